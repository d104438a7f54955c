//! A holder's log tells the story off a terminal (stderr is a pipe here): a
//! closing line when the lock is released after a signal or a failure of
//! COMMAND, an outage's failed renewals in the line that says they were
//! confirmed again, and a skipped run's line on a terminal.

use std::time::{Duration, Instant};

use crate::support::expect::assert_lines;
use crate::support::expect_within;
use crate::support::holder::{go, hold, until_go};
use crate::support::redis_server::RedisServer;
use crate::support::rlock::{self, code, rlock, sh, show, spawn};
use crate::support::scratch::Scratch;
use crate::support::terminal::spawn_on_terminal;

/// A COMMAND that marks `dir/ready`, then runs until SIGINT, on which it
/// exits 130 as a shell script's cleanup trap does.
fn interruptible(dir: &Scratch) -> String {
    format!(
        "trap 'exit 130' INT; touch {}; while :; do sleep 0.02; done",
        dir.file("ready")
    )
}

#[test]
fn a_run_interrupted_by_sigint_ends_its_log_with_the_release() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let run = spawn(
        rlock(&redis.url())
            .args(["run", "deploy-prod", "--"])
            .args(sh(&interruptible(&dir))),
    );
    expect_within(rlock::LIMIT, "COMMAND to start", || {
        std::path::Path::new(&dir.file("ready")).exists()
    });
    run.signal(libc::SIGINT);
    let out = run.output_within(rlock::LIMIT);
    assert_eq!(code(&out), 130, "{}", show(&out));
    assert_lines(
        &rlock::stderr(&out),
        "rlock: deploy-prod: released after [..]s (COMMAND exited 130 on SIGINT)",
    );
    assert_eq!(redis.lock_keys("deploy-prod"), Vec::<String>::new());
}

#[test]
fn a_failed_command_ends_its_log_with_the_release_and_a_success_stays_silent() {
    let redis = RedisServer::start();
    let failed =
        rlock::output(rlock(&redis.url()).args(["run", "job", "--", "sh", "-c", "exit 3"]));
    assert_eq!(code(&failed), 3, "{}", show(&failed));
    assert_lines(
        &rlock::stderr(&failed),
        "rlock: job: released after [..]s (COMMAND exited 3)",
    );
    let quiet =
        rlock::output(rlock(&redis.url()).args(["-q", "run", "job", "--", "sh", "-c", "exit 3"]));
    assert_eq!(code(&quiet), 3, "{}", show(&quiet));
    assert_eq!(rlock::stderr(&quiet), "", "-q silences it");
    let fine = rlock::output(rlock(&redis.url()).args(["run", "job", "--", "true"]));
    assert_eq!(code(&fine), 0, "{}", show(&fine));
    assert_eq!(rlock::stderr(&fine), "", "a success says nothing");
}

/// Waits for a renewal of `name`'s hold (its key's PTTL jumps back up).
fn next_renewal(redis: &RedisServer, name: &str) {
    let key = format!("rlock:{{{name}}}:leases");
    let mut last: i64 = redis.cmd(&["PTTL", &key]);
    expect_within(Duration::from_secs(10), "a renewal", || {
        let pttl: i64 = redis.cmd(&["PTTL", &key]);
        let renewed = pttl > last + 50;
        last = pttl;
        renewed
    });
}

/// With `--ttl 6s --kill-after 1s` a renewal is sent every 0.49 s, each
/// bounded by half the 4.87 s left before SIGTERM: a 3 s stall always
/// outlasts one renewal's bound (failing it) and is ridden out.
#[test]
fn a_stall_ridden_out_is_told_as_a_failure_then_confirmed_again() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let holder = spawn(
        rlock(&redis.url())
            .args(["run", "--ttl", "6s", "--kill-after", "1s", "blip", "--"])
            .args(sh(&until_go(&dir))),
    );
    next_renewal(&redis, "blip");
    redis.freeze();
    let frozen = Instant::now();
    std::thread::sleep(Duration::from_secs(3).saturating_sub(frozen.elapsed()));
    redis.thaw();
    next_renewal(&redis, "blip");
    go(&dir);
    let out = holder.output_within(rlock::LIMIT);
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert_lines(
        &rlock::stderr(&out),
        "rlock: blip: renewal failed for [..]s (blip: server 127.0.0.1:[..] unavailable: \
         no reply within [..]), then confirmed again",
    );
}

/// `rlock` as `cmd` would run it, on a terminal, under a shell that
/// prints `status=N` after it: once that shows, everything rlock wrote has.
fn on_terminal(cmd: &std::process::Command) -> (i32, String) {
    let mut shell = std::process::Command::new("sh");
    shell
        .args(["-c", "\"$0\" \"$@\"; echo \"status=$?\""])
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (var, value) in cmd.get_envs() {
        match value {
            Some(value) => shell.env(var, value),
            None => shell.env_remove(var),
        };
    }
    let (mut run, _terminal, screen) = spawn_on_terminal(&mut shell);
    let text = || String::from_utf8_lossy(&screen.lock().unwrap()).into_owned();
    expect_within(rlock::LIMIT, "rlock to exit", || text().contains("status="));
    run.wait_within(rlock::LIMIT);
    let text = text();
    let status = text
        .split("status=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    (status, text)
}

/// A run skipped because the lock was taken says so on a terminal in one
/// line, with `-E 0` too (off a terminal `-E 0` keeps a cron job's mail
/// empty); `-q` silences it.
#[test]
fn a_skipped_run_says_so_on_a_terminal() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let _holder = hold(&redis, &dir, "nightly");
    for (global, opts, said, want) in [
        (&[][..], &["-n", "-E", "0"][..], true, 0),
        (&[], &["--wait", "0.2", "-E", "0"], true, 0),
        (&[], &["-n"], true, 75),
        (&["-q"], &["-n", "-E", "0"], false, 0),
    ] {
        let (status, text) = on_terminal(
            rlock(&redis.url())
                .args(global)
                .arg("run")
                .args(opts)
                .args(["nightly", "--", "true"]),
        );
        assert_eq!(status, want, "{opts:?}: {text}");
        // (The waiting line of `--wait` is drawn over, not a line.)
        let lines = text.matches("rlock: ").count() - text.matches("rlock: waiting for").count();
        if said {
            assert!(text.contains("nightly: not acquired: "), "{opts:?}: {text}");
            assert_eq!(lines, 1, "{opts:?}: one line: {text}");
        } else {
            assert_eq!(lines, 0, "{global:?} {opts:?}: {text}");
        }
    }
    // Off a terminal, `-E 0` stays silent but with -v.
    let out =
        rlock::output(rlock(&redis.url()).args(["run", "-n", "-E", "0", "nightly", "--", "true"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert_eq!(rlock::stderr(&out), "", "{}", show(&out));
}
