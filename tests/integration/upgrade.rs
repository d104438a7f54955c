//! A rolling upgrade: the previous release's rlock (built from history by
//! scripts/previous-rlock, or `RLOCK_PREVIOUS_BIN`) and this one on the same
//! locks. Holds of the earlier layout are seen as held by every command of
//! this build; the earlier rlock that meets this build's hold fails closed
//! (69) and never runs its COMMAND; the two never hold a lock at once.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use crate::support::expect_within;
use crate::support::holder::{holder, holder_by, release, span, timed_job};
use crate::support::process::Proc;
use crate::support::redis_server::RedisServer;
use crate::support::rlock::{self, assert_fails, code, output, rlock, sh, show, spawn, stdout};
use crate::support::scratch::Scratch;

/// The first build of the previous release compiles a whole crate: minutes on
/// a slow machine, far longer than any run of it.
const BUILD_LIMIT: &str = "1800";

/// The previous release's binary: `RLOCK_PREVIOUS_BIN`, else what
/// scripts/previous-rlock prints (building it once, cached across runs).
fn previous_bin() -> &'static str {
    static BIN: OnceLock<String> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(bin) = std::env::var("RLOCK_PREVIOUS_BIN")
            .ok()
            .filter(|b| !b.is_empty())
        {
            return bin;
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/previous-rlock");
        assert!(
            script.exists(),
            "{} is missing (not a git clone?): set RLOCK_PREVIOUS_BIN to the previous release's rlock",
            script.display()
        );
        let out = Command::new("timeout")
            .arg(BUILD_LIMIT)
            .arg(&script)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("{}: {e}", script.display()));
        assert!(
            out.status.success(),
            "{} failed ({:?}): {}",
            script.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    })
}

/// `rlock --url URL` of the previous release, with the same clean environment
/// as [`rlock`].
fn previous(url: &str) -> Command {
    let model = rlock(url);
    let mut cmd = Command::new(previous_bin());
    cmd.args(model.get_args());
    for (var, value) in model.get_envs() {
        match value {
            Some(value) => cmd.env(var, value),
            None => cmd.env_remove(var),
        };
    }
    cmd.stdin(Stdio::null());
    cmd
}

/// [`holder_by`] the earlier build: `run OPTS NAME` holding until
/// [`release`]`(dir, tag)`.
fn previous_holder(
    redis: &RedisServer,
    dir: &Scratch,
    opts: &[&str],
    name: &str,
    tag: &str,
) -> Proc {
    holder_by(previous(&redis.url()), dir, opts, name, tag)
}

/// Waits until `count` runs wait in NAME's queue (a key both layouts keep).
fn expect_waiting(redis: &RedisServer, name: &str, count: i64) {
    expect_within(
        rlock::LIMIT,
        &format!("{count} waiter(s) of {name}"),
        || redis.cmd::<i64>(&["ZCARD", &format!("rlock:{{{name}}}:waiters")]) >= count,
    );
}

fn exists(dir: &Scratch, file: &str) -> bool {
    Path::new(&dir.file(file)).exists()
}

fn exit_code(status: std::process::ExitStatus) -> Option<i32> {
    status.code()
}

#[test]
fn a_new_run_without_wait_finds_a_previous_hold_taken() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let mut old = previous_holder(&redis, &dir, &["--ttl", "60s"], "up-nowait", "old");
    let out = output(rlock(&redis.url()).args([
        "run",
        "-n",
        "up-nowait",
        "--",
        "touch",
        &dir.file("new.ran"),
    ]));
    assert_fails(&out, 75);
    assert!(
        !exists(&dir, "new.ran"),
        "COMMAND ran beside an earlier hold"
    );
    release(&dir, "old");
    assert_eq!(exit_code(old.wait_within(rlock::LIMIT)), Some(0));
}

