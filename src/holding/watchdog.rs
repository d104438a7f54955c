//! The watchdog: renews the lease while COMMAND runs (see [`Lease::period`]),
//! and moves the deadlines the guardian enforces after each confirmed renewal.
//!
//! The lease is counted from when the last *confirmed* renewal was *sent* (the
//! server extended it after that instant, never before), less a drift margin:
//! that is the end of the lease rlock can prove. COMMAND's whole process group
//! must be dead before it, so SIGKILL is due a guard margin earlier (timer
//! slack and signal delivery), and SIGTERM `--kill-after` before that. The
//! guardian process keeps both deadlines on its own precise timer, so neither
//! a renewal blocked in a socket read nor rlock itself being stopped can delay
//! them. A renewal the server refuses ("not ours") stops COMMAND at once;
//! renewals that fail (server down, paused, unreachable) are retried until the
//! SIGTERM deadline.

use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

use super::clocks::ServerClocks;
use super::deadline::{Deadline, Guarded};
use super::held::HeldLock;
use super::lost::{Lost, why_lapsed};
use super::retries::Retries;
use crate::backend::Extend;
use crate::backend::Session;
use crate::lock::clock::{ClockStep, Stamp, drift};
pub use crate::lock::lease::{Lease, fit_grace};
use crate::report;
use crate::run_state::Shared;
use crate::sys::process::Pid;
use crate::sys::signal::Signal;

/// What renews the lease while COMMAND runs.
pub(crate) enum Renewing {
    /// Nobody yet: COMMAND ended before its first renewal was due.
    Idle(Box<dyn Session>),
    /// The watchdog thread.
    Watching(Watchdog),
    /// The watchdog could not be started; COMMAND was killed.
    Failed,
}

impl Renewing {
    /// Starts the watchdog (and the signal thread); when that fails, kills
    /// COMMAND's group.
    pub(crate) fn start(
        session: Box<dyn Session>,
        renewal: Renewal,
        shared: &Arc<Shared>,
        pgid: Pid,
    ) -> Renewing {
        let display = renewal.display.clone();
        // From here on rlock renews for as long as COMMAND runs: what it
        // allocates it also frees, so the start-up arena (which keeps what
        // it hands out) gives way to the system allocator. A COMMAND that
        // ends before its first renewal never gets here, and its release
        // allocates from the arena still.
        crate::sys::arena::close();
        // COMMAND runs on: a signal must reach it while rlock waits.
        let started = shared
            .watch_signals()
            .map_err(|e| std::io::Error::other(e.to_string()))
            .and_then(|()| Watchdog::start(session, renewal, Arc::clone(shared)));
        match started {
            Ok(watchdog) => Renewing::Watching(watchdog),
            Err(e) => {
                report::error(&format!(
                    "{display}: cannot start the watchdog ({e}); stopping COMMAND"
                ));
                crate::sys::process::signal_group(pgid, Signal::KILL);
                Renewing::Failed
            }
        }
    }
}

/// A running watchdog thread.
pub struct Watchdog {
    stop: mpsc::Sender<()>,
    handle: JoinHandle<(Box<dyn Session>, Option<Lost>)>,
}

/// What the watchdog needs to know.
#[derive(Clone)]
pub struct Renewal {
    /// Each lock held.
    pub holds: Vec<HeldLock>,
    /// The locks' names, for messages.
    pub display: String,
    /// Lease kind and length.
    pub lease: Lease,
    /// Grace between SIGTERM and SIGKILL (already fitted to the lease).
    pub grace: Duration,
    /// How often it is renewed: [`Lease::period`], or shorter under
    /// systemd's watchdog.
    pub period: Duration,
    /// When the request that proved the lease was sent.
    pub confirmed_at: Stamp,
    /// The deadlines the guardian enforces (a library hold: in-process ones).
    pub deadlines: Arc<dyn Deadline>,
}

impl Watchdog {
    /// Starts the thread; it owns `session` until [`Watchdog::finish`].
    pub fn start(
        session: Box<dyn Session>,
        renewal: Renewal,
        shared: Arc<Shared>,
    ) -> std::io::Result<Self> {
        let (stop, stopped) = mpsc::channel();
        let handle = std::thread::Builder::new()
            .name("watchdog".into())
            .spawn(move || watch(session, renewal, &stopped, shared))?;
        Ok(Watchdog { stop, handle })
    }

    /// Stops the thread (COMMAND has ended) and returns the session and
    /// whether it saw the hold lost.
    pub fn finish(self) -> Option<(Box<dyn Session>, Option<Lost>)> {
        let _ = self.stop.send(());
        self.handle.join().ok()
    }
}

