//! The `--while-pid` keeper of a `file:` lock: `rlock acquire` hands its open
//! lock files to this background process, which keeps them (and so the
//! kernel's locks) until PID exits or `rlock release` asks it to let go.

use std::fs::{self, File};
use std::os::fd::{FromRawFd, RawFd};

use super::files::Paths;
use super::watch::DirWatch;
use crate::error::{Error, Result};
use crate::sys::process::{Ready, Watched};
use crate::token::Token;

/// Keeps the lock files `fds` (the holder record last) open until `pid`
/// exits or a release marker `E.r.TOKEN` appears; then closes them, the
/// record last, and removes the record.
pub fn keep_while(
    dir: &str,
    name: &str,
    token: &Token,
    exit: &Watched,
    fds: &[RawFd],
    ready: &mut Ready,
) -> Result<()> {
    if fds.is_empty() {
        return Err(Error::Internal(format!(
            "{name}: no lock file was handed over"
        )));
    }
    let held: Vec<File> = fds
        .iter()
        .map(|&fd| {
            // SAFETY: F_GETFD only reads the flags of a descriptor number.
            if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
                return Err(Error::Internal(format!(
                    "{name}: lock file descriptor {fd} was not handed over"
                )));
            }
            // SAFETY: the descriptor is open and was handed to this process
            // alone to own (rlock acquire exits after starting it).
            Ok(unsafe { File::from_raw_fd(fd) })
        })
        .collect::<Result<_>>()?;
    let paths = Paths::new(super::absolute_dir(dir)?);
    let record = paths.of(name, &format!("h.{}", token.as_str()));
    let marker = paths.of(name, &format!("r.{}", token.as_str()));
    let watch = DirWatch::new(paths.dir(), libc::IN_CREATE | libc::IN_MOVED_TO);
    // Nobody knows the token if acquire did not hand it over: let go at once.
    // The marker is looked for after the watch is set up, so none is missed.
    let handed = ready.handshake();
    while handed && !(marker.exists() || exit.gone()) {
        let mut fds = Vec::new();
        fds.extend(exit.fd().map(pollin));
        fds.extend(watch.as_ref().map(|w| pollin(w.fd())));
        // Without a pidfd or inotify, look again each second.
        let timeout = if fds.len() == 2 { -1 } else { 1000 };
        // SAFETY: a valid array of pollfd of the given length.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
        if let Some(watch) = &watch {
            watch.drain();
        }
    }
    // The locks go before the record: an unlocked record means a free lock.
    for file in held {
        drop(file);
    }
    let _ = fs::remove_file(&record);
    let _ = fs::remove_file(&marker);
    Ok(())
}

fn pollin(fd: RawFd) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}
