//! Waiting outlives a restart: a run that may wait for the lock also waits
//! for its server (refused connections, LOADING, dropped connections), within
//! --wait, or --unreachable-wait without it; --no-wait gives up at once.

use std::fs::File;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::expect::assert_lines;
use crate::support::expect_within;
use crate::support::holder::hold;
use crate::support::process::Proc;
use crate::support::redis_server::RedisServer;
use crate::support::rlock::{LIMIT, assert_fails, assert_fails_last_line, output, rlock};
use crate::support::scratch::Scratch;

/// Starts `cmd` with stdout and stderr in files of `dir`, so a test can wait
/// for a line while the process runs.
fn spawn_logged(cmd: &mut std::process::Command, dir: &Scratch, tag: &str) -> Proc {
    let out = File::create(dir.file(&format!("{tag}.out"))).unwrap();
    let err = File::create(dir.file(&format!("{tag}.err"))).unwrap();
    Proc::new(
        cmd.stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .unwrap(),
    )
}

#[test]
fn a_run_with_wait_waits_for_a_server_that_is_down_at_first() {
    let dir = Scratch::new();
    let mut redis = RedisServer::start();
    redis.stop();
    let mut run = spawn_logged(
        rlock(&redis.url()).args(["run", "--wait", "20s", "back", "--", "echo", "ran"]),
        &dir,
        "run",
    );
    expect_within(LIMIT, "rlock to say it waits for the server", || {
        dir.read("run.err")
            .contains("waiting for it for the rest of --wait")
    });
    let port = redis.port;
    assert_lines(
        &dir.read("run.err"),
        &format!(
            "rlock: back: server 127.0.0.1:{port} unavailable: connection refused \
             (is redis-server running on 127.0.0.1:{port}?); waiting for it for the rest of --wait"
        ),
    );
    redis.restart();
    let status = run.wait_within(LIMIT);
    assert_eq!(status.code(), Some(0), "{}", dir.read("run.err"));
    assert_eq!(dir.read("run.out"), "ran\n");
    assert_lines(
        &dir.read("run.err"),
        &format!(
            "rlock: back: server 127.0.0.1:{port} unavailable: connection refused \
             (is redis-server running on 127.0.0.1:{port}?); waiting for it for the rest of --wait
rlock: back: server 127.0.0.1:{port} is back after [..]s"
        ),
    );
    assert!(redis.lock_keys("back").is_empty(), "released after");
}

#[test]
fn a_waiter_rides_out_a_restart_that_is_still_loading() {
    let dir = Scratch::new();
    // Loading 3000 keys at 1 ms each keeps the restarted server in LOADING for
    // about 3 s, answering LOADING meanwhile (it serves clients every 1 KiB).
    let mut redis = RedisServer::start_with(&[
        "--key-load-delay",
        "1000",
        "--loading-process-events-interval-bytes",
        "1024",
        "--enable-debug-command",
        "local",
    ]);
    redis.cmd::<String>(&["DEBUG", "POPULATE", "3000"]);
    redis.cmd::<String>(&["SAVE"]);
    let _holder = hold(&redis, &dir, "loading");
    let mut waiter = spawn_logged(
        rlock(&redis.url()).args(["run", "loading", "--", "echo", "waited"]),
        &dir,
        "waiter",
    );
    expect_within(LIMIT, "the waiter to queue", || {
        let waiters: i64 = redis.cmd(&["ZCARD", "rlock:{loading}:waiters"]);
        waiters == 1
    });
    redis.stop();
    redis.respawn();
    expect_within(LIMIT, "the waiter to meet the loading server", || {
        dir.read("waiter.err").contains("LOADING")
    });
    let status = waiter.wait_within(LIMIT);
    assert_eq!(status.code(), Some(0), "{}", dir.read("waiter.err"));
    assert_eq!(dir.read("waiter.out"), "waited\n");
}

#[test]
fn an_unreachable_server_is_waited_for_within_bounds_only() {
    // Refused for the whole test: a stopped server's port could be taken by
    // another test's server meanwhile.
    let (_reserved, port) = crate::support::redis_server::refusing_port();
    let url = format!("redis://127.0.0.1:{port}");
    // --wait: 69 when the wait runs out with the server still unreachable.
    let start = Instant::now();
    let out = output(rlock(&url).args(["run", "--wait", "700ms", "x", "--", "true"]));
    assert_fails_last_line(&out, 69);
    let refused = format!(
        "rlock: x: server 127.0.0.1:{port} unavailable: connection refused \
         (is redis-server running on 127.0.0.1:{port}?)"
    );
    assert_lines(
        &crate::support::rlock::stderr(&out),
        &format!(
            "{refused}; waiting for it for the rest of --wait
{refused}; unreachable for the last 0.7s"
        ),
    );
    assert!(start.elapsed() >= Duration::from_millis(700));
    // No --wait: the documented bound, adjustable (here from the environment).
    let start = Instant::now();
    let out = output(
        rlock(&url)
            .env("RLOCK_UNREACHABLE_WAIT", "500ms")
            .args(["run", "x", "--", "true"]),
    );
    assert_fails_last_line(&out, 69);
    assert_lines(
        &crate::support::rlock::stderr(&out),
        &format!(
            "{refused}; waiting for it up to 500ms (--unreachable-wait)
{refused}; unreachable for the last 0.5s"
        ),
    );
    assert!(start.elapsed() >= Duration::from_millis(500));
    // --no-wait: at once, as before.
    let out = output(rlock(&url).args(["run", "--no-wait", "x", "--", "true"]));
    let err = assert_fails(&out, 69);
    assert_lines(&err, &refused);
    // A password that is refused does not pass on its own: no waiting.
    let guarded = RedisServer::start_with(&["--requirepass", "right-secret-pw"]);
    let out = output(
        rlock(&format!("redis://:wrong@127.0.0.1:{}", guarded.port))
            .args(["run", "--wait", "1m", "x", "--", "true"]),
    );
    let err = assert_fails(&out, 69);
    assert_lines(
        &err,
        &format!(
            "rlock: x: server 127.0.0.1:{} unavailable: authentication failed: \
             wrong user name or password (check the URL or REDISCLI_AUTH)",
            guarded.port
        ),
    );
}