/// Waits on `stopped` until `until`; true when told to stop. Records how late
/// the wake-up came, which is how a suspension of rlock shows.
fn sleep_until(stopped: &mpsc::Receiver<()>, until: Stamp, guarded: &dyn Guarded) -> bool {
    let outcome = stopped.recv_timeout(until.remaining());
    // Also when told to stop: a stop message that was waiting when rlock was
    // continued must not hide how long it was stopped.
    guarded.note_wake(until);
    !matches!(outcome, Err(RecvTimeoutError::Timeout))
}

/// The watchdog thread: renews until told to stop (COMMAND has ended) or the
/// hold is lost, then makes sure SIGKILL comes even without the guardian.
fn watch(
    mut session: Box<dyn Session>,
    renewal: Renewal,
    stopped: &mpsc::Receiver<()>,
    shared: Arc<Shared>,
) -> (Box<dyn Session>, Option<Lost>) {
    let mut watch = Watch::new(renewal, shared);
    let lost = loop {
        let next = match watch.due() {
            Due::At(wake) if sleep_until(stopped, wake, watch.guarded.as_ref()) => Next::Stopped,
            Due::At(_) => watch.act(session.as_mut()),
            Due::Lapsed(lost) if stopped.try_recv().is_ok() => Next::Ended(lost),
            Due::Lapsed(lost) => Next::Lost(lost),
            Due::Closed => {
                let _ = stopped.recv();
                Next::Stopped
            }
        };
        match next {
            Next::Again => {}
            Next::Stopped => return (session, None),
            // The guardian may have stopped COMMAND before this thread knew.
            Next::Ended(lost) => {
                watch.guarded.lost();
                return (session, Some(lost));
            }
            Next::Lost(lost) => {
                watch.guarded.lost();
                break lost;
            }
        }
    };
    watch.kill_when_due(stopped);
    (session, Some(lost))
}

/// When a watch acts next.
pub(crate) enum Due {
    /// At this instant: a renewal, or the stop, is due.
    At(Stamp),
    /// The stop went out: the lease is no longer proven, for this reason
    /// (unless what it protects had ended before: run judges that by the
    /// clock).
    Lapsed(Lost),
    /// No deadline is kept any more (COMMAND's group is gone).
    Closed,
}

/// What the watch does after a turn.
pub(crate) enum Next {
    /// Keep watching.
    Again,
    /// Told to stop: COMMAND has ended.
    Stopped,
    /// Told to stop after SIGTERM went out: COMMAND's group is gone, and
    /// the lease may have lapsed under it (the run judges that by the clock).
    Ended(Lost),
    /// The hold is lost; COMMAND is being stopped.
    Lost(Lost),
}

/// A lease's watch between turns: renewing it on a session it is given
/// each turn (a run's own, or the one a library client renews all its
/// holds on), and telling what it protects what became of it.
pub(crate) struct Watch {
    renewal: Arc<Renewal>,
    guarded: Arc<dyn Guarded>,
    /// When the next renewal is due.
    next: Stamp,
    /// The cause of the renewals failing since the last confirmed one.
    failing: Option<String>,
    /// When the renewals began failing, and why: said once they get
    /// through again (a loss has its own line, which names the cause).
    outage: Option<(Stamp, String)>,
    /// The servers' clocks as the last renewals read them.
    clocks: ServerClocks,
    /// How the next renewal sets the lease: exactly to the ttl while a
    /// backward step of the server's clock has not been undone yet.
    extend: Extend,
    /// How long after the next failure to retry.
    retries: Retries,
}

impl Watch {
    /// The watch of `renewal`'s lease, telling `guarded`.
    pub(crate) fn new(renewal: Renewal, guarded: Arc<dyn Guarded>) -> Self {
        Watch {
            next: renewal.confirmed_at + renewal.period,
            renewal: Arc::new(renewal),
            guarded,
            failing: None,
            outage: None,
            clocks: ServerClocks::default(),
            extend: Extend::AtLeast,
            retries: Retries::default(),
        }
    }

    /// The renewal this watch makes (its locks and lease).
    pub(crate) fn renewal(&self) -> &Renewal {
        &self.renewal
    }

    /// When a renewal or SIGTERM is due, or why not.
    pub(crate) fn due(&mut self) -> Due {
        let deadlines = &self.renewal.deadlines;
        match deadlines.term_at() {
            Some(term) => Due::At(match self.renewal.lease {
                Lease::Renewed(_) => self.next.min(term),
                Lease::Fixed(_) => term,
            }),
            // SIGTERM went out: the lease is no longer proven.
            None if deadlines.fired() => {
                let failing = self.failing.take();
                Due::Lapsed(why_lapsed(self.renewal.lease, failing, self.guarded.late()))
            }
            // COMMAND's group is gone and the deadlines are closed.
            None => Due::Closed,
        }
    }

