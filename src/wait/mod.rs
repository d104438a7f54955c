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

mod outage;
mod registrations;
mod waiter;
mod waiting_line;
mod wanted;

use waiter::{Round, Waiter};
pub use wanted::Wanted;

use std::sync::Arc;
use std::time::Duration;

use crate::backend::{Backend, Hold, Session};
use crate::error::{Cause, Error, Result};
use crate::lock::clock::Stamp;
use crate::lock::name::LockId;
use crate::report;
use crate::run_state::Shared;
use outage::Outage;

// A waiter's registration lasts its ttl, and it blocks at most half of that
// before trying (and registering) again: a live waiter never looks dead, and a
// killed one leaves the queue within its ttl.
/// Shortest block: keeps a just-expiring holder from turning into a busy loop.
const MIN_BLOCK: Duration = Duration::from_millis(5);

/// Renews `holds` (taken by the request sent at `round`) when the acquisition
/// took longer than the caller's renewal period, so that COMMAND never starts
/// on a lease older than a renewed one could be. Returns when the lease is now counted from, or
/// None when a hold lapsed meanwhile (the caller queues again).
fn refresh(
    session: &mut dyn Session,
    wanted: &Wanted<'_>,
    holds: &[Hold],
    round: Stamp,
) -> Result<Option<Stamp>> {
    if Stamp::now().since(round) < wanted.refresh_after {
        return Ok(Some(round));
    }
    let sent = Stamp::now();
    // A renewal must be confirmed within a third of the lease; a link whose
    // round trip is longer cannot hold this lease at all: said as such.
    let too_slow = |err: Error| {
        if !err.reply_timed_out() {
            return err;
        }
        err.with_more(&format!(
            "; the acquisition took {:.1}s and --ttl {} needs replies within {}: use a longer --ttl",
            sent.since(round).as_secs_f64(),
            humantime::format_duration(wanted.ttl),
            humantime::format_duration(wanted.ttl / 3)
        ))
    };
    for (keys, hold) in wanted.locks.iter().zip(holds) {
        if !session
            .renew(keys, &hold.token, wanted.ttl, wanted.ttl / 3)
            .map_err(too_slow)?
        {
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
/// is waited for as `wanted.patience` allows (see [`crate::wait::outage`]); `lock`
/// names the lock(s) in messages about it.
pub fn acquire(
    backend: &Arc<dyn Backend>,
    wanted: &Wanted<'_>,
    lock: &str,
    shared: &Arc<Shared>,
) -> Result<(Box<dyn Session>, Vec<Hold>, Stamp)> {
    let mut outage = Outage::new(wanted.patience);
    report::flush_note();
    report::verbose(|| format!("{lock}: using {}", backend.server()));
    let mut session = loop {
        match backend.connect() {
            Ok(session) => {
                report::mark("connected");
                break session;
            }
            // A signal that came while connecting is the reason the user
            // sees, whatever the connection's own failure.
            Err(_) if let Some(signal) = shared.interrupted() => {
                return Err(Error::from(Cause::Interrupted(signal)).in_lock(lock));
            }
            Err(err) => outage
                .ride_out(err, lock, shared)
                .map_err(|e| e.in_lock(lock))?,
        }
    };
    let (holds, at) = acquire_on(backend, session.as_mut(), wanted, shared, outage)?;
    Ok((session, holds, at))
}

/// [`acquire`] on a connected session, within what is left of an outage
/// met while connecting: each turn asks for every lock in order, then either
/// finishes (all held), or stands in line for the one that is taken and
/// blocks until a release wakes it or hands it over.
fn acquire_on(
    backend: &Arc<dyn Backend>,
    session: &mut dyn Session,
    wanted: &Wanted<'_>,
    shared: &Arc<Shared>,
    outage: Outage,
) -> Result<(Vec<Hold>, Stamp)> {
    let mut waiter = Waiter::new(backend, session, wanted, shared, outage);
    loop {
        waiter.check_interrupt()?;
        let turn = waiter.turn();
        let done = match waiter.try_all(&turn)? {
            Round::Retry => None,
            Round::Held(holds) => waiter.finish(holds, turn.round)?,
            Round::Taken(taken) => {
                waiter.stand_in_line(&turn, &taken)?;
                waiter.block(&turn, &taken)?
            }
        };
        if let Some((holds, at)) = done {
            waiter.in_time(&holds)?;
            waiter.log_acquired();
            return Ok((holds, at));
        }
    }
}

/// How long after the `--wait` deadline a grant may still be used: COMMAND
/// starts within 100 ms of the deadline, spawning included.
const GRANT_GRACE: Duration = Duration::from_millis(50);

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
        let released = match &hold.history_entry {
            Some(entry) => session.release_retracting(keys, &hold.token, entry),
            None => session.release(keys, &hold.token),
        };
        if let Err(err) = released {
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
fn or_signal(err: Error, lock: &LockId, shared: &Shared) -> Error {
    match shared.interrupted() {
        Some(signal) => interrupted(lock, signal),
        None => err,
    }
}

fn interrupted(lock: &LockId, signal: crate::signal::Signal) -> Error {
    Error::from(Cause::Interrupted(signal)).in_lock(&lock.name)
}
