//! The steps of one acquisition's wait, as methods of a [`Waiter`]: each
//! turn asks for every lock in order ([`Waiter::try_all`]), then either
//! finishes ([`Waiter::finish`]: every lock held) or stands in line for the
//! one that is taken ([`Waiter::stand_in_line`]) and blocks until a release
//! wakes it or hands the lock over ([`Waiter::block`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

mod holds;

use super::Wanted;
use super::registrations::Registrations;
use crate::backend::{
    AcquireRequest, AcquiredEvent, Attempt, Backend, Hold, HolderInfo, Session, Wake,
};
use crate::error::{Cause, Error, Result};
use crate::lock::clock::Stamp;
use crate::lock::event::Event;
use crate::lock::name::LockId;
use crate::report;
use crate::run_state::{Blocked, Phase, Shared};
use crate::wait::outage::Outage;
use crate::wait::views::Views;
use crate::wait::waiting_line::holder_for;
use holds::{Say, confirm_replicas, give_back, refresh};

// A waiter's registration lasts its ttl, and it blocks at most half of that
// before trying (and registering) again: a live waiter never looks dead, and a
// killed one leaves the queue within its ttl.
/// Shortest block: keeps a just-expiring holder from turning into a busy loop.
const MIN_BLOCK: Duration = Duration::from_millis(5);

/// How long after the `--wait` deadline a grant may still be used: COMMAND
/// starts within 100 ms of the deadline, spawning included.
const GRANT_GRACE: Duration = Duration::from_millis(50);

/// One turn of the wait: when its requests were sent and what it allows.
pub(super) struct Turn {
    pub(super) round: Stamp,
    /// False once `--wait` has run out (or with `--no-wait`): no registering,
    /// no blocking.
    may_wait: bool,
    /// Longest to block before trying again: half our registration, and no
    /// longer than what is left of `--wait`.
    block_cap: Duration,
}

/// Lock `i` of the wanted ones is taken (this turn's holds were given back).
pub(super) struct Taken {
    i: usize,
    /// Until the holder's lease could run out (None: only the queue is in the way).
    pttl: Option<Duration>,
    holder: Option<HolderInfo>,
    place: Option<u32>,
}

/// What one turn's requests found.
pub(super) enum Round {
    /// Every lock is held.
    Held(Vec<Hold>),
    /// One is taken by someone else.
    Taken(Taken),
    /// The server could not be reached: try the turn again (after the pause
    /// the outage took).
    Retry,
}

/// One acquisition in progress: the session, what is wanted, and what the
/// wait has seen and shown so far. Its methods are the steps of a turn of
/// [`acquire_on`](super::acquire_on); on every error it leaves the queues it joined.
pub(super) struct Waiter<'a, 'w> {
    backend: &'a Arc<dyn Backend>,
    session: &'a mut dyn Session,
    wanted: &'a Wanted<'w>,
    shared: &'a Arc<Shared>,
    outage: Outage,
    start: Instant,
    /// When `--wait` runs out (None: never; a wait too long to represent is
    /// a wait forever).
    deadline: Option<Instant>,
    registered: Registrations,
    announced: bool,
    views: Views,
    /// The lock last waited for (named when a signal ends the wait).
    waiting_on: usize,
}

impl<'a, 'w> Waiter<'a, 'w> {
    pub(super) fn new(
        backend: &'a Arc<dyn Backend>,
        session: &'a mut dyn Session,
        wanted: &'a Wanted<'w>,
        shared: &'a Arc<Shared>,
        outage: Outage,
    ) -> Self {
        let start = Instant::now();
        Waiter {
            backend,
            session,
            wanted,
            shared,
            outage,
            start,
            // From when the caller asked (connecting took part of the wait).
            deadline: wanted.patience.wait_ends,
            registered: Registrations::default(),
            announced: false,
            views: Views::default(),
            waiting_on: 0,
        }
    }

    /// Off a terminal, a wait that was logged ends with a line saying the
    /// lock was acquired and after how long.
    pub(super) fn log_acquired(&self) {
        let names: Vec<&str> = self.wanted.locks.iter().map(|k| k.name.as_str()).collect();
        self.views.acquired(&names.join(", "));
    }

