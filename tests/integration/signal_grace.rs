//! `run --signal-grace`: a cancelled CI job releases its lock. GitHub Actions
//! cancels a step with SIGINT, SIGTERM 7.5 s later and SIGKILL to the whole
//! tree 2.5 s after that; with `--signal-grace 5s` rlock kills a COMMAND
//! that does not stop, releases, and exits 130 before the runner kills it.

use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

use crate::support::expect::assert_lines;
use crate::support::expect_within;
use crate::support::process::{alive, signal};
use crate::support::redis_server::RedisServer;
use crate::support::rlock::{self, code, rlock, sh, show, spawn, spawn_quiet, stderr};
use crate::support::scratch::Scratch;

/// GitHub's schedule, from the first signal.
const TERM_AFTER: Duration = Duration::from_millis(7500);
const KILL_AFTER: Duration = Duration::from_secs(10);

/// What became of a cancelled run and of the run waiting behind it.
struct Cancelled {
    /// When the waiter's COMMAND started, after the first signal.
    waiter_started: Duration,
    /// When the cancelled rlock exited, after the first signal, and its
    /// status (None: the schedule's SIGKILL ended it).
    exited: Option<(Duration, i32)>,
    /// The cancelled rlock's stderr.
    stderr: String,
}

/// Holds lock `deploy` with a COMMAND that ignores SIGINT and SIGTERM (as a
/// `sleep` under `trap '' INT TERM` does), with a waiter in line behind it,
/// then cancels the holder on GitHub's schedule: SIGINT to rlock and to
/// COMMAND's process group, SIGTERM to both 7.5 s later, SIGKILL to
/// everything left 2.5 s after that.
fn cancel_on_githubs_schedule(ttl: &str, extra: &[&str]) -> Cancelled {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let (pid_file, waiter_file) = (dir.file("pid"), dir.file("waiter"));
    let mut holder = rlock(&redis.url());
    holder
        .args(["run", "--ttl", ttl])
        .args(extra)
        .args(["deploy", "--"])
        .args(sh(&format!(
            "trap '' INT TERM; echo $$ > {pid_file}.tmp; mv {pid_file}.tmp {pid_file}; sleep 60"
        )))
        // rlock's own group, as a runner's step has one.
        .process_group(0);
    let mut holder = spawn(&mut holder);
    expect_within(rlock::LIMIT, "COMMAND to start", || {
        std::path::Path::new(&pid_file).exists()
    });
    let command: u32 = dir.read("pid").trim().parse().unwrap();
    let _waiter = spawn_quiet(
        rlock(&redis.url())
            .args(["run", "--wait", "30s", "--ttl", "30s", "deploy", "--"])
            .args(sh(&format!("touch {waiter_file}"))),
    );
    expect_within(rlock::LIMIT, "the waiter to stand in line", || {
        redis.cmd::<i64>(&["ZCARD", "rlock:{deploy}:waiters"]) == 1
    });

    let (rlock_pid, group) = (holder.pid, -i32::try_from(command).unwrap());
    let to_all = |sig: i32| {
        signal(rlock_pid, sig);
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(group, sig) };
    };
    let cancelled = Instant::now();
    to_all(libc::SIGINT);
    let (mut termed, mut killed) = (false, false);
    let (mut waiter_started, mut exited) = (None, None);
    // One loop drives the schedule and watches both runs until the waiter
    // has started and the holder has ended (by itself or by the schedule's
    // SIGKILL), within the test's limit.
    while (waiter_started.is_none() || exited.is_none() && !killed)
        && cancelled.elapsed() < rlock::LIMIT
    {
        if !termed && cancelled.elapsed() >= TERM_AFTER {
            to_all(libc::SIGTERM);
            termed = true;
        }
        if !killed && cancelled.elapsed() >= KILL_AFTER {
            to_all(libc::SIGKILL);
            killed = true;
        }
        if exited.is_none()
            && let Some(status) = holder.try_status()
        {
            exited = Some((cancelled.elapsed(), status.code().unwrap_or(-1)));
        }
        if std::path::Path::new(&waiter_file).exists() {
            waiter_started = Some(cancelled.elapsed());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(!alive(command), "COMMAND {command} outlived the cancel");
    let out = holder.output_within(rlock::LIMIT);
    Cancelled {
        waiter_started: waiter_started.expect("the waiter started within 30 s"),
        exited: exited.filter(|_| out.status.code().is_some()),
        stderr: stderr(&out),
    }
}

/// With --signal-grace 5s, the COMMAND that ignores the cancel is killed 5 s
/// after SIGINT: the lock is released and the next deploy starts at once,
/// not when the 30 s lease ends; rlock exits 130, before the runner's SIGTERM.
#[test]
fn a_cancelled_ci_job_releases_its_lock_after_the_signal_grace() {
    let run = cancel_on_githubs_schedule("30s", &["--signal-grace", "5s"]);
    assert!(
        run.waiter_started >= Duration::from_millis(4900)
            && run.waiter_started < Duration::from_millis(6500),
        "the waiter started {:?} after SIGINT (the grace is 5s)",
        run.waiter_started
    );
    let (exited, status) = run.exited.expect("rlock exited by itself");
    assert_eq!(status, 130, "{}", run.stderr);
    assert!(exited < TERM_AFTER, "rlock exited {exited:?} after SIGINT");
    assert_lines(
        &run.stderr,
        "rlock: deploy: COMMAND still ran 5s after SIGINT; killed it (--signal-grace)\n\
         rlock: deploy: released after [..]s (COMMAND exited 130 on SIGINT)",
    );
}

/// Without it, as before: rlock waits for COMMAND until the runner kills
/// both, and the waiter waits for the lease to end (3 s after the kill).
#[test]
fn without_signal_grace_a_cancelled_job_keeps_its_lock_for_the_lease() {
    let run = cancel_on_githubs_schedule("3s", &[]);
    assert_eq!(run.exited, None, "rlock was still waiting for COMMAND");
    assert!(
        run.waiter_started >= KILL_AFTER,
        "the waiter started {:?} after SIGINT, before the runner's SIGKILL",
        run.waiter_started
    );
}

/// `RLOCK_SIGNAL_GRACE` is read; a COMMAND that stops in time keeps its own
/// status; a grace of 0 is refused (it would leave COMMAND no time to stop),
/// `forever` is the default (off).
#[test]
fn signal_grace_from_the_environment_and_its_bounds() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let started = dir.file("started");
    let polite = spawn(
        rlock(&redis.url())
            .env("RLOCK_SIGNAL_GRACE", "20s")
            .args(["run", "polite", "--"])
            .args(sh(&format!(
                "trap 'exit 3' INT; touch {started}; sleep 60 & wait"
            ))),
    );
    expect_within(rlock::LIMIT, "COMMAND to start", || {
        std::path::Path::new(&started).exists()
    });
    polite.signal(libc::SIGINT);
    let out = polite.output_within(rlock::LIMIT);
    assert_eq!(code(&out), 3, "{}", show(&out));

    let started = dir.file("stubborn");
    let stubborn = spawn(
        rlock(&redis.url())
            .env("RLOCK_SIGNAL_GRACE", "300ms")
            .args(["run", "stubborn", "--"])
            .args(sh(&format!("trap '' HUP; touch {started}; sleep 60"))),
    );
    expect_within(rlock::LIMIT, "COMMAND to start", || {
        std::path::Path::new(&started).exists()
    });
    stubborn.signal(libc::SIGHUP);
    let out = stubborn.output_within(rlock::LIMIT);
    assert_eq!(code(&out), 129, "{}", show(&out));
    assert_lines(
        &stderr(&out),
        "rlock: stubborn: COMMAND still ran 300ms after SIGHUP; killed it (--signal-grace)\n\
         rlock: stubborn: released after [..]s (COMMAND exited 129 on SIGHUP)",
    );
    assert_eq!(
        redis.lock_keys("stubborn"),
        Vec::<String>::new(),
        "released"
    );

    for (grace, line) in [
        (
            "0",
            "rlock: x: invalid value '0' for '--signal-grace <DUR>': must be at least 1ms \
             (or forever); usage: rlock run [..]",
        ),
        (
            "soon",
            "rlock: x: invalid value 'soon' for '--signal-grace <DUR>': [..] (or forever); \
             usage: rlock run [..]",
        ),
    ] {
        let out = rlock::output(rlock(&redis.url()).args([
            "run",
            "--signal-grace",
            grace,
            "x",
            "--",
            "true",
        ]));
        assert_eq!(code(&out), 2, "{}", show(&out));
        assert_lines(&stderr(&out), line);
    }
    let out = rlock::output(rlock(&redis.url()).args([
        "run",
        "--signal-grace",
        "forever",
        "x",
        "--",
        "true",
    ]));
    assert_eq!(code(&out), 0, "{}", show(&out));
}
