//! Showing a wait. On a terminal, one self-updating line on stderr saying
//! which lock rlock waits for, who holds it and for how long, and how long we
//! have waited; cleared when the wait ends. Off a terminal (cron, CI logs), a
//! timestamped line when the wait starts and then every `--progress-interval`,
//! so a long wait never looks like a hang. Nothing with `-q`.
//!
//! The terminal line is kept to one row: never wider than the terminal (the
//! holder's command is shortened first, then its note is left out, then the
//! line is cut), so erasing it erases exactly what was drawn; any other
//! message erases it first (`report`).

use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::backend::HolderInfo;
use crate::report;

/// How often the line is redrawn.
const TICK: Duration = Duration::from_secs(1);

/// The width assumed when the terminal does not say.
const DEFAULT_COLUMNS: usize = 80;

enum Update {
    Waiting {
        lock: String,
        holder: Option<HolderInfo>,
        place: Option<u32>,
        unknown: &'static str,
        at: Instant,
    },
    /// The server cannot be reached (since the first such update).
    Unreachable {
        lock: String,
        at: Instant,
    },
    Done,
}

/// What the line shows.
struct Shown {
    lock: String,
    holder: Option<HolderInfo>,
    place: Option<u32>,
    /// What stands in the way when no holder is known.
    unknown: &'static str,
    seen_at: Instant,
    /// Since when the server has not answered (None: it answers).
    down_since: Option<Instant>,
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
                let mut shown: Option<Shown> = None;
                loop {
                    match rx.recv_timeout(TICK) {
                        Ok(Update::Waiting {
                            lock,
                            holder,
                            place,
                            unknown,
                            at,
                        }) => {
                            shown = Some(Shown {
                                lock,
                                holder,
                                place,
                                unknown,
                                seen_at: at,
                                down_since: None,
                            })
                        }
                        Ok(Update::Unreachable { lock, at }) => match &mut shown {
                            Some(s) => {
                                s.down_since.get_or_insert(at);
                            }
                            None => {
                                shown = Some(Shown {
                                    lock,
                                    holder: None,
                                    place: None,
                                    unknown: "",
                                    seen_at: at,
                                    down_since: Some(at),
                                })
                            }
                        },
                        Ok(Update::Done) | Err(RecvTimeoutError::Disconnected) => break,
                        Err(RecvTimeoutError::Timeout) => {}
                    }
                    if let Some(s) = &shown {
                        let columns =
                            crate::sys::terminal::stderr_columns().unwrap_or(DEFAULT_COLUMNS);
                        report::status_line(&line(s, started.elapsed(), columns));
                    }
                }
                report::clear_status_line();
            })
            .ok()?;
        Some(WaitLine {
            tx,
            thread: Some(thread),
        })
    }

    /// What the last attempt found; `unknown` says what stands in the way
    /// when no holder is known (`queued behind other waiters`).
    pub fn waiting(
        &self,
        lock: &str,
        holder: Option<&HolderInfo>,
        place: Option<u32>,
        unknown: &'static str,
    ) {
        let _ = self.tx.send(Update::Waiting {
            lock: lock.to_owned(),
            holder: holder.cloned(),
            place,
            unknown,
            at: Instant::now(),
        });
    }

    /// The server could not be reached: the line says so (and for how long)
    /// instead of showing a holder that may be gone.
    pub fn unreachable(&self, lock: &str) {
        let _ = self.tx.send(Update::Unreachable {
            lock: lock.to_owned(),
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

/// `text` cut to at most `max` characters, ending in `…` when cut.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The terminal line for `s`, at most `columns - 1` characters (the last
/// column is left free: a character there makes some terminals wrap). What
/// gives way, in turn: the holder's command (shortened), its note, the
/// command entirely, the place in line, the words "waiting for"; whatever
/// still does not fit is cut.
fn line(s: &Shown, waited: Duration, columns: usize) -> String {
    let max = columns.saturating_sub(1).max(20);
    let lock = cut(&report::sanitize(&s.lock), 40);
    let head = format!("rlock: waiting for {lock}: ");
    let short_head = format!("rlock: {lock}: ");
    let short_tail = format!("; waited {}", seconds(waited));
    let tail = format!("{}{short_tail}", in_line(s.place));
    let width = |parts: &[&str]| parts.iter().map(|p| p.chars().count()).sum::<usize>();
    let mut candidates: Vec<String> = Vec::new();
    let least = match (&s.holder, s.down_since) {
        (_, Some(down)) => format!("server unreachable for {}", seconds(down.elapsed())),
        (None, None) => s.unknown.to_owned(),
        (Some(h), None) if h.earlier => EARLIER.to_owned(),
        (Some(h), None) => {
            let held_for = h.held_for + s.seen_at.elapsed();
            let held = seconds(held_for);
            candidates.push(format!("{head}held by {}{tail}", holder_for(h, held_for)));
            let bare = |command: &str, note: &str| {
                format!(
                    "held by {} for {held}",
                    report::holder(&h.pid, &h.host, command, note)
                )
            };
            let command = report::sanitize(&h.command);
            for tail in [&tail, &short_tail] {
                for note in [h.note.as_str(), ""] {
                    let room = max.saturating_sub(width(&[&head, &bare("", note), tail]));
                    if room >= 12 {
                        candidates
                            .push(format!("{head}{}{tail}", bare(&cut(&command, room), note)));
                    }
                }
            }
            format!(
                "held by pid {} on {} for {held}",
                report::sanitize(&h.pid),
                report::sanitize(&h.host)
            )
        }
    };
    candidates.push(format!("{head}{least}{tail}"));
    candidates.push(format!("{head}{least}{short_tail}"));
    let last = format!("{short_head}{least}{short_tail}");
    candidates
        .into_iter()
        .find(|c| c.chars().count() <= max)
        .unwrap_or_else(|| cut(&last, max))
}

/// A hold of an rlock from before the current key layout, as waiting shows it.
const EARLIER: &str = "held by an earlier rlock version";

/// `pid 42 on host ('command') for 3s`: `h`, which has held the lock for
/// `held` (shown in whole seconds), sanitized for the terminal.
pub fn holder_for(h: &HolderInfo, held: Duration) -> String {
    if h.earlier {
        return "an earlier rlock version (it records no details this version reads)".to_owned();
    }
    format!(
        "{} for {}",
        report::holder(&h.pid, &h.host, &h.command, &h.note),
        seconds(held)
    )
}

/// `waiting for NAME: held by pid 42 on host ('command') for 3s; 1st in
/// line`: what the last attempt found, sanitized, as the progress log and
/// systemd's STATUS= say it; `unknown` stands for an unknown holder.
pub fn waiting_for(
    lock: &str,
    holder: Option<&HolderInfo>,
    place: Option<u32>,
    unknown: &str,
) -> String {
    let who = match holder {
        Some(h) => format!("held by {}", holder_for(h, h.held_for)),
        None => unknown.into(),
    };
    format!(
        "waiting for {}: {who}{}",
        report::sanitize(lock),
        in_line(place)
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

/// Off a terminal: a timestamped line when waiting starts and every `every`
/// (or, when systemd's STATUS= shows the wait, when its holder changes).
pub struct ProgressLog {
    every: Duration,
    started: Instant,
    next: Instant,
    changes_only: bool,
}

impl ProgressLog {
    /// None on a terminal (the waiting line shows it), with `-q`, or when
    /// `every` is zero (`--progress-interval 0`). With `changes_only`, a line
    /// only when the wait starts and when its holder changes.
    pub fn start(every: Duration, changes_only: bool) -> Option<Self> {
        let tty = crate::sys::terminal::stderr_is_terminal();
        if tty || every.is_zero() || !report::enabled() {
            return None;
        }
        let now = Instant::now();
        Some(ProgressLog {
            every,
            started: now,
            next: now,
            changes_only,
        })
    }

    /// Prints the line if one is due: `waiting` (see [`waiting_for`]), what
    /// the last attempt found, whose holder `changed` since the one before.
    pub fn tick(&mut self, waiting: &str, changed: bool) {
        let now = Instant::now();
        let due = if self.changes_only {
            changed
        } else {
            now >= self.next
        };
        if !due {
            return;
        }
        self.next = now + self.every;
        let at = humantime::format_rfc3339_seconds(std::time::SystemTime::now());
        report::error(&format!(
            "{at} {waiting}; waited {}",
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

    /// How long until the next line is due (None: lines come with changes).
    pub fn until_due(&self) -> Option<Duration> {
        (!self.changes_only).then(|| self.next.saturating_duration_since(Instant::now()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_fits_shortening_the_command_then_the_note() {
        let shown = |command: &str, note: &str| Shown {
            lock: "deploy".into(),
            holder: Some(HolderInfo {
                host: "ci-3".into(),
                pid: "4242".into(),
                command: command.into(),
                note: note.into(),
                held_for: Duration::from_secs(5),
                detached: false,
                earlier: false,
            }),
            place: Some(1),
            unknown: "",
            seen_at: Instant::now(),
            down_since: None,
        };
        let wide = shown(&"c".repeat(300), &"n".repeat(100));
        for columns in [20, 40, 60, 80, 100, 200, 400] {
            let text = line(&wide, Duration::from_secs(3), columns);
            assert!(text.chars().count() < columns.max(21), "{columns}: {text}");
            assert!(
                columns < 60 || text.ends_with("waited 3s"),
                "{columns}: {text}"
            );
        }
        let text = line(&wide, Duration::from_secs(3), 120);
        assert!(text.contains("…') for 5s; 1st in line"), "{text}");
        assert!(!text.contains("note"), "{text}");
        let text = line(&shown("make deploy", "n"), Duration::ZERO, 120);
        assert_eq!(
            text,
            "rlock: waiting for deploy: held by pid 4242 on ci-3 ('make deploy', note 'n') for 5s; 1st in line; waited 0s"
        );
    }

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