#[test]
fn a_new_run_with_wait_runs_only_after_the_previous_holder_ended() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let mut old = previous_holder(&redis, &dir, &["--ttl", "60s"], "up-wait", "old");
    let new = spawn(
        rlock(&redis.url())
            .args(["run", "--wait", "30s", "up-wait", "--"])
            .args(sh(&timed_job(&dir, "new", "0.2"))),
    );
    expect_waiting(&redis, "up-wait", 1);
    assert!(
        !exists(&dir, "new.held"),
        "the new run started its COMMAND while an earlier rlock held the lock"
    );
    release(&dir, "old");
    assert_eq!(exit_code(old.wait_within(rlock::LIMIT)), Some(0));
    let out = new.output_within(rlock::LIMIT);
    assert_eq!(code(&out), 0, "{}", show(&out));
    let (_, old_end) = span(&dir, "old").expect("the earlier holder's span");
    let (new_start, _) = span(&dir, "new").expect("the new run's span");
    assert!(
        new_start >= old_end,
        "new COMMAND started at {new_start}, before the earlier holder ended at {old_end}"
    );
}

#[test]
fn status_reports_a_previous_hold_and_release_force_leaves_it() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let mut old = previous_holder(&redis, &dir, &["--ttl", "60s"], "up-status", "old");

    let out = output(rlock(&redis.url()).args(["status", "up-status"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let text = stdout(&out);
    assert!(
        text.contains("held by an earlier rlock version"),
        "status names the earlier version: {text}"
    );
    assert!(!text.contains("free"), "{text}");

    // --check: 0 while any NAME is held (1 would say free).
    let out = output(rlock(&redis.url()).args(["status", "--check", "up-status"]));
    assert_eq!(code(&out), 0, "held, for --check: {}", show(&out));

    let out = output(rlock(&redis.url()).args(["status", "--json", "up-status"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let json = stdout(&out);
    assert!(json.contains("\"held\":true"), "{json}");
    assert!(
        json.contains("\"earlier_version\":true"),
        "the holder is marked: {json}"
    );

    // release --force leaves an earlier version's hold to that version.
    let out = output(rlock(&redis.url()).args(["release", "--force", "up-status"]));
    let err = assert_fails(&out, 69);
    assert!(
        err.contains("up-status: the lock is held by an earlier rlock version"),
        "{err}"
    );
    assert!(!err.contains("unavailable"), "{err}");

    release(&dir, "old");
    assert_eq!(exit_code(old.wait_within(rlock::LIMIT)), Some(0));
}

#[test]
fn a_previous_hold_whose_rlock_died_ends_within_its_ttl() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let mut old = previous_holder(&redis, &dir, &["--ttl", "3s"], "up-dead", "old");
    // The earlier rlock dies without releasing; its COMMAND (looping until
    // released) is left behind, holding nothing any more after the lease.
    old.kill();
    let killed = crate::support::now_ms();
    let out = output(
        rlock(&redis.url())
            .args(["run", "--wait", "20s", "up-dead", "--"])
            .args(sh(&timed_job(&dir, "new", "0"))),
    );
    release(&dir, "old");
    assert_eq!(code(&out), 0, "{}", show(&out));
    let (new_start, _) = span(&dir, "new").expect("the new run's span");
    assert!(
        new_start < killed + 3_000 + 2_000,
        "taken {} ms after the earlier holder died, ttl 3 s",
        new_start - killed
    );
}

#[test]
fn a_previous_run_meeting_a_new_hold_exits_69_and_never_runs() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let mut new = holder(&redis, &dir, &["--ttl", "60s"], "up-closed", "new");

    let out = output(previous(&redis.url()).args([
        "run",
        "-n",
        "up-closed",
        "--",
        "touch",
        &dir.file("old-n.ran"),
    ]));
    assert_eq!(code(&out), 69, "earlier rlock, -n: {}", show(&out));
    assert!(!exists(&dir, "old-n.ran"), "the earlier rlock ran COMMAND");

    let out = output(previous(&redis.url()).args([
        "run",
        "--wait",
        "5s",
        "up-closed",
        "--",
        "touch",
        &dir.file("old-wait.ran"),
    ]));
    assert_eq!(code(&out), 69, "earlier rlock, --wait 5s: {}", show(&out));
    assert!(
        !exists(&dir, "old-wait.ran"),
        "the earlier rlock ran COMMAND"
    );

    assert!(new.try_status().is_none(), "the new holder kept running");
    release(&dir, "new");
    assert_eq!(exit_code(new.wait_within(rlock::LIMIT)), Some(0));
    assert!(
        span(&dir, "new").is_some(),
        "the new holder's COMMAND ended"
    );
    assert!(!exists(&dir, "old-n.ran") && !exists(&dir, "old-wait.ran"));
}

/// The outcome of an earlier rlock's waiting run beside a new holder's
/// [`timed_job`] "new": 69 without its COMMAND, or its COMMAND ran (exit 0)
/// wholly before or, when `only_after`, wholly after the new holder's.
fn assert_waiter_apart(dir: &Scratch, waiter: &std::process::Output, only_after: bool) {
    let (new_start, new_end) = span(dir, "new").expect("the new run's span");
    match code(waiter) {
        69 => assert!(
            !exists(dir, "waiter.held"),
            "the earlier waiter exited 69 but ran COMMAND: {}",
            show(waiter)
        ),
        0 => {
            let (start, end) = span(dir, "waiter").expect("the earlier waiter's span");
            assert!(
                start >= new_end || (!only_after && end <= new_start),
                "the earlier waiter ran {start}..{end}, the new holder {new_start}..{new_end}"
            );
        }
        other => panic!(
            "the earlier waiter: exit {other}, neither 69 nor its COMMAND: {}",
            show(waiter)
        ),
    }
    eprintln!(
        "earlier waiter: exit {:?}, ran {:?}; new ran {new_start}..{new_end}",
        waiter.status.code(),
        span(dir, "waiter")
    );
}

/// An earlier holder, then an earlier waiter and a new one in the order
/// `earlier_first` says, then the earlier holder's release: the new run
/// starts after the earlier holder ended, and the earlier waiter exits 69
/// without its COMMAND or runs it apart from the new one's (only after it,
/// when `only_after`).
fn queue_both(name: &str, earlier_first: bool, only_after: bool) {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let mut old = previous_holder(&redis, &dir, &["--ttl", "60s"], name, "old");
    let spawn_earlier = || {
        spawn(
            previous(&redis.url())
                .args(["run", "--wait", "60s", name, "--"])
                .args(sh(&timed_job(&dir, "waiter", "0.5"))),
        )
    };
    let spawn_new = || {
        spawn(
            rlock(&redis.url())
                .args(["run", "--wait", "30s", name, "--"])
                .args(sh(&timed_job(&dir, "new", "1"))),
        )
    };
    let (waiter, new) = if earlier_first {
        let waiter = spawn_earlier();
        expect_waiting(&redis, name, 1);
        (waiter, spawn_new())
    } else {
        let new = spawn_new();
        expect_waiting(&redis, name, 1);
        (spawn_earlier(), new)
    };
    expect_waiting(&redis, name, 2);
    release(&dir, "old");
    assert_eq!(exit_code(old.wait_within(rlock::LIMIT)), Some(0));

    let new = new.output_within(rlock::LIMIT);
    assert_eq!(code(&new), 0, "the new run: {}", show(&new));
    let waiter = waiter.output_within(Duration::from_secs(90));
    let (_, old_end) = span(&dir, "old").expect("the earlier holder's span");
    let (new_start, _) = span(&dir, "new").expect("the new run's span");
    assert!(
        new_start >= old_end,
        "new started before the earlier holder ended"
    );
    if let Some((start, _)) = span(&dir, "waiter") {
        assert!(start >= old_end, "the earlier waiter overlapped its holder");
    }
    assert_waiter_apart(&dir, &waiter, only_after);
}

/// The earlier waiter first in line: the earlier release may hand the lock
/// to its own kind's waiter first; whoever runs, no two COMMANDs overlap.
#[test]
fn a_previous_waiter_ahead_of_a_new_one_never_overlaps_it() {
    queue_both("up-queue", true, false);
}

/// The new waiter first in line: it takes the lock when the earlier holder is
/// done; the earlier waiter then exits 69 or runs only after it.
#[test]
fn a_previous_waiter_behind_a_new_holder_exits_69_or_runs_after_it() {
    queue_both("up-behind", false, true);
}
