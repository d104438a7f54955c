//! A `file:` lock's history: `DIR/STEM.history`, one event a line (the time
//! in ms, then tab-separated `field=value` pairs, `\`, tab and line feed
//! escaped), kept to its cap by rewriting it in place when it has grown
//! past it, under a `flock` on the file itself. A file not
//! written for [`IDLE`] is history no more: it reads as empty and the next
//! event starts it afresh.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use crate::lock::event::{Event, IDLE};

/// Appends `event` (stamped now) to the history at `path`, keeping `cap`.
pub(super) fn append(path: &Path, cap: u32, event: &Event) -> io::Result<()> {
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    lock(&file, true)?;
    let mut text = String::new();
    if !stale(&file) {
        file.read_to_string(&mut text)?;
    }
    let now = crate::lock::clock::now_ms();
    text.push_str(&line(now, event));
    let lines: Vec<&str> = text.lines().collect();
    let cap = cap as usize;
    let keep = if lines.len() > cap || stale(&file) {
        lines[lines.len().saturating_sub(cap)..].join("\n") + "\n"
    } else {
        // Only the new line is written.
        file.seek(io::SeekFrom::End(0))?;
        return file.write_all(line(now, event).as_bytes());
    };
    file.set_len(0)?;
    file.seek(io::SeekFrom::Start(0))?;
    file.write_all(keep.as_bytes())
}

/// The last `limit` events at `path`, newest first (none when it is missing
/// or idle past [`IDLE`]).
pub(super) fn read(path: &Path, limit: usize) -> io::Result<Vec<Event>> {
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(err),
    };
    lock(&file, false)?;
    if stale(&file) {
        return Ok(Vec::new());
    }
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    Ok(text.lines().rev().filter_map(parse).take(limit).collect())
}

/// Takes the file's `flock`, waiting at most 2 s (writers hold it for one
/// small write).
fn lock(file: &File, exclusive: bool) -> io::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(2);
    while !crate::sys::fs::try_flock(file, exclusive)? {
        if Instant::now() >= deadline {
            return Err(io::Error::other(
                "another process kept the history locked for 2s",
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

fn stale(file: &File) -> bool {
    file.metadata()
        .and_then(|m| m.modified())
        .ok()
        .and_then(|at| SystemTime::now().duration_since(at).ok())
        .is_some_and(|idle| idle > IDLE)
}

fn line(now_ms: u64, event: &Event) -> String {
    let mut out = now_ms.to_string();
    for (field, value) in event.fields() {
        out.push('\t');
        out.push_str(field);
        out.push('=');
        for c in value.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\t' => out.push_str("\\t"),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
    }
    out.push('\n');
    out
}

fn parse(line: &str) -> Option<Event> {
    let mut parts = line.split('\t');
    let time: u64 = parts.next()?.parse().ok()?;
    let pairs: Vec<(&str, String)> = parts
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (k, unescape(v)))
        .collect();
    Some(Event::from_fields(
        time,
        pairs.iter().map(|(k, v)| (*k, v.as_str())),
    ))
}

fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some(c) => out.push(c),
            None => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_read_back_and_are_capped() {
        let dir = std::env::temp_dir().join(format!("rlock-history-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.history");
        let _ = std::fs::remove_file(&path);
        for i in 0..30 {
            let event = Event {
                event: "released".into(),
                command: format!("a\tb\\n{i}"),
                exit: Some(i),
                ..Event::default()
            };
            append(&path, 10, &event).unwrap();
        }
        let events = read(&path, 100).unwrap();
        assert_eq!(events.len(), 10);
        assert_eq!(events[0].exit, Some(29));
        assert_eq!(events[0].command, "a\tb\\n29");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
