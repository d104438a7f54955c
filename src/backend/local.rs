//! The `file:DIR` backend: locks on this host only, held with the kernel's
//! `flock` on files in DIR, so no server is needed and the kernel frees a lock
//! the moment its holder dies.
//!
//! For lock NAME (encoded into a safe file name) DIR holds:
//! `E.lock` (exclusive: LOCK_EX; shared: LOCK_SH; semaphore holders: LOCK_SH),
//! `E.slotI` (semaphore slot I: LOCK_EX), `E.fence` (the fencing counter,
//! updated under LOCK_EX), `E.h.TOKEN` (a holder's details, for `status` and
//! re-entry), `E.w.TOKEN` (a waiter, for `status`), `E.i.TOKEN` (an interrupt
//! for a waiter). Details of a dead process are ignored and cleaned up.
//! There is no queue: waiters look again every few milliseconds.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::{
    AcquireRequest, Attempt, Backend, Hold, HolderInfo, HolderStatus, Kind, LockStatus, Session,
    Wake,
};
use crate::error::{Error, Result};
use crate::name::LockKeys;
use crate::token::{Fence, Token};

/// How often a waiter looks again.
const POLL: Duration = Duration::from_millis(5);

/// Locks in a directory of this host.
pub struct Local {
    dir: PathBuf,
    display: String,
}

impl Local {
    /// The backend for `file:DIR`; creates DIR (mode 0700) when missing.
    pub fn new(dir: &str) -> Result<Self> {
        if dir.is_empty() {
            return Err(Error::usage("invalid --url: expected file:DIR"));
        }
        let dir = PathBuf::from(dir);
        if !dir.is_dir() {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)
                .map_err(|e| {
                    Error::usage(format!(
                        "cannot create the lock directory {}: {e}",
                        dir.display()
                    ))
                })?;
        }
        let display = format!("this host only ({})", dir.display());
        Ok(Local { dir, display })
    }
}

impl Backend for Local {
    fn server(&self) -> &str {
        &self.display
    }

    fn connect(&self) -> Result<Box<dyn Session>> {
        Ok(Box::new(LocalSession {
            dir: self.dir.clone(),
            display: self.display.clone(),
            held: HashMap::new(),
        }))
    }
}

/// A hold of this process: the open files whose locks it is, or none for a
/// re-entry into a lock an enclosing run holds.
struct Held {
    token: Token,
    files: Vec<File>,
    fence: u64,
}

struct LocalSession {
    dir: PathBuf,
    display: String,
    held: HashMap<String, Held>,
}

/// NAME as a file name: bytes outside `[A-Za-z0-9_-]` as `%XX`, so no name
/// can reach outside DIR or collide with another.
fn encode(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn decode(encoded: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(encoded.len());
    let mut it = encoded.bytes();
    while let Some(b) = it.next() {
        if b == b'%' {
            let hex = [it.next()?, it.next()?];
            bytes.push(u8::from_str_radix(std::str::from_utf8(&hex).ok()?, 16).ok()?);
        } else {
            bytes.push(b);
        }
    }
    String::from_utf8(bytes).ok()
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// True while `pid` names a live process (EPERM: alive, another user's).
fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    pid > 0
        && (unsafe { libc::kill(pid, 0) } == 0
            || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM))
}

/// `flock` without waiting; false when someone else holds it.
fn try_flock(file: &File, exclusive: bool) -> io::Result<bool> {
    let op = if exclusive {
        libc::LOCK_EX
    } else {
        libc::LOCK_SH
    } | libc::LOCK_NB;
    loop {
        // SAFETY: a valid descriptor of ours.
        if unsafe { libc::flock(file.as_raw_fd(), op) } == 0 {
            return Ok(true);
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EWOULDBLOCK) => return Ok(false),
            Some(libc::EINTR) => continue,
            _ => return Err(err),
        }
    }
}

/// Whether someone holds a lock on the file at `path` (a live holder keeps
/// LOCK_EX on its own details file; a stale file is unlocked). Unlike a pid,
/// this cannot be fooled by a reused pid or another pid namespace.
fn held_by_someone(path: &Path) -> bool {
    match File::open(path) {
        Ok(file) => !try_flock(&file, false).unwrap_or(true),
        Err(_) => false,
    }
}

/// Lets COMMAND inherit `file`, so the kernel lock lasts as long as COMMAND or
/// anything it started still holds it (as with flock(1)), not only rlock.
fn inheritable(file: &File) {
    // SAFETY: F_SETFD on a valid descriptor of ours.
    unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETFD, 0) };
}

/// Longest wait for the gate, which holders keep only while they decide.
const GATE: Duration = Duration::from_millis(200);

