//! Test support: real `redis-server` processes and the topologies made of them
//! (Sentinel, Cluster, a Redlock quorum, TLS), an HTTP(S) server recording
//! requests, the real `rlock` binary, and waiting for conditions with deadlines.

pub mod clock;
pub mod cluster;
pub mod expect;
pub mod holder;
pub mod http_server;
pub mod lua;
pub mod process;
pub mod prom;
pub mod quorum;
pub mod redis_server;
pub mod rlock;
pub mod scratch;
pub mod sentinel;
pub mod terminal;
pub mod tls;

use std::time::{Duration, Instant};

/// Polls `cond` until it holds or `within` passes; returns whether it held.
pub fn wait_until(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Like [`wait_until`] but panics with `what` when the deadline passes.
pub fn expect_within(within: Duration, what: &str, cond: impl FnMut() -> bool) {
    assert!(
        wait_until(within, cond),
        "timed out after {within:?} waiting for {what}"
    );
}

/// Milliseconds since the Unix epoch (what `date +%s%3N` prints in COMMANDs).
pub fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

/// Lines "start end fence" that jobs appended to `dir/file`, sorted by start.
pub fn fenced_intervals(dir: &scratch::Scratch, file: &str) -> Vec<(u128, u128, u64)> {
    let mut intervals: Vec<(u128, u128, u64)> = dir
        .lines(file)
        .iter()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
            )
        })
        .collect();
    intervals.sort();
    intervals
}

/// [`fenced_intervals`], asserting there are `count`, that none overlaps the
/// next, and that fences increase with start time.
pub fn assert_exclusive_with_fences(
    dir: &scratch::Scratch,
    file: &str,
    count: usize,
) -> Vec<(u128, u128, u64)> {
    let intervals = fenced_intervals(dir, file);
    assert_eq!(intervals.len(), count, "{intervals:?}");
    for pair in intervals.windows(2) {
        assert!(pair[0].1 <= pair[1].0, "overlapping holds: {pair:?}");
        assert!(
            pair[0].2 < pair[1].2,
            "fences increase with start time: {pair:?}"
        );
    }
    intervals
}
