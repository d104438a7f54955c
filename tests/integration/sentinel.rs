//! Sentinel (`redis+sentinel://`): a primary, a replica and three sentinels on
//! 127.0.0.1. rlock finds the master through the sentinels, and follows a
//! `SENTINEL FAILOVER`: a holder keeps its lock on the new master (or reports
//! it lost, exit 70), a waiter keeps waiting and runs after it, and two
//! COMMANDs never run at once unless the first one's loss was reported.

use std::time::Duration;

use crate::support::expect_within;
use crate::support::holder::{assert_rode_out, replicated_holder, span, timed_job};
use crate::support::rlock::{self, bare, code, output, sh, show, spawn};
use crate::support::scratch::Scratch;
use crate::support::sentinel::topology;

#[test]
fn the_master_is_found_through_the_sentinels() {
    let (primary, _replica, sentinels) = topology();
    let dir = Scratch::new();
    let file = dir.file("fence");
    let clock = primary.time_us();
    let out = output(
        bare()
            .args(["--url", &sentinels.url(), "run", "via-sentinel", "--"])
            .args(sh(&format!("echo $RLOCK_FENCE > {file}"))),
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
    let fence = dir.read("fence").trim().to_owned();
    assert!(
        fence.parse::<u64>().unwrap() > clock,
        "{fence} after {clock}"
    );
    assert_eq!(
        primary.cmd::<String>(&["GET", "rlock:{via-sentinel}:fence"]),
        fence,
        "taken on the primary"
    );
    let out = output(bare().args([
        "--url",
        &sentinels.url().replace("mymaster", "nosuch"),
        "run",
        "x",
        "--",
        "true",
    ]));
    assert_eq!(code(&out), 69, "{}", show(&out));
}

#[test]
fn a_failover_is_followed_by_the_holder_and_the_waiter() {
    let (primary, replica, sentinels) = topology();
    let dir = Scratch::new();
    let url = sentinels.url();
    let holder = spawn(
        bare()
            .args(["--url", &url, "run", "--ttl", "3s", "fo", "--"])
            .args(sh(&timed_job(&dir, "holder", "4"))),
    );
    expect_within(rlock::LIMIT, "the holder to hold", || {
        std::path::Path::new(&dir.file("holder.held")).exists()
    });
    let waiter = spawn(
        bare()
            .args(["--url", &url, "run", "--ttl", "3s", "fo", "--"])
            .args(sh(&timed_job(&dir, "waiter", "0.1"))),
    );
    expect_within(rlock::LIMIT, "the waiter to queue", || {
        primary.cmd::<i64>(&["ZCARD", "rlock:{fo}:waiters"]) == 1
    });
    // The lock's keys are on the replica before it is promoted.
    expect_within(rlock::LIMIT, "the lock to reach the replica", || {
        replica.cmd::<i64>(&["EXISTS", "rlock:{fo}:leases"]) == 1
    });
    expect_within(rlock::LIMIT, "the failover to start", || {
        sentinels.failover().is_some()
    });
    expect_within(rlock::LIMIT, "the replica to be the master", || {
        sentinels.master_port() == Some(replica.port)
    });
    let holder = holder.output_within(rlock::LIMIT);
    let waiter = waiter.output_within(rlock::LIMIT);
    let held = code(&holder);
    assert!(held == 0 || held == 70, "holder: {}", show(&holder));
    assert_eq!(
        code(&waiter),
        0,
        "the waiter kept waiting: {}",
        show(&waiter)
    );
    let w = span(&dir, "waiter").expect("the waiter ran");
    if held == 0 {
        let h = span(&dir, "holder").expect("the holder finished");
        assert!(
            h.1 <= w.0,
            "the waiter ran while the holder held: {h:?} {w:?}"
        );
    }
}

#[test]
fn a_lock_the_new_master_never_got_is_reported_lost() {
    let (primary, replica, sentinels) = topology();
    let dir = Scratch::new();
    let ticks = dir.file("ticks");
    let holder = spawn(
        bare()
            .args([
                "-v",
                "--url",
                &sentinels.url(),
                "run",
                "--ttl",
                "6s",
                "lost",
                "--",
            ])
            .args(sh(&format!(
                "while :; do echo t >> {ticks}; sleep 0.05; done"
            ))),
    );
    expect_within(rlock::LIMIT, "the lock on the replica", || {
        replica.cmd::<i64>(&["EXISTS", "rlock:{lost}:leases"]) == 1
    });
    // The replica loses the lock, as if the write had not reached it before
    // the failover: the primary, stalled, sends it no renewal meanwhile.
    primary.freeze();
    replica.cmd::<String>(&["CONFIG", "SET", "replica-read-only", "no"]);
    replica.cmd::<i64>(&["DEL", "rlock:{lost}:leases"]);
    expect_within(rlock::LIMIT, "the failover to start", || {
        sentinels.failover().is_some()
    });
    expect_within(rlock::LIMIT, "the replica to be the master", || {
        sentinels.master_port() == Some(replica.port)
    });
    let out = holder.output_within(rlock::LIMIT);
    primary.thaw();
    assert_eq!(code(&out), 70, "{}", show(&out));
    // The cause names the failover.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no longer ours (the master changed from 127.0.0.1:")
            && err.contains("the new master does not have the hold"),
        "{}",
        show(&out)
    );
}

