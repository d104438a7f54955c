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
mod views;
mod waiter;
mod waiting_line;
mod wanted;

use waiter::{Round, Waiter};
pub use wanted::Wanted;

use std::sync::Arc;

use crate::backend::{Backend, Hold, Session};
use crate::error::{Cause, Error, Result};
use crate::lock::clock::Stamp;
use crate::report;
use crate::run_state::Shared;
use outage::Outage;

/// Acquires all of `wanted.locks` or none, waiting as allowed. Returns the holds
/// (in the order of `locks`) and the instant the round that got them all
/// started (every lease starts no earlier).
///
/// Several locks are taken one after the other; when one is taken by someone
/// else, the ones already held are released again before waiting for it. No
/// run ever waits while holding, so `run a b` and `run b a` cannot deadlock,
/// and a failure, timeout or interrupt leaves no partial hold.
///
/// Works on `session` when one is given (a client's, kept between
/// acquisitions), else connects first. A server that cannot be reached, when
/// connecting or later, is waited for as `wanted.patience` allows (see
/// [`crate::wait::outage`]); `lock` names the lock(s) in messages about it.
pub fn acquire(
    backend: &Arc<dyn Backend>,
    session: Option<Box<dyn Session>>,
    wanted: &Wanted<'_>,
    lock: &str,
    shared: &Arc<Shared>,
) -> Result<(Box<dyn Session>, Vec<Hold>, Stamp)> {
    let mut outage = Outage::new(wanted.patience);
    report::flush_note();
    report::verbose(|| format!("{lock}: using {}", backend.server()));
    let mut session = match session {
        Some(session) => session,
        None => connect(backend, lock, shared, &mut outage)?,
    };
    let (holds, at) = acquire_on(backend, session.as_mut(), wanted, shared, outage)?;
    Ok((session, holds, at))
}

/// Connects, riding out an outage as `outage` allows.
fn connect(
    backend: &Arc<dyn Backend>,
    lock: &str,
    shared: &Arc<Shared>,
    outage: &mut Outage,
) -> Result<Box<dyn Session>> {
    loop {
        match backend.connect() {
            Ok(session) => {
                report::mark("connected");
                return Ok(session);
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
    }
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
