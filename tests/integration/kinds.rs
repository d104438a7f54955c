//! Lock kinds: shared (read/write), semaphores (--limit), fair FIFO queues,
//! re-entry and fencing across kinds.

use std::time::Duration;

use crate::support::holder::{holder, release};
use crate::support::lua::script;
use crate::support::process::Proc;
use crate::support::redis_server::RedisServer;
use crate::support::rlock::{self, code, output, rlock, sh, show, spawn, spawn_quiet, stdout};
use crate::support::scratch::Scratch;
use crate::support::{expect_within, now_ms};

/// (tag, start, end) from the log.
fn intervals(dir: &Scratch) -> Vec<(String, u128, u128)> {
    dir.lines("log")
        .iter()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (
                f[0].to_owned(),
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
            )
        })
        .collect()
}

fn waiters(redis: &RedisServer, name: &str) -> i64 {
    redis.cmd(&["ZCARD", &format!("rlock:{{{name}}}:waiters")])
}

#[test]
fn shared_holders_overlap_and_an_exclusive_run_waits_for_all_of_them() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    // All three hold at once: each returns only once it holds.
    let mut readers: Vec<Proc> = ["r1", "r2", "r3"]
        .iter()
        .map(|tag| holder(&redis, &dir, &["--shared"], "rw", tag))
        .collect();
    let ran = dir.file("writer");
    let mut writer = spawn(
        rlock(&redis.url())
            .args(["run", "rw", "--"])
            .args(sh(&format!("date +%s%3N > {ran}"))),
    );
    expect_within(rlock::LIMIT, "the writer to wait", || {
        waiters(&redis, "rw") == 1
    });
    for tag in ["r1", "r2", "r3"] {
        release(&dir, tag);
    }
    for reader in &mut readers {
        assert!(reader.wait_within(rlock::LIMIT).success());
    }
    assert!(writer.wait_within(rlock::LIMIT).success());
    let writer_start: u128 = dir.read("writer").trim().parse().unwrap();
    let last_reader_end = intervals(&dir).iter().map(|i| i.2).max().unwrap();
    assert!(
        writer_start >= last_reader_end,
        "the writer waited for every reader"
    );
}

#[test]
fn a_semaphore_admits_exactly_its_limit() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let log = dir.file("log");
    let script = format!("s=$(date +%s%N); sleep 0.2; echo \"x $s $(date +%s%N)\" >> {log}");
    let mut runs: Vec<Proc> = (0..8)
        .map(|_| {
            spawn_quiet(
                rlock(&redis.url())
                    .args(["run", "--limit", "3", "slots", "--"])
                    .args(sh(&script)),
            )
        })
        .collect();
    for run in &mut runs {
        assert!(run.wait_within(rlock::LIMIT).success());
    }
    let mut events: Vec<(u128, i32)> = Vec::new();
    for (_, start, end) in intervals(&dir) {
        events.push((start, 1));
        events.push((end, -1));
    }
    events.sort_by_key(|&(t, d)| (t, d));
    let (mut now, mut most) = (0, 0);
    for (_, d) in events {
        now += d;
        most = most.max(now);
    }
    assert_eq!(most, 3, "at most 3 at once, and 8 runs of 200 ms reach 3");
    assert_eq!(redis.lock_keys("slots"), Vec::<String>::new());
}

#[test]
fn callers_with_different_limits_never_exceed_the_smallest() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let _a = holder(&redis, &dir, &["--limit", "3"], "mixed", "a");
    let _b = holder(&redis, &dir, &["--limit", "3"], "mixed", "b");
    let out =
        output(rlock(&redis.url()).args(["run", "-n", "--limit", "2", "mixed", "--", "true"]));
    assert_eq!(
        code(&out),
        75,
        "two holders already fill a limit of 2: {}",
        show(&out)
    );
    let out =
        output(rlock(&redis.url()).args(["run", "-n", "--limit", "5", "mixed", "--", "true"]));
    assert_eq!(
        code(&out),
        0,
        "a third fits the holders' limit of 3: {}",
        show(&out)
    );
    let _c = holder(&redis, &dir, &["--limit", "5"], "mixed", "c");
    let out =
        output(rlock(&redis.url()).args(["run", "-n", "--limit", "5", "mixed", "--", "true"]));
    assert_eq!(
        code(&out),
        75,
        "a fourth exceeds the holders' limit of 3: {}",
        show(&out)
    );
    let out = output(rlock(&redis.url()).args(["run", "-n", "--shared", "mixed", "--", "true"]));
    assert_eq!(code(&out), 75, "kinds do not mix: {}", show(&out));
}

