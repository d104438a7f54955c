//! The `--while-pid` keeper of a `file:` lock: `rlock acquire` hands its open
//! lock files to this background process, which keeps them (and so the
//! kernel's locks) until PID exits or `rlock release` asks it to let go.
//! Also the asking side: a release of a lock such a keeper holds.

use std::fs::{self, File};
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use super::LocalSession;
use super::files::{self, Paths, held_by_someone, open};
use super::lock_dir::absolute_dir;
use crate::error::{Cause, Error, Result};
use crate::lock::event::Event;
use crate::lock::token::Token;
use crate::sys::inotify::DirWatch;
use crate::sys::process::{Ready, Watched, poll_readable, take_fd};

/// Keeps the lock files `fds` (the holder record last) open until `pid`
/// exits or a release marker `E.r.TOKEN` appears; then closes them, the
/// record last, and removes the record. When PID exited, `released` (with
/// the time held filled in) goes to the lock's history, keeping its cap.
pub fn keep_while(
    dir: &std::path::Path,
    name: &str,
    token: &Token,
    exit: &Watched,
    fds: &[RawFd],
    ready: &mut Ready,
    released: Option<(u32, Event)>,
) -> Result<()> {
    let started = Instant::now();
    if fds.is_empty() {
        return Err(Error::internal(format!(
            "{name}: no lock file was handed over"
        )));
    }
    // Handed to this process alone to own (rlock acquire exits after
    // starting it).
    let held: Vec<File> = fds
        .iter()
        .map(|&fd| {
            take_fd(fd).map(File::from).ok_or_else(|| {
                Error::internal(format!(
                    "{name}: lock file descriptor {fd} was not handed over"
                ))
            })
        })
        .collect::<Result<_>>()?;
    let paths = Paths::new(absolute_dir(dir, true)?);
    let record = paths.of(name, &format!("h.{}", token.as_str()));
    let marker = paths.of(name, &format!("r.{}", token.as_str()));
    let watch = DirWatch::new(paths.dir(), libc::IN_CREATE | libc::IN_MOVED_TO);
    // Nobody knows the token if acquire did not hand it over: let go at once.
    // The marker is looked for after the watch is set up, so none is missed.
    let handed = ready.handshake();
    while handed && !(marker.exists() || exit.gone()) {
        let mut fds = Vec::new();
        fds.extend(exit.borrowed_fd());
        fds.extend(watch.as_ref().map(|w| w.as_fd()));
        // Without a pidfd or inotify, look again each second.
        let timeout = (fds.len() < 2).then_some(std::time::Duration::from_secs(1));
        let _ = poll_readable(&fds, timeout);
        if let Some(watch) = &watch {
            watch.drain();
        }
    }
    let asked = marker.exists();
    // The locks go before the record: an unlocked record means a free lock.
    for file in held {
        drop(file);
    }
    let _ = fs::remove_file(&record);
    let _ = fs::remove_file(&marker);
    // A release asked for by `rlock release` is recorded there.
    if let (false, Some((cap, mut event))) = (asked, released) {
        event.held_ms = Some(u64::try_from(started.elapsed().as_millis()).unwrap_or(0));
        if cap > 0 {
            let _ = super::history::append(&paths.of(name, "history"), cap, &event);
        }
    }
    Ok(())
}

/// How long `release` waits for a `--while-pid` keeper to let go.
const KEEPER_WAIT: Duration = Duration::from_secs(5);

impl LocalSession {
    /// Asks the `--while-pid` keeper of `token` to let go and waits until it has.
    /// Returns false when another release of the same token came first.
    /// Releases of one token take turns on a lock of a turn file `E.t.TOKEN`;
    /// the marker `E.r.TOKEN` appearing is what the keeper waits for.
    pub(super) fn release_kept(&self, name: &str, token: &Token) -> Result<bool> {
        let record = self.record_path(name, "h", token);
        let marker = self.record_path(name, "r", token);
        let stuck = || {
            Error::from(Cause::Unavailable {
                server: self.display.clone(),
                cause: format!(
                    "the --while-pid keeper holding it did not let go within {} (is it stopped?)",
                    humantime::format_duration(KEEPER_WAIT)
                ),
            })
            .in_lock(name)
        };
        let turn_path = self.record_path(name, "t", token);
        let turn = open(&turn_path)
            .map_err(|e| self.fail_to(name, "reaching the --while-pid keeper", e))?;
        if !files::lock_within(&turn, KEEPER_WAIT)
            .map_err(|e| self.fail_to(name, "reaching the --while-pid keeper", e))?
        {
            return Err(stuck());
        }
        // Our turn: an earlier release (which removed the turn file before
        // letting others have a turn) may have freed it already.
        if !held_by_someone(&record) {
            let _ = fs::remove_file(&turn_path);
            return Ok(false);
        }
        fs::write(&marker, "")
            .map_err(|e| self.fail_to(name, "reaching the --while-pid keeper", e))?;
        let until = Instant::now() + KEEPER_WAIT;
        while held_by_someone(&record) {
            if Instant::now() >= until {
                let _ = fs::remove_file(&marker);
                let _ = fs::remove_file(&turn_path);
                return Err(stuck());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let _ = fs::remove_file(&marker);
        let _ = fs::remove_file(&record);
        let _ = fs::remove_file(&turn_path);
        drop(turn);
        Ok(true)
    }
}
