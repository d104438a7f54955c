//! Acquiring with waiting: try, and when the lock is taken, block until a
//! release hands the lock over or wakes us (push, not polling), or the holder's
//! lease could have run out, whichever is first.
//!
//! A failed attempt registers this waiter in the same script that saw the lock
//! taken, so a release between the attempt and the block cannot be missed: the
//! release sees the waiter. A run waiting for a single lock registers its lease
//! and holder details too, and the release makes it the holder right there
//! (`g<fence>` on its list: no second round trip); a run waiting for several is
//! woken (`w`) and tries again. A waiter that dies after that holds others up
//! at most its ttl; one that gives up gives back a hold it was handed, or
//! passes the wake-up on (leave.lua).
//!
//! Several locks are all-or-none: see [`acquire`].

mod registrations;
mod wanted;

use registrations::Registrations;
pub use wanted::Wanted;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::{AcquireRequest, Attempt, Backend, Hold, Kind, Session, Wake};
use crate::clock::Stamp;
use crate::error::{Cause, Error, Result};
use crate::name::LockId;
use crate::outage::Outage;
use crate::report;
use crate::run_state::{Blocked, Phase, Shared};
use crate::waiting_line::holder_for;

// A waiter's registration lasts its ttl, and it blocks at most half of that
// before trying (and registering) again: a live waiter never looks dead, and a
// killed one leaves the queue within its ttl.
/// Shortest block: keeps a just-expiring holder from turning into a busy loop.
const MIN_BLOCK: Duration = Duration::from_millis(5);

/// Renews `holds` (taken by the request sent at `round`) when less than two
/// thirds of their lease is still provable, so that COMMAND never starts on a
/// lease that is nearly gone. Returns when the lease is now counted from, or
/// None when a hold lapsed meanwhile (the caller queues again).
fn refresh(
    session: &mut dyn Session,
    wanted: &Wanted<'_>,
    holds: &[Hold],
    round: Stamp,
) -> Result<Option<Stamp>> {
    if Stamp::now().since(round) < wanted.ttl / 3 {
        return Ok(Some(round));
    }
    let sent = Stamp::now();
    for (keys, hold) in wanted.locks.iter().zip(holds) {
        if !session.renew(keys, &hold.token, wanted.ttl, wanted.ttl / 3)? {
            return Ok(None);
        }
    }
    report::verbose(|| {
        format!(
            "renewed before starting COMMAND: the acquisition took {:.0} ms",
            sent.since(round).as_secs_f64() * 1000.0
        )
    });
    Ok(Some(sent))
}

/// Acquires all of `wanted.locks` or none, waiting as allowed. Returns the holds
/// (in the order of `locks`) and the instant the round that got them all
/// started (every lease starts no earlier).
///
/// Several locks are taken one after the other; when one is taken by someone
/// else, the ones already held are released again before waiting for it. No
/// run ever waits while holding, so `run a b` and `run b a` cannot deadlock,
/// and a failure, timeout or interrupt leaves no partial hold.
///
/// Connects first. A server that cannot be reached, when connecting or later,
/// is waited for as `wanted.patience` allows (see [`crate::outage`]); `lock`
/// names the lock(s) in messages about it.
pub fn acquire(
    backend: &Arc<dyn Backend>,
    wanted: &Wanted<'_>,
    lock: &str,
    shared: &Shared,
) -> Result<(Box<dyn Session>, Vec<Hold>, Stamp)> {
    let mut outage = Outage::new(wanted.patience);
    report::verbose(|| format!("{lock}: using {}", backend.server()));
    let mut session = loop {
        match backend.connect() {
            Ok(session) => break session,
            Err(err) => outage
                .ride_out(err, lock, shared)
                .map_err(|e| e.in_lock(lock))?,
        }
    };
    let (holds, at) = acquire_on(backend, session.as_mut(), wanted, shared, outage)?;
    Ok((session, holds, at))
}

