//! Redlock: one lock over three independent redis-servers (several --url).
//! A quorum of two keeps it working with one server gone; with two gone it
//! refuses (69) at once; a holder whose majority stops answering stops COMMAND
//! in time (70); runs exclude each other and fences keep increasing while the
//! quorum changes.

use std::time::{Duration, Instant};

use crate::support::expect_within;
use crate::support::quorum;
use crate::support::redis_server::RedisServer;
use crate::support::rlock::{self, assert_fails, bare, code, output, sh, show, spawn};
use crate::support::scratch::Scratch;

fn fence_of(servers: &[&RedisServer], dir: &Scratch) -> u64 {
    let file = dir.file("fence");
    let out = output(
        quorum::over(servers)
            .args(["run", "--ttl", "2s", "rl", "--"])
            .args(sh(&format!("echo $RLOCK_FENCE > {file}"))),
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
    dir.read("fence").trim().parse().unwrap()
}

#[test]
fn a_quorum_works_with_one_server_gone_and_refuses_with_two() {
    let mut servers = quorum::servers(3);
    let dir = Scratch::new();
    let all: Vec<&RedisServer> = servers.iter().collect();
    let clock = servers.iter().map(RedisServer::time_us).min().unwrap();
    let fence = fence_of(&all, &dir);
    assert!(
        fence > clock,
        "fence {fence} from the clock ({clock} before)"
    );
    drop(all);
    let gone = servers.pop().unwrap();
    let urls = [servers[0].url(), servers[1].url(), gone.url()];
    drop(gone);
    let run = |dir: &Scratch| {
        output(
            quorum::rlock(&urls)
                .args(["run", "--no-wait", "rl", "--"])
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
    let servers = quorum::servers(3);
    let dir = Scratch::new();
    let all: Vec<&RedisServer> = servers.iter().collect();
    let ticks = dir.file("ticks");
    let holder = spawn(
        quorum::over(&all)
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
    let servers = quorum::servers(3);
    let dir = Scratch::new();
    let all: Vec<&RedisServer> = servers.iter().collect();
    // Concurrent runs: one at a time.
    let log = dir.file("log");
    let runs: Vec<_> = (0..4)
        .map(|_| {
            spawn(
                quorum::over(&all)
                    .args(["run", "rl", "--"])
                    .args(sh(&format!(
                "s=$(date +%s%N); sleep 0.05; echo \"$s $(date +%s%N) $RLOCK_FENCE\" >> {log}"
            ))),
            )
        })
        .collect();
    for run in runs {
        let out = run.output_within(rlock::LIMIT);
        assert_eq!(code(&out), 0, "{}", show(&out));
    }
    let intervals = crate::support::assert_exclusive_with_fences(&dir, "log", 4);
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

/// A key of another type on one server: exit 69, and the holds taken on the
/// others are given back.
#[test]
fn a_foreign_key_on_one_server_leaves_no_hold_on_the_others() {
    let servers = quorum::servers(3);
    let all: Vec<&RedisServer> = servers.iter().collect();
    servers[1].cmd::<String>(&["SET", "rlock:{fk}:leases", "not-a-lock"]);
    let out = output(quorum::over(&all).args(["run", "--ttl", "60s", "fk", "--", "true"]));
    assert_eq!(code(&out), 69, "{}", show(&out));
    assert_eq!(
        servers[0].lock_keys("fk"),
        Vec::<String>::new(),
        "a hold was left on server 0 after exit 69: {}",
        show(&out)
    );
}

/// A nested run when the parent's quorum left one server out: it re-enters
/// with the parent's token where a quorum knows it, and nothing is left.
#[test]
fn a_nested_run_reenters_with_the_token_a_quorum_knows() {
    let servers = quorum::servers(3);
    let dir = Scratch::new();
    let all: Vec<&RedisServer> = servers.iter().collect();
    // The parent takes the lock while server 0 does not answer.
    servers[0].freeze();
    let go = dir.file("go");
    let inner_out = dir.file("inner");
    let urls: Vec<String> = servers
        .iter()
        .map(|s| format!("--url {}", s.url()))
        .collect();
    let script = format!(
        "while [ ! -e {go} ]; do sleep 0.05; done; \
         {bin} {urls} run --ttl 1500ms nest -- sleep 1.5; echo $? > {inner_out}",
        bin = crate::support::rlock::bin(),
        urls = urls.join(" "),
    );
    let parent = spawn(
        quorum::over(&all)
            .args(["run", "--ttl", "1500ms", "nest", "--"])
            .args(sh(&script)),
    );
    expect_within(
        rlock::LIMIT,
        "the parent to hold on servers 1 and 2",
        || {
            servers[1..]
                .iter()
                .all(|s| s.cmd::<i64>(&["EXISTS", "rlock:{nest}:leases"]) == 1)
        },
    );
    servers[0].thaw();
    std::fs::write(&go, "").unwrap();
    let out = parent.output_within(Duration::from_secs(30));
    let inner_status = dir.read("inner");
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert_eq!(inner_status.trim(), "0", "nested run: {}", show(&out));
    for (i, s) in servers.iter().enumerate() {
        assert_eq!(
            s.lock_keys("nest"),
            Vec::<String>::new(),
            "left on server {i}"
        );
    }
}

/// The README's ACL rules include SET, which lifting the fences needs; with a
/// server whose counter is ahead, fences still increase when the quorum changes.
#[test]
fn fences_keep_increasing_for_a_user_with_the_documented_acl_rules() {
    let servers = quorum::servers(3);
    let rules = crate::acl::RULES;
    let mut urls = Vec::new();
    for s in &servers {
        let mut args = vec!["ACL", "SETUSER", "locker", "on", ">pw"];
        args.extend_from_slice(rules);
        s.cmd::<String>(&args);
        urls.push(format!("redis://locker:pw@127.0.0.1:{}", s.port));
    }
    // Server 0 has handed out more fences before (its history differs), ahead
    // of the clocks: only lifting the other counters keeps fences increasing.
    let ahead = servers[0].time_us() + 3_600_000_000;
    servers[0].cmd::<String>(&["SET", "rlock:{f}:fence", &ahead.to_string()]);
    let dir = Scratch::new();
    let fence = |dir: &Scratch| {
        let file = dir.file("fence");
        let out = output(
            quorum::rlock(&urls)
                .args(["run", "f", "--"])
                .args(sh(&format!("echo $RLOCK_FENCE > {file}"))),
        );
        assert_eq!(code(&out), 0, "{}", show(&out));
        dir.read("fence").trim().parse::<u64>().unwrap()
    };
    let first = fence(&dir);
    assert_eq!(first, ahead + 1);
    servers[0].freeze();
    let second = fence(&dir);
    servers[0].thaw();
    assert!(second > first, "fence went from {first} to {second}");
}

/// With three of five password-protected servers stalled, reconnecting during
/// a renewal is bounded by the lease left: COMMAND stops within the lease.
#[test]
fn renewals_stay_within_the_lease_when_reconnecting_to_stalled_servers() {
    // A password (or a db) makes each new connection wait for a reply.
    let servers = quorum::servers_with(5, &["--requirepass", "pw"]);
    let dir = Scratch::new();
    let ticks = dir.file("ticks");
    let mut cmd = quorum::rlock(
        servers
            .iter()
            .map(|s| format!("redis://:pw@127.0.0.1:{}", s.port)),
    );
    let holder = spawn(
        cmd.args(["run", "--ttl", "3s", "--kill-after", "1s", "rl", "--"])
            .args(sh(&format!(
                "while :; do date +%s%3N >> {ticks}; sleep 0.02; done"
            ))),
    );
    crate::support::expect_within(Duration::from_secs(10), "COMMAND to run", || {
        !dir.read("ticks").is_empty()
    });
    let stopped = crate::support::now_ms();
    for s in &servers[2..] {
        s.freeze();
    }
    let out = holder.output_within(Duration::from_secs(30));
    for s in &servers[2..] {
        s.thaw();
    }
    assert_eq!(code(&out), 70, "{}", show(&out));
    let last: u128 = dir.lines("ticks").last().unwrap().trim().parse().unwrap();
    // No renewal after `stopped` reached a quorum: the lease ends by stopped + 3 s.
    assert!(
        last <= stopped + 3000,
        "COMMAND worked {} ms after the last possible confirmation, past the 3 s lease",
        last - stopped
    );
}

#[test]
fn semaphores_and_fair_queues_need_one_server() {
    let servers = quorum::servers(3);
    let all: Vec<&RedisServer> = servers.iter().collect();
    for opts in [&["--limit", "2"][..], &["--fair"]] {
        let out = output(
            quorum::over(&all)
                .arg("run")
                .args(opts)
                .args(["x", "--", "true"]),
        );
        let err = assert_fails(&out, 2);
        assert!(err.contains("need one server"), "{err}");
    }
}

/// `status` under Redlock shows what a quorum of servers agrees on, and says
/// when the servers disagree, instead of the first server's view.
#[test]
fn status_shows_the_quorums_view_and_says_when_servers_disagree() {
    let mut servers = quorum::servers(3);
    let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    let all = || quorum::rlock(&urls);
    let stdout = |out: &std::process::Output| String::from_utf8_lossy(&out.stdout).into_owned();
    let holders = |text: &str, name: &str| {
        let row = text
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} in {text}"));
        row.split_whitespace().nth(2).unwrap().to_owned()
    };
    // Held on every server: one holder, no disagreement.
    let held = output(all().args(["acquire", "--ttl", "30s", "everywhere"]));
    assert_eq!(code(&held), 0, "{}", show(&held));
    let out = output(all().args(["status", "--json", "everywhere"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let json = stdout(&out);
    assert!(json.contains("\"held\":true"), "{json}");
    assert!(
        json.contains(
            "\"servers\":{\"total\":3,\"answered\":3,\"agree\":true,\"disagreement\":null}"
        ),
        "{json}"
    );
    // Held on the first server only (taken there alone): no Redlock holder,
    // though the first server's own view has one.
    let minority = output(bare().args(["--url", &urls[0], "acquire", "--ttl", "30s", "first"]));
    assert_eq!(code(&minority), 0, "{}", show(&minority));
    let out = output(all().args(["status", "first"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let text = stdout(&out);
    assert_eq!(holders(&text, "first"), "0", "no holder: {text}");
    assert!(
        text.contains("servers disagree: pid")
            && text.contains("holds it on 1 of 3 servers (not a quorum: not a holder)"),
        "{text}"
    );
    let out = output(all().args(["status", "--json", "first"]));
    assert!(stdout(&out).contains("\"held\":false"), "{}", show(&out));
    assert!(stdout(&out).contains("\"agree\":false"), "{}", show(&out));
    // One server gone: the quorum still answers, and says which did not.
    drop(servers.remove(2));
    let out = output(all().args(["status", "everywhere"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let text = stdout(&out);
    assert!(text.contains("1 of 3 servers did not answer"), "{text}");
    assert_eq!(holders(&text, "everywhere"), "1", "still held: {text}");
}
