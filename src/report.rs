//! Diagnostics on stderr: one `rlock: ` prefix, one verbosity setting, and quoting
//! that keeps control characters from reaching a terminal.

use std::io::Write;
use std::sync::atomic::{AtomicI8, Ordering};

pub mod json;

/// Quiet until the `rlock` binary says otherwise ([`crate::start`]): a
/// program using the library gets no `rlock:` lines on its stderr.
static VERBOSITY: AtomicI8 = AtomicI8::new(-1);

/// Sets the verbosity: -1 quiet, 0 normal, 1 verbose.
pub fn set_verbosity(level: i8) {
    VERBOSITY.store(level, Ordering::Relaxed);
}

/// True unless `-q` was given.
pub fn enabled() -> bool {
    VERBOSITY.load(Ordering::Relaxed) >= 0
}

/// True when `-v` was given.
pub fn verbose_enabled() -> bool {
    VERBOSITY.load(Ordering::Relaxed) > 0
}

/// Whether the terminal's self-updating waiting line is drawn: every other
/// line erases it first (it is redrawn at its next tick), so no message is
/// ever glued to it.
static STATUS_LINE: std::sync::Mutex<bool> = std::sync::Mutex::new(false);

/// Erases the waiting line: it never wraps (see `waiting_line`), so one row.
const ERASE: &str = "\r\x1b[2K";

/// Writes `text` to stderr in one `write`: stderr is unbuffered, and a line
/// written in pieces would mix with the lines of other processes sharing the
/// same log or pipe (a pipe keeps a write of up to 4 KiB whole).
fn write_whole(text: &str) {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// Writes `rlock: <msg>` on its own line, after erasing the waiting line.
fn line(msg: &str) {
    let mut shown = STATUS_LINE.lock().unwrap_or_else(|e| e.into_inner());
    let erase = if *shown { ERASE } else { "" };
    *shown = false;
    write_whole(&format!("{erase}rlock: {msg}\n"));
}

/// Draws the terminal's waiting line (one row, no newline) over the last one.
pub fn status_line(text: &str) {
    let mut shown = STATUS_LINE.lock().unwrap_or_else(|e| e.into_inner());
    write_whole(&format!("{ERASE}{text}"));
    *shown = true;
}

/// Erases the waiting line, if drawn.
pub fn clear_status_line() {
    let mut shown = STATUS_LINE.lock().unwrap_or_else(|e| e.into_inner());
    if *shown {
        write_whole(ERASE);
        *shown = false;
    }
}

/// Prints `rlock: <msg>` unless `-q` was given. Write errors are ignored: a closed
/// stderr must not turn into a panic.
pub fn error(msg: &str) {
    if VERBOSITY.load(Ordering::Relaxed) >= 0 {
        line(msg);
    }
}

/// A note held back until the command first reaches for the server (see
/// [`defer_note`]): a usage error found before that stays the only line.
static DEFERRED: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Keeps `msg` to be printed by [`flush_note`], once.
pub fn defer_note(msg: String) {
    if let Ok(mut note) = DEFERRED.lock() {
        *note = Some(msg);
    }
}

/// Prints the note [`defer_note`] kept, if any (once), as [`error`] does.
pub fn flush_note() {
    let note = DEFERRED.lock().ok().and_then(|mut n| n.take());
    if let Some(msg) = note {
        error(&msg);
    }
}

/// Prints `rlock: <msg>` only with `-v`.
pub fn verbose(msg: impl FnOnce() -> String) {
    if verbose_enabled() {
        line(&msg());
    }
}

/// `msg` without a leading `<lock>: `, for nesting an error's text in a
/// message that already names the lock.
pub fn without_lock(msg: &str, lock: &str) -> String {
    msg.strip_prefix(lock)
        .and_then(|rest| rest.strip_prefix(": "))
        .unwrap_or(msg)
        .to_owned()
}

/// Control, escape and bidi-override characters: never sent to a terminal raw.
pub fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Quotes user- or server-supplied text for a message: control and escape
/// characters are shown escaped, never sent to the terminal raw.
pub fn quote(text: &str) -> String {
    format!("'{}'", sanitize(text))
}

/// A holder as messages name it: `pid 42 on ci-3 ('make deploy')`, with its
/// note when it has one (`…('make deploy', note 'https://ci/job/7')`), every
/// part sanitized.
pub fn holder(pid: &str, host: &str, command: &str, note: &str) -> String {
    let note = if note.is_empty() {
        String::new()
    } else {
        format!(", note {}", quote(note))
    };
    format!(
        "pid {} on {} ({}{note})",
        sanitize(pid),
        sanitize(host),
        quote(command)
    )
}

/// Escapes control, escape and bidi characters in text that came from a user or
/// from another host, so it cannot drive the terminal.
pub fn sanitize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if needs_escape(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// `RLOCK_TIMELINE=1` (bench/run): the moments a run passes, kept in memory
/// and printed on stderr as it ends, one `rlock: timeline:` line of
/// `step=ns` on `CLOCK_BOOTTIME`, so a caller that read the same clock before
/// starting rlock sees where each millisecond of a run goes.
static TIMELINE: std::sync::Mutex<Vec<(&'static str, u64)>> = std::sync::Mutex::new(Vec::new());
static TIMELINE_ON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Turns the timeline on when `RLOCK_TIMELINE` is set (first thing in `main`).
pub fn timeline_start() {
    if std::env::var_os("RLOCK_TIMELINE").is_some_and(|v| !v.is_empty() && v != "0") {
        TIMELINE_ON.store(true, Ordering::Relaxed);
        mark("main");
    }
}

/// Notes that the run reached `step` now (nothing unless the timeline is on).
pub fn mark(step: &'static str) {
    if TIMELINE_ON.load(Ordering::Relaxed) {
        let now = crate::sys::clock::Stamp::now().0;
        if let Ok(mut steps) = TIMELINE.lock() {
            steps.push((step, now));
        }
    }
}

/// Prints the timeline, when on.
pub fn print_timeline() {
    if !TIMELINE_ON.load(Ordering::Relaxed) {
        return;
    }
    let steps = TIMELINE.lock().map(|s| s.clone()).unwrap_or_default();
    let text: Vec<String> = steps.iter().map(|(s, t)| format!("{s}={t}")).collect();
    write_whole(&format!("rlock: timeline: {}\n", text.join(" ")));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_escapes_control_and_bidi_characters() {
        assert_eq!(quote("deploy"), "'deploy'");
        assert_eq!(quote("a\u{1b}[2Jb"), "'a\\u{1b}[2Jb'");
        assert_eq!(quote("x\u{202e}y"), "'x\\u{202e}y'");
        assert_eq!(quote("a\nb"), "'a\\nb'");
    }
}
