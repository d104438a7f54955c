//! The `file:DIR` backend: locks on this host only, held with the kernel's
//! `flock` on files in DIR, so no server is needed and the kernel frees a lock
//! the moment its holder dies.
//!
//! For lock NAME (its file-name stem E, see [`files::stem`]) DIR holds:
//! `E.lock` (exclusive: LOCK_EX; shared: LOCK_SH; semaphore holders: LOCK_SH),
//! `E.slotI` (semaphore slot I: LOCK_EX), `E.gate` (held for a moment while a
//! request is decided), `E.fence` (the fencing counter), `E.h.TOKEN` (a
//! holder's record, locked while it lives), `E.w.TOKEN` (a waiter's record,
//! locked while it waits), `E.i.TOKEN` (an interrupt for a waiter),
//! `E.r.TOKEN` (a release asked of a `--while-pid` keeper; `E.t.TOKEN` takes
//! turns between releases of one token), `E.n.TOKEN` (a record being made)
//! and, for a name
//! too long to spell out, `E.name`. Unlocked records are stale and removed.
//! There is no queue: waiters wake when a record of the lock leaves DIR
//! (inotify), and look again every few milliseconds for a lock the kernel
//! freed silently (a holder killed).
//!
//! This file holds the backend and its session's lock operations. Beside
//! it: `lock_dir` (DIR from the URL), `files` (file names, kernel locks,
//! record text), `records` (holder and waiter records), `admission` (who may
//! take the lock now), `fence` (the fencing counter), `wait` (waiting with
//! no queue), `keeper` (the `--while-pid` keeper and releasing through it),
//! `dir_check` (`rlock check` on DIR) and `history` (`E.history`, the lock's
//! last events).

mod admission;
mod dir_check;
mod fence;
mod files;
mod history;
mod keeper;
mod lock_dir;
mod records;
mod wait;

use std::collections::HashMap;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

use admission::compatible;
pub use dir_check::check_dir;
use files::{Paths, held_by_someone, open};
pub use keeper::keep_while;
use lock_dir::absolute_dir;
use records::{Details, OpenHold, Waiting, read_live};
use wait::{POLL, RETRY};

use super::{
    AcquireRequest, Administer, Attempt, Backend, Hold, HolderStatus, Inspect, LockStatus, Session,
    Wake,
};
use crate::backend::Extend;
use crate::error::{Cause, Error, Result};
use crate::lock::clock;
use crate::lock::event::Event;
use crate::lock::kind::Kind;
use crate::lock::name::LockId;
use crate::lock::token::{Fence, Token};

/// Longest wait for the gate, which requests keep only while they decide.
const GATE: Duration = Duration::from_millis(200);

/// Locks in a directory of this host.
pub struct Local {
    paths: Paths,
    display: String,
    /// The enclosing runs' tokens: a release of one of them from inside its
    /// run leaves the run's hold in place.
    inherited: Vec<Token>,
}

impl Local {
    /// The backend for `file:DIR`; creates DIR (mode 0700) when missing.
    pub fn new(dir: &Path, inherited: Vec<Token>, create: bool) -> Result<Self> {
        let dir = absolute_dir(dir, create)?;
        let display = format!("this host only ({})", dir.display());
        Ok(Local {
            paths: Paths::new(dir),
            display,
            inherited,
        })
    }
}

impl Backend for Local {
    fn server(&self) -> &str {
        &self.display
    }

    fn connect(&self) -> Result<Box<dyn Session>> {
        Ok(Box::new(self.session()))
    }

    fn inspect(&self) -> Result<Box<dyn Inspect>> {
        Ok(Box::new(self.session()))
    }

    fn administer(&self) -> Result<Box<dyn Administer>> {
        Ok(Box::new(self.session()))
    }
}

impl Local {
    fn session(&self) -> LocalSession {
        LocalSession {
            paths: self.paths.clone(),
            display: self.display.clone(),
            held: HashMap::new(),
            waiting: HashMap::new(),
            watch: None,
            inherited: self.inherited.clone(),
        }
    }
}

/// This process's holds and waits on the locks of one DIR.
struct LocalSession {
    paths: Paths,
    display: String,
    held: HashMap<String, OpenHold>,
    waiting: HashMap<String, Waiting>,
    /// Set up when this session first waits; None inside when inotify is refused.
    watch: Option<Option<crate::sys::inotify::DirWatch>>,
    inherited: Vec<Token>,
}

