//! A dead holder is short-lived and visible: when rlock dies while COMMAND
//! runs, its guardian kills COMMAND's group and releases the hold, so the
//! next holder starts at once; `status` shows a holder's last renewal and
//! flags one that is overdue.

use std::time::Duration;

use crate::support::expect::assert_lines;
use crate::support::process::{Proc, alive, signal};
use crate::support::redis_server::RedisServer;
use crate::support::rlock::{self, code, rlock, sh, show, spawn, stdout};
use crate::support::scratch::Scratch;
use crate::support::{expect_within, now_ms};

#[test]
fn a_sigkilled_holders_next_holder_starts_within_a_second() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let mut holder = spawn(
        rlock(&redis.url())
            .args([
                "run",
                "--ttl",
                "30s",
                "--ready-file",
                &dir.file("ready"),
                "dead",
                "--",
            ])
            .args(sh(&format!("echo $$ > {}; sleep 60", dir.file("command")))),
    );
    expect_within(rlock::LIMIT, "COMMAND to start and the ready file", || {
        dir.read("command").trim().parse::<u32>().is_ok()
            && std::path::Path::new(&dir.file("ready")).exists()
    });
    let command: u32 = dir.read("command").trim().parse().unwrap();
    let waiter = spawn(
        rlock(&redis.url())
            .args(["run", "--wait", "30s", "dead", "--"])
            .args(sh(&format!("date +%s%3N > {}", dir.file("started")))),
    );
    expect_within(rlock::LIMIT, "the waiter to wait", || {
        redis.cmd::<i64>(&["ZCARD", "rlock:{dead}:waiters"]) == 1
    });
    let killed = now_ms();
    holder.kill();
    let out = waiter.output_within(rlock::LIMIT);
    assert_eq!(code(&out), 0, "{}", show(&out));
    let started: u128 = dir.read("started").trim().parse().unwrap();
    let after = started.saturating_sub(killed);
    assert!(
        after < 1000,
        "the waiter started {after} ms after the SIGKILL"
    );
    assert!(!alive(command), "COMMAND was killed with its rlock");
    // Removed before the release that let the waiter in.
    assert!(
        !std::path::Path::new(&dir.file("ready")).exists(),
        "the dead holder's ready file is gone"
    );
    // The history: the dead holder's end, then the waiter's run.
    let out = rlock::output(rlock(&redis.url()).args(["history", "dead", "--limit", "3"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert_lines(
        &stdout(&out),
        &format!(
            "[..]  released    pid [..] on [..] ('sh -c date [..]'), fence [..], held [..], exit 0\n\
             [..]  acquired    pid [..] on [..] ('sh -c date [..]'), fence [..], waited [..]\n\
             [..]  released    pid {} on [..] ('sh -c echo [..]', note 'rlock died while COMMAND ran; \
             its guardian killed COMMAND's process group and released the lock'), fence [..], held [..]",
            holder.pid
        ),
    );
}

/// A hold lost while COMMAND ran (its keys deleted, as a failover to a
/// replica that lacked them does), with rlock SIGKILLed before a renewal
/// could notice: nobody else can tell the holder, so the guardian's release
/// says the lock was lost, on rlock's stderr and in the history.
#[test]
fn a_sigkilled_holder_whose_hold_was_already_gone_is_told_by_its_guardian() {
    let redis = RedisServer::start();
    let (mut holder, command) = sleeping_holder(&redis, "30s", "gone");
    // Stopped first, so that no renewal finds the hold gone before the kill.
    signal(holder.pid, libc::SIGSTOP);
    for key in redis.lock_keys("gone") {
        let _: i64 = redis.cmd(&["DEL", &key]);
    }
    let pid = holder.pid;
    holder.kill();
    let out = holder.output_within(rlock::LIMIT);
    let err = rlock::stderr(&out);
    assert!(
        err.contains("gone: lock lost: it was no longer ours at release (")
            && err.contains(
                "so COMMAND may have run beside another holder \
                 (rlock had died; its guardian stopped COMMAND)"
            ),
        "{err}"
    );
    assert!(!alive(command), "COMMAND was killed with its rlock");
    let out = rlock::output(rlock(&redis.url()).args(["history", "gone", "--limit", "1"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert_lines(
        &stdout(&out),
        &format!(
            "[..]  lost        pid {} on [..] ('sh -c echo [..]', note 'lock lost: it was no longer \
             ours at release ([..]), so COMMAND may have run beside another holder (rlock had \
             died; its guardian stopped COMMAND)'), fence [..], held [..]",
            pid
        ),
    );
}

/// On a server promoted from a replica (a failover), the guardian's cause
/// names the failover among the possible ones: it never saw the switch.
#[test]
fn a_guardian_on_a_promoted_server_names_the_failover() {
    let (_old_primary, promoted) = RedisServer::with_replica();
    let _: String = promoted.cmd(&["REPLICAOF", "NO", "ONE"]);
    let (mut holder, _) = sleeping_holder(&promoted, "30s", "switched");
    signal(holder.pid, libc::SIGSTOP);
    for key in promoted.lock_keys("switched") {
        let _: i64 = promoted.cmd(&["DEL", &key]);
    }
    holder.kill();
    let err = rlock::stderr(&holder.output_within(rlock::LIMIT));
    assert_lines(
        &err,
        "rlock: switched: lock lost: it was no longer ours at release (released by force or \
         deleted by another client, or lost in a failover: the server neither restarted nor \
         evicted keys, and was promoted from a replica since it started), so COMMAND may have \
         run beside another holder (rlock had died; its guardian stopped COMMAND)",
    );
}

/// An rlock stopped past its lease: its guardian kills COMMAND before the
/// lease can end; killed then, it cannot say so itself, so the guardian
/// does, without claiming a loss that the deadlines ruled out.
#[test]
fn a_stopped_then_sigkilled_holder_is_told_its_lease_had_run_out() {
    let redis = RedisServer::start();
    let (mut holder, command) = sleeping_holder(&redis, "3s", "lapsed");
    signal(holder.pid, libc::SIGSTOP);
    expect_within(rlock::LIMIT, "the guardian to kill COMMAND", || {
        !alive(command)
    });
    expect_within(rlock::LIMIT, "the lease to lapse", || {
        redis.lock_keys("lapsed").is_empty()
    });
    holder.kill();
    let err = rlock::stderr(&holder.output_within(rlock::LIMIT));
    assert_lines(
        &err,
        "rlock: lapsed: the lease had run out by the guardian's release (rlock had died); \
         COMMAND was stopped before it could end",
    );
}

/// `status` of a holder whose rlock is stopped: the renewal it missed.
#[test]
fn status_flags_the_overdue_renewal_of_a_stopped_holder() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let holder = spawn(
        rlock(&redis.url())
            .args(["run", "--ttl", "10s", "stopped", "--"])
            .args(sh(&format!("touch {}; sleep 60", dir.file("ready")))),
    );
    let status = || {
        let out = rlock::output(rlock(&redis.url()).args(["status", "stopped"]));
        assert_eq!(code(&out), 0, "{}", show(&out));
        stdout(&out)
    };
    // Renewed every 0.9 s at most (a tenth of the lease's 9.2 s stretch).
    expect_within(rlock::LIMIT, "a renewal", || {
        status().contains(", renewed ")
    });
    signal(holder.pid, libc::SIGSTOP);
    let overdue = crate::support::wait_until(Duration::from_secs(8), || {
        status().contains(", renewal overdue by ")
    });
    let shown = status();
    let json = rlock::output(rlock(&redis.url()).args(["status", "--json", "stopped"]));
    signal(holder.pid, libc::SIGCONT);
    signal(holder.pid, libc::SIGTERM);
    holder.output_within(rlock::LIMIT);
    assert!(overdue, "{shown}");
    assert_lines(
        &shown,
        "server [..]\n\
         NAME    STATE      HOLDERS WAITING\n\
         stopped exclusive        1       0\n\
         \x20 pid [..] on [..] ('sh -c touch [..]') held for [..]s, lease left [..]s, renewal overdue by [..]s",
    );
    let json = stdout(&json);
    assert!(json.contains("\"renewed_ms_ago\":"), "{json}");
    assert!(!json.contains("\"renewal_overdue_ms\":0}"), "{json}");
}

/// A `file:` lock goes with its dead rlock's open files; its `--ready-file`
/// goes too, so a probe never sees the dead holder as the leader.
#[test]
fn a_sigkilled_file_holders_ready_file_is_removed() {
    let dir = Scratch::new();
    let ready = dir.file("ready");
    let mut holder = spawn(rlock(&format!("file:{}", dir.file("locks"))).args([
        "run",
        "--ready-file",
        &ready,
        "dead",
        "--",
        "sleep",
        "60",
    ]));
    expect_within(rlock::LIMIT, "the ready file", || {
        std::path::Path::new(&ready).exists()
    });
    holder.kill();
    expect_within(rlock::LIMIT, "the ready file to go", || {
        !std::path::Path::new(&ready).exists()
    });
}

/// The variable that starts a dead rlock's successor, set by hand, is
/// refused: nothing runs, nothing is released.
#[test]
fn a_handover_variable_set_by_hand_is_refused() {
    for value in ["x", "1", "3,5", "99"] {
        let out = rlock::output(
            rlock("redis://127.0.0.1:1")
                .env("RLOCK_HANDOVER_FD", value)
                .args(["run", "g", "--", "echo", "RAN"]),
        );
        assert_eq!(code(&out), 2, "{value}: {}", show(&out));
        assert_eq!(stdout(&out), "", "{value}: {}", show(&out));
        assert_lines(
            &rlock::stderr(&out),
            "rlock: RLOCK_HANDOVER_FD is rlock's own; unset it",
        );
    }
}

/// `rlock run --ttl TTL NAME -- sh -c '…; sleep 60'` holding, and COMMAND's pid.
fn sleeping_holder(redis: &RedisServer, ttl: &str, name: &str) -> (Proc, u32) {
    let dir = Scratch::new();
    let holder = spawn(
        rlock(&redis.url())
            .args(["run", "--ttl", ttl, name, "--"])
            .args(sh(&format!("echo $$ > {}; sleep 60", dir.file("command")))),
    );
    expect_within(rlock::LIMIT, "COMMAND to start", || {
        dir.read("command").trim().parse::<u32>().is_ok()
    });
    let command = dir.read("command").trim().parse().unwrap();
    (holder, command)
}