    /// Holds read after the `--wait` deadline (a server that stalled across
    /// it, a grant that came late) are given back: COMMAND never starts
    /// after the wait it was given, whatever the server does. `--no-wait`
    /// has no deadline to miss: its one try is answered when it is.
    pub(super) fn in_time(&mut self, holds: &[Hold]) -> Result<()> {
        let Some(deadline) = self.deadline else {
            return Ok(());
        };
        let late = Instant::now().saturating_duration_since(deadline);
        if self.wanted.wait == Some(Duration::ZERO) || late <= GRANT_GRACE {
            return Ok(());
        }
        give_back(self.session, self.wanted, holds, Say::Failures);
        let wait = self.wanted.wait.unwrap_or_default();
        let err = Error::from(Cause::NotAcquired {
            cause: format!(
                "acquired only {:.1}s after --wait {} ran out (the server answered late); given back",
                late.as_secs_f64(),
                humantime::format_duration(wait)
            ),
            code: self.wanted.conflict_code,
        })
        .in_lock(&self.wanted.locks[self.waiting_on].name);
        Err(self.fail(err))
    }

    /// `err`, after leaving every queue this caller joined.
    fn fail(&mut self, err: Error) -> Error {
        self.registered
            .leave_all_but(None, self.session, self.wanted);
        err
    }

    /// A signal ends the wait, with nothing held.
    pub(super) fn check_interrupt(&mut self) -> Result<()> {
        match self.shared.interrupted() {
            Some(signal) => {
                let err = interrupted(&self.wanted.locks[self.waiting_on], signal);
                Err(self.fail(err))
            }
            None => Ok(()),
        }
    }

    pub(super) fn turn(&self) -> Turn {
        let remaining = self
            .deadline
            .map(|d| d.saturating_duration_since(Instant::now()));
        let half = self.wanted.ttl / 2;
        Turn {
            round: Stamp::now(),
            may_wait: remaining.is_none_or(|r| !r.is_zero()),
            block_cap: remaining.map_or(half, |r| r.min(half)),
        }
    }

    /// Asks for every lock in order, stopping at the first that is taken
    /// (registering as its waiter when waiting is allowed). No hold is kept
    /// unless every lock is held.
    pub(super) fn try_all(&mut self, turn: &Turn) -> Result<Round> {
        let wanted = self.wanted;
        let mut holds: Vec<Hold> = Vec::with_capacity(wanted.locks.len());
        // The acquiring script records each new hold. With several locks, or
        // replicas to wait for, a hold may be given back in this round: the
        // request is tentative, and such a hold's event is retracted by its
        // release (a backend that cannot leaves it to the caller, once every
        // hold is confirmed).
        let tentative = wanted.locks.len() > 1 || wanted.min_replicas > 0;
        let event = wanted.record.as_ref().map(|(cap, e)| {
            let waited = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
            (
                *cap,
                Event {
                    waited_ms: Some(waited),
                    ..e.clone()
                },
            )
        });
        for (i, keys) in wanted.locks.iter().enumerate() {
            let request = AcquireRequest {
                keys,
                token: wanted.token,
                inherited: wanted.inherited,
                ttl: wanted.ttl,
                holder: wanted.holder,
                register: turn.may_wait.then_some(wanted.ttl),
                kind: wanted.kind,
                fair: wanted.fair,
                grant: wanted.handoff,
                record: event.as_ref().map(|(cap, e)| (*cap, e)),
                tentative,
            };
            let attempt = self.session.acquire(&request);
            if attempt.is_ok() {
                self.outage.over(&keys.name, self.backend.server());
            }
            match attempt {
                Ok(Attempt::Acquired(hold)) => {
                    self.registered.remove(i);
                    holds.push(hold);
                }
                Ok(Attempt::Incompatible { held }) => {
                    give_back(self.session, wanted, &holds, Say::Failures);
                    return Err(self.incompatible(keys, held));
                }
                Ok(Attempt::Taken {
                    pttl,
                    holder,
                    place,
                }) => {
                    // No partial hold while waiting.
                    give_back(self.session, wanted, &holds, Say::Failures);
                    let taken = Taken {
                        i,
                        pttl,
                        holder,
                        place,
                    };
                    return Ok(self.taken(turn, taken));
                }
                Err(err) => return self.unanswered(i, err, &holds),
            }
        }
        Ok(Round::Held(holds))
    }

    /// An enclosing run holds `keys` as a kind (`held`) the one wanted
    /// cannot re-enter.
    fn incompatible(&mut self, keys: &LockId, held: crate::lock::kind::Kind) -> Error {
        let err = Error::from(Cause::NotAcquired {
            cause: format!(
                "an enclosing rlock run holds it {}; it cannot be re-entered as {}",
                held.held_as(),
                self.wanted.kind.describe()
            ),
            code: self.wanted.conflict_code,
        })
        .in_lock(&keys.name);
        self.fail(err)
    }

