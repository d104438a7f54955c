//! `run --max-hold`: COMMAND stopped as timeout(1) stops it (SIGTERM, SIGKILL
//! --kill-after later), the lock released at once, exit 124.

use std::time::{Duration, Instant};

use crate::support::process::alive;
use crate::support::redis_server::RedisServer;
use crate::support::rlock::{code, output, rlock, sh, show, stderr};
use crate::support::scratch::Scratch;

/// A COMMAND that ignores SIGTERM (and so does the `sleep` it starts) is
/// killed --kill-after past --max-hold; rlock exits 124, the whole group is
/// dead and the lock is free at once, long before its 30 s lease could end.
#[test]
fn a_command_ignoring_sigterm_is_killed_after_the_grace_and_the_lock_is_free_at_once() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let script = format!(
        "trap '' TERM; sleep 60 & echo \"$$ $!\" > {}; wait",
        dir.file("pids")
    );
    let started = Instant::now();
    let out = output(
        rlock(&redis.url())
            .args([
                "run",
                "--max-hold",
                "1s",
                "--kill-after",
                "1s",
                "capped",
                "--",
            ])
            .args(sh(&script)),
    );
    let took = started.elapsed();
    assert_eq!(code(&out), 124, "{}", show(&out));
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_secs(8),
        "max-hold 1s + kill-after 1s took {took:?}"
    );
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{}", show(&out));
    assert!(
        err.starts_with("rlock: capped: ") && err.contains("--max-hold 1s"),
        "{}",
        show(&out)
    );
    for pid in dir.read("pids").split_whitespace() {
        let pid: u32 = pid.parse().unwrap();
        assert!(!alive(pid), "process {pid} of COMMAND's group still runs");
    }
    assert_eq!(redis.lock_keys("capped"), Vec::<String>::new(), "released");
    let again = output(rlock(&redis.url()).args(["run", "-n", "capped", "--", "true"]));
    assert_eq!(code(&again), 0, "the lock is free: {}", show(&again));
}

/// A COMMAND that exits on SIGTERM ends the run shortly after --max-hold, with
/// 124 even though it exited 0 itself (as timeout(1) without --preserve-status).
#[test]
fn a_command_exiting_on_sigterm_ends_the_run_with_124_shortly_after_max_hold() {
    let redis = RedisServer::start();
    let started = Instant::now();
    let out = output(
        rlock(&redis.url())
            .args(["run", "--max-hold", "500ms", "polite", "--"])
            .args(sh("trap 'exit 0' TERM; sleep 30 & wait")),
    );
    let took = started.elapsed();
    assert_eq!(code(&out), 124, "{}", show(&out));
    assert!(
        took >= Duration::from_millis(500) && took < Duration::from_secs(5),
        "took {took:?} (the grace of 10s was not needed)"
    );
    assert_eq!(redis.lock_keys("polite"), Vec::<String>::new());
}

/// From the environment too; a COMMAND done in time keeps its own status.
#[test]
fn a_command_finishing_before_max_hold_exits_with_its_own_status() {
    let redis = RedisServer::start();
    let out = output(
        rlock(&redis.url())
            .env("RLOCK_MAX_HOLD", "20s")
            .args(["run", "quick", "--"])
            .args(sh("exit 3")),
    );
    assert_eq!(code(&out), 3, "{}", show(&out));
    crate::support::expect::assert_lines(
        &stderr(&out),
        "rlock: quick: released after [..]s (COMMAND exited 3)",
    );
    let out = output(
        rlock(&redis.url())
            .env("RLOCK_MAX_HOLD", "200ms")
            .args(["run", "quick", "--"])
            .args(sh("sleep 30")),
    );
    assert_eq!(code(&out), 124, "RLOCK_MAX_HOLD is read: {}", show(&out));
}

#[test]
fn a_bad_max_hold_is_a_usage_error() {
    let out =
        output(rlock("redis://127.0.0.1:1").args(["run", "--max-hold", "soon", "x", "--", "true"]));
    assert_eq!(code(&out), 2, "{}", show(&out));
    assert!(stderr(&out).starts_with("rlock: "), "{}", show(&out));
}
