//! A `file:` lock's history: `DIR/STEM.history`, one event a line (the time
//! in ms, then tab-separated `field=value` pairs, `\`, tab and line feed
//! escaped, the last one `cap=N`, the writer's cap), under a `flock` on the
//! file itself. A file not written for [`IDLE`] is history no more: it reads
//! as empty and the next event starts it afresh.
//!
//! An event is appended, and the file rewritten only once it has grown to
//! twice its cap: rewriting it at every event (ext4 flushes a file truncated to
//! zero when it is closed) cost each acquisition and release about 0.25 ms.
//! What is kept is exact all the same: readers (and the rewrite) replay the
//! lines, each dropping what its writer's cap would have dropped, so the
//! history shows the events an exact trim at every event would have kept.

use std::collections::VecDeque;
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
    let stale = stale(&file);
    let mut text = String::new();
    if !stale {
        file.read_to_string(&mut text)?;
    }
    // A last line a crash cut short is no event: it goes (its cap could be
    // cut too, and trim what it should not).
    if !text.is_empty() && !text.ends_with('\n') {
        text.truncate(text.rfind('\n').map_or(0, |at| at + 1));
        file.set_len(text.len() as u64)?;
    }
    let new = line(crate::lock::clock::now_ms(), event, cap);
    let lines = text.lines().count() + 1;
    if !stale && lines <= 2 * (cap as usize).max(1) {
        file.seek(io::SeekFrom::Start(text.len() as u64))?;
        return file.write_all(new.as_bytes());
    }
    text.push_str(&new);
    let mut keep = survivors(&text).join("\n");
    keep.push('\n');
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
    Ok(survivors(&text)
        .into_iter()
        .rev()
        .filter_map(parse)
        .take(limit)
        .collect())
}

/// The lines an exact trim at every event would have kept: each line, once
/// written, leaves the last `cap` lines (its writer's cap; a line without
/// one, written before caps were recorded, trims nothing).
fn survivors(text: &str) -> Vec<&str> {
    // Only whole lines: a last one without its line feed was cut short.
    let whole = &text[..text.rfind('\n').map_or(0, |at| at + 1)];
    let mut kept: VecDeque<&str> = VecDeque::new();
    for line in whole.lines().filter(|l| !l.is_empty()) {
        kept.push_back(line);
        if let Some(cap) = cap_of(line) {
            while kept.len() > cap {
                kept.pop_front();
            }
        }
    }
    kept.into()
}

/// The `cap=N` a line was written with.
fn cap_of(line: &str) -> Option<usize> {
    let (_, cap) = line.rsplit_once("\tcap=")?;
    cap.parse().ok()
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

fn line(now_ms: u64, event: &Event, cap: u32) -> String {
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
    out.push_str("\tcap=");
    out.push_str(&cap.to_string());
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

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("rlock-history-unit-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.history");
        let _ = std::fs::remove_file(&path);
        path
    }

    fn event(i: i64) -> Event {
        Event {
            event: crate::lock::event::EventKind::Released,
            command: format!("a\tb\\n{i}"),
            exit: Some(i),
            ..Event::default()
        }
    }

    fn exits(path: &Path) -> Vec<i64> {
        read(path, 1000)
            .unwrap()
            .iter()
            .map(|e| e.exit.unwrap())
            .collect()
    }

    #[test]
    fn lines_read_back_and_are_capped() {
        let path = scratch("capped");
        for i in 0..30 {
            append(&path, 10, &event(i)).unwrap();
            let lines = std::fs::read_to_string(&path).unwrap().lines().count();
            assert!(lines <= 20, "{lines} lines kept for a cap of 10");
            let kept = exits(&path);
            let want: Vec<i64> = (0..=i).rev().take(10).collect();
            assert_eq!(kept, want, "after event {i}");
        }
        let events = read(&path, 100).unwrap();
        assert_eq!(events[0].command, "a\tb\\n29");
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }

    #[test]
    fn a_line_a_crash_cut_short_is_dropped_not_joined() {
        let path = scratch("cut");
        for i in 0..3 {
            append(&path, 100, &event(i)).unwrap();
        }
        // The last line cut inside its cap (cap=100 -> cap=1): no trim from it.
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, &text[..text.len() - 3]).unwrap();
        assert_eq!(exits(&path), vec![1, 0]);
        append(&path, 100, &event(3)).unwrap();
        assert_eq!(exits(&path), vec![3, 1, 0]);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.ends_with('\n') && !text.contains('\0'), "{text:?}");
        assert_eq!(text.lines().count(), 3);
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }

    #[test]
    fn each_writer_cap_trims_as_an_exact_trim_would() {
        let path = scratch("mixed");
        // Lines of an earlier version: no cap recorded, none trimmed.
        std::fs::write(
            &path,
            "1\tevent=released\texit=100\n2\tevent=released\texit=101\n",
        )
        .unwrap();
        for i in 0..5 {
            append(&path, 3, &event(i)).unwrap();
        }
        assert_eq!(exits(&path), vec![4, 3, 2]);
        // A larger cap later brings back nothing the smaller one dropped.
        for i in 5..7 {
            append(&path, 100, &event(i)).unwrap();
        }
        assert_eq!(exits(&path), vec![6, 5, 4, 3, 2]);
        append(&path, 1, &event(7)).unwrap();
        assert_eq!(exits(&path), vec![7]);
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }
}