    /// Lock `taken.i` is taken: this caller stays registered as its waiter
    /// (when waiting is allowed), and nowhere else.
    fn taken(&mut self, turn: &Turn, taken: Taken) -> Round {
        if turn.may_wait {
            self.registered.add(taken.i);
        }
        self.registered
            .leave_all_but(Some(taken.i), self.session, self.wanted);
        self.waiting_on = taken.i;
        Round::Taken(taken)
    }

    /// The request for lock `i` failed: the `holds` taken before it in this
    /// turn are given back (quietly when the server is likely not
    /// answering), and the outage is ridden out as allowed.
    fn unanswered(&mut self, i: usize, err: Error, holds: &[Hold]) -> Result<Round> {
        let keys = &self.wanted.locks[i];
        let err = or_signal(err, keys, self.shared);
        // No hold is kept while waiting for the server either.
        let say = if err.is_transient() {
            Say::Nothing
        } else {
            Say::Failures
        };
        give_back(self.session, self.wanted, holds, say);
        if err.is_transient() {
            self.views.unreachable(&keys.name);
        }
        match self.outage.ride_out(err, &keys.name, self.shared) {
            Ok(()) => Ok(Round::Retry),
            Err(err) => Err(self.fail(err)),
        }
    }

    /// Every lock is held: confirms them with the replicas asked for and
    /// renews a lease the acquisition ate into. None when a hold lapsed
    /// meanwhile (the caller takes another turn).
    pub(super) fn finish(
        &mut self,
        holds: Vec<Hold>,
        round: Stamp,
    ) -> Result<Option<(Vec<Hold>, Stamp)>> {
        let wanted = self.wanted;
        // A signal that came while the last request was out ends the wait
        // all the same: nothing may stay held.
        if let Some(signal) = self.shared.interrupted() {
            give_back(self.session, wanted, &holds, Say::Failures);
            return Err(interrupted(&wanted.locks[self.waiting_on], signal));
        }
        if let Err(err) = confirm_replicas(self.session, wanted, &holds, self.backend.server()) {
            give_back(self.session, wanted, &holds, Say::Failures);
            return Err(err);
        }
        // A slow acquisition (a paused server, a stalled link) leaves less
        // of the lease provable than it gave: renew before COMMAND starts
        // rather than start it on a lease nearly gone.
        let acquired_at = match refresh(self.session, wanted, &holds, round) {
            Ok(Some(at)) => at,
            Ok(None) => {
                give_back(self.session, wanted, &holds, Say::Failures);
                return Ok(None);
            }
            Err(err) => {
                // A server that answers slowly gets the holds back quietly
                // (best effort): the error says why.
                let say = if err.reply_timed_out() {
                    Say::Nothing
                } else {
                    Say::Failures
                };
                give_back(self.session, wanted, &holds, say);
                return Err(self.fail(err));
            }
        };
        report::verbose(|| {
            let fences: Vec<String> = wanted
                .locks
                .iter()
                .zip(&holds)
                .map(|(k, h)| format!("{} (fence {}, hold count {})", k.name, h.fence, h.count))
                .collect();
            format!(
                "acquired {} after {:.1} ms",
                fences.join(", "),
                self.start.elapsed().as_secs_f64() * 1000.0
            )
        });
        Ok(Some((holds, acquired_at)))
    }

    /// Lock `taken.i` is taken: not acquired when waiting is over, else
    /// the wait is shown (the terminal line, the progress log, `-v`).
    pub(super) fn stand_in_line(&mut self, turn: &Turn, taken: &Taken) -> Result<()> {
        let wanted = self.wanted;
        let keys = &wanted.locks[taken.i];
        let holder = taken.holder.as_ref();
        if !turn.may_wait {
            let cause = match (holder, wanted.wait) {
                (Some(h), Some(w)) if !w.is_zero() => format!(
                    "still held after waiting {}; held by {}",
                    humantime::format_duration(w),
                    holder_for(h, h.held_for)
                ),
                (None, Some(w)) if !w.is_zero() => {
                    format!("still held after waiting {}", humantime::format_duration(w))
                }
                (Some(h), _) => format!("held by {}", holder_for(h, h.held_for)),
                (None, _) => "held by another owner".into(),
            };
            let err = Error::from(Cause::NotAcquired {
                cause,
                code: wanted.conflict_code,
            })
            .in_lock(&keys.name);
            return Err(self.fail(err));
        }
        // No holder known: a Redisson lock (its layout records none), else
        // the queue is what stands in the way.
        let unknown = if keys.redisson {
            "held by a Redisson client (Redisson's layout records no holder details)"
        } else {
            "queued behind other waiters"
        };
        let every = wanted.progress_interval;
        let shown = (taken.place, unknown);
        self.views
            .taken(self.shared, every, &keys.name, holder, shown);
        if !self.announced {
            self.announced = true;
            report::verbose(|| match holder {
                Some(h) => format!(
                    "{}: waiting; held by {}",
                    keys.name,
                    holder_for(h, h.held_for)
                ),
                None => format!("{}: waiting", keys.name),
            });
        }
        Ok(())
    }

