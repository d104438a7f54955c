//! What the waiter does with the holds a turn took before it keeps them:
//! confirm them with the replicas asked for, renew a lease the acquisition
//! ate into, or give them back.

use crate::backend::Extend;
use crate::backend::{Hold, Session};
use crate::error::{Cause, Error, Result};
use crate::lock::clock::Stamp;
use crate::report;
use crate::wait::Wanted;

/// How a give-back that fails is said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Say {
    /// As an error line: the holds expire only with their ttl.
    Failures,
    /// Not at all: the server is likely not answering, and the error that
    /// ends the turn says why.
    Nothing,
}

/// Gives back holds taken in a round that could not keep them all, the last
/// taken first. Each hold's `acquired` event, when the acquiring script wrote
/// one, goes with it: no run kept the hold.
pub(super) fn give_back(session: &mut dyn Session, wanted: &Wanted<'_>, holds: &[Hold], say: Say) {
    for (keys, hold) in wanted.locks.iter().zip(holds).rev() {
        let released = session.give_back(keys, hold);
        if let (Err(err), Say::Failures) = (released, say) {
            report::error(&format!(
                "{}: could not release after a partial acquisition ({}); it expires within {}",
                keys.name,
                report::without_lock(&err.to_string(), &keys.name),
                humantime::format_duration(wanted.ttl)
            ));
        }
    }
}

/// Renews `holds` (taken by the request sent at `round`) when the acquisition
/// took longer than the caller's renewal period, so that COMMAND never starts
/// on a lease older than a renewed one could be. Returns when the lease is now counted from, or
/// None when a hold lapsed meanwhile (the caller queues again).
pub(super) fn refresh(
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
            .renew(
                keys,
                &hold.token,
                wanted.ttl,
                wanted.ttl / 3,
                Extend::AtLeast,
            )
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

/// `--min-replicas N`: the holds count only once N replicas have them (WAIT
/// covers every write of this session). Fewer within the timeout means the
/// replicas are missing or not keeping up: the server cannot give the
/// durability asked for (exit 69), and the caller gives the holds back.
pub(super) fn confirm_replicas(
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