/// LOCK_EX on `file`, trying until `within` has passed.
fn lock_within(file: &File, within: Duration) -> io::Result<bool> {
    let until = Instant::now() + within;
    loop {
        if try_flock(file, true)? {
            return Ok(true);
        }
        if Instant::now() >= until {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Whether a request of `kind` may join the live holders (the rule the Redis
/// scripts apply): one exclusive holder; or shared holders only; or semaphore
/// holders fewer than the smallest limit among them and the newcomer.
fn compatible(holders: &[Details], kind: Kind) -> bool {
    if holders.is_empty() {
        return true;
    }
    match kind {
        Kind::Exclusive => false,
        Kind::Shared => holders.iter().all(|d| d.kind == "s"),
        Kind::Semaphore(n) => {
            let limits: Option<Vec<u32>> = holders
                .iter()
                .map(|d| d.kind.strip_prefix('m')?.parse().ok())
                .collect();
            limits.is_some_and(|limits| {
                let cap = limits.into_iter().min().unwrap_or(n).min(n);
                holders.len() < cap as usize
            })
        }
    }
}

/// A holder's details, one `key=value` per line.
struct Details {
    pid: i32,
    host: String,
    command: String,
    since: u64,
    kind: String,
    fence: u64,
}

impl Details {
    fn render(&self) -> String {
        // The command is last, so a newline in it cannot forge a field.
        format!(
            "pid={}\nhost={}\nsince={}\nkind={}\nfence={}\ncommand={}",
            self.pid, self.host, self.since, self.kind, self.fence, self.command
        )
    }

    fn parse(text: &str) -> Option<Self> {
        let (head, command) = text.split_once("\ncommand=")?;
        let field = |name: &str| {
            head.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix('='))
                .map(str::to_owned)
        };
        Some(Details {
            pid: field("pid")?.parse().ok()?,
            host: field("host")?,
            since: field("since")?.parse().ok()?,
            kind: field("kind")?,
            fence: field("fence")?.parse().ok()?,
            command: command.to_owned(),
        })
    }
}

impl LocalSession {
    fn path(&self, name: &str, suffix: &str) -> PathBuf {
        self.dir.join(format!("{}.{suffix}", encode(name)))
    }

    fn fail(&self, name: &str, err: io::Error) -> Error {
        Error::Unavailable {
            lock: Some(name.to_owned()),
            server: self.display.clone(),
            cause: err.to_string(),
        }
    }

    fn open(&self, path: &Path) -> io::Result<File> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
    }

    /// Takes the kernel locks `kind` needs, without waiting.
    fn take(&self, name: &str, kind: Kind) -> io::Result<Option<Vec<File>>> {
        let main = self.open(&self.path(name, "lock"))?;
        match kind {
            Kind::Exclusive => Ok(try_flock(&main, true)?.then(|| vec![main])),
            Kind::Shared => Ok(try_flock(&main, false)?.then(|| vec![main])),
            Kind::Semaphore(n) => {
                if !try_flock(&main, false)? {
                    return Ok(None);
                }
                for slot in 0..n {
                    let file = self.open(&self.path(name, &format!("slot{slot}")))?;
                    if try_flock(&file, true)? {
                        return Ok(Some(vec![main, file]));
                    }
                }
                Ok(None)
            }
        }
    }

    /// The next fence: the counter file, incremented under its own LOCK_EX.
    fn next_fence(&self, name: &str) -> io::Result<u64> {
        let mut file = self.open(&self.path(name, "fence"))?;
        // SAFETY: a valid descriptor of ours; released when the file closes.
        while unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            let err = io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EINTR) {
                return Err(err);
            }
        }
        let mut text = String::new();
        file.read_to_string(&mut text)?;
        let fence = text.trim().parse::<u64>().unwrap_or(0) + 1;
        file.set_len(0)?;
        file.rewind()?;
        file.write_all(fence.to_string().as_bytes())?;
        file.sync_data()?;
        Ok(fence)
    }

    /// Live holders' details (dead ones' files are removed).
    fn holders(&self, name: &str) -> Vec<Details> {
        self.tagged(name, "h")
            .into_iter()
            .filter_map(|path| {
                if !held_by_someone(&path) {
                    let _ = fs::remove_file(&path);
                    return None;
                }
                Details::parse(&fs::read_to_string(&path).ok()?)
            })
            .collect()
    }

    /// Files `E.TAG.*` of lock `name`.
    fn tagged(&self, name: &str, tag: &str) -> Vec<PathBuf> {
        let prefix = format!("{}.{tag}.", encode(name));
        fs::read_dir(&self.dir)
            .map(|entries| {
                entries
                    .flatten()
                    .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                    .map(|e| e.path())
                    .collect()
            })
            .unwrap_or_default()
    }

    fn holder_info(details: &Details) -> HolderInfo {
        HolderInfo {
            host: details.host.clone(),
            pid: details.pid.to_string(),
            command: details.command.clone(),
            held_for: Duration::from_millis(now_ms().saturating_sub(details.since)),
        }
    }
}

