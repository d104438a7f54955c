//! `--min-replicas N`: an acquisition counts only once WAIT confirms N
//! replicas; otherwise it is given back and rlock exits 69.

use std::time::{Duration, Instant};

use crate::support::expect_within;
use crate::support::redis_server::RedisServer;
use crate::support::rlock::{self, assert_fails, code, output, rlock, sh, show};
use crate::support::scratch::Scratch;

#[test]
fn an_acquisition_counts_once_the_replicas_have_it() {
    let (primary, replica) = RedisServer::with_replica();
    let dir = Scratch::new();
    let script = format!("echo $RLOCK_FENCE > {}", dir.file("fence"));
    let clock = primary.time_us();
    let out = output(
        rlock(&primary.url())
            .args(["run", "--min-replicas", "1", "durable", "--"])
            .args(sh(&script)),
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
    let fence = dir.read("fence").trim().to_owned();
    assert!(
        fence.parse::<u64>().unwrap() > clock,
        "{fence} after {clock}"
    );
    // The replica saw the lock's writes (its fence counter is there).
    expect_within(rlock::LIMIT, "the fence on the replica", || {
        replica.cmd::<Option<String>>(&["GET", "rlock:{durable}:fence"]) == Some(fence.clone())
    });
}

#[test]
fn missing_replicas_mean_no_acquisition_and_exit_69() {
    let (primary, replica) = RedisServer::with_replica();
    let dir = Scratch::new();
    let ran = dir.file("ran");
    // More replicas than there are.
    let out = output(
        rlock(&primary.url())
            .args([
                "--connect-timeout",
                "300ms",
                "run",
                "--min-replicas",
                "2",
                "durable",
                "--",
            ])
            .args(sh(&format!("touch {ran}"))),
    );
    let err = assert_fails(&out, 69);
    // (1 of 2, or 0 when the one replica was slow to acknowledge.)
    assert!(err.contains("of 2 replicas confirmed the lock"), "{err}");
    // A replica that stopped answering.
    replica.freeze();
    let start = Instant::now();
    let out = output(
        rlock(&primary.url())
            .args([
                "--connect-timeout",
                "300ms",
                "run",
                "--min-replicas",
                "1",
                "durable",
                "--",
            ])
            .args(sh(&format!("touch {ran}"))),
    );
    let err = assert_fails(&out, 69);
    assert!(err.contains("only 0 of 1 replicas"), "{err}");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "bounded by the timeout"
    );
    replica.thaw();
    assert!(!std::path::Path::new(&ran).exists(), "COMMAND never ran");
    assert_eq!(
        primary.lock_keys("durable"),
        Vec::<String>::new(),
        "given back"
    );
}