/// [`acquire`] on a connected session, within what is left of an outage
/// met while connecting.
fn acquire_on(
    backend: &Arc<dyn Backend>,
    session: &mut dyn Session,
    wanted: &Wanted<'_>,
    shared: &Shared,
    mut outage: Outage,
) -> Result<(Vec<Hold>, Stamp)> {
    let start = Instant::now();
    // A wait too long to represent is a wait forever.
    let deadline = wanted.wait.and_then(|w| start.checked_add(w));
    let mut registered = Registrations::default();
    let mut announced = false;
    let mut line: Option<crate::waiting_line::WaitLine> = None;
    let mut progress: Option<crate::waiting_line::ProgressLog> = None;
    // The lock last waited for (named when a signal ends the wait).
    let mut waiting_on = 0;
    loop {
        let fail = |session: &mut dyn Session, registered: &mut Registrations, err: Error| {
            registered.leave_all_but(None, session, wanted);
            err
        };
        if let Some(signal) = shared.interrupted() {
            let err = interrupted(&wanted.locks[waiting_on], signal);
            return Err(fail(session, &mut registered, err));
        }
        let remaining = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let may_wait = remaining.is_none_or(|r| !r.is_zero());
        // Longest we could block before trying again: half our registration,
        // and no longer than our own --wait.
        let block_cap = remaining.map_or(wanted.ttl / 2, |r| r.min(wanted.ttl / 2));
        let round = Stamp::now();
        let mut holds: Vec<Hold> = Vec::with_capacity(wanted.locks.len());
        let mut taken = None;
        // The server could not be reached: try the round again after a pause.
        let mut retry = false;
        for (i, keys) in wanted.locks.iter().enumerate() {
            let request = AcquireRequest {
                keys,
                token: wanted.token,
                inherited: wanted.inherited,
                ttl: wanted.ttl,
                holder: wanted.holder,
                register: may_wait.then_some(wanted.ttl),
                kind: wanted.kind,
                fair: wanted.fair,
                grant: wanted.handoff,
            };
            let attempt = session.acquire(&request);
            if attempt.is_ok() {
                outage.over(&keys.name, backend.server());
            }
            match attempt {
                Ok(Attempt::Acquired(hold)) => {
                    registered.remove(i);
                    holds.push(hold);
                }
                Ok(Attempt::Incompatible { held }) => {
                    release_all(session, wanted, &holds);
                    let held = if held == Kind::Shared {
                        "shared"
                    } else {
                        "as a semaphore"
                    };
                    let err = Error::from(Cause::NotAcquired {
                        cause: format!(
                            "an enclosing rlock run holds it {held}; it cannot be re-entered as {}",
                            wanted.kind.describe()
                        ),
                        code: wanted.conflict_code,
                    })
                    .in_lock(&keys.name);
                    return Err(fail(session, &mut registered, err));
                }
                Ok(Attempt::Taken {
                    pttl,
                    holder,
                    place,
                }) => {
                    if may_wait {
                        registered.add(i);
                    }
                    taken = Some((i, pttl, holder, place));
                    break;
                }
                Err(err) => {
                    let err = or_signal(err, &wanted.locks[i], shared);
                    if err.is_transient() {
                        // No hold is kept while waiting for the server either
                        // (best effort, quietly: it is likely not answering).
                        for (keys, hold) in wanted.locks.iter().zip(&holds).rev() {
                            let _ = session.release(keys, &hold.token);
                        }
                    } else {
                        release_all(session, wanted, &holds);
                    }
                    match outage.ride_out(err, &keys.name, shared) {
                        Ok(()) => {
                            retry = true;
                            break;
                        }
                        Err(err) => return Err(fail(session, &mut registered, err)),
                    }
                }
            }
        }
        if retry {
            continue;
        }
        let Some((i, pttl, holder, place)) = taken else {
            // A signal that came while the last request was out ends the wait
            // all the same: nothing may stay held.
            if let Some(signal) = shared.interrupted() {
                release_all(session, wanted, &holds);
                return Err(interrupted(&wanted.locks[waiting_on], signal));
            }
            if let Err(err) = confirm_replicas(session, wanted, &holds, backend.server()) {
                release_all(session, wanted, &holds);
                return Err(err);
            }
            // A slow acquisition (a paused server, a stalled link) leaves less
            // of the lease provable than it gave: renew before COMMAND starts
            // rather than start it on a lease nearly gone.
            let acquired_at = match refresh(session, wanted, &holds, round) {
                Ok(Some(at)) => at,
                Ok(None) => {
                    release_all(session, wanted, &holds);
                    continue;
                }
                Err(err) => {
                    release_all(session, wanted, &holds);
                    return Err(fail(session, &mut registered, err));
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
                    start.elapsed().as_secs_f64() * 1000.0
                )
            });
            return Ok((holds, acquired_at));
        };
        // No partial hold while waiting, and no stale registrations elsewhere.
        release_all(session, wanted, &holds);
        registered.leave_all_but(Some(i), session, wanted);
        let keys = &wanted.locks[i];
        waiting_on = i;
        if !may_wait {
            let cause = match (&holder, wanted.wait) {
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
            return Err(fail(session, &mut registered, err));
        }
        if line.is_none() && progress.is_none() && !announced {
            line = crate::waiting_line::WaitLine::start();
            if line.is_none() {
                progress = crate::waiting_line::ProgressLog::start(wanted.progress_interval);
            }
        }
        if let Some(line) = &line {
            line.waiting(&keys.name, holder.as_ref(), place);
        }
        if let Some(progress) = &mut progress {
            progress.tick(&keys.name, holder.as_ref(), place);
        }
        if !announced {
            announced = true;
            report::verbose(|| match &holder {
                Some(h) => format!(
                    "{}: waiting; held by {}",
                    keys.name,
                    holder_for(h, h.held_for)
                ),
                None => format!("{}: waiting", keys.name),
            });
        }
        let mut block = pttl.unwrap_or(block_cap).min(block_cap).max(MIN_BLOCK);
        // Look again when the next progress line is due, so it is on time.
        if let Some(progress) = &progress {
            block = block.min(progress.until_due().max(MIN_BLOCK));
        }
        {
            let mut phase = shared.phase();
            if shared.interrupted().is_some() {
                continue;
            }
            *phase = Phase::Blocked(Box::new(Blocked {
                backend: Arc::clone(backend),
                keys: keys.clone(),
                token: wanted.token.clone(),
            }));
        }
        let woke = session.block(keys, wanted.token, block);
        shared.set(Phase::Acquiring);
        match woke {
            Ok(Wake::Granted(fence)) => {
                registered.remove(i);
                // A signal that came as the lock was handed over ends the wait:
                // give the hold back (leave.lua drops a handed-over hold).
                if let Some(signal) = shared.interrupted() {
                    let _ = session.leave(keys, wanted.token);
                    return Err(interrupted(keys, signal));
                }
                report::verbose(|| {
                    format!(
                        "acquired {} (fence {fence}, handed over) after {:.1} ms",
                        keys.name,
                        start.elapsed().as_secs_f64() * 1000.0
                    )
                });
                // Handed over no earlier than this round's request, which
                // registered us (the lease ends when that registration would).
                let hold = Hold {
                    token: wanted.token.clone(),
                    fence,
                    count: 1,
                };
                let acquired_at = match refresh(session, wanted, std::slice::from_ref(&hold), round)
                {
                    Ok(Some(at)) => at,
                    // It lapsed before we read it: queue again.
                    Ok(None) => continue,
                    Err(err) => {
                        let _ = session.leave(keys, wanted.token);
                        return Err(fail(session, &mut registered, err));
                    }
                };
                return Ok((vec![hold], acquired_at));
            }
            // Whatever else woke us (a wake-up, a lapsed lease, an interrupt),
            // the next turn of the loop looks at the locks and at the
            // interrupt flag again.
            Ok(_) => {}
            Err(err) => {
                let err = or_signal(err, keys, shared);
                if let Err(err) = outage.ride_out(err, &keys.name, shared) {
                    return Err(fail(session, &mut registered, err));
                }
            }
        }
    }
}

