//! `rlock history NAME` (README: "What happened last night?"): the lock's
//! last events, newest first; and the events only the end of a command
//! knows (a wait given up or interrupted, a hold lost), recorded after it.

use crate::backend::Backend;
use crate::config::Config;
use crate::error::Result;
use crate::exit::Exit;
use crate::lock::event::Event;
use crate::lock::name::LockId;

/// `rlock history NAME [--limit N] [--json]`.
pub fn history(
    config: &Config,
    name: &str,
    limit: usize,
    json: bool,
    redisson: bool,
) -> Result<Exit> {
    let keys = config.lock_id(redisson, name);
    let backend = config.backend(keys.dialect())?;
    let mut session = backend.inspect().map_err(|e| e.in_lock(name))?;
    let events = session.history(&keys, limit).map_err(|e| e.in_lock(name))?;
    let out = if json {
        crate::report::json::to_string(&events) + "\n"
    } else if events.is_empty() {
        format!("no events recorded for {}\n", crate::report::sanitize(name))
    } else {
        events.iter().map(|e| e.to_line() + "\n").collect()
    };
    crate::commands::output::report(&out)?;
    Ok(Exit::Success)
}

/// Records `event` for each lock on a connection of its own, after the
/// command that knew of it; a failure is a `-v` note.
pub fn record_after(backend: &dyn Backend, locks: &[LockId], cap: u32, event: &Event) {
    if cap == 0 || locks.is_empty() {
        return;
    }
    let mut session = match backend.connect() {
        Ok(session) => session,
        Err(err) => {
            crate::report::verbose(|| format!("history not written: {err}"));
            return;
        }
    };
    for keys in locks {
        if let Err(err) = session.record(keys, cap, event) {
            crate::report::verbose(|| format!("{}: history not written: {err}", keys.name));
        }
    }
}
