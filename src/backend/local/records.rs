//! The records a lock's holders and waiters leave in DIR (`E.h.TOKEN`,
//! `E.w.TOKEN`), each locked while its process lives, and what this process
//! keeps of its own holds and waits.

use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::LocalSession;
use super::files::{Record, field, held_by_someone, open, try_flock};
use crate::backend::{HolderInfo, WaiterStatus};
use crate::lock::clock;
use crate::lock::kind::Kind;
use crate::lock::token::Token;

/// A hold of this process: the open files whose locks it is (the record
/// last), or none for a re-entry into a lock an enclosing run holds.
pub(super) struct OpenHold {
    pub(super) token: Token,
    pub(super) files: Vec<File>,
    pub(super) fence: u64,
}

/// This process's waiter record for one lock, locked while it waits.
pub(super) struct Waiting {
    file: File,
    /// When it first asked (its place in the queue).
    pub(super) since: u128,
    /// Last turned away by the queue (writer preference), not by a holder.
    pub(super) queued: bool,
    /// Waits for an exclusive hold: only a free lock file can let it in.
    pub(super) exclusive: bool,
    /// When its record was last marked as still waiting.
    stamped: Instant,
}

/// A waiter record not marked for this long belongs to a process that does
/// not run (stopped, or not scheduled): it holds no shared request back.
const WAITER_STALE: Duration = Duration::from_secs(2);

impl Waiting {
    /// Marks the record as still waiting (its modification time).
    pub(super) fn stamp(&mut self) {
        if self.stamped.elapsed() >= WAITER_STALE / 10 {
            self.stamped = Instant::now();
            let _ = self.file.set_modified(SystemTime::now());
        }
    }
}

/// A holder's record.
pub(super) struct Details {
    pub(super) pid: String,
    pub(super) host: String,
    pub(super) command: String,
    pub(super) note: String,
    pub(super) since: u64,
    pub(super) kind: String,
    pub(super) fence: u64,
    /// Held by an `rlock acquire --while-pid` keeper, which lets go when asked.
    pub(super) keeper: bool,
}

impl Details {
    pub(super) fn render(&self) -> String {
        Record::new()
            .with("pid", &self.pid)
            .with("host", &self.host)
            .with("since", self.since)
            .with("kind", &self.kind)
            .with("fence", self.fence)
            .with("keeper", u8::from(self.keeper))
            .with("note", &self.note)
            .with("command", &self.command)
            .render()
    }

    pub(super) fn parse(text: &str) -> Option<Self> {
        let get = |key| field(text, key, "command");
        Some(Details {
            pid: get("pid")?,
            host: get("host")?,
            since: get("since")?.parse().ok()?,
            kind: get("kind")?,
            fence: get("fence")?.parse().ok()?,
            keeper: get("keeper").as_deref() == Some("1"),
            // Records written before notes existed have none.
            note: get("note").unwrap_or_default(),
            command: get("command")?,
        })
    }

    pub(super) fn read(path: &Path) -> Option<Self> {
        Details::parse(&fs::read_to_string(path).ok()?)
    }

    pub(super) fn info(&self) -> HolderInfo {
        HolderInfo {
            host: self.host.clone(),
            pid: self.pid.clone(),
            command: self.command.clone(),
            note: self.note.clone(),
            held_for: Duration::from_millis(clock::now_ms().saturating_sub(self.since)),
            detached: self.keeper,
            earlier: false,
        }
    }
}

/// A holder record, read through one open file: None when no live process
/// holds it (missing, or unlocked: stale); Some(None) when it cannot be read.
pub(super) fn read_live(path: &Path) -> Option<Option<Details>> {
    use std::io::Read;
    let mut file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .ok()?;
    if try_flock(&file, false).unwrap_or(true) {
        return None;
    }
    let mut text = String::new();
    Some(
        file.read_to_string(&mut text)
            .ok()
            .and_then(|_| Details::parse(&text)),
    )
}

/// Now, in nanoseconds since the epoch (a waiter's place in the queue).
fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