/// The case operators meet at every planned maintenance: `SENTINEL FAILOVER`
/// while a lock is held, the old primary left running (it accepts writes for
/// seconds, until the sentinels demote it). The holder must follow the new
/// master: its replicated hold carries on there (it finishes 0, and probes
/// through the sentinels find the lock taken); a second holder is never
/// granted while the first runs on unreported.
#[test]
fn a_planned_failover_with_the_old_primary_still_writable_never_splits_the_lock() {
    let (_primary, replica, sentinels) = topology();
    let dir = Scratch::new();
    let url = sentinels.url();
    let mut holder = spawn(
        bare()
            .args(["--url", &url, "run", "--ttl", "3s", "split", "--"])
            .args(sh(&timed_job(&dir, "holder", "7"))),
    );
    expect_within(rlock::LIMIT, "the holder to hold", || {
        std::path::Path::new(&dir.file("holder.held")).exists()
    });
    expect_within(rlock::LIMIT, "the lock to reach the replica", || {
        replica.cmd::<i64>(&["EXISTS", "rlock:{split}:leases"]) == 1
    });
    expect_within(rlock::LIMIT, "the failover to start", || {
        sentinels.failover().is_some()
    });
    expect_within(rlock::LIMIT, "the replica to be the master", || {
        sentinels.master_port() == Some(replica.port)
    });
    // Probe through the sentinels while the holder runs. A probe that gets
    // the lock records when it held it, so a grant just after the holder's
    // own release (before the test sees the holder exit) is told apart.
    let mut taken = 0;
    let mut probes = 0;
    let mut granted = Vec::new();
    while holder.try_status().is_none() {
        probes += 1;
        let tag = format!("probe{probes}");
        let out = output(
            bare()
                .args(["--url", &url, "run", "--no-wait", "split", "--"])
                .args(sh(&timed_job(&dir, &tag, "0"))),
        );
        match code(&out) {
            0 => granted.push(tag),
            75 => taken += 1,
            // A probe that meets the failover itself.
            69 => {}
            other => panic!("probe exited {other}: {}", show(&out)),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = holder.output_within(rlock::LIMIT);
    // The holder's section ends when its job logs (never, if it was killed).
    let holder_end = span(&dir, "holder").map_or(u128::MAX, |(_, end)| end);
    let granted: Vec<(u128, u128)> = granted
        .iter()
        .filter_map(|tag| span(&dir, tag))
        .filter(|(start, _)| *start <= holder_end)
        .collect();
    if !granted.is_empty() {
        assert_eq!(
            code(&out),
            70,
            "a probe got the lock at {granted:?} while the holder ran unreported: {}",
            show(&out)
        );
        return;
    }
    assert_eq!(
        code(&out),
        0,
        "the replicated hold carries on: {}",
        show(&out)
    );
    assert!(taken > 0, "probes found the lock taken on the new master");
    assert_eq!(
        replica.cmd::<i64>(&["EXISTS", "rlock:{split}:leases"]),
        0,
        "released on the new master"
    );
}

/// `rlock check` through the sentinels: it checks the master they
/// name, and counts its replica.
#[test]
fn check_asks_the_master_the_sentinels_name() {
    let (primary, _replica, sentinels) = topology();
    let out = output(bare().args(["--url", &sentinels.url(), "check"]));
    // The fixtures run without AOF: persistence warns.
    assert_eq!(code(&out), 1, "{}", show(&out));
    let text = rlock::stdout(&out);
    let master = format!("127.0.0.1:{}", primary.port);
    let topology = text
        .lines()
        .find(|l| l.starts_with("ok      topology"))
        .unwrap_or_default();
    assert!(
        topology.contains("Sentinel: master mymaster") && topology.contains(&master),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("ok      replicas") && l.contains("1 replica")),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l.starts_with("warn    persistence")),
        "{text}"
    );
}

/// An unplanned failover (the master killed) of a hold that was replicated
/// (`--min-replicas 1`), with a ttl that rides the switch out: COMMAND runs on
/// to its end (exit 0) while the renewals follow the new master, and a
/// `--no-wait` probe through the sentinels meanwhile finds the lock taken
/// (75), never free.
#[test]
fn a_replicated_hold_rides_out_an_unplanned_failover() {
    let (mut primary, replica, sentinels) = topology();
    let dir = Scratch::new();
    let url = sentinels.url();
    let holder = replicated_holder(&url, &dir);
    primary.stop();
    expect_within(
        Duration::from_secs(20),
        "the replica to be the master",
        || sentinels.master_port() == Some(replica.port),
    );
    let out = assert_rode_out(holder, &url, &replica, &dir);
    assert!(
        rlock::stderr(&out).contains("the sentinels name a new master"),
        "{}",
        show(&out)
    );
}
