//! `--ready-file`: a file that exists exactly while the lock is held and
//! COMMAND runs, for an exec readiness probe (`test -e FILE`). Written whole
//! (a temporary file in the same directory, renamed), so a probe never reads
//! half of it; removed when COMMAND exits, before the release, and as soon
//! as the hold is known lost.
//!
//! Its lines: `RLOCK_PID=` (rlock's pid; first, so whose file it is reads
//! from its first bytes), `RLOCK_NAME=` (the names, space-separated),
//! `RLOCK_FENCE=` (the first name's fence), `RLOCK_FENCES=` (`name=fence`
//! for each) and `RLOCK_SINCE=` (when the lock was taken, RFC 3339 UTC).
//! Never the owner token.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use super::{Event, Held, Sink};
use crate::report;

/// The most a removal holds up what follows it (SIGTERM to COMMAND, after a
/// loss): a file system that hangs gets no more, and the removal goes on
/// alone.
const REMOVAL_WAIT: Duration = Duration::from_millis(100);

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

    /// Removes the file if it is still ours (another run may have written
    /// the path since: ours lapsed, its hold is real), waiting for that at
    /// most [`REMOVAL_WAIT`].
    fn remove(&self) {
        if !std::mem::take(&mut *self.written()) {
            return;
        }
        let path = self.path.clone();
        let (done, removed) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("ready-file".into())
            .spawn(move || {
                let outcome = match pid_of(&path) == Some(std::process::id()) {
                    true => std::fs::remove_file(&path),
                    false => Ok(()),
                };
                let _ = done.send(outcome);
            });
        let outcome = match spawned {
            Ok(_) => removed.recv_timeout(REMOVAL_WAIT).ok(),
            Err(err) => Some(Err(err)),
        };
        match outcome {
            Some(Err(err)) if err.kind() != std::io::ErrorKind::NotFound => {
                report::error(&format!(
                    "--ready-file {}: not removed ({err})",
                    report::sanitize(&self.path.display().to_string())
                ));
            }
            Some(_) => {}
            None => report::verbose(|| {
                format!(
                    "--ready-file {}: its removal is taking long; it goes on",
                    report::sanitize(&self.path.display().to_string())
                )
            }),
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
pub fn remove_if_stale(path: &Path, dead: Option<u32>) {
    if let Some(pid) = pid_of(path)
        && (Some(pid) == dead || !run_alive(pid))
    {
        let _ = std::fs::remove_file(path);
    }
}

/// The pid an rlock ready file at `path` names on its first line; None for
/// anything else (another program's file, a FIFO or a device, never read).
fn pid_of(path: &Path) -> Option<u32> {
    use std::io::Read;
    if !std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file()) {
        return None;
    }
    let mut head = [0u8; 32];
    let read = std::fs::File::open(path).ok()?.read(&mut head).ok()?;
    let line = head[..read].split(|b| *b == b'\n').next()?;
    std::str::from_utf8(line.strip_prefix(b"RLOCK_PID=")?)
        .ok()?
        .parse()
        .ok()
}

/// Whether the run `pid` names still runs: a live process (not a zombie),
/// and, where /proc says, one with this program's name (a number reused by
/// another program after a reboot does not count). What cannot be told
/// counts as running: another's file is never removed on a guess.
fn run_alive(pid: u32) -> bool {
    if pid == std::process::id() {
        return false;
    }
    match crate::sys::process::Watched::open(pid) {
        None => return false,
        Some(process) if process.gone() => return false,
        Some(_) => {}
    }
    match (name_of(&pid.to_string()), program_name()) {
        (Some(theirs), Some(ours)) => theirs == ours,
        _ => true,
    }
}

/// This program's name as the kernel keeps it for a process started from
/// it: the file's name, cut to 15 bytes (a successor runs as `exe`, from
/// /proc/self/exe, so its own COMM would not do).
fn program_name() -> Option<String> {
    let exe = std::env::current_exe().ok()?;
    let name = exe.file_name()?.to_str()?;
    let mut end = name.len().min(15);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    Some(name[..end].to_owned())
}

/// The program name of process `pid`, from `/proc/PID/stat`'s
/// "PID (COMM) STATE ...": COMM may hold spaces and parentheses.
fn name_of(pid: &str) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (open, close) = (stat.find('(')?, stat.rfind(')')?);
    Some(stat.get(open + 1..close)?.to_owned())
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
        "RLOCK_PID={}\nRLOCK_NAME={}\nRLOCK_FENCE={first}\nRLOCK_FENCES={}\nRLOCK_SINCE={}\n",
        std::process::id(),
        names.join(" "),
        fences.join(" "),
        humantime::format_rfc3339_seconds(held.acquired_at)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_names_rlocks_pid_first_then_the_locks_and_their_fences() {
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_800_000_000);
        let text = content(&Held {
            locks: &[("db", 7), ("cache", 9)],
            acquired_at: at,
        });
        let pid = std::process::id();
        assert_eq!(
            text,
            format!(
                "RLOCK_PID={pid}\nRLOCK_NAME=db cache\nRLOCK_FENCE=7\nRLOCK_FENCES=db=7 cache=9\n\
                 RLOCK_SINCE=2027-01-15T08:00:00Z\n"
            )
        );
    }
}