impl LocalSession {
    fn path(&self, name: &str, suffix: &str) -> PathBuf {
        self.paths.of(name, suffix)
    }

    fn record_path(&self, name: &str, tag: &str, token: &Token) -> PathBuf {
        self.path(name, &format!("{tag}.{}", token.as_str()))
    }

    /// Whether this user can see the lock `name`'s records: a record it
    /// cannot open would otherwise read as no holder at all.
    fn readable(&self, name: &str) -> Result<()> {
        let dir = self.paths.dir();
        fs::read_dir(dir).map_err(|e| lock_dir::unreadable(dir, &e).in_lock(name))?;
        for tag in ["h", "w"] {
            for (path, _) in self.paths.tagged(name, tag) {
                if let Err(e) = fs::File::open(&path)
                    && e.kind() == io::ErrorKind::PermissionDenied
                {
                    return Err(lock_dir::unreadable(dir, &e).in_lock(name));
                }
            }
        }
        Ok(())
    }

    /// The filesystem refused `op` in the lock directory: unavailable (69),
    /// saying which directory, what was being done, and what to do.
    fn fail_to(&self, name: &str, op: &str, err: io::Error) -> Error {
        Error::from(Cause::Unavailable {
            server: self.display.clone(),
            cause: lock_dir::refused(self.paths.dir(), op, &err),
        })
        .in_lock(name)
    }

    /// The lock cannot be taken now: a waiter is recorded (when the request
    /// waits and the gate was had) and told when to look again.
    fn turn_away(
        &mut self,
        req: &AcquireRequest<'_>,
        gated: bool,
        queued: bool,
        holders: &[Details],
    ) -> Result<Attempt> {
        let name = &req.keys.name;
        if req.register.is_some() {
            self.watch();
            if gated {
                self.register(name, req.token, req.kind, &req.holder.note)
                    .map_err(|e| self.fail_to(name, "recording a waiter", e))?;
            }
            if let Some(waiting) = self.waiting.get_mut(name) {
                waiting.queued = queued;
            }
        }
        let woken = matches!(self.watch, Some(Some(_)));
        Ok(Attempt::Taken {
            pttl: Some(if woken { RETRY } else { POLL }),
            holder: holders.first().map(Details::info),
            // Waiters here are records, not a queue with places.
            place: None,
        })
    }

    /// The lock's files are taken: number the hold, record its holder under
    /// the gate, then remember the hold and, when asked, its history.
    fn grant(
        &mut self,
        req: &AcquireRequest<'_>,
        mut files: Vec<fs::File>,
        gate: Option<fs::File>,
    ) -> Result<Attempt> {
        let name = &req.keys.name;
        let fence = self
            .next_fence(name)
            .map_err(|e| self.fail_to(name, "writing the fence counter", e))?;
        // Records half made by a process that died: only a holder of the gate
        // makes records, so under it an unlocked one is certainly stale.
        for (path, _) in self.paths.tagged(name, "n") {
            if !held_by_someone(&path) {
                let _ = fs::remove_file(path);
            }
        }
        let details = Details {
            pid: req.holder.pid.clone(),
            host: req.holder.host.clone(),
            command: req.holder.command.clone(),
            note: req.holder.note.clone(),
            since: clock::now_ms(),
            kind: req.kind.record(),
            fence,
            keeper: req.holder.detached,
        };
        let record = self
            .create_locked(name, "h", req.token, &details.render())
            .map_err(|e| self.fail_to(name, "recording the holder", e))?;
        files.push(record);
        drop(gate);
        for file in &files {
            files::inheritable(file);
        }
        self.unregister(name, req.token);
        self.held.insert(
            name.clone(),
            OpenHold {
                token: req.token.clone(),
                files,
                fence,
            },
        );
        let mut recorded = false;
        // A hold the round may give back is recorded by the caller, once kept.
        if let Some((cap, event)) = req.record.filter(|(cap, _)| *cap > 0 && !req.tentative) {
            let event = Event {
                fence: Some(fence),
                ..event.clone()
            };
            recorded = true;
            if let Err(err) = Session::record(self, req.keys, cap, &event) {
                crate::report::verbose(|| format!("{name}: history not written: {err}"));
            }
        }
        Ok(Attempt::Acquired(Hold {
            token: req.token.clone(),
            fence: Fence(fence),
            count: 1,
            recorded,
            history_entry: None,
        }))
    }
}