    /// Blocks on lock `taken.i` until a release wakes us or hands it over,
    /// the holder's lease could have run out, or the next progress line is
    /// due. Some when the lock was handed over (then it is ours).
    pub(super) fn block(
        &mut self,
        turn: &Turn,
        taken: &Taken,
    ) -> Result<Option<(Vec<Hold>, Stamp)>> {
        let wanted = self.wanted;
        let keys = &wanted.locks[taken.i];
        let cap = turn.block_cap;
        let mut block = taken.pttl.unwrap_or(cap).min(cap).max(MIN_BLOCK);
        // Look again when the next progress line or answer is due, on time.
        if let Some(most) = self.views.block_at_most(self.shared) {
            block = block.min(most.max(MIN_BLOCK));
        }
        // A signal ends the wait through a thread that wakes it.
        if let Err(err) = self.shared.watch_signals() {
            return Err(self.fail(err));
        }
        {
            let mut phase = self.shared.phase();
            if self.shared.interrupted().is_some() {
                return Ok(None);
            }
            *phase = Phase::Blocked(Box::new(Blocked {
                backend: Arc::clone(self.backend),
                keys: keys.clone(),
                token: wanted.token.clone(),
            }));
        }
        let woke = self.session.block(keys, wanted.token, block);
        self.shared.set(Phase::Acquiring);
        match woke {
            Ok(Wake::Granted(fence)) => self.granted(turn, taken, fence),
            // Whatever else woke us (a wake-up, a lapsed lease, an interrupt),
            // the next turn looks at the locks and at the interrupt flag again.
            Ok(_) => Ok(None),
            Err(err) => {
                let err = or_signal(err, keys, self.shared);
                if err.is_transient() {
                    self.views.unreachable(&keys.name);
                }
                match self.outage.ride_out(err, &keys.name, self.shared) {
                    Ok(()) => Ok(None),
                    Err(err) => Err(self.fail(err)),
                }
            }
        }
    }

    /// A release handed lock `taken.i` over to us (with `fence`): it is ours
    /// unless a signal came meanwhile, or it lapsed before we read it.
    fn granted(
        &mut self,
        turn: &Turn,
        taken: &Taken,
        fence: crate::lock::token::Fence,
    ) -> Result<Option<(Vec<Hold>, Stamp)>> {
        let wanted = self.wanted;
        let keys = &wanted.locks[taken.i];
        self.registered.remove(taken.i);
        // A signal that came as the lock was handed over ends the wait:
        // give the hold back (leave.lua drops a handed-over hold).
        if let Some(signal) = self.shared.interrupted() {
            let _ = self.session.leave(keys, wanted.token);
            return Err(interrupted(keys, signal));
        }
        report::verbose(|| {
            format!(
                "acquired {} (fence {fence}, handed over) after {:.1} ms",
                keys.name,
                self.start.elapsed().as_secs_f64() * 1000.0
            )
        });
        // Handed over no earlier than this round's request, which
        // registered us (the lease ends when that registration would).
        // Its `acquired` event was recorded by the release that
        // handed it over (with that release's --history).
        let hold = Hold {
            token: wanted.token.clone(),
            fence,
            count: 1,
            recorded: true,
            history_entry: Some(AcquiredEvent::ByFence),
        };
        match refresh(
            self.session,
            wanted,
            std::slice::from_ref(&hold),
            turn.round,
        ) {
            Ok(Some(at)) => Ok(Some((vec![hold], at))),
            // It lapsed before we read it: queue again.
            Ok(None) => Ok(None),
            Err(err) => {
                let _ = self.session.leave(keys, wanted.token);
                Err(self.fail(err))
            }
        }
    }
}

/// A signal that arrived while a request was failing is the reason the user sees.
fn or_signal(err: Error, lock: &LockId, shared: &Shared) -> Error {
    match shared.interrupted() {
        Some(signal) => interrupted(lock, signal),
        None => err,
    }
}

fn interrupted(lock: &LockId, signal: crate::sys::signal::Signal) -> Error {
    Error::from(Cause::Interrupted(signal)).in_lock(&lock.name)
}
