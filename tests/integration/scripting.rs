//! `acquire`, `renew` and `release` for shell scripts, and `release --force`.

use std::time::Duration;

use crate::support::expect_within;
use crate::support::holder::hold;
use crate::support::redis_server::RedisServer;
use crate::support::rlock::{self, assert_fails, code, output, rlock, sh, show, spawn, stdout};
use crate::support::scratch::Scratch;

fn acquire(redis: &RedisServer, args: &[&str]) -> String {
    let out = output(rlock(&redis.url()).arg("acquire").args(args));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let token = stdout(&out).trim().to_owned();
    assert_eq!(token.len(), 32, "only the token on stdout: {token:?}");
    token
}

#[test]
fn acquire_renew_and_release_with_the_token() {
    let redis = RedisServer::start();
    let token = acquire(&redis, &["--ttl", "60s", "script"]);
    let out = output(rlock(&redis.url()).args(["run", "-n", "script", "--", "true"]));
    assert_eq!(code(&out), 75, "acquire holds the lock: {}", show(&out));
    let out =
        output(rlock(&redis.url()).args(["renew", "script", "--token", &token, "--ttl", "5s"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let pttl: i64 = redis.cmd(&["PTTL", "rlock:{script}:leases"]);
    assert!(pttl > 50_000, "renew never shortens the lease: {pttl}");
    let out = output(rlock(&redis.url()).args(["release", "script", "--token", &token]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert_eq!(redis.lock_keys("script"), Vec::<String>::new());
    let out = output(rlock(&redis.url()).args(["release", "script", "--token", &token]));
    let err = assert_fails(&out, 1);
    assert!(err.contains("does not hold"), "{err}");
    let out = output(rlock(&redis.url()).args(["renew", "script", "--token", &token]));
    assert_fails(&out, 1);
    let out = output(rlock(&redis.url()).args(["release", "script", "--token", &"0".repeat(32)]));
    assert_fails(&out, 1);
    let out = output(rlock(&redis.url()).args(["release", "script", "--token", "not-a-token"]));
    let err = assert_fails(&out, 1);
    assert!(err.starts_with("rlock: script: "), "{err}");
    assert!(!rlock::stderr(&out).contains(&token));
}

#[test]
fn an_acquired_lock_lasts_its_ttl_without_renewal() {
    let redis = RedisServer::start();
    acquire(&redis, &["--ttl", "300ms", "brief"]);
    let out = output(rlock(&redis.url()).args(["run", "--wait", "10s", "brief", "--", "true"]));
    assert_eq!(code(&out), 0, "free once the ttl ran out: {}", show(&out));
}

#[test]
fn acquire_waits_and_gives_up_like_run() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let _holder = hold(&redis, &dir, "queue");
    let out = output(rlock(&redis.url()).args(["acquire", "--wait", "200ms", "-E", "3", "queue"]));
    assert_fails(&out, 3);
    assert_eq!(stdout(&out), "", "no token printed");
    let out = output(rlock(&redis.url()).args(["acquire", "--shared", "--no-wait", "queue"]));
    assert_fails(&out, 75);
}

#[test]
fn force_release_evicts_a_running_holder_and_lets_the_next_waiter_in() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let ready = dir.file("ready");
    let term = dir.file("term");
    let holder = spawn(
        rlock(&redis.url())
            .args(["run", "--ttl", "1s", "evict", "--"])
            .args(sh(&format!(
                "exec 2>/dev/null; trap 'touch {term}; exit 1' TERM; touch {ready}; while :; do sleep 0.02; done"
            ))),
    );
    expect_within(rlock::LIMIT, "the holder to start", || {
        std::path::Path::new(&ready).exists()
    });
    let mut waiter =
        spawn(rlock(&redis.url()).args(["run", "--wait", "20s", "evict", "--", "true"]));
    expect_within(rlock::LIMIT, "the waiter to queue", || {
        redis.cmd::<i64>(&["ZCARD", "rlock:{evict}:waiters"]) == 1
    });
    let out = output(rlock(&redis.url()).args(["release", "evict", "--force"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let out = holder.output_within(rlock::LIMIT);
    let err = assert_fails(&out, 70);
    assert!(err.contains("lost"), "{err}");
    assert!(std::path::Path::new(&term).exists(), "COMMAND got SIGTERM");
    assert!(
        waiter.wait_within(Duration::from_secs(10)).success(),
        "the waiter got in"
    );
    let out = output(rlock(&redis.url()).args(["release", "evict", "--force"]));
    assert_fails(&out, 1);
}

/// Pids of `__while-pid` watchdogs for lock `name` (read from /proc; killed by nobody).
fn watchdogs(name: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
            args.contains(&&b"__while-pid"[..])
                && args.contains(&name.as_bytes())
                && crate::support::process::alive(*pid)
        })
        .collect()
}

#[test]
fn while_pid_keeps_the_lock_while_the_process_lives_and_releases_it_after() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let bin = &crate::support::rlock::bin();
    let token_file = dir.file("token");
    let stop = dir.file("stop");
    let script = format!(
        "{bin} --url {url} acquire --ttl 1s --while-pid $$ life > {token_file} || exit 9; \
         while [ ! -e {stop} ]; do sleep 0.02; done",
        url = redis.url()
    );
    let mut shell = spawn(std::process::Command::new("sh").args(["-c", &script]));
    expect_within(rlock::LIMIT, "the token", || {
        dir.read("token").trim().len() == 32
    });
    let started = std::time::Instant::now();
    // Held well past its 1 s ttl while the shell lives.
    while started.elapsed() < Duration::from_millis(2500) {
        let out = output(rlock(&redis.url()).args(["run", "-n", "life", "--", "true"]));
        assert_eq!(
            code(&out),
            75,
            "renewed while the shell lives: {}",
            show(&out)
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    assert_eq!(watchdogs("life").len(), 1, "one watchdog");
    std::fs::write(&stop, "").unwrap();
    assert!(shell.wait_within(rlock::LIMIT).success());
    let out = output(rlock(&redis.url()).args(["run", "--wait", "5s", "life", "--", "true"]));
    assert_eq!(
        code(&out),
        0,
        "released when the shell exited: {}",
        show(&out)
    );
    expect_within(rlock::LIMIT, "the watchdog to end", || {
        watchdogs("life").is_empty()
    });
}

/// The keeper renews at the run's cadence (a tenth of the lease, not a
/// third), so an outage at its worst moment is ridden out 90% as long as at
/// its best: with a 3 s ttl the lease never falls below 2.3 s left.
#[test]
fn while_pid_renews_at_the_runs_cadence() {
    let redis = RedisServer::start();
    let me = std::process::id().to_string();
    let token = acquire(&redis, &["--ttl", "3s", "--while-pid", &me, "cadence"]);
    let mut lowest = i64::MAX;
    let watched = std::time::Instant::now();
    while watched.elapsed() < Duration::from_secs(2) {
        let pttl: i64 = redis.cmd(&["PTTL", "rlock:{cadence}:leases"]);
        lowest = lowest.min(pttl);
        std::thread::sleep(Duration::from_millis(20));
    }
    // Every third of the lease would let it fall to about 2 s.
    assert!(lowest > 2300, "lowest lease left: {lowest} ms");
    let out = output(rlock(&redis.url()).args(["release", "cadence", "--token", &token]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    expect_within(rlock::LIMIT, "the watchdog to end", || {
        watchdogs("cadence").is_empty()
    });
}

#[test]
fn while_pid_watchdog_ends_when_the_script_releases() {
    let redis = RedisServer::start();
    let me = std::process::id().to_string();
    let token = acquire(&redis, &["--ttl", "600ms", "--while-pid", &me, "early"]);
    expect_within(rlock::LIMIT, "the watchdog", || {
        watchdogs("early").len() == 1
    });
    let out = output(rlock(&redis.url()).args(["release", "early", "--token", &token]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    expect_within(rlock::LIMIT, "the watchdog to end", || {
        watchdogs("early").is_empty()
    });
    for pid in ["999999999", "4294967295"] {
        let out = output(rlock(&redis.url()).args(["acquire", "--while-pid", pid, "nobody"]));
        assert_fails(&out, 2);
    }
}

#[test]
fn while_pid_watchdog_takes_a_name_that_looks_like_an_option() {
    let redis = RedisServer::start();
    let me = std::process::id().to_string();
    let token = acquire(&redis, &["--ttl", "600ms", "--while-pid", &me, "--", "-v"]);
    // Past its ttl: only a running watchdog can have kept it.
    std::thread::sleep(Duration::from_millis(1500));
    let out = output(rlock(&redis.url()).args(["release", "--token", &token, "--", "-v"]));
    assert_eq!(code(&out), 0, "still held: {}", show(&out));
    expect_within(rlock::LIMIT, "the watchdog to end", || {
        watchdogs("-v").is_empty()
    });
}

/// `release --force` says on stderr whom it removed (host, pid,
/// command, how long it had held the lock); `-q` silences it. Off a
/// terminal, a run that waited says when it got the lock and after how long.
#[test]
fn release_force_names_whom_it_removed_and_a_waiter_says_when_it_got_in() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let go = dir.file("go");
    let mut holder = spawn(
        rlock(&redis.url())
            .args(["run", "--ttl", "60s", "cut-off", "--"])
            .args(sh(&format!(
                "exec 2>/dev/null; while [ ! -e {go} ]; do sleep 0.02; done # the holder"
            ))),
    );
    expect_within(rlock::LIMIT, "the holder", || {
        redis.cmd::<i64>(&["EXISTS", "rlock:{cut-off}:leases"]) == 1
    });
    let waiter = spawn(
        rlock(&redis.url())
            .env("RLOCK_PROGRESS_INTERVAL", "30s")
            .args(["run", "--wait", "20s", "cut-off", "--", "true"]),
    );
    expect_within(rlock::LIMIT, "the waiter to queue", || {
        redis.cmd::<i64>(&["ZCARD", "rlock:{cut-off}:waiters"]) == 1
    });
    let out = output(rlock(&redis.url()).args(["release", "--force", "cut-off"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let err = rlock::stderr(&out);
    assert!(
        err.starts_with("rlock: cut-off: removed the hold of pid ")
            && err.contains(&format!(" on {}", hostname()))
            && err.contains("# the holder")
            && err.contains("held for "),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "{}", show(&out));
    let out = waiter.output_within(rlock::LIMIT);
    assert_eq!(code(&out), 0, "{}", show(&out));
    let err = rlock::stderr(&out);
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("rlock: 20")
            && last.contains(" acquired cut-off after ")
            && last.ends_with('s'),
        "{err}"
    );
    std::fs::write(&go, "").unwrap();
    holder.wait_within(rlock::LIMIT);
    // -q: nothing said.
    acquire(&redis, &["--ttl", "60s", "quiet"]);
    let out = output(rlock(&redis.url()).args(["-q", "release", "--force", "quiet"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert!(out.stderr.is_empty(), "{}", show(&out));
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_owned()
}
