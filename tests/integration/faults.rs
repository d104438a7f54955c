//! Crashes and stalls: rlock SIGKILLed, the lock flushed, redis-server stopped,
//! and fixed leases that run out. COMMAND must be stopped in time (exit 70) and
//! the lock must free itself.

use std::time::Duration;

use crate::support::expect::assert_lines;
use crate::support::process::{Proc, alive};
use crate::support::redis_server::RedisServer;
use crate::support::rlock::{self, code, rlock, sh, show, spawn};
use crate::support::scratch::Scratch;
use crate::support::{expect_within, now_ms};

/// COMMAND that records its pid, then on SIGTERM the time it got it, and exits 1.
/// (Its shell's own "Terminated" notice is silenced, so stderr is rlock's alone.)
fn trapping(dir: &Scratch) -> String {
    format!(
        "exec 2>/dev/null; trap 'date +%s%3N > {term}; exit 1' TERM; echo $$ > {pid}; while :; do sleep 0.02; done",
        term = dir.file("term"),
        pid = dir.file("pid"),
    )
}

/// Starts `rlock run OPTS NAME` with the [`trapping`] COMMAND; returns once
/// COMMAND runs.
fn trapping_holder(redis: &RedisServer, dir: &Scratch, opts: &[&str], name: &str) -> Proc {
    let holder = spawn(
        rlock(&redis.url())
            .arg("run")
            .args(opts)
            .args([name, "--"])
            .args(sh(&trapping(dir))),
    );
    command_pid(dir);
    holder
}

/// When the trapping COMMAND got SIGTERM (ms since the epoch).
fn term_time(dir: &Scratch) -> u128 {
    dir.read("term")
        .trim()
        .parse()
        .expect("COMMAND got SIGTERM")
}

fn command_pid(dir: &Scratch) -> u32 {
    expect_within(rlock::LIMIT, "COMMAND to start", || {
        !dir.read("pid").trim().is_empty()
    });
    dir.read("pid").trim().parse().unwrap()
}

#[test]
fn killing_rlock_kills_command_and_the_lock_frees_within_the_ttl() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let script = format!("echo $$ > {}; exec sleep 60", dir.file("pid"));
    let mut holder = spawn(
        rlock(&redis.url())
            .args(["run", "--ttl", "2s", "crash", "--"])
            .args(sh(&script)),
    );
    let pid = command_pid(&dir);
    holder.signal(libc::SIGKILL);
    holder.wait_within(rlock::LIMIT);
    expect_within(Duration::from_secs(5), "COMMAND to die with rlock", || {
        !alive(pid)
    });
    let mut waiter =
        spawn(rlock(&redis.url()).args(["run", "--wait", "10s", "crash", "--", "true"]));
    let status = waiter.wait_within(rlock::LIMIT);
    assert!(
        status.success(),
        "the lock frees itself within the ttl: {status:?}"
    );
}

#[test]
fn killing_rlock_kills_what_command_started_too() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    // A shell that forks a grandchild (not exec'd) and waits for it.
    let script = format!(
        "sleep 60 & echo $! > {}; echo $$ > {}; wait",
        dir.file("grandchild"),
        dir.file("pid")
    );
    let mut holder = spawn(
        rlock(&redis.url())
            .args(["run", "tree", "--"])
            .args(sh(&script)),
    );
    let pid = command_pid(&dir);
    expect_within(rlock::LIMIT, "the grandchild to start", || {
        !dir.read("grandchild").trim().is_empty()
    });
    let grandchild: u32 = dir.read("grandchild").trim().parse().unwrap();
    holder.signal(libc::SIGKILL);
    holder.wait_within(rlock::LIMIT);
    expect_within(Duration::from_secs(5), "COMMAND to die with rlock", || {
        !alive(pid)
    });
    expect_within(Duration::from_secs(5), "COMMAND's child to die too", || {
        !alive(grandchild)
    });
}

#[test]
fn flushed_lock_stops_command_at_the_next_renewal() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let holder = trapping_holder(&redis, &dir, &["--ttl", "1s"], "flushed");
    redis.cmd::<String>(&["FLUSHALL"]);
    let flushed_at = now_ms();
    let out = holder.output_within(rlock::LIMIT);
    let err = rlock::assert_fails(&out, 70);
    assert_lines(
        &err,
        "rlock: flushed: lock lost: the server says it is no longer ours \
         (released by force or deleted by another client: \
         the server neither restarted nor evicted keys); COMMAND was stopped",
    );
    let term_at = term_time(&dir);
    // The next renewal (every ttl/3) finds the lock gone; allow the shell's reaction.
    assert!(
        term_at <= flushed_at + 1000,
        "SIGTERM {} ms after the flush",
        term_at - flushed_at
    );
}

#[test]
fn stalled_server_stops_command_before_the_lease_can_expire() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let holder = trapping_holder(&redis, &dir, &["--ttl", "1s"], "stalled");
    redis.freeze();
    let frozen_at = now_ms();
    let out = holder.output_within(rlock::LIMIT);
    redis.thaw();
    // One line: the loss, with the renewals' cause.
    assert_eq!(rlock::code(&out), 70, "{}", rlock::show(&out));
    let err = rlock::stderr(&out);
    assert_lines(
        &err,
        &format!(
            "rlock: stalled: lock lost: lease could not be renewed before it expired \
             (stalled: server 127.0.0.1:{} unavailable: no reply within [..]ms); \
             COMMAND was stopped",
            redis.port
        ),
    );
    let term_at = term_time(&dir);
    // Every confirmed renewal was sent before the freeze, so the lease could end
    // no later than freeze + ttl; the margin covers the trap's own reaction.
    assert!(
        term_at <= frozen_at + 1000 + 200,
        "SIGTERM {} ms after the freeze",
        term_at - frozen_at
    );
}

