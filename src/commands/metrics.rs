//! Metrics in Prometheus' text format (README: "What happened last night?"):
//! `rlock metrics [PATTERN...]` for what the locks look like now, and
//! `run --metrics-file FILE` for what one run did, kept in a file that
//! node_exporter's textfile collector (or any scrape wrapper) reads.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::backend::LockStatus;
use crate::commands::prometheus::{self, Family};
use crate::config::Config;
use crate::error::Result;
use crate::exit::Exit;
use crate::lock::clock::now_ms;
use crate::lock::event::{Event, EventKind};
use crate::lock::name::{Dialect, LockId, LockName};
use crate::supervisor::Ended;

const LAST_RUN: &str = "rlock_last_run_timestamp_seconds";
const LAST_SUCCESS: &str = "rlock_last_success_timestamp_seconds";

/// Writes the outcome of the run of `names` into `path` (`--metrics-file`),
/// keeping every other lock's series. A failure is one line (`-q` silences
/// it), never a changed exit: an alert on a stale metric would otherwise be
/// the first sign that the file was never written.
pub fn write_run_file(path: &Path, names: &[LockName], ended: &Ended) {
    let names: Vec<String> = names.iter().map(|n| n.as_str().to_owned()).collect();
    if let Err(err) = rewrite(path, |existing| run_text(existing, &names, ended)) {
        // The directory is the usual slip: collectors' layouts differ.
        let hint = match err.kind() {
            io::ErrorKind::NotFound => {
                "; create its directory, or use the textfile collector's (Debian: /var/lib/prometheus/node-exporter)"
            }
            _ => "",
        };
        crate::report::error(&format!(
            "{}: cannot write the metrics file {}: {err}{hint}",
            names.join(", "),
            crate::report::quote(&path.to_string_lossy())
        ));
    }
}

fn run_text(existing: &str, names: &[String], ended: &Ended) -> String {
    let now = seconds(SystemTime::now());
    let word = ended.ending.word();
    let waited = ended.waited;
    let held = ended.held.unwrap_or(Duration::ZERO);
    let mut last_run = Family::new(
        LAST_RUN,
        "gauge",
        "When the last rlock run of the lock ended (Unix time), labelled by its result.",
    );
    let mut last_success = Family::new(
        LAST_SUCCESS,
        "gauge",
        "When the last rlock run of the lock whose COMMAND exited 0 ended (Unix time).",
    );
    let mut wait = Family::new(
        "rlock_wait_seconds",
        "gauge",
        "How long the last run waited for the lock (until it was acquired or given up).",
    );
    let mut hold = Family::new(
        "rlock_hold_seconds",
        "gauge",
        "How long the last run held the lock (0 when it was not acquired).",
    );
    let mut status = Family::new(
        "rlock_exit_status",
        "gauge",
        "The exit status of the last run, labelled by its result.",
    );
    for name in names {
        let lock = || vec![("lock", name.clone())];
        let with_result = || vec![("lock", name.clone()), ("result", word.to_owned())];
        last_run.push(with_result(), now);
        let success = if word == "success" {
            Some(now)
        } else {
            previous(existing, LAST_SUCCESS, name)
        };
        if let Some(at) = success {
            last_success.push(lock(), at);
        }
        wait.push(lock(), waited.unwrap_or(Duration::ZERO).as_secs_f64());
        hold.push(lock(), held.as_secs_f64());
        status.push(with_result(), f64::from(ended.exit().code()));
    }
    prometheus::merge(
        existing,
        &[last_run, last_success, wait, hold, status],
        names,
    )
}

/// The value of `metric{lock="NAME"}` in `text`.
fn previous(text: &str, metric: &str, name: &str) -> Option<f64> {
    text.lines()
        .filter(|l| prometheus::sample_name(l) == Some(metric))
        .filter(|l| prometheus::label_value(l, "lock").as_deref() == Some(name))
        .find_map(prometheus::sample_value)
}

fn seconds(at: SystemTime) -> f64 {
    let ms = at
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    // Milliseconds: what the clock tells reliably, and short to print.
    (ms as f64) / 1000.0
}

/// Replaces `path` with `make(old contents)`: written to a temporary file in
/// the same directory and renamed over it (the textfile collector must never
/// read half a file), while holding a `flock` on the file itself so that two
/// runs sharing it do not lose each other's series.
fn rewrite(path: &Path, make: impl FnOnce(&str) -> String) -> io::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(2);
    let file = loop {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        if !crate::sys::fs::try_flock(&file, true)? {
            if Instant::now() >= deadline {
                return Err(io::Error::other("another run kept it locked for 2s"));
            }
            std::thread::sleep(Duration::from_millis(5));
            continue;
        }
        // A writer that renamed a new file over the one we locked: lock that.
        if std::fs::metadata(path)?.ino() == file.metadata()?.ino() {
            break file;
        }
    };
    let mut existing = String::new();
    (&file).read_to_string(&mut existing)?;
    let text = make(&existing);
    let temp = temp_path(path);
    let written = (|| {
        let mut out = File::create(&temp)?;
        out.write_all(text.as_bytes())?;
        out.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    drop(file);
    written
}

/// `.NAME.PID.tmp` beside `path`: not `*.prom`, so the collector skips it.
fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
}

