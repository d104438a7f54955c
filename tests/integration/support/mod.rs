//! Test support: real `redis-server` processes, the real `rlock` binary, and
//! waiting for conditions with deadlines.

pub mod holder;
pub mod lua;
pub mod process;
pub mod redis_server;
pub mod rlock;
pub mod scratch;

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
