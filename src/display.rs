//! The waiting line: on a terminal, one self-updating line on stderr saying
//! which lock rlock waits for, who holds it and for how long, and how long we
//! have waited; cleared when the wait ends. Nothing when stderr is not a
//! terminal (the `-v` log says it instead) or with `-q`.

use std::io::Write;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::backend::HolderInfo;
use crate::report;

/// How often the line is redrawn.
const TICK: Duration = Duration::from_secs(1);

enum Update {
    Waiting {
        lock: String,
        holder: Option<HolderInfo>,
        at: Instant,
    },
    Done,
}

/// The waiting line's thread; cleared and stopped on drop.
pub struct WaitLine {
    tx: Sender<Update>,
    thread: Option<JoinHandle<()>>,
}

impl WaitLine {
    /// Starts the line if stderr is a terminal and diagnostics are on.
    pub fn start() -> Option<Self> {
        // SAFETY: isatty on fd 2 has no preconditions.
        let tty = unsafe { libc::isatty(2) == 1 };
        if !tty || !report::enabled() {
            return None;
        }
        let (tx, rx) = mpsc::channel::<Update>();
        let thread = std::thread::Builder::new()
            .name("wait-line".into())
            .spawn(move || {
                let started = Instant::now();
                let mut shown: Option<(String, Option<HolderInfo>, Instant)> = None;
                loop {
                    match rx.recv_timeout(TICK) {
                        Ok(Update::Waiting { lock, holder, at }) => {
                            shown = Some((lock, holder, at))
                        }
                        Ok(Update::Done) | Err(RecvTimeoutError::Disconnected) => break,
                        Err(RecvTimeoutError::Timeout) => {}
                    }
                    if let Some((lock, holder, at)) = &shown {
                        draw(lock, holder.as_ref(), *at, started);
                    }
                }
                let _ = write!(std::io::stderr(), "\r\x1b[2K");
            })
            .ok()?;
        Some(WaitLine {
            tx,
            thread: Some(thread),
        })
    }

    /// What the last attempt found.
    pub fn waiting(&self, lock: &str, holder: Option<&HolderInfo>) {
        let _ = self.tx.send(Update::Waiting {
            lock: lock.to_owned(),
            holder: holder.cloned(),
            at: Instant::now(),
        });
    }
}

impl Drop for WaitLine {
    fn drop(&mut self) {
        let _ = self.tx.send(Update::Done);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn seconds(d: Duration) -> String {
    humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
}

fn draw(lock: &str, holder: Option<&HolderInfo>, seen_at: Instant, started: Instant) {
    let who = match holder {
        Some(h) => format!(
            "held by pid {} on {} ({}) for {}",
            report::sanitize(&h.pid),
            report::sanitize(&h.host),
            report::quote(&h.command),
            seconds(h.held_for + seen_at.elapsed())
        ),
        None => "queued behind other waiters".into(),
    };
    let line = format!(
        "rlock: waiting for {}: {who}; waited {}",
        report::sanitize(lock),
        seconds(started.elapsed())
    );
    let _ = write!(std::io::stderr(), "\r\x1b[2K{line}");
}