/// `--min-replicas N`: the holds count only once N replicas have them (WAIT
/// covers every write of this session). Fewer within the timeout means the
/// replicas are missing or not keeping up: the server cannot give the
/// durability asked for (exit 69), and the caller gives the holds back.
fn confirm_replicas(
    session: &mut dyn Session,
    wanted: &Wanted<'_>,
    holds: &[Hold],
    server: &str,
) -> Result<()> {
    let n = wanted.min_replicas;
    if n == 0 || holds.iter().all(|h| h.count > 1) {
        return Ok(());
    }
    let keys = &wanted.locks[0];
    let confirmed = session.confirm_replicas(keys, n, wanted.replica_timeout)?;
    if confirmed >= n {
        report::verbose(|| format!("{}: {confirmed} replicas have the lock", keys.name));
        return Ok(());
    }
    Err(Error::from(Cause::Unavailable {
        server: server.to_owned(),
        cause: format!(
            "only {confirmed} of {n} replicas confirmed the lock within {}; not acquired",
            humantime::format_duration(wanted.replica_timeout)
        ),
    })
    .in_lock(&keys.name))
}

/// Gives back holds taken in a round that could not take every lock.
fn release_all(session: &mut dyn Session, wanted: &Wanted<'_>, holds: &[Hold]) {
    for (keys, hold) in wanted.locks.iter().zip(holds).rev() {
        if let Err(err) = session.release(keys, &hold.token) {
            report::error(&format!(
                "{}: could not release after a partial acquisition ({}); it expires within {}",
                keys.name,
                report::without_lock(&err.to_string(), &keys.name),
                humantime::format_duration(wanted.ttl)
            ));
        }
    }
}

/// A signal that arrived while a request was failing is the reason the user sees.
fn or_signal(err: Error, keys: &LockId, shared: &Shared) -> Error {
    match shared.interrupted() {
        Some(signal) => interrupted(keys, signal),
        None => err,
    }
}

fn interrupted(keys: &LockId, signal: crate::signal::Signal) -> Error {
    Error::from(Cause::Interrupted(signal)).in_lock(&keys.name)
}
