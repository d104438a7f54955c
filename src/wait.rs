//! Acquiring with waiting: try, and when the lock is taken, block until a
//! release wakes us (push, not polling) or the holder's lease could have run
//! out, whichever is first; then try again.
//!
//! A failed attempt registers this waiter in the same script that saw the lock
//! taken, so a release between the attempt and the block cannot be missed: the
//! release sees the waiter and leaves a wake-up token for it. A release wakes
//! one waiter (one token, one BLPOP). A woken waiter that dies before acquiring
//! strands the others only until their block times out, which is at most the
//! holder's remaining lease; one that gives up passes the token on (leave.lua).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::{AcquireRequest, Attempt, Backend, Hold, HolderInfo, Session};
use crate::error::{Error, Result};
use crate::name::LockKeys;
use crate::report;
use crate::signals::{Blocked, Phase, Shared};
use crate::token::Token;

/// Extra life of a waiter's registration beyond its longest block, so a live
/// waiter never looks dead to a release.
const REGISTRATION_MARGIN: Duration = Duration::from_secs(5);
/// Shortest block: keeps a just-expiring holder from turning into a busy loop.
const MIN_BLOCK: Duration = Duration::from_millis(5);

/// What to acquire and how long to wait.
pub struct Wanted<'a> {
    /// The lock.
    pub keys: &'a LockKeys,
    /// Fresh token for this caller.
    pub token: &'a Token,
    /// Ancestors' tokens (re-entry).
    pub inherited: &'a [Token],
    /// Lease to ask for.
    pub ttl: Duration,
    /// Metadata stored with the hold.
    pub holder: &'a HolderInfo,
    /// How long to wait: `None` forever, zero for `--no-wait`.
    pub wait: Option<Duration>,
    /// Status for "not acquired" (`-E`).
    pub conflict_code: u8,
}

/// Acquires `wanted`, waiting as allowed. Returns the hold and the instant the
/// successful request was sent (the lease starts no earlier).
pub fn acquire(
    backend: &Arc<dyn Backend>,
    session: &mut dyn Session,
    wanted: &Wanted<'_>,
    shared: &Shared,
) -> Result<(Hold, Instant)> {
    let start = Instant::now();
    // A wait too long to represent is a wait forever.
    let deadline = wanted.wait.and_then(|w| start.checked_add(w));
    let mut registered = false;
    let mut announced = false;
    loop {
        if let Some(signal) = shared.interrupted() {
            return Err(give_up(
                session,
                wanted,
                registered,
                interrupted(wanted, signal),
            ));
        }
        let remaining = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let may_wait = remaining.is_none_or(|r| !r.is_zero());
        // Longest we could block before trying again: bounded by the ttl we ask
        // for when the holder's lease is unknown, and by our own --wait.
        let block_cap = remaining.map_or(wanted.ttl, |r| r.min(wanted.ttl));
        let sent = Instant::now();
        let request = AcquireRequest {
            keys: wanted.keys,
            token: wanted.token,
            inherited: wanted.inherited,
            ttl: wanted.ttl,
            holder: wanted.holder,
            register: may_wait.then_some(block_cap.max(wanted.ttl) + REGISTRATION_MARGIN),
        };
        let attempt = match session.acquire(&request) {
            Ok(attempt) => attempt,
            Err(err) => {
                return Err(give_up(
                    session,
                    wanted,
                    registered,
                    or_signal(err, wanted, shared),
                ))
            }
        };
        let (pttl, holder) = match attempt {
            Attempt::Acquired(hold) => {
                report::verbose(|| {
                    format!(
                        "{}: acquired (fence {}, hold count {}) after {:.1} ms",
                        wanted.keys.name,
                        hold.fence,
                        hold.count,
                        start.elapsed().as_secs_f64() * 1000.0
                    )
                });
                return Ok((hold, sent));
            }
            Attempt::Taken { pttl, holder } => (pttl, holder),
        };
        registered |= may_wait;
        if !may_wait {
            let cause = match (&holder, wanted.wait) {
                (_, Some(w)) if !w.is_zero() => {
                    format!("still held after waiting {}", humantime::format_duration(w))
                }
                (Some(h), _) => format!("held by {}", describe_holder(h)),
                (None, _) => "held by another owner".into(),
            };
            return Err(give_up(
                session,
                wanted,
                registered,
                Error::NotAcquired {
                    lock: wanted.keys.name.clone(),
                    cause,
                    code: wanted.conflict_code,
                },
            ));
        }
        if !announced {
            announced = true;
            report::verbose(|| match &holder {
                Some(h) => format!(
                    "{}: waiting; held by {}",
                    wanted.keys.name,
                    describe_holder(h)
                ),
                None => format!("{}: waiting", wanted.keys.name),
            });
        }
        let block = pttl.unwrap_or(block_cap).min(block_cap).max(MIN_BLOCK);
        {
            let mut phase = shared.phase();
            if shared.interrupted().is_some() {
                continue;
            }
            *phase = Phase::Blocked(Blocked {
                backend: Arc::clone(backend),
                keys: wanted.keys.clone(),
                token: wanted.token.clone(),
            });
        }
        // Whatever woke us (a release, a lapsed lease, an interrupt), the next
        // turn of the loop looks at the lock and at the interrupt flag again.
        let woke = session.block(wanted.keys, wanted.token, block);
        shared.set(Phase::Acquiring);
        if let Err(err) = woke {
            return Err(give_up(
                session,
                wanted,
                registered,
                or_signal(err, wanted, shared),
            ));
        }
    }
}

/// A signal that arrived while a request was failing is the reason the user sees.
fn or_signal(err: Error, wanted: &Wanted<'_>, shared: &Shared) -> Error {
    match shared.interrupted() {
        Some(signal) => interrupted(wanted, signal),
        None => err,
    }
}

fn interrupted(wanted: &Wanted<'_>, signal: i32) -> Error {
    Error::Interrupted {
        lock: wanted.keys.name.clone(),
        signal,
    }
}

/// Leaves the waiter queue (best effort: a failure only delays cleanup until
/// the registration expires) and returns `err`.
fn give_up(session: &mut dyn Session, wanted: &Wanted<'_>, registered: bool, err: Error) -> Error {
    if registered {
        let _ = session.leave(wanted.keys, wanted.token, wanted.ttl);
    }
    err
}

/// `pid 42 on host ('command') for 3s`, sanitized for the terminal.
pub fn describe_holder(h: &HolderInfo) -> String {
    let held = Duration::from_secs(h.held_for.as_secs());
    format!(
        "pid {} on {} ({}) for {}",
        report::sanitize(&h.pid),
        report::sanitize(&h.host),
        report::quote(&h.command),
        humantime::format_duration(held)
    )
}