impl Session for LocalSession {
    fn acquire(&mut self, req: &AcquireRequest<'_>) -> Result<Attempt> {
        let name = &req.keys.name;
        if let Some(held) = self.held.get(name) {
            return Ok(Attempt::Acquired(Hold {
                token: held.token.clone(),
                fence: Fence(held.fence),
                count: 1,
                recorded: false,
                history_entry: None,
            }));
        }
        if let Some(attempt) = self.reenter(req) {
            return Ok(attempt);
        }
        // Kinds, limits and writer preference are decided from the records
        // under a short gate lock, as one Redis script decides them (the
        // kernel's locks alone cannot keep shared and semaphore holders apart,
        // nor hold semaphores to the smallest limit).
        let gate = open(&self.path(name, "gate"))
            .and_then(|gate| Ok(files::lock_within(&gate, GATE)?.then_some(gate)))
            .map_err(|e| self.fail_to(name, "opening the lock's gate file", e))?;
        self.paths.remember(name);
        let holders = self.holders(name);
        let fits = gate.is_some() && compatible(&holders, req.kind);
        let queued = fits && !self.queue_allows(name, req.kind, req.token);
        let admitted = fits && !queued;
        let taken = if admitted {
            self.take(name, req.kind)
                .map_err(|e| self.fail_to(name, "locking the lock file", e))?
        } else {
            None
        };
        let Some(files) = taken else {
            return self.turn_away(req, gate.is_some(), queued, &holders);
        };
        self.grant(req, files, gate)
    }

    fn record(&mut self, lock: &LockId, cap: u32, event: &Event) -> Result<()> {
        if cap == 0 {
            return Ok(());
        }
        history::append(&self.path(&lock.name, "history"), cap, event)
            .map_err(|e| self.fail_to(&lock.name, "writing the lock's history", e))
    }

    fn block(&mut self, lock: &LockId, token: &Token, timeout: Duration) -> Result<Wake> {
        self.block_in_dir(lock, token, timeout)
    }

    fn interrupt(&mut self, lock: &LockId, token: &Token) -> Result<()> {
        fs::write(self.record_path(&lock.name, "i", token), "")
            .map_err(|e| self.fail_to(&lock.name, "writing an interrupt marker", e))
    }

    fn leave(&mut self, lock: &LockId, token: &Token) -> Result<()> {
        self.unregister(&lock.name, token);
        for tag in ["w", "i"] {
            let _ = fs::remove_file(self.record_path(&lock.name, tag, token));
        }
        Ok(())
    }

    fn renew(
        &mut self,
        lock: &LockId,
        token: &Token,
        _ttl: Duration,
        _limit: Duration,
        _extend: Extend,
    ) -> Result<bool> {
        // The kernel keeps the lock while the file is open: nothing expires.
        match self.held.get(&lock.name) {
            Some(held) => Ok(&held.token == token),
            None => Ok(held_by_someone(&self.record_path(&lock.name, "h", token))),
        }
    }

    fn release(&mut self, lock: &LockId, token: &Token) -> Result<Option<u64>> {
        let name = &lock.name;
        match self.held.remove(name) {
            Some(held) if &held.token == token => {
                if held.files.is_empty() {
                    // A re-entry: the enclosing run keeps its hold.
                    return Ok(Some(1));
                }
                // The locks go before the record, so an unlocked record
                // means the lock is free (or kept by what COMMAND left).
                drop(held.files);
                let record = self.record_path(name, "h", token);
                if !held_by_someone(&record) {
                    let _ = fs::remove_file(record);
                }
                return Ok(Some(0));
            }
            Some(other) => {
                self.held.insert(name.clone(), other);
                return Ok(None);
            }
            None => {}
        }
        // Another process holds it: only a --while-pid keeper can be asked.
        let Some(details) = read_live(&self.record_path(name, "h", token)) else {
            return Ok(None);
        };
        match details {
            Some(details) if details.keeper => Ok(self.release_kept(name, token)?.then_some(0)),
            // From inside the run that holds it (a script's nested acquire
            // re-entered it): the run keeps its hold until COMMAND ends.
            _ if self.inherited.contains(token) => Ok(Some(1)),
            details => Err(Error::usage(format!(
                "{name}: this token is held by rlock run{}, which keeps a file: lock until its COMMAND ends; stop that process instead",
                details.map_or(String::new(), |d| format!(" (pid {})", d.pid))
            ))),
        }
    }