#[test]
fn a_writer_gets_in_while_new_readers_keep_arriving() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let _first = holder(&redis, &dir, &["--shared"], "busy", "first");
    let ran = dir.file("writer");
    let mut writer = spawn(
        rlock(&redis.url())
            .args(["run", "busy", "--"])
            .args(sh(&format!("date +%s%3N > {ran}"))),
    );
    expect_within(rlock::LIMIT, "the writer to wait", || {
        waiters(&redis, "busy") == 1
    });
    // New readers now queue behind the waiting writer instead of joining in.
    let mut late = spawn_quiet(rlock(&redis.url()).args(["run", "--shared", "busy", "--", "true"]));
    expect_within(rlock::LIMIT, "the late reader to queue", || {
        waiters(&redis, "busy") == 2
    });
    let released_at = now_ms();
    release(&dir, "first");
    assert!(writer.wait_within(rlock::LIMIT).success());
    assert!(late.wait_within(rlock::LIMIT).success());
    let writer_start: u128 = dir.read("writer").trim().parse().unwrap();
    assert!(
        writer_start >= released_at,
        "the writer ran after the first reader"
    );
}

#[test]
fn fair_waiters_acquire_in_arrival_order_across_kinds() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let _gate = holder(&redis, &dir, &[], "fifo", "gate");
    let order = dir.file("order");
    let kinds = [
        ("0", false),
        ("1", true),
        ("2", false),
        ("3", true),
        ("4", true),
    ];
    let mut runs = Vec::new();
    for (i, (tag, shared)) in kinds.iter().enumerate() {
        let mut cmd = rlock(&redis.url());
        cmd.args(["run", "--fair"]);
        if *shared {
            cmd.arg("--shared");
        }
        cmd.args(["fifo", "--"])
            .args(sh(&format!("echo {tag} >> {order}; sleep 0.05")));
        runs.push(spawn_quiet(&mut cmd));
        expect_within(rlock::LIMIT, "the waiter to queue", || {
            waiters(&redis, "fifo") == i as i64 + 1
        });
    }
    release(&dir, "gate");
    for run in &mut runs {
        assert!(run.wait_within(rlock::LIMIT).success());
    }
    let seen = dir.lines("order");
    assert_eq!(
        &seen[..3],
        ["0", "1", "2"],
        "strict arrival order: {seen:?}"
    );
    let mut tail = seen[3..].to_vec();
    tail.sort();
    assert_eq!(tail, ["3", "4"], "{seen:?}");
}

#[test]
fn a_killed_fair_waiter_holds_up_the_next_no_longer_than_its_ttl() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let mut gate = holder(&redis, &dir, &["--ttl", "60s"], "dead", "gate");
    let mut first = spawn_quiet(
        rlock(&redis.url()).args(["run", "--fair", "--ttl", "1s", "dead", "--", "true"]),
    );
    expect_within(rlock::LIMIT, "the first waiter", || {
        waiters(&redis, "dead") == 1
    });
    let mut second =
        spawn(rlock(&redis.url()).args(["run", "--fair", "--ttl", "60s", "dead", "--", "true"]));
    expect_within(rlock::LIMIT, "the second waiter", || {
        waiters(&redis, "dead") == 2
    });
    first.signal(libc::SIGKILL);
    first.wait_within(rlock::LIMIT);
    release(&dir, "gate");
    assert!(gate.wait_within(rlock::LIMIT).success());
    let status = second.wait_within(Duration::from_secs(10));
    assert!(
        status.success(),
        "the second waiter got in after the first's 1 s registration ran out"
    );
}

#[test]
fn a_crashed_semaphore_holder_frees_its_slot_within_its_ttl() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let _keep = holder(&redis, &dir, &["--limit", "2"], "pool", "keep");
    let mut crash = holder(
        &redis,
        &dir,
        &["--limit", "2", "--ttl", "1s"],
        "pool",
        "crash",
    );
    crash.signal(libc::SIGKILL);
    crash.wait_within(rlock::LIMIT);
    let out = output(
        rlock(&redis.url()).args(["run", "--limit", "2", "--wait", "5s", "pool", "--", "true"]),
    );
    assert_eq!(code(&out), 0, "the slot came back: {}", show(&out));
}

#[test]
fn reentry_and_fencing_follow_the_kind() {
    let redis = RedisServer::start();
    let bin = &crate::support::rlock::bin();
    let url = redis.url();
    let nested =
        |inner: &str| format!("{bin} --url {url} run -n {inner} k -- sh -c 'echo $RLOCK_FENCE'");
    let out = output(
        rlock(&url)
            .args(["run", "--shared", "k", "--"])
            .args(sh(&nested("--shared"))),
    );
    assert_eq!(code(&out), 0, "shared re-enters shared: {}", show(&out));
    let out = output(
        rlock(&url)
            .args(["run", "--shared", "k", "--"])
            .args(sh(&nested(""))),
    );
    let err = rlock::stderr(&out);
    assert_eq!(code(&out), 75, "{}", show(&out));
    assert!(err.contains("cannot be re-entered"), "{err}");
    let out = output(
        rlock(&url)
            .args(["run", "k", "--"])
            .args(sh(&nested("--shared"))),
    );
    assert_eq!(
        code(&out),
        0,
        "exclusive covers a nested shared run: {}",
        show(&out)
    );
    let mut last = 0u64;
    for opts in [&[][..], &["--shared"], &["--limit", "2"], &[]] {
        let out = output(
            rlock(&url)
                .arg("run")
                .args(opts)
                .args(["k", "--"])
                .args(sh("echo $RLOCK_FENCE")),
        );
        let fence: u64 = stdout(&out).trim().parse().unwrap();
        assert!(
            fence > last,
            "fences increase across kinds: {fence} after {last}"
        );
        last = fence;
    }
}