#[test]
fn fixed_lease_stops_command_when_it_ends() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let holder = trapping_holder(&redis, &dir, &["--lease", "500ms"], "leased");
    let out = holder.output_within(rlock::LIMIT);
    let err = rlock::assert_fails(&out, 70);
    assert_lines(
        &err,
        "rlock: leased: lease of 500ms ended; COMMAND was stopped",
    );
    assert!(!dir.read("term").is_empty(), "COMMAND got SIGTERM");
    // The key was never renewed, so it is gone by now.
    assert_eq!(redis.lock_keys("leased"), Vec::<String>::new());
}

#[test]
fn command_ignoring_sigterm_is_killed_after_kill_after() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let script = format!(
        "trap '' TERM; echo $$ > {}; while :; do sleep 0.02; done",
        dir.file("pid")
    );
    let holder = spawn(
        rlock(&redis.url())
            .args([
                "run",
                "--lease",
                "300ms",
                "--kill-after",
                "300ms",
                "stubborn",
                "--",
            ])
            .args(sh(&script)),
    );
    let pid = command_pid(&dir);
    let out = holder.output_within(rlock::LIMIT);
    assert_eq!(code(&out), 70, "{}", show(&out));
    assert!(!alive(pid), "COMMAND was killed");
}

#[test]
fn a_lost_lease_kills_group_members_that_ignore_sigterm() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let script = format!(
        "exec 2>/dev/null; (trap '' TERM; sleep 60) & echo $! > {}; echo $$ > {}; sleep 60",
        dir.file("stubborn"),
        dir.file("pid")
    );
    let holder = spawn(
        rlock(&redis.url())
            .args([
                "run",
                "--lease",
                "300ms",
                "--kill-after",
                "300ms",
                "group",
                "--",
            ])
            .args(sh(&script)),
    );
    command_pid(&dir);
    let stubborn: u32 = dir.read("stubborn").trim().parse().unwrap();
    let out = holder.output_within(rlock::LIMIT);
    assert_eq!(code(&out), 70, "{}", show(&out));
    assert!(
        !alive(stubborn),
        "the member that ignored SIGTERM was killed"
    );
}

#[test]
fn a_lease_lost_while_leftovers_run_stops_them_and_exits_70() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    // COMMAND exits as soon as it has left behind a process that ignores SIGTERM.
    let script = format!(
        "exec 2>/dev/null; (trap '' TERM; while :; do echo t >> {ticks}; sleep 0.02; done) & \
         echo $! > {pid}; while [ ! -s {ticks} ]; do sleep 0.01; done",
        ticks = dir.file("ticks"),
        pid = dir.file("pid"),
    );
    let holder = spawn(
        rlock(&redis.url())
            .args([
                "run",
                "--ttl",
                "1s",
                "--kill-after",
                "3s",
                "leftover-lost",
                "--",
            ])
            .args(sh(&script)),
    );
    let leftover = command_pid(&dir);
    expect_within(rlock::LIMIT, "the leftover to run", || {
        !dir.read("ticks").is_empty()
    });
    redis.cmd::<String>(&["FLUSHALL"]);
    let out = holder.output_within(rlock::LIMIT);
    assert_eq!(
        code(&out),
        70,
        "work ran on without the lock: {}",
        show(&out)
    );
    assert!(!alive(leftover), "the leftover was killed");
}

/// A TCP proxy on 127.0.0.1 to `port` that holds every chunk for `delay`
/// before passing it on, both ways: a slow link to a real server. Returns
/// its port; it lives as long as the test process.
fn slow_link(port: u16, delay: Duration) -> u16 {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(server) = TcpStream::connect(("127.0.0.1", port)) else {
                continue;
            };
            let pipe = |mut from: TcpStream, mut to: TcpStream| {
                std::thread::spawn(move || {
                    let mut buf = [0u8; 16384];
                    while let Ok(n @ 1..) = from.read(&mut buf) {
                        std::thread::sleep(delay);
                        if to.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = to.shutdown(std::net::Shutdown::Both);
                });
            };
            pipe(client.try_clone().unwrap(), server.try_clone().unwrap());
            pipe(server, client);
        }
    });
    proxy
}

/// A round trip longer than the lease allows (renewals must be
/// confirmed within a third of it) is said as such, not as a partial
/// acquisition that could not be released.
#[test]
fn a_link_too_slow_for_the_lease_is_said_as_such() {
    let redis = RedisServer::start();
    let port = slow_link(redis.port, Duration::from_millis(600));
    let url = format!("redis://127.0.0.1:{port}");
    let out = rlock::output(
        rlock::bare()
            .args(["--url", &url, "--connect-timeout", "5s"])
            .args(["run", "--ttl", "3s", "slow", "--", "true"]),
    );
    let err = rlock::assert_fails(&out, 69);
    assert_lines(
        &err,
        &format!(
            "rlock: slow: server 127.0.0.1:{port} unavailable: no reply within 999ms; \
             the acquisition took [..]s and --ttl 3s needs replies within 1s: use a longer --ttl"
        ),
    );
    expect_within(rlock::LIMIT, "the hold given back", || {
        redis
            .lock_keys("slow")
            .iter()
            .all(|k| k.ends_with(":fence"))
    });
    // A lease long enough for the link works.
    let out = rlock::output(
        rlock::bare()
            .args(["--url", &url, "--connect-timeout", "5s"])
            .args(["run", "--ttl", "10s", "slow", "--", "true"]),
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
}