fn kind_code(kind: Kind) -> String {
    match kind {
        Kind::Exclusive => "x".into(),
        Kind::Shared => "s".into(),
        Kind::Semaphore(n) => format!("m{n}"),
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
            }));
        }
        // Re-entry: an enclosing run (our ancestor) holds it.
        for inherited in req.inherited {
            let path = self.path(name, &format!("h.{}", inherited.as_str()));
            if !held_by_someone(&path) {
                continue;
            }
            let Some(details) = fs::read_to_string(&path)
                .ok()
                .and_then(|t| Details::parse(&t))
            else {
                continue;
            };
            if details.kind != "x" && details.kind != kind_code(req.kind) {
                let held = if details.kind == "s" { "s" } else { "m" };
                return Ok(Attempt::Incompatible { held: held.into() });
            }
            self.held.insert(
                name.clone(),
                Held {
                    token: inherited.clone(),
                    files: Vec::new(),
                    fence: details.fence,
                },
            );
            return Ok(Attempt::Acquired(Hold {
                token: inherited.clone(),
                fence: Fence(details.fence),
                count: 2,
            }));
        }
        let waiter = self.path(name, &format!("w.{}", req.token.as_str()));
        // Kinds and limits are decided from the live holders' details under a
        // short gate lock (the kernel's locks alone cannot keep shared and
        // semaphore holders apart, nor hold semaphores to the smallest limit).
        let gate = self
            .open(&self.path(name, "gate"))
            .and_then(|gate| Ok(lock_within(&gate, GATE)?.then_some(gate)))
            .map_err(|e| self.fail(name, e))?;
        let admitted = gate.is_some() && compatible(&self.holders(name), req.kind);
        let taken = if admitted {
            self.take(name, req.kind).map_err(|e| self.fail(name, e))?
        } else {
            None
        };
        let Some(files) = taken else {
            if req.register.is_some() {
                let _ = fs::write(&waiter, std::process::id().to_string());
            }
            let holder = self.holders(name).first().map(Self::holder_info);
            return Ok(Attempt::Taken {
                pttl: Some(POLL),
                holder,
            });
        };
        let fence = self.next_fence(name).map_err(|e| self.fail(name, e))?;
        let details = Details {
            pid: i32::try_from(std::process::id()).unwrap_or(0),
            host: req.holder.host.clone(),
            command: req.holder.command.clone(),
            since: now_ms(),
            kind: kind_code(req.kind),
            fence,
        };
        let path = self.path(name, &format!("h.{}", req.token.as_str()));
        let mut files = files;
        let written = self.open(&path).and_then(|mut file| {
            // Locked before it says anything: never seen unlocked while live.
            if !try_flock(&file, true)? {
                return Err(io::Error::other(
                    "the holder file is locked by another process",
                ));
            }
            file.write_all(details.render().as_bytes())?;
            Ok(file)
        });
        files.push(written.map_err(|e| self.fail(name, e))?);
        for file in &files {
            inheritable(file);
        }
        let _ = fs::remove_file(&waiter);
        self.held.insert(
            name.clone(),
            Held {
                token: req.token.clone(),
                files,
                fence,
            },
        );
        Ok(Attempt::Acquired(Hold {
            token: req.token.clone(),
            fence: Fence(fence),
            count: 1,
        }))
    }

    fn block(&mut self, keys: &LockKeys, token: &Token, timeout: Duration) -> Result<Wake> {
        let interrupt = self.path(&keys.name, &format!("i.{}", token.as_str()));
        let until = Instant::now() + timeout;
        loop {
            if fs::remove_file(&interrupt).is_ok() {
                return Ok(Wake::Interrupted);
            }
            // Free for an exclusive hold means free for any.
            let main = self.open(&self.path(&keys.name, "lock"));
            if let Ok(main) = main {
                if try_flock(&main, true).unwrap_or(false) {
                    return Ok(Wake::Released);
                }
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Wake::TimedOut);
            }
            std::thread::sleep(left.min(POLL));
        }
    }

    fn interrupt(&mut self, keys: &LockKeys, token: &Token) -> Result<()> {
        let path = self.path(&keys.name, &format!("i.{}", token.as_str()));
        fs::write(&path, "").map_err(|e| self.fail(&keys.name, e))
    }

    fn leave(&mut self, keys: &LockKeys, token: &Token) -> Result<()> {
        for tag in ["w", "i"] {
            let _ = fs::remove_file(self.path(&keys.name, &format!("{tag}.{}", token.as_str())));
        }
        Ok(())
    }

    fn renew(
        &mut self,
        keys: &LockKeys,
        token: &Token,
        _ttl: Duration,
        _limit: Duration,
    ) -> Result<bool> {
        // The kernel keeps the lock while the file is open: nothing expires.
        Ok(self.held.get(&keys.name).is_some_and(|h| &h.token == token))
    }

    fn release(&mut self, keys: &LockKeys, token: &Token) -> Result<Option<u64>> {
        match self.held.remove(&keys.name) {
            Some(held) if &held.token == token => {
                if held.files.is_empty() {
                    // A re-entry: the enclosing run keeps its hold.
                    return Ok(Some(1));
                }
                let path = self.path(&keys.name, &format!("h.{}", token.as_str()));
                let _ = fs::remove_file(path);
                drop(held.files);
                Ok(Some(0))
            }
            Some(other) => {
                self.held.insert(keys.name.clone(), other);
                Ok(None)
            }
            None => Ok(None),
        }
    }

    fn confirm_replicas(&mut self, _: &LockKeys, _: u32, _: Duration) -> Result<u32> {
        Ok(0)
    }

    fn raise_fence(&mut self, _: &LockKeys, _: Fence) -> Result<()> {
        Ok(())
    }

    fn force_release(&mut self, keys: &LockKeys) -> Result<u64> {
        let pids: Vec<String> = self
            .holders(&keys.name)
            .iter()
            .map(|d| d.pid.to_string())
            .collect();
        Err(Error::usage(format!(
            "{}: release --force cannot break a lock the kernel keeps for a live process on this host; stop its holder instead{}",
            keys.name,
            if pids.is_empty() {
                String::new()
            } else {
                format!(" (pid {})", pids.join(", "))
            }
        )))
    }

    fn status(&mut self, keys: &LockKeys) -> Result<LockStatus> {
        let holders = self.holders(&keys.name);
        let kind = holders.first().map_or(String::new(), |d| {
            d.kind.chars().next().map(String::from).unwrap_or_default()
        });
        let limit = holders
            .iter()
            .filter_map(|d| d.kind.strip_prefix('m')?.parse::<u64>().ok())
            .min()
            .unwrap_or(1);
        let fence = fs::read_to_string(self.path(&keys.name, "fence"))
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0);
        let waiting = self
            .tagged(&keys.name, "w")
            .iter()
            .filter(|p| {
                fs::read_to_string(p)
                    .ok()
                    .and_then(|t| t.trim().parse::<i32>().ok())
                    .is_some_and(alive)
            })
            .count() as u64;
        Ok(LockStatus {
            kind,
            limit,
            fence,
            waiting,
            holders: holders
                .iter()
                .map(|d| HolderStatus {
                    host: d.host.clone(),
                    pid: d.pid.to_string(),
                    command: d.command.clone(),
                    since_ms: d.since,
                    ttl_ms: crate::status::NO_LEASE,
                })
                .collect(),
        })
    }

    fn list(&mut self, _prefix: &str, pattern: &str) -> Result<Vec<String>> {
        let entries = fs::read_dir(&self.dir).map_err(|e| self.fail("*", e))?;
        let mut names = Vec::new();
        for entry in entries.flatten() {
            let file = entry.file_name().to_string_lossy().into_owned();
            let Some((encoded, rest)) = file.split_once('.') else {
                continue;
            };
            if !(rest.starts_with("h.") || rest.starts_with("w.")) {
                continue;
            }
            let Some(name) = decode(encoded) else {
                continue;
            };
            if glob(pattern.as_bytes(), name.as_bytes()) && !names.contains(&name) {
                let live = !self.holders(&name).is_empty()
                    || self.status(&LockKeys::new("", &name))?.waiting > 0;
                if live {
                    names.push(name);
                }
            }
        }
        names.sort();
        Ok(names)
    }
}

/// `*` and `?` glob matching (the patterns `list` takes).
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    match (pattern.first(), text.first()) {
        (None, None) => true,
        (Some(b'*'), _) => {
            glob(&pattern[1..], text) || (!text.is_empty() && glob(pattern, &text[1..]))
        }
        (Some(b'?'), Some(_)) => glob(&pattern[1..], &text[1..]),
        (Some(p), Some(t)) if p == t => glob(&pattern[1..], &text[1..]),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_safe_file_names_and_back() {
        for name in [
            "a",
            "../etc/passwd",
            "..",
            "caf\u{e9}",
            "100%",
            "a.b.c",
            "x/y",
        ] {
            let encoded = encode(name);
            assert!(!encoded.contains(['/', '.']), "{encoded}");
            assert_eq!(decode(&encoded).as_deref(), Some(name));
        }
    }

    #[test]
    fn globs_match_like_scan() {
        assert!(glob(b"*", b"anything"));
        assert!(glob(b"deploy-*", b"deploy-prod"));
        assert!(!glob(b"deploy-*", b"backup"));
        assert!(glob(b"a?c", b"abc"));
    }
}
