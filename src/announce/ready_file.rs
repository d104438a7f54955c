//! `--ready-file`: a file that exists exactly while the lock is held and
//! COMMAND runs, for an exec readiness probe (`test -e FILE`). Written whole
//! (a temporary file in the same directory, renamed), so a probe never reads
//! half of it; removed when COMMAND exits, before the release, and as soon
//! as the hold is known lost.
//!
//! Its lines: `RLOCK_NAME=` (the names, space-separated), `RLOCK_FENCE=`
//! (the first name's fence), `RLOCK_FENCES=` (`name=fence` for each),
//! `RLOCK_PID=` (rlock's pid) and `RLOCK_SINCE=` (when the lock was taken,
//! RFC 3339 UTC). Never the owner token.

use std::path::PathBuf;
use std::sync::Mutex;

use super::{Event, Held, Sink};
use crate::report;

/// The ready file and whether rlock wrote it.
pub(super) struct ReadyFile {
    path: PathBuf,
    written: Mutex<bool>,
}

impl ReadyFile {
    /// Removes a ready file a dead run left (killed with its guardian, a
    /// container gone): before the lock is held, no probe may read it as
    /// held. Only an rlock ready file, and not a live run's.
    pub(super) fn new(path: PathBuf) -> Self {
        remove_if_stale(&path, None);
        ReadyFile {
            path,
            written: Mutex::new(false),
        }
    }

    fn written(&self) -> std::sync::MutexGuard<'_, bool> {
        self.written.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self, held: &Held<'_>) {
        let mut written = self.written();
        let mut temp = self.path.clone().into_os_string();
        temp.push(format!(".{}.tmp", std::process::id()));
        let temp = PathBuf::from(temp);
        let done = std::fs::write(&temp, content(held)).and_then(|()| {
            std::fs::rename(&temp, &self.path).inspect_err(|_| {
                let _ = std::fs::remove_file(&temp);
            })
        });
        match done {
            Ok(()) => *written = true,
            Err(err) => report::error(&format!(
                "--ready-file {}: not written ({err})",
                report::sanitize(&self.path.display().to_string())
            )),
        }
    }

    /// Removes the file if it is still ours: another run may have written
    /// the path since (ours lapsed, its hold is real).
    fn remove(&self) {
        let mut written = self.written();
        if std::mem::take(&mut *written)
            && ready_file_text(&self.path)
                .is_some_and(|text| pid_of(&text) == Some(std::process::id()))
            && let Err(err) = std::fs::remove_file(&self.path)
            && err.kind() != std::io::ErrorKind::NotFound
        {
            report::error(&format!(
                "--ready-file {}: not removed ({err})",
                report::sanitize(&self.path.display().to_string())
            ));
        }
    }
}

impl Sink for ReadyFile {
    fn tell(&self, event: &Event<'_>) {
        match event {
            Event::Held(held) => self.write(held),
            Event::Lost | Event::Stopping | Event::Ended(_) => self.remove(),
            Event::Waiting { .. }
            | Event::Unreachable { .. }
            | Event::Renewed
            | Event::RenewalsFailing { .. } => {}
        }
    }
}

/// Removes the ready file at `path` if the run that wrote it no longer runs,
/// or is `dead` (a dying rlock may still show as running).
pub fn remove_if_stale(path: &std::path::Path, dead: Option<u32>) {
    if let Some(text) = ready_file_text(path)
        && text.starts_with("RLOCK_NAME=")
        && (dead.is_some() && pid_of(&text) == dead || !run_alive(&text))
    {
        let _ = std::fs::remove_file(path);
    }
}

/// What a regular file at `path` holds, up to 64 KiB (a FIFO or a device
/// is no ready file, and is never read).
fn ready_file_text(path: &std::path::Path) -> Option<String> {
    use std::io::Read;
    if !std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file()) {
        return None;
    }
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(64 * 1024)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// The `RLOCK_PID=` a ready file names.
fn pid_of(text: &str) -> Option<u32> {
    text.lines()
        .find_map(|line| line.strip_prefix("RLOCK_PID="))
        .and_then(|pid| pid.trim().parse().ok())
}

/// Whether the run a ready file names still runs: its pid is a live rlock
/// (not a zombie, nor a number reused by another program after a reboot).
fn run_alive(text: &str) -> bool {
    let Some(stat) = pid_of(text)
        .filter(|pid| *pid != std::process::id())
        .and_then(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok())
    else {
        return false;
    };
    // "PID (COMM) STATE ...": COMM may hold spaces and parentheses.
    let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
        return false;
    };
    let state = stat[close + 1..].split_whitespace().next();
    stat[open + 1..close].starts_with("rlock") && !matches!(state, Some("Z" | "X"))
}

/// The file's lines for `held`.
fn content(held: &Held<'_>) -> String {
    let names: Vec<&str> = held.locks.iter().map(|(name, _)| *name).collect();
    let fences: Vec<String> = held
        .locks
        .iter()
        .map(|(name, fence)| format!("{name}={fence}"))
        .collect();
    let first = held.locks.first().map_or(0, |(_, fence)| *fence);
    format!(
        "RLOCK_NAME={}\nRLOCK_FENCE={first}\nRLOCK_FENCES={}\nRLOCK_PID={}\nRLOCK_SINCE={}\n",
        names.join(" "),
        fences.join(" "),
        std::process::id(),
        humantime::format_rfc3339_seconds(held.acquired_at)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_names_the_locks_their_fences_and_rlocks_pid() {
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_800_000_000);
        let text = content(&Held {
            locks: &[("db", 7), ("cache", 9)],
            acquired_at: at,
        });
        let pid = std::process::id();
        assert_eq!(
            text,
            format!(
                "RLOCK_NAME=db cache\nRLOCK_FENCE=7\nRLOCK_FENCES=db=7 cache=9\n\
                 RLOCK_PID={pid}\nRLOCK_SINCE=2027-01-15T08:00:00Z\n"
            )
        );
    }
}
