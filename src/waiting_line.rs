//! Showing a wait. On a terminal, one self-updating line on stderr saying
//! which lock rlock waits for, who holds it and for how long, and how long we
//! have waited; cleared when the wait ends. Off a terminal (cron, CI logs), a
//! timestamped line when the wait starts and then every `--progress-interval`,
//! so a long wait never looks like a hang. Nothing with `-q`.

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
        place: Option<u32>,
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
        let tty = crate::sys::terminal::stderr_is_terminal();
        if !tty || !report::enabled() {
            return None;
        }
        let (tx, rx) = mpsc::channel::<Update>();
        let thread = std::thread::Builder::new()
            .name("wait-line".into())
            .spawn(move || {
                let started = Instant::now();
                let mut shown: Option<(String, Option<HolderInfo>, Option<u32>, Instant)> = None;
                loop {
                    match rx.recv_timeout(TICK) {
                        Ok(Update::Waiting {
                            lock,
                            holder,
                            place,
                            at,
                        }) => shown = Some((lock, holder, place, at)),
                        Ok(Update::Done) | Err(RecvTimeoutError::Disconnected) => break,
                        Err(RecvTimeoutError::Timeout) => {}
                    }
                    if let Some((lock, holder, place, at)) = &shown {
                        draw(lock, holder.as_ref(), *place, *at, started);
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
    pub fn waiting(&self, lock: &str, holder: Option<&HolderInfo>, place: Option<u32>) {
        let _ = self.tx.send(Update::Waiting {
            lock: lock.to_owned(),
            holder: holder.cloned(),
            place,
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

/// `pid 42 on host ('command') for 3s`: `h`, which has held the lock for
/// `held` (shown in whole seconds), sanitized for the terminal.
pub fn holder_for(h: &HolderInfo, held: Duration) -> String {
    format!(
        "{} for {}",
        report::holder(&h.pid, &h.host, &h.command, &h.note),
        seconds(held)
    )
}

/// `; 2nd in line`: a waiter's place in the queue, when the backend knows it.
fn in_line(place: Option<u32>) -> String {
    let Some(n) = place else {
        return String::new();
    };
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("; {n}{suffix} in line")
}

fn draw(
    lock: &str,
    holder: Option<&HolderInfo>,
    place: Option<u32>,
    seen_at: Instant,
    started: Instant,
) {
    let who = match holder {
        Some(h) => format!("held by {}", holder_for(h, h.held_for + seen_at.elapsed())),
        None => "queued behind other waiters".into(),
    };
    let line = format!(
        "rlock: waiting for {}: {who}{}; waited {}",
        report::sanitize(lock),
        in_line(place),
        seconds(started.elapsed())
    );
    let _ = write!(std::io::stderr(), "\r\x1b[2K{line}");
}

/// Off a terminal: a timestamped line when waiting starts and every `every`.
pub struct ProgressLog {
    every: Duration,
    started: Instant,
    next: Instant,
}

impl ProgressLog {
    /// None on a terminal (the waiting line shows it), with `-q`, or when
    /// `every` is zero (`--progress-interval 0`).
    pub fn start(every: Duration) -> Option<Self> {
        let tty = crate::sys::terminal::stderr_is_terminal();
        if tty || every.is_zero() || !report::enabled() {
            return None;
        }
        let now = Instant::now();
        Some(ProgressLog {
            every,
            started: now,
            next: now,
        })
    }

    /// Prints the line if one is due: what the last attempt found.
    pub fn tick(&mut self, lock: &str, holder: Option<&HolderInfo>, place: Option<u32>) {
        let now = Instant::now();
        if now < self.next {
            return;
        }
        self.next = now + self.every;
        let who = match holder {
            Some(h) => format!("held by {}", holder_for(h, h.held_for)),
            None => "queued behind other waiters".into(),
        };
        let at = humantime::format_rfc3339_seconds(std::time::SystemTime::now());
        report::error(&format!(
            "{at} waiting for {}: {who}{}; waited {}",
            report::sanitize(lock),
            in_line(place),
            seconds(now - self.started)
        ));
    }

    /// The wait ended with the lock(s) held: says so, with how long it took
    /// (a log that showed the wait shows its end).
    pub fn acquired(&self, locks: &str) {
        let at = humantime::format_rfc3339_seconds(std::time::SystemTime::now());
        report::error(&format!(
            "{at} acquired {} after {:.1}s",
            report::sanitize(locks),
            self.started.elapsed().as_secs_f64()
        ));
    }

    /// How long until the next line is due.
    pub fn until_due(&self) -> Duration {
        self.next.saturating_duration_since(Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_in_line_read_as_ordinals() {
        assert_eq!(in_line(None), "");
        assert_eq!(in_line(Some(1)), "; 1st in line");
        assert_eq!(in_line(Some(2)), "; 2nd in line");
        assert_eq!(in_line(Some(3)), "; 3rd in line");
        assert_eq!(in_line(Some(11)), "; 11th in line");
        assert_eq!(in_line(Some(22)), "; 22nd in line");
        assert_eq!(in_line(Some(104)), "; 104th in line");
    }
}
