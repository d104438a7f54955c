//! Metrics in Prometheus' text format, read back by prometheus_client's
//! parser: `run --metrics-file` (one file several locks share) and
//! `rlock metrics`.

use crate::support::expect::assert_lines;
use crate::support::holder::{hold, release};
use crate::support::prom::{one, parse};
use crate::support::redis_server::RedisServer;
use crate::support::rlock::{code, output, rlock, sh, show, stderr, stdout};
use crate::support::scratch::Scratch;

const WEIRD: &str = "we\"ird\\name";

/// Two locks share one file: each run replaces only its own lock's series, a
/// failed run keeps the last success time, and label values that need
/// escaping (a quote, a backslash) come back as they were.
#[test]
fn a_metrics_file_two_locks_share_keeps_each_locks_series() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let file = dir.file("rlock.prom");
    let run = |name: &str, script: &str| {
        output(
            rlock(&redis.url())
                .args(["run", "--metrics-file", &file, name, "--"])
                .args(sh(script)),
        )
    };
    let out = run("backup", "sleep 0.2");
    assert_eq!(code(&out), 0, "{}", show(&out));
    let first = parse(&dir.read("rlock.prom"));
    let success = one(&first, "rlock_last_success_timestamp_seconds", "backup").value;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!((now - success).abs() < 30.0, "a Unix time: {success}");
    assert!(one(&first, "rlock_hold_seconds", "backup").value >= 0.2);

    let out = run(WEIRD, "exit 3");
    assert_eq!(code(&out), 3, "{}", show(&out));
    let out = run("backup", "exit 1");
    assert_eq!(code(&out), 1, "{}", show(&out));

    let text = dir.read("rlock.prom");
    let samples = parse(&text);
    let status = one(&samples, "rlock_exit_status", "backup");
    assert_eq!(status.value, 1.0);
    assert_eq!(status.label("result"), Some("failure"));
    assert_eq!(
        one(&samples, "rlock_last_success_timestamp_seconds", "backup").value,
        success,
        "a failed run keeps the last success: {text}"
    );
    let last = one(&samples, "rlock_last_run_timestamp_seconds", "backup");
    assert!(last.value >= success);
    assert_eq!(one(&samples, "rlock_exit_status", WEIRD).value, 3.0);
    assert!(
        samples
            .iter()
            .all(|s| s.name != "rlock_last_success_timestamp_seconds"
                || s.label("lock") != Some(WEIRD)),
        "no success yet for {WEIRD}: {text}"
    );
    for metric in ["rlock_wait_seconds", "rlock_hold_seconds"] {
        one(&samples, metric, WEIRD);
        one(&samples, metric, "backup");
    }
    let entries: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(entries, ["rlock.prom"], "no temporary file left behind");
}

/// A run that did not get the lock says so: result "busy", its -E status,
/// how long it waited and no hold.
#[test]
fn a_busy_run_is_recorded_with_its_status_and_no_hold() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let file = dir.file("busy.prom");
    let mut holder = hold(&redis, &dir, "taken");
    let out = output(
        rlock(&redis.url())
            .env("RLOCK_METRICS_FILE", &file)
            .args(["run", "--wait", "300ms", "-E", "9", "taken", "--", "true"]),
    );
    assert_eq!(code(&out), 9, "{}", show(&out));
    let samples = parse(&dir.read("busy.prom"));
    let status = one(&samples, "rlock_exit_status", "taken");
    assert_eq!((status.value, status.label("result")), (9.0, Some("busy")));
    assert_eq!(one(&samples, "rlock_hold_seconds", "taken").value, 0.0);
    assert!(one(&samples, "rlock_wait_seconds", "taken").value >= 0.3);
    release(&dir, "taken");
    holder.wait_within(std::time::Duration::from_secs(10));
}