    /// Once the instant [`Watch::due`] named has come: sends SIGTERM if it
    /// is due, else renews on `session`.
    pub(crate) fn act(&mut self, session: &mut dyn Session) -> Next {
        let deadlines = Arc::clone(&self.renewal.deadlines);
        if deadlines.fire_if_due() {
            self.stop_command();
        }
        let Some(term) = deadlines.term_at() else {
            return Next::Again;
        };
        if matches!(self.renewal.lease, Lease::Fixed(_)) {
            return Next::Again;
        }
        self.renew(session, term)
    }

    /// Renews every hold within half the time left before `term`, so that a
    /// stalled server leaves room to retry (on a fresh connection) before
    /// SIGTERM is due.
    fn renew(&mut self, session: &mut dyn Session, term: Stamp) -> Next {
        let renewal = Arc::clone(&self.renewal);
        let renewal = renewal.as_ref();
        let sent = Stamp::now();
        let limit = (term.since(sent) / 2).max(Duration::from_millis(1));
        let ttl = renewal.lease.ttl();
        let renewed = renew_all(session, renewal, ttl, limit, self.extend);
        if let Ok(None) = renewed {
            self.extend = Extend::AtLeast;
        }
        // A renewal that overran its limit by far was held up by rlock's own
        // stop, not by the server (a call may take one and a half times its
        // limit: see the session's connection).
        self.guarded.note_wake(sent + limit + limit / 2);
        let step = match renewed {
            Ok(_) => self.read_clock(session, sent),
            Err(_) => None,
        };
        match renewed {
            Ok(None) => {
                match step {
                    Some(step @ ClockStep::Forward(_)) => report::error(&format!(
                        "{}: the server's clock {}; the hold was still there, and its lease now runs on the new clock",
                        renewal.display,
                        step.describe()
                    )),
                    // Every lease on the server got longer: set ours back to
                    // the ttl, so a dead rlock's hold does not outlive it.
                    Some(step @ ClockStep::Back(_)) => {
                        let left = limit.saturating_sub(Stamp::now().since(sent));
                        let set = renew_all(session, renewal, ttl, left, Extend::Exactly);
                        if let Ok(Some(name)) = set {
                            return self.not_ours(name, None);
                        }
                        // Not set back: the next renewals try again.
                        if set.is_err() {
                            self.extend = Extend::Exactly;
                        }
                        report::error(&format!(
                            "{}: the server's clock {}; {}",
                            renewal.display,
                            step.describe(),
                            match set {
                                Ok(None) => format!(
                                    "the lease is set back to {}",
                                    humantime::format_duration(ttl)
                                ),
                                _ => "the lease could not be set back yet; the next renewals try again".to_owned(),
                            }
                        ));
                    }
                    None => {}
                }
                self.confirmed(sent)
            }
            // Each confirmed renewal proves the hold was never broken before it
            // was sent (nothing but our own acquire writes our token).
            Ok(Some(name)) => self.not_ours(name, step),
            Err(err) => {
                self.failed(err, sent, term);
                Next::Again
            }
        }
    }

    /// The server says the hold on `name` is gone: COMMAND is stopped at
    /// once, and the loss names a forward `step` of its clock, if any.
    fn not_ours(&mut self, name: String, step: Option<ClockStep>) -> Next {
        let renewal = Arc::clone(&self.renewal);
        if renewal.deadlines.stop_now(renewal.grace) {
            self.stop_command();
        } else {
            // The guardian had stopped COMMAND before the answer came: if
            // rlock itself was stopped meanwhile (within the renewal's round
            // trip), the lease lapsed under the suspension, and another
            // holder's taking the lock is what the refusal shows.
            let lapsed = why_lapsed(renewal.lease, None, self.guarded.late());
            if matches!(lapsed, Lost::Suspended(_)) {
                return Next::Lost(lapsed);
            }
        }
        Next::Lost(match step {
            Some(step @ ClockStep::Forward(_)) => Lost::ClockJumped {
                name,
                how: step.describe(),
            },
            _ => Lost::NotOurs(name),
        })
    }

    /// The hold is lost: said first (the ready file goes before COMMAND
    /// hears of it), then COMMAND's group gets SIGTERM.
    fn stop_command(&self) {
        self.guarded.stop();
    }

    /// The step of the servers' clocks the renewal sent at `sent` (just
    /// answered) read, if any.
    fn read_clock(&mut self, session: &mut dyn Session, sent: Stamp) -> Option<ClockStep> {
        let margin = drift(self.renewal.lease.ttl());
        self.clocks.read(&session.server_times(), sent, margin)
    }

