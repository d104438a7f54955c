//! The run's events the supervisor tells (see [`crate::announce`]): the
//! holds once COMMAND started, and the run's end.

use std::time::SystemTime;

use super::ended::{Ended, Holding};
use crate::announce::{self, Announcer, Event};
use crate::holding::ending::Ending;
use crate::lock::name::LockName;

/// Tells that every lock in `holding` is held and COMMAND started; `names`
/// are the names as given.
pub(super) fn held(announcer: &Announcer, names: &[LockName], holding: &Holding) {
    if announcer.quiet() {
        return;
    }
    let locks: Vec<(&str, u64)> = names
        .iter()
        .filter_map(|name| {
            let lock = holding.locks.iter().find(|l| l.name() == name.as_str())?;
            Some((name.as_str(), lock.fence().0))
        })
        .collect();
    let acquired_at = SystemTime::now()
        .checked_sub(holding.acquired.elapsed())
        .unwrap_or_else(SystemTime::now);
    announcer.tell(&Event::Held(&announce::Held {
        locks: &locks,
        acquired_at,
    }));
}

/// Tells how the run `ended`: its exit status, whether the lock was taken
/// (so COMMAND never ran), and its one-line cause.
pub fn ended(announcer: &Announcer, ended: &Ended) {
    if announcer.quiet() {
        return;
    }
    let cause = match (&ended.result, &ended.ending) {
        (Err(err), _) => Some(err.to_string()),
        (Ok(_), Ending::Lost { line, .. }) => Some(line.clone()),
        (Ok(_), _) => ended.closing.clone(),
    };
    announcer.tell(&Event::Ended(&announce::Ended {
        exit: ended.exit(),
        skipped: ended.ending == Ending::Busy,
        cause: cause.as_deref(),
        by: ended.wind_up_by,
    }));
}