/// `rlock metrics [PATTERN...]`: the matching locks as they are now. A
/// PATTERN without glob characters is a NAME, shown even when free.
pub fn metrics(config: &Config, patterns: &[String]) -> Result<Exit> {
    let patterns: Vec<String> = match patterns {
        [] => vec!["*".to_owned()],
        given => given.to_vec(),
    };
    for pattern in patterns.iter().filter(|p| !is_glob(p)) {
        LockName::new(pattern)?;
    }
    let backend = config.backend(Dialect::Rlock)?;
    let mut session = backend
        .inspect()
        .map_err(|e| e.in_lock(&patterns.join(", ")))?;
    let mut names: Vec<String> = Vec::new();
    for pattern in &patterns {
        let found = if is_glob(pattern) {
            session.list(&config.prefix, pattern)?
        } else {
            vec![pattern.clone()]
        };
        for name in found {
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    names.sort();
    let mut states = Vec::new();
    let mut histories = Vec::new();
    let mut waits = Vec::new();
    for name in &names {
        let id = LockId::new(&config.prefix, name);
        let state = session.status(&id).map_err(|e| e.in_lock(name))?;
        if state.waiting == 0 {
            waits.push((name.clone(), Some(Duration::ZERO)));
        } else {
            let wait = session.longest_wait(&id).map_err(|e| e.in_lock(name))?;
            waits.push((name.clone(), wait));
        }
        states.push((name.clone(), state));
        // The history is an extra: a server that refuses it (an ACL without
        // XREVRANGE) leaves the state as it is.
        match session.history(&id, HISTORY_READ) {
            Ok(events) => histories.push((name.clone(), events)),
            Err(err) => crate::report::verbose(|| format!("{name}: no history: {err}")),
        }
    }
    let mut families = now_families(&states);
    let mut longest = Family::new(
        "rlock_longest_wait_seconds",
        "gauge",
        "How long the longest-waiting run has waited for the lock (0 when none waits).",
    );
    for (name, wait) in waits {
        // Left out where the backend cannot tell (file: locks keep no queue).
        if let Some(wait) = wait {
            longest.push(vec![("lock", name)], wait.as_secs_f64());
        }
    }
    families.insert(4, longest);
    families.extend(history_families(&histories));
    crate::commands::output::report(&prometheus::encode(&families))?;
    Ok(Exit::Success)
}

/// Most events read per lock: more than any history keeps by default.
const HISTORY_READ: usize = 1000;

fn history_families(histories: &[(String, Vec<Event>)]) -> Vec<Family> {
    // Not rlock_last_success_timestamp_seconds: a collector reading this
    // beside a --metrics-file would see one series twice.
    let mut success = Family::new(
        "rlock_history_last_success_timestamp_seconds",
        "gauge",
        "When the last run of the lock whose COMMAND exited 0 released it (Unix time), from its history.",
    );
    let mut counts = Family::new(
        "rlock_history_events",
        "gauge",
        "Events of each kind among those the lock's history keeps (--history).",
    );
    for (name, events) in histories {
        let last = events
            .iter()
            .find(|e| e.event == EventKind::Released && e.exit == Some(0));
        if let Some(e) = last {
            success.push(vec![("lock", name.clone())], e.time_ms as f64 / 1000.0);
        }
        for kind in EventKind::KNOWN {
            let n = events.iter().filter(|e| e.event == kind).count();
            counts.push(
                vec![("lock", name.clone()), ("event", kind.as_str().to_owned())],
                n as f64,
            );
        }
    }
    vec![success, counts]
}

fn is_glob(pattern: &str) -> bool {
    pattern.contains(['*', '?', '['])
}

fn now_families(states: &[(String, LockStatus)]) -> Vec<Family> {
    let now = now_ms();
    let mut held = Family::new("rlock_held", "gauge", "1 when the lock is held, else 0.");
    let mut holders = Family::new("rlock_holders", "gauge", "Live holders of the lock.");
    let mut limit = Family::new(
        "rlock_limit",
        "gauge",
        "Holders the lock admits at once (1: exclusive; the semaphore's N).",
    );
    let mut waiters = Family::new("rlock_waiters", "gauge", "Runs waiting for the lock.");
    let mut age = Family::new(
        "rlock_hold_age_seconds",
        "gauge",
        "How long the longest current holder has held the lock (0 when free).",
    );
    let mut fence = Family::new(
        "rlock_fence",
        "gauge",
        "The last fencing token handed out for the lock.",
    );
    for (name, s) in states {
        let lock = || vec![("lock", name.clone())];
        held.push(lock(), if s.holders.is_empty() { 0.0 } else { 1.0 });
        holders.push(lock(), s.holders.len() as f64);
        limit.push(lock(), s.limit as f64);
        waiters.push(lock(), s.waiting as f64);
        let since = s
            .holders
            .iter()
            .map(|h| h.since_ms)
            .filter(|ms| *ms > 0)
            .min();
        let seconds = since.map_or(0.0, |ms| now.saturating_sub(ms) as f64 / 1000.0);
        age.push(lock(), seconds);
        fence.push(lock(), s.fence as f64);
    }
    vec![held, holders, limit, waiters, age, fence]
}