    /// A renewal sent at `sent` was confirmed: the guardian's deadlines move
    /// to the lease it proves, and the next renewal is due a third of the
    /// lease later.
    fn confirmed(&mut self, sent: Stamp) -> Next {
        let renewal = Arc::clone(&self.renewal);
        let (term, kill) = renewal.lease.deadlines(sent, renewal.grace);
        if !renewal.deadlines.extend(term, kill) {
            return Next::Again;
        }
        if !renewal.deadlines.wake() {
            report::error(&format!(
                "{}: the guardian process is gone; stopping COMMAND",
                renewal.display
            ));
            renewal.deadlines.stop_now(Duration::ZERO);
            self.guarded.kill();
            return Next::Lost(Lost::Unconfirmed("the guardian process is gone".into()));
        }
        self.guarded.renewed();
        self.next = sent + renewal.period;
        self.retries = Retries::default();
        self.failing = None;
        if let Some((since, cause)) = self.outage.take() {
            // One line for the whole outage: a log read later shows how long
            // the renewals did not get through and why, and that they did
            // again; a lost lease says so in a line of its own instead.
            report::error(&format!(
                "{}: renewal failed for {} ({cause}), then confirmed again",
                renewal.display,
                crate::lock::lease::tenths(Stamp::now().since(since))
            ));
        }
        report::verbose(|| {
            format!(
                "{}: renewed in {:.1} ms",
                renewal.display,
                Stamp::now().since(sent).as_secs_f64() * 1000.0
            )
        });
        Next::Again
    }

    /// A renewal sent at `sent` failed (`err`): retried soon, until SIGTERM
    /// at `term`. One that waited out its reply bound is retried at once, so
    /// that some request is out whenever the server may come back.
    fn failed(&mut self, err: Failure, sent: Stamp, term: Stamp) {
        // Said with -v only as it begins: if the lease is lost, the run's
        // one line says why; if a retry gets through, the line that says so
        // tells the outage.
        if self.failing.is_none() {
            report::verbose(|| {
                format!(
                    "{}: renewal failed ({}); retrying for {} before stopping COMMAND",
                    self.renewal.display,
                    err.cause,
                    humantime::format_duration(round_ms(term.remaining()))
                )
            });
        }
        if self.outage.is_none() {
            self.outage = Some((sent, err.cause.clone()));
        }
        // What the server said names the outage best (it became a replica,
        // it is loading); a renewal left unanswered only echoes the first
        // cause, with a shorter bound.
        if self.failing.is_none() || !err.unanswered {
            self.failing = Some(err.cause);
        }
        if let (Some((since, _)), Some(cause)) = (&self.outage, &self.failing) {
            self.guarded
                .renewals_failing(Stamp::now().since(*since), cause);
        }
        let spacing = self.retries.next(term.remaining());
        // Not in the past: a wake-up planned earlier than now reads as late.
        self.next = (sent + spacing).max(Stamp::now());
    }

    /// The guardian sends SIGKILL when it is due; should it be gone, so do we.
    fn kill_when_due(&self, stopped: &mpsc::Receiver<()>) {
        if let Some(kill) = self.renewal.deadlines.kill_at()
            && !sleep_until(stopped, kill, self.guarded.as_ref())
        {
            self.guarded.kill();
        }
    }
}

/// Why a round of renewals failed.
struct Failure {
    cause: String,
    /// No answer within the bound (a stalled server, or one out of reach),
    /// rather than an answer that said what is wrong.
    unanswered: bool,
}

/// Renews every hold; a round is confirmed only when each renewal is. Returns
/// the name of a lock that is no longer ours, or the first failure.
fn renew_all(
    session: &mut dyn Session,
    renewal: &Renewal,
    ttl: Duration,
    limit: Duration,
    extend: Extend,
) -> Result<Option<String>, Failure> {
    let round = Stamp::now();
    for held in &renewal.holds {
        let (keys, token) = (&held.id, held.token());
        let left = limit.saturating_sub(Stamp::now().since(round));
        if left.is_zero() {
            return Err(Failure {
                cause: "no time left to renew".into(),
                unanswered: true,
            });
        }
        match session.renew(keys, token, ttl, left, extend) {
            Ok(true) => {}
            Ok(false) => return Ok(Some(keys.name.clone())),
            Err(err) => {
                return Err(Failure {
                    unanswered: err.reply_timed_out(),
                    cause: err.to_string(),
                });
            }
        }
    }
    Ok(None)
}

fn round_ms(d: Duration) -> Duration {
    Duration::from_millis(d.as_millis() as u64)
}