#[test]
fn an_unfair_reader_ahead_of_a_fair_writer_does_not_stall_the_queue() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let mut gate = holder(&redis, &dir, &["--ttl", "60s"], "mix", "gate");
    let mut reader = spawn_quiet(
        rlock(&redis.url()).args(["run", "--ttl", "60s", "--shared", "mix", "--", "true"]),
    );
    expect_within(rlock::LIMIT, "the reader to queue", || {
        waiters(&redis, "mix") == 1
    });
    let mut writer = spawn_quiet(
        rlock(&redis.url()).args(["run", "--ttl", "60s", "--fair", "mix", "--", "true"]),
    );
    expect_within(rlock::LIMIT, "the writer to queue", || {
        waiters(&redis, "mix") == 2
    });
    release(&dir, "gate");
    assert!(gate.wait_within(rlock::LIMIT).success());
    // Both are woken in turn: neither waits for a 30 s re-check.
    assert!(reader.wait_within(Duration::from_secs(10)).success());
    assert!(writer.wait_within(Duration::from_secs(10)).success());
}

#[test]
fn fair_semaphore_waiters_fill_every_slot_freed_at_once() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let mut a = holder(
        &redis,
        &dir,
        &["--limit", "2", "--ttl", "60s"],
        "fairpool",
        "a",
    );
    let mut b = holder(
        &redis,
        &dir,
        &["--limit", "2", "--ttl", "60s"],
        "fairpool",
        "b",
    );
    let mut queued = Vec::new();
    for i in 1..=2 {
        queued.push(spawn_quiet(rlock(&redis.url()).args([
            "run", "--fair", "--limit", "2", "--ttl", "60s", "fairpool", "--", "true",
        ])));
        expect_within(rlock::LIMIT, "the waiter to queue", || {
            waiters(&redis, "fairpool") == i
        });
    }
    release(&dir, "a");
    release(&dir, "b");
    assert!(a.wait_within(rlock::LIMIT).success());
    assert!(b.wait_within(rlock::LIMIT).success());
    // Each is woken, not left for its 30 s re-check.
    for waiter in &mut queued {
        assert!(waiter.wait_within(Duration::from_secs(10)).success());
    }
}

#[test]
fn a_fair_waiter_that_gives_up_lets_the_next_one_in_at_once() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let mut gate = holder(&redis, &dir, &["--ttl", "60s"], "quit", "gate");
    let first = spawn_quiet(
        rlock(&redis.url()).args(["run", "--fair", "--ttl", "60s", "quit", "--", "true"]),
    );
    expect_within(rlock::LIMIT, "the first waiter", || {
        waiters(&redis, "quit") == 1
    });
    let mut second = spawn_quiet(
        rlock(&redis.url()).args(["run", "--fair", "--ttl", "60s", "quit", "--", "true"]),
    );
    expect_within(rlock::LIMIT, "the second waiter", || {
        waiters(&redis, "quit") == 2
    });
    first.signal(libc::SIGINT);
    expect_within(rlock::LIMIT, "the first waiter to leave", || {
        waiters(&redis, "quit") == 1
    });
    release(&dir, "gate");
    assert!(gate.wait_within(rlock::LIMIT).success());
    assert!(second.wait_within(Duration::from_secs(10)).success());
}

fn acquire_semaphore(redis: &RedisServer, token: &str, register: &str) -> bool {
    let reply = script(
        redis,
        "acquire",
        "sem",
        token,
        &["", "60000", "host", "1", "cmd", register, "m", "2", "1"],
    );
    matches!(reply, redis::Value::Array(ref items) if items.first() == Some(&redis::Value::Int(1)))
}

#[test]
fn a_fair_semaphore_grant_passes_the_wake_up_to_the_next_waiter() {
    let redis = RedisServer::start();
    let [a, b, c, d] = ["a", "b", "c", "d"].map(|t| t.repeat(32));
    assert!(acquire_semaphore(&redis, &a, "0"));
    assert!(acquire_semaphore(&redis, &b, "0"));
    assert!(!acquire_semaphore(&redis, &c, "60000"), "full: c queues");
    assert!(
        !acquire_semaphore(&redis, &d, "60000"),
        "full: d queues behind c"
    );
    script(&redis, "release", "sem", &a, &[]);
    script(&redis, "release", "sem", &b, &[]);
    let d_list = format!("rlock:{{sem}}:w:{d}");
    // d is woken and tries first: c is ahead of it, so it is sent back...
    assert_eq!(
        redis.cmd::<Option<String>>(&["LPOP", &d_list]).as_deref(),
        Some("w")
    );
    assert!(!acquire_semaphore(&redis, &d, "60000"));
    // ...and c's grant wakes it again, with a slot still free.
    assert!(acquire_semaphore(&redis, &c, "60000"));
    assert_eq!(redis.cmd::<i64>(&["LLEN", &d_list]), 1, "d is woken again");
    assert!(acquire_semaphore(&redis, &d, "60000"));
}
