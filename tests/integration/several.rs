//! Several NAMEs in one run: all or none, no deadlock, nothing partial left.

use crate::support::expect_within;
use crate::support::holder::hold;
use crate::support::process::Proc;
use crate::support::redis_server::RedisServer;
use crate::support::rlock::{self, code, output, rlock, sh, show, spawn, spawn_quiet, stdout};
use crate::support::scratch::Scratch;

#[test]
fn opposite_orders_neither_deadlock_nor_overlap() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    std::fs::write(dir.path().join("counter"), "0").unwrap();
    let script = format!(
        "s=$(date +%s%N); n=$(cat {c}); sleep 0.03; echo $((n+1)) > {c}; echo \"$s $(date +%s%N)\" >> {log}",
        c = dir.file("counter"),
        log = dir.file("intervals")
    );
    let mut runs: Vec<Proc> = (0..8)
        .map(|i| {
            let names = if i % 2 == 0 { ["a", "b"] } else { ["b", "a"] };
            spawn(
                rlock(&redis.url())
                    .args(["run", "--wait", "20s"])
                    .args(names)
                    .arg("--")
                    .args(sh(&script)),
            )
        })
        .collect();
    for run in &mut runs {
        assert!(
            run.wait_within(rlock::LIMIT).success(),
            "every run finishes"
        );
    }
    assert_eq!(dir.read("counter").trim(), "8");
    let mut intervals: Vec<(u128, u128)> = dir
        .lines("intervals")
        .iter()
        .map(|l| {
            let f: Vec<u128> = l.split_whitespace().map(|x| x.parse().unwrap()).collect();
            (f[0], f[1])
        })
        .collect();
    intervals.sort();
    for pair in intervals.windows(2) {
        assert!(pair[0].1 <= pair[1].0, "overlapping holds: {pair:?}");
    }
    assert_eq!(redis.lock_keys("a"), Vec::<String>::new());
    assert_eq!(redis.lock_keys("b"), Vec::<String>::new());
}

#[test]
fn all_or_none_leaves_no_partial_hold() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let _b = hold(&redis, &dir, "b");
    let out = output(rlock(&redis.url()).args(["run", "-n", "a", "b", "--", "true"]));
    let err = rlock::assert_fails(&out, 75);
    assert!(
        err.starts_with("rlock: b: "),
        "names the lock that was taken: {err}"
    );
    let out = output(rlock(&redis.url()).args(["run", "--wait", "300ms", "a", "b", "--", "true"]));
    rlock::assert_fails(&out, 75);
    assert_eq!(redis.lock_keys("a"), Vec::<String>::new(), "a is not held");
    assert_eq!(
        redis.lock_keys("b"),
        ["rlock:{b}:leases"],
        "no waiter left on b"
    );
}

#[test]
fn an_interrupt_while_waiting_for_one_of_several_leaves_nothing() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let _b = hold(&redis, &dir, "b");
    let waiter = spawn(rlock(&redis.url()).args(["run", "a", "b", "--", "true"]));
    expect_within(rlock::LIMIT, "the waiter to block on b", || {
        redis.cmd::<i64>(&["ZCARD", "rlock:{b}:waiters"]) == 1
    });
    waiter.signal(libc::SIGINT);
    let out = waiter.output_within(rlock::LIMIT);
    rlock::assert_fails(&out, 130);
    assert_eq!(redis.lock_keys("a"), Vec::<String>::new());
    assert_eq!(redis.lock_keys("b"), ["rlock:{b}:leases"]);
}

#[test]
fn command_sees_every_name_and_fence() {
    let redis = RedisServer::start();
    let out = output(
        rlock(&redis.url())
            .args(["run", "z", "y", "z", "--"])
            .args(sh("echo \"$RLOCK_NAME|$RLOCK_FENCE|$RLOCK_FENCES\"")),
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
    let [z, y] = ["z", "y"].map(|n| redis.cmd::<String>(&["GET", &format!("rlock:{{{n}}}:fence")]));
    assert_eq!(
        stdout(&out),
        format!("z y|{z}|z={z} y={y}\n"),
        "names as given, duplicates dropped"
    );
}

#[test]
fn losing_one_of_several_locks_stops_command_and_releases_the_others() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let ready = dir.file("ready");
    let holder = spawn(
        rlock(&redis.url())
            .args(["run", "--ttl", "1s", "p", "q", "--"])
            .args(sh(&format!("exec 2>/dev/null; touch {ready}; sleep 30"))),
    );
    expect_within(rlock::LIMIT, "COMMAND to start", || {
        std::path::Path::new(&ready).exists()
    });
    redis.cmd::<i64>(&["DEL", "rlock:{q}:leases"]);
    let out = holder.output_within(rlock::LIMIT);
    let err = rlock::assert_fails(&out, 70);
    assert!(err.starts_with("rlock: q: lock lost"), "{err}");
    assert_eq!(redis.lock_keys("p"), Vec::<String>::new(), "p was released");
}

#[test]
fn several_names_work_with_shared_and_limit() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let ready = dir.file("ready");
    let release = dir.file("release");
    let mut first = spawn_quiet(
        rlock(&redis.url())
            .args(["run", "--shared", "m", "n", "--"])
            .args(sh(&format!(
                "touch {ready}; while [ ! -e {release} ]; do sleep 0.02; done"
            ))),
    );
    expect_within(rlock::LIMIT, "the first shared holder", || {
        std::path::Path::new(&ready).exists()
    });
    let out = output(rlock(&redis.url()).args(["run", "-n", "--shared", "n", "m", "--", "true"]));
    assert_eq!(
        code(&out),
        0,
        "a second shared run holds both too: {}",
        show(&out)
    );
    let out = output(rlock(&redis.url()).args(["run", "-n", "m", "--", "true"]));
    assert_eq!(
        code(&out),
        75,
        "an exclusive run is kept out: {}",
        show(&out)
    );
    std::fs::write(&release, "").unwrap();
    assert!(first.wait_within(rlock::LIMIT).success());
    let out =
        output(rlock(&redis.url()).args(["run", "-n", "--limit", "2", "m", "n", "--", "true"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert_eq!(redis.lock_keys("m"), Vec::<String>::new());
    assert_eq!(redis.lock_keys("n"), Vec::<String>::new());
}
