//! Giving the holds back when COMMAND is done, and telling a hold that was
//! already gone (it ended before COMMAND did) from a release that failed.

use std::time::{Duration, Instant};

use crate::backend::{Backend, Session};
use crate::error::Error;
use crate::lock::event::Event;
use crate::lock::name::LockId;
use crate::lock::token::Token;
use crate::report;

/// The history's cap, the event that ends the holds, and each lock's fence
/// (by name) to record it with.
pub(super) type EndEvent<'a> = (u32, &'a Event, &'a [(String, u64)]);

/// Releases the holds, reusing the watchdog's session when there is one.
/// Returns the name of a lock whose hold was already gone: it ended before
/// COMMAND did, and someone else may have held it meanwhile. A release that
/// fails is reported, not fatal (COMMAND ran under a proven lease, and the
/// lease expires by itself), once a fresh connection has shown the hold is
/// still ours. With `quiet` (the run ends in a line of its own: lost, or
/// failed), a failed release is said with -v only.
/// The session used is left in `session` (for asking why a hold was gone).
/// With `record`, each release also writes the lock's history event. With
/// `by` (after a loss), no request starts after that instant: what is left
/// expires with its lease.
pub(super) fn release(
    backend: &dyn Backend,
    session: &mut Option<Box<dyn Session>>,
    held: &[(LockId, Token)],
    ttl: Duration,
    quiet: bool,
    record: Option<EndEvent<'_>>,
    by: Option<Instant>,
) -> Option<String> {
    let late = || by.is_some_and(|by| Instant::now() >= by);
    let start = Instant::now();
    let connected = match session.take() {
        Some(s) => Ok(s),
        None => backend.connect(),
    };
    let failed = match connected {
        Ok(s) => {
            *session = Some(s);
            None
        }
        Err(err) => Some(err),
    };
    let mut gone = None;
    for (keys, token) in held.iter().rev() {
        if late() {
            report::verbose(|| {
                format!(
                    "{}: not released: no time left after the loss; it expires within {}",
                    keys.name,
                    humantime::format_duration(ttl)
                )
            });
            continue;
        }
        // The event, with this lock's fence, recorded by the releasing script.
        let event = record.map(|(cap, event, fences)| {
            let fence = fences
                .iter()
                .find(|(n, _)| n == &keys.name)
                .map(|(_, f)| *f);
            (
                cap,
                Event {
                    fence,
                    ..event.clone()
                },
            )
        });
        let outcome = match (session.as_mut(), &failed) {
            (Some(s), _) => s.release_recorded(keys, token, event.as_ref().map(|(c, e)| (*c, e))),
            (None, Some(err)) => Err(Error::internal(err.to_string())),
            (None, None) => Err(Error::internal("no session")),
        };
        match outcome {
            Ok(Some(left)) => report::verbose(|| {
                format!(
                    "{}: released in {:.1} ms (holds left: {left})",
                    keys.name,
                    start.elapsed().as_secs_f64() * 1000.0
                )
            }),
            Ok(None) => gone = gone.or(Some(keys.name.clone())),
            Err(err) => {
                // The connection may have died with the server (a restart
                // that lost the lock): ask again on a new one whether the
                // hold is still ours. A renewal to 1 ms changes nothing (it
                // only lengthens). Not after a timeout: the release may have
                // been carried out without its reply reaching us.
                if !err.reply_timed_out() && !late() {
                    let still_ours = backend
                        .connect()
                        .and_then(|mut s| s.renew(keys, token, Duration::from_millis(1), ttl / 3));
                    if let Ok(false) = still_ours {
                        gone = gone.or(Some(keys.name.clone()));
                        continue;
                    }
                }
                let said = format!(
                    "{}: could not release ({}); it expires within {}",
                    keys.name,
                    report::without_lock(&err.to_string(), &keys.name),
                    humantime::format_duration(ttl)
                );
                // A failed run ends with one line, saying why it failed.
                if quiet {
                    report::verbose(|| said);
                } else {
                    report::error(&said);
                }
            }
        }
    }
    gone
}