/// A metrics file that cannot be written never changes the run's status,
/// and says so in one line without -v (a missing directory gets the
/// collector's directory as a hint), after the run's closing line; -q
/// silences it.
#[test]
fn a_metrics_file_that_cannot_be_written_does_not_fail_the_run() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let file = dir.file("missing-dir/x.prom");
    let out = output(
        rlock(&redis.url())
            .args(["run", "--metrics-file", &file, "m", "--"])
            .args(sh("exit 4")),
    );
    assert_eq!(code(&out), 4, "{}", show(&out));
    assert_lines(
        &stderr(&out),
        &format!(
            "rlock: m: released after [..]s (COMMAND exited 4)\n\
             rlock: m: cannot write the metrics file '{file}': No such file or directory (os error 2); \
             create its directory, or use the textfile collector's (Debian: /var/lib/prometheus/node-exporter)"
        ),
    );
    // A file where its directory should be: no directory could be made.
    std::fs::write(dir.file("plain"), "").unwrap();
    let file = dir.file("plain/x.prom");
    let out = output(rlock(&redis.url()).args(["run", "--metrics-file", &file, "m", "--", "true"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert_lines(
        &stderr(&out),
        &format!("rlock: m: cannot write the metrics file '{file}': Not a directory (os error 20)"),
    );
    let out =
        output(rlock(&redis.url()).args(["-q", "run", "--metrics-file", &file, "m", "--", "true"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert_eq!(stderr(&out), "", "{}", show(&out));
}

/// `rlock metrics`: a held lock, a lock given by name that is free, a glob.
#[test]
fn metrics_shows_held_and_free_locks_as_prometheus_reads_them() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let mut holder = hold(&redis, &dir, "job-a");
    let mut waiter = crate::support::rlock::spawn_quiet(
        rlock(&redis.url()).args(["run", "job-a", "--", "true"]),
    );
    crate::support::expect_within(crate::support::rlock::LIMIT, "a waiter", || {
        redis.cmd::<i64>(&["ZCARD", "rlock:{job-a}:waiters"]) == 1
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    let out = output(rlock(&redis.url()).args(["metrics", "job-*", "idle"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let samples = parse(&stdout(&out));
    assert_eq!(one(&samples, "rlock_held", "job-a").value, 1.0);
    assert_eq!(one(&samples, "rlock_holders", "job-a").value, 1.0);
    assert_eq!(one(&samples, "rlock_limit", "job-a").value, 1.0);
    assert_eq!(one(&samples, "rlock_waiters", "job-a").value, 1.0);
    let waited = one(&samples, "rlock_longest_wait_seconds", "job-a").value;
    assert!((0.3..30.0).contains(&waited), "{waited}");
    assert_eq!(
        one(&samples, "rlock_longest_wait_seconds", "idle").value,
        0.0
    );
    assert!(one(&samples, "rlock_fence", "job-a").value >= 1.0);
    assert!(one(&samples, "rlock_hold_age_seconds", "job-a").value >= 0.0);
    assert_eq!(one(&samples, "rlock_held", "idle").value, 0.0);
    assert_eq!(one(&samples, "rlock_hold_age_seconds", "idle").value, 0.0);
    // From the history: one acquisition of job-a so far, no success yet.
    let acquired = samples
        .iter()
        .find(|s| {
            s.name == "rlock_history_events"
                && s.label("lock") == Some("job-a")
                && s.label("event") == Some("acquired")
        })
        .unwrap();
    assert_eq!(acquired.value, 1.0);
    release(&dir, "job-a");
    holder.wait_within(std::time::Duration::from_secs(10));
    assert!(
        waiter
            .wait_within(std::time::Duration::from_secs(10))
            .success()
    );
    let out = output(rlock(&redis.url()).args(["metrics", "job-a"]));
    let samples = parse(&stdout(&out));
    assert!(
        one(
            &samples,
            "rlock_history_last_success_timestamp_seconds",
            "job-a"
        )
        .value
            > 1e9
    );
    assert_eq!(one(&samples, "rlock_held", "job-a").value, 0.0);

    let out = output(rlock(&redis.url()).args(["metrics", "bad name"]));
    assert_eq!(code(&out), 2, "{}", show(&out));
}