    fn confirm_replicas(&mut self, _: &LockId, _: u32, _: Duration) -> Result<u32> {
        Ok(0)
    }

    fn raise_fence(&mut self, _: &LockId, _: Fence) -> Result<()> {
        Ok(())
    }

    fn handover(&self, lock: &LockId) -> Vec<RawFd> {
        self.held
            .get(&lock.name)
            .map(|h| h.files.iter().map(AsRawFd::as_raw_fd).collect())
            .unwrap_or_default()
    }
}

impl Inspect for LocalSession {
    fn status(&mut self, lock: &LockId) -> Result<LockStatus> {
        self.readable(&lock.name)?;
        let holders = self.holders(&lock.name);
        let limit = holders
            .iter()
            .filter_map(|d| Kind::from_record(&d.kind)?.semaphore_limit().map(u64::from))
            .min()
            .unwrap_or(1);
        let kind = holders
            .first()
            .and_then(|d| Kind::from_code(&d.kind, u32::try_from(limit).unwrap_or(u32::MAX)));
        Ok(LockStatus {
            kind,
            limit,
            fence: self.fence(&lock.name),
            waiting: self.live(&lock.name, "w").len() as u64,
            waiters: self.waiters(&lock.name),
            holders: holders
                .iter()
                .map(|d| HolderStatus {
                    host: d.host.clone(),
                    pid: d.pid.clone(),
                    command: d.command.clone(),
                    note: d.note.clone(),
                    since_ms: d.since,
                    lease_ms: None,
                    ttl_ms: None,
                    renewed_ms: None,
                    earlier: false,
                })
                .collect(),
            servers: None,
            redisson: false,
        })
    }

    fn list(&mut self, _prefix: &str, pattern: &str) -> Result<Vec<String>> {
        let entries = fs::read_dir(self.paths.dir())
            .map_err(|e| lock_dir::unreadable(self.paths.dir(), &e))?;
        let mut names = Vec::new();
        for entry in entries.flatten() {
            let Ok(file) = entry.file_name().into_string() else {
                continue;
            };
            let Some((stem, rest)) = file.split_once('.') else {
                continue;
            };
            if !(rest.starts_with("h.") || rest.starts_with("w.")) {
                continue;
            }
            let Some(name) = self.paths.name_of(stem) else {
                continue;
            };
            if glob_matches(pattern, &name)
                && !names.contains(&name)
                && !(self.live(&name, "h").is_empty() && self.live(&name, "w").is_empty())
            {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    }

    fn history(&mut self, lock: &LockId, limit: usize) -> Result<Vec<Event>> {
        history::read(&self.path(&lock.name, "history"), limit)
            .map_err(|e| self.fail_to(&lock.name, "reading the lock's history", e))
    }
}

impl Administer for LocalSession {
    fn force_release(&mut self, lock: &LockId) -> Result<u64> {
        let name = &lock.name;
        let holders: Vec<(Token, Details)> = self
            .live(name, "h")
            .iter()
            .filter_map(|(token, text)| Some((Token::parse(token)?, Details::parse(text)?)))
            .collect();
        let runs: Vec<&str> = holders
            .iter()
            .filter(|(_, d)| !d.keeper)
            .map(|(_, d)| d.pid.as_str())
            .collect();
        if !runs.is_empty() {
            return Err(Error::usage(format!(
                "{name}: release --force cannot break a lock the kernel keeps for a running rlock run on this host; stop its holder instead (pid {})",
                runs.join(", ")
            )));
        }
        // Every keeper is asked, even when one of them is stuck.
        let mut released = 0;
        let mut stuck = None;
        for (token, _) in &holders {
            match self.release_kept(name, token) {
                Ok(done) => released += u64::from(done),
                Err(err) => stuck = Some(err),
            }
        }
        match stuck {
            Some(err) => Err(err),
            None => Ok(released),
        }
    }
}

fn glob_matches(pattern: &str, name: &str) -> bool {
    files::glob(pattern.as_bytes(), name.as_bytes())
}
