//! Redlock: one lock over three independent redis-servers (several --url).
//! A quorum of two keeps it working with one server gone; with two gone it
//! refuses (69) at once; a holder whose majority stops answering stops COMMAND
//! in time (70); runs exclude each other and fences keep increasing while the
//! quorum changes.

use std::time::{Duration, Instant};

use crate::support::expect_within;
use crate::support::redis_server::RedisServer;
use crate::support::rlock::{self, assert_fails, bare, code, output, sh, show, spawn};
use crate::support::scratch::Scratch;

fn three() -> Vec<RedisServer> {
    (0..3).map(|_| RedisServer::start()).collect()
}

/// `rlock --url A --url B --url C`.
fn quorum(servers: &[&RedisServer]) -> std::process::Command {
    let mut cmd = bare();
    for server in servers {
        cmd.arg("--url").arg(server.url());
    }
    cmd
}

fn fence_of(servers: &[&RedisServer], dir: &Scratch) -> u64 {
    let file = dir.file("fence");
    let out = output(
        quorum(servers)
            .args(["run", "--ttl", "2s", "rl", "--"])
            .args(sh(&format!("echo $RLOCK_FENCE > {file}"))),
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
    dir.read("fence").trim().parse().unwrap()
}

#[test]
fn a_quorum_works_with_one_server_gone_and_refuses_with_two() {
    let mut servers = three();
    let dir = Scratch::new();
    let all: Vec<&RedisServer> = servers.iter().collect();
    assert_eq!(fence_of(&all, &dir), 1);
    drop(all);
    let gone = servers.pop().unwrap();
    let urls = [servers[0].url(), servers[1].url(), gone.url()];
    drop(gone);
    let run = |dir: &Scratch| {
        let mut cmd = bare();
        for url in &urls {
            cmd.arg("--url").arg(url);
        }
        output(
            cmd.args(["run", "rl", "--"])
                .args(sh(&format!("touch {}", dir.file("ran")))),
        )
    };
    let out = run(&dir);
    assert_eq!(code(&out), 0, "one of three gone: {}", show(&out));
    let second = servers.pop().unwrap();
    drop(second);
    let start = Instant::now();
    let dir2 = Scratch::new();
    let out = run(&dir2);
    let err = assert_fails(&out, 69);
    assert!(
        err.contains("no quorum: 1 of 3 servers answered, 2 needed"),
        "{err}"
    );
    assert!(start.elapsed() < Duration::from_secs(5), "refused at once");
    assert!(!std::path::Path::new(&dir2.file("ran")).exists());
    assert_eq!(
        servers[0].lock_keys("rl"),
        Vec::<String>::new(),
        "nothing left"
    );
}

#[test]
fn a_holder_whose_majority_stops_answering_stops_command_in_time() {
    let servers = three();
    let dir = Scratch::new();
    let all: Vec<&RedisServer> = servers.iter().collect();
    let ticks = dir.file("ticks");
    let holder = spawn(
        quorum(&all)
            .args(["run", "--ttl", "1500ms", "--kill-after", "1s", "rl", "--"])
            .args(sh(&format!(
                "while :; do date +%s%3N >> {ticks}; sleep 0.02; done"
            ))),
    );
    expect_within(rlock::LIMIT, "COMMAND to run", || {
        !dir.read("ticks").is_empty()
    });
    let stopped = crate::support::now_ms();
    servers[0].freeze();
    servers[1].freeze();
    let out = holder.output_within(rlock::LIMIT);
    servers[0].thaw();
    servers[1].thaw();
    assert_eq!(code(&out), 70, "{}", show(&out));
    let last: u128 = dir.lines("ticks").last().unwrap().trim().parse().unwrap();
    assert!(
        last <= stopped + 1500,
        "COMMAND worked {} ms after the majority stopped, past the 1.5 s lease",
        last - stopped
    );
}

#[test]
fn runs_exclude_each_other_and_fences_increase_while_the_quorum_changes() {
    let servers = three();
    let dir = Scratch::new();
    let all: Vec<&RedisServer> = servers.iter().collect();
    // Concurrent runs: one at a time.
    let log = dir.file("log");
    let runs: Vec<_> = (0..4)
        .map(|_| {
            spawn(quorum(&all).args(["run", "rl", "--"]).args(sh(&format!(
                "s=$(date +%s%N); sleep 0.05; echo \"$s $(date +%s%N) $RLOCK_FENCE\" >> {log}"
            ))))
        })
        .collect();
    for run in runs {
        let out = run.output_within(rlock::LIMIT);
        assert_eq!(code(&out), 0, "{}", show(&out));
    }
    let mut intervals: Vec<(u128, u128, u64)> = dir
        .lines("log")
        .iter()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
            )
        })
        .collect();
    intervals.sort();
    assert_eq!(intervals.len(), 4);
    for pair in intervals.windows(2) {
        assert!(pair[0].1 <= pair[1].0, "overlap: {pair:?}");
        assert!(pair[0].2 < pair[1].2, "fences: {pair:?}");
    }
    // Each run now has another server stopped: every quorum shares a server
    // with the one before, and the fences go on increasing.
    let mut last = intervals.last().unwrap().2;
    for (down, server) in servers.iter().enumerate() {
        server.freeze();
        let fence = fence_of(&all, &dir);
        server.thaw();
        assert!(
            fence > last,
            "fence {fence} after {last} with server {down} down"
        );
        last = fence;
    }
    // A request a stopped server ran only when it resumed holds no longer than
    // its 2 s lease.
    expect_within(Duration::from_secs(5), "nothing left", || {
        servers.iter().all(|s| s.lock_keys("rl").is_empty())
    });
}