impl LocalSession {
    /// Creates a record (`tag` "h" or "w") locked before anyone can see it,
    /// so it is never seen unlocked while its process lives.
    pub(super) fn create_locked(
        &self,
        name: &str,
        tag: &str,
        token: &Token,
        text: &str,
    ) -> io::Result<File> {
        // Written under a name no scan looks at, then renamed into place:
        // a scan that finds a record unlocked may remove it as stale.
        let new = self.record_path(name, "n", token);
        let mut file = open(&new)?;
        if !try_flock(&file, true)? {
            return Err(io::Error::other(
                "a new record is locked by another process",
            ));
        }
        // Emptied only when not empty already (left by an earlier attempt):
        // on ext4 a truncation to zero makes the close flush the file to the
        // disk, and its removal cost ten times a fresh file's.
        if file.metadata()?.len() > 0 {
            file.set_len(0)?;
        }
        file.write_all(text.as_bytes())?;
        fs::rename(&new, self.record_path(name, tag, token))?;
        Ok(file)
    }

    /// Live records tagged `tag` as (token, text); stale ones are removed.
    pub(super) fn live(&self, name: &str, tag: &str) -> Vec<(String, String)> {
        self.paths
            .tagged(name, tag)
            .into_iter()
            .filter_map(|(path, token)| {
                if !held_by_someone(&path) {
                    let _ = fs::remove_file(&path);
                    return None;
                }
                Some((token, fs::read_to_string(&path).ok()?))
            })
            .collect()
    }

    /// The live holders' records (stale ones are removed).
    pub(super) fn holders(&self, name: &str) -> Vec<Details> {
        self.live(name, "h")
            .iter()
            .filter_map(|(_, text)| Details::parse(text))
            .collect()
    }

    /// The live waiters of `name`, first come first, as `status` shows them
    /// (a waiter record has its pid, note and when it asked; the host is
    /// this one).
    pub(super) fn waiters(&self, name: &str) -> Vec<WaiterStatus> {
        let now = now_ns();
        let mut found: Vec<(u128, WaiterStatus)> = self
            .live(name, "w")
            .iter()
            .map(|(_, text)| {
                let since = field(text, "since", "kind").and_then(|s| s.parse::<u128>().ok());
                let status = WaiterStatus {
                    host: crate::sys::process::host_name(),
                    pid: field(text, "pid", "kind").unwrap_or_default(),
                    note: field(text, "note", "kind").unwrap_or_default(),
                    waiting_ms: since
                        .map(|ns| u64::try_from(now.saturating_sub(ns) / 1_000_000).unwrap_or(0)),
                };
                (since.unwrap_or(u128::MAX), status)
            })
            .collect();
        found.sort_by_key(|(since, _)| *since);
        found.into_iter().map(|(_, w)| w).collect()
    }

    /// Whether the waiter `token`'s record has not been marked for
    /// [`WAITER_STALE`].
    pub(super) fn stale_waiter(&self, name: &str, token: &str) -> bool {
        let path = self.path(name, &format!("w.{token}"));
        fs::metadata(path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > WAITER_STALE)
    }

    /// Records this process as waiting for `name` (once per wait; the first
    /// registration's time keeps its place).
    pub(super) fn register(
        &mut self,
        name: &str,
        token: &Token,
        kind: Kind,
        note: &str,
    ) -> io::Result<()> {
        if let Some(waiting) = self.waiting.get_mut(name) {
            waiting.stamp();
            return Ok(());
        }
        let since = now_ns();
        let text = Record::new()
            .with("pid", std::process::id())
            .with("since", since)
            // (One line: notes are cleaned to one line; `kind` stays last.)
            .with("note", note.replace(['\n', '\r'], " "))
            .with("kind", kind.letter())
            .render();
        let file = self.create_locked(name, "w", token, &text)?;
        self.waiting.insert(
            name.to_owned(),
            Waiting {
                file,
                since,
                queued: false,
                exclusive: kind == Kind::Exclusive,
                stamped: Instant::now(),
            },
        );
        Ok(())
    }

    /// Removes this process's waiter record for `name`, if it has one.
    pub(super) fn unregister(&mut self, name: &str, token: &Token) {
        if self.waiting.remove(name).is_some() {
            let _ = fs::remove_file(self.record_path(name, "w", token));
        }
    }
}
