//! What a run tells systemd (a datagram socket bound here as NOTIFY_SOCKET,
//! read the way systemd reads it) and its `--ready-file`, across a wait, a
//! hold, a release and a loss.

use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::expect_within;
use crate::support::holder::{go, hold, release, until_go};
use crate::support::process::Proc;
use crate::support::redis_server::RedisServer;
use crate::support::rlock::{self, assert_fails, code, output, rlock, sh, show, spawn};
use crate::support::scratch::Scratch;

/// systemd's end of the notification socket.
struct Systemd {
    socket: UnixDatagram,
    path: String,
    /// Every message read so far, in order.
    seen: Vec<String>,
}

impl Systemd {
    fn bind(dir: &Scratch) -> Self {
        let path = dir.file("notify");
        let socket = UnixDatagram::bind(&path).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        Systemd {
            socket,
            path,
            seen: Vec::new(),
        }
    }

    /// Reads what came, until `deadline`.
    fn read_until(&mut self, deadline: Instant) {
        let mut buf = [0u8; 4096];
        while Instant::now() < deadline {
            if let Ok(n) = self.socket.recv(&mut buf) {
                self.seen
                    .push(String::from_utf8_lossy(&buf[..n]).into_owned());
            }
        }
    }

    /// Reads until a message `what` matches, within `within`; returns its
    /// index in [`Systemd::seen`].
    fn expect(&mut self, within: Duration, what: &str, pred: impl Fn(&str) -> bool) -> usize {
        let deadline = Instant::now() + within;
        let mut buf = [0u8; 4096];
        loop {
            if let Some(i) = self.seen.iter().position(|m| pred(m)) {
                return i;
            }
            assert!(
                Instant::now() < deadline,
                "no message {what} within {within:?}; seen: {:#?}",
                self.seen
            );
            if let Ok(n) = self.socket.recv(&mut buf) {
                self.seen
                    .push(String::from_utf8_lossy(&buf[..n]).into_owned());
            }
        }
    }

    /// The messages from index `from` on with an assignment `line`.
    fn count(&self, from: usize, line: &str) -> usize {
        self.seen[from..]
            .iter()
            .filter(|m| m.lines().any(|l| l == line))
            .count()
    }
}

fn has(message: &str, line: &str) -> bool {
    message.lines().any(|l| l == line)
}

fn status(message: &str) -> Option<&str> {
    message.lines().find_map(|l| l.strip_prefix("STATUS="))
}

/// `rlock run` of `name` under systemd, whose COMMAND runs until [`go`].
fn standby(
    redis: &RedisServer,
    dir: &Scratch,
    systemd: &Systemd,
    opts: &[&str],
) -> std::process::Command {
    let mut cmd = rlock(&redis.url());
    cmd.env("NOTIFY_SOCKET", &systemd.path)
        .arg("run")
        .args(opts)
        .arg("svc")
        .arg("--")
        .args(sh(&until_go(dir)));
    cmd
}

#[test]
fn a_standby_says_what_it_waits_for_and_is_ready_only_once_it_holds() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let mut systemd = Systemd::bind(&dir);
    let first = hold(&redis, &dir, "svc");
    let ready = dir.file("ready");
    let run = spawn(&mut standby(
        &redis,
        &dir,
        &systemd,
        &["--ready-file", &ready],
    ));
    let waiting = format!("waiting for svc: held by pid {} on ", first.pid);
    let i = systemd.expect(rlock::LIMIT, "saying it waits", |m| {
        status(m).is_some_and(|s| s.starts_with(&waiting))
    });
    let extend = systemd.seen[i]
        .lines()
        .find_map(|l| l.strip_prefix("EXTEND_TIMEOUT_USEC="))
        .unwrap_or_else(|| panic!("no EXTEND_TIMEOUT_USEC: {:?}", systemd.seen[i]));
    assert!(extend.parse::<u64>().unwrap() >= 30_000_000, "{extend}");
    assert!(
        !Path::new(&ready).exists(),
        "the ready file exists while waiting"
    );
    assert_eq!(systemd.count(0, "READY=1"), 0, "{:#?}", systemd.seen);
    release(&dir, "svc");
    let held = systemd.expect(rlock::LIMIT, "READY=1", |m| has(m, "READY=1"));
    let holding = status(&systemd.seen[held]).unwrap_or_default();
    assert!(holding.starts_with("holding svc since "), "{holding}");
    assert!(holding.contains(", fence "), "{holding}");
    expect_within(rlock::LIMIT, "the ready file", || {
        Path::new(&ready).exists()
    });
    let content = std::fs::read_to_string(&ready).unwrap();
    assert!(
        content.contains("\nRLOCK_NAME=svc\nRLOCK_FENCE="),
        "{content}"
    );
    assert!(
        content.starts_with(&format!("RLOCK_PID={}\n", run.pid)),
        "{content}"
    );
    assert!(!content.contains("TOKEN"), "{content}");
    go(&dir);
    let out = run.output_within(rlock::LIMIT);
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert!(
        !Path::new(&ready).exists(),
        "the ready file outlived the run"
    );
    let stopping = systemd.expect(rlock::LIMIT, "STOPPING=1", |m| has(m, "STOPPING=1"));
    assert!(stopping > held, "{:#?}", systemd.seen);
    systemd.read_until(Instant::now() + Duration::from_millis(200));
    assert_eq!(systemd.count(0, "READY=1"), 1, "{:#?}", systemd.seen);
    assert_eq!(systemd.count(0, "WATCHDOG=1"), 0, "{:#?}", systemd.seen);
}

#[test]
fn notify_ready_start_says_ready_before_the_lock_is_held() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let mut systemd = Systemd::bind(&dir);
    let _first = hold(&redis, &dir, "svc");
    let mut cmd = standby(&redis, &dir, &systemd, &[]);
    let _run = spawn(cmd.env("RLOCK_NOTIFY_READY", "start"));
    systemd.expect(rlock::LIMIT, "saying it waits", |m| {
        status(m).is_some_and(|s| s.starts_with("waiting for svc: held by pid "))
    });
    assert!(has(&systemd.seen[0], "READY=1"), "{:#?}", systemd.seen);
    // Started already: nothing to extend.
    assert!(
        systemd
            .seen
            .iter()
            .all(|m| !m.contains("EXTEND_TIMEOUT_USEC=")),
        "{:#?}",
        systemd.seen
    );
}

/// While renewals fail during a hold, STATUS= says so (how long, why)
/// without a WATCHDOG=1; the first confirmed renewal puts the hold's
/// STATUS= back.
#[test]
fn a_hold_whose_renewals_fail_says_so_in_its_status_until_one_gets_through() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let mut systemd = Systemd::bind(&dir);
    let mut cmd = standby(&redis, &dir, &systemd, &[]);
    // Renewals every 0.5 s (half the watchdog's interval).
    let run = spawn(cmd.env("WATCHDOG_USEC", "1000000"));
    let held = systemd.expect(rlock::LIMIT, "READY=1", |m| has(m, "READY=1"));
    let holding = status(&systemd.seen[held]).unwrap().to_owned();
    assert!(holding.starts_with("holding svc since "), "{holding}");
    redis.freeze();
    let failing = systemd.expect(rlock::LIMIT, "renewals failing", |m| {
        status(m).is_some_and(|s| s.starts_with(&format!("{holding}; renewals failing for ")))
    });
    assert!(
        !systemd.seen[failing].lines().any(|l| l == "WATCHDOG=1"),
        "{:#?}",
        systemd.seen
    );
    redis.thaw();
    // What came after the failing status only.
    systemd.seen.drain(..=failing);
    systemd.expect(rlock::LIMIT, "the hold's status again", |m| {
        status(m) == Some(holding.as_str())
    });
    go(&dir);
    let out = run.output_within(rlock::LIMIT);
    assert_eq!(code(&out), 0, "{}", show(&out));
}

#[test]
fn the_watchdog_hears_of_each_answer_and_each_renewal_and_of_nothing_else() {
    let mut redis = RedisServer::start();
    let dir = Scratch::new();
    let mut systemd = Systemd::bind(&dir);
    let _first = hold(&redis, &dir, "svc");
    // 1 s: an answer every 0.5 s while waiting, a renewal every 0.5 s while
    // holding (the default --ttl renews every 2.3 s: more often, then).
    let mut cmd = standby(&redis, &dir, &systemd, &[]);
    let run = spawn(cmd.env("WATCHDOG_USEC", "1000000"));
    systemd.expect(rlock::LIMIT, "saying it waits", |m| has(m, "WATCHDOG=1"));
    let from = systemd.seen.len();
    systemd.read_until(Instant::now() + Duration::from_millis(2100));
    let pings = systemd.count(from, "WATCHDOG=1");
    assert!(
        pings >= 3,
        "{pings} pings in 2.1 s of waiting: {:#?}",
        systemd.seen
    );
    // A server that does not answer: no sign of progress, no ping.
    redis.freeze();
    systemd.read_until(Instant::now() + Duration::from_millis(300));
    let from = systemd.seen.len();
    systemd.read_until(Instant::now() + Duration::from_millis(1500));
    let frozen = systemd.count(from, "WATCHDOG=1");
    redis.thaw();
    assert_eq!(
        frozen, 0,
        "pinged while the server was stopped: {:#?}",
        systemd.seen
    );
    release(&dir, "svc");
    let held = systemd.expect(rlock::LIMIT, "READY=1", |m| has(m, "READY=1"));
    systemd.read_until(Instant::now() + Duration::from_millis(2100));
    let renewals = systemd.count(held + 1, "WATCHDOG=1");
    assert!(
        renewals >= 3,
        "{renewals} pings in 2.1 s of holding: {:#?}",
        systemd.seen
    );
    go(&dir);
    let out = run.output_within(rlock::LIMIT);
    assert_eq!(code(&out), 0, "{}", show(&out));
    let _ = &mut redis;
}

#[test]
fn a_watchdog_meant_for_another_process_is_not_pinged() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let mut systemd = Systemd::bind(&dir);
    go(&dir);
    let mut cmd = standby(&redis, &dir, &systemd, &[]);
    let out = output(cmd.env("WATCHDOG_USEC", "1000000").env("WATCHDOG_PID", "1"));
    assert_eq!(code(&out), 0, "{}", show(&out));
    systemd.expect(rlock::LIMIT, "STOPPING=1", |m| has(m, "STOPPING=1"));
    assert_eq!(systemd.count(0, "READY=1"), 1, "{:#?}", systemd.seen);
    assert_eq!(systemd.count(0, "WATCHDOG=1"), 0, "{:#?}", systemd.seen);
}

#[test]
fn under_systemd_the_progress_log_says_the_start_and_each_new_holder_only() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let systemd = Systemd::bind(&dir);
    let first = hold(&redis, &dir, "svc");
    // The next holder: first in line, so the release hands it the lock.
    let next = holder_queued(&redis, &dir);
    let log = dir.file("stderr");
    let mut cmd = standby(&redis, &dir, &systemd, &[]);
    cmd.env("RLOCK_PROGRESS_INTERVAL", "0.2")
        .stderr(std::fs::File::create(&log).unwrap());
    let mut run = Proc::new(cmd.stdout(std::process::Stdio::null()).spawn().unwrap());
    let progress = || -> Vec<String> {
        dir.lines("stderr")
            .into_iter()
            .filter(|l| l.contains(" waiting for svc: "))
            .collect()
    };
    expect_within(rlock::LIMIT, "the first progress line", || {
        !progress().is_empty()
    });
    release(&dir, "svc");
    // The waiter sees the new holder when it next looks (within half its
    // ttl), not every 0.2 s meanwhile.
    expect_within(rlock::LIMIT, "a line naming the next holder", || {
        progress().len() > 1
    });
    run.signal(libc::SIGTERM);
    run.wait_within(rlock::LIMIT);
    let lines = progress();
    let all = dir.read("stderr");
    assert_eq!(lines.len(), 2, "{all}");
    assert!(
        lines[0].contains(&format!("held by pid {} ", first.pid)),
        "{all}"
    );
    assert!(
        lines[1].contains(&format!("held by pid {} ", next.pid)),
        "{all}"
    );
}

/// How many wait for `svc`.
fn waiting(redis: &RedisServer) -> u64 {
    let out = output(rlock(&redis.url()).args(["status", "--json", "svc"]));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    json["waiting"].as_u64().unwrap_or(0)
}

/// A run of `svc` that queues now (it holds, once handed the lock, until
/// the test ends: `next.held` says it started).
fn holder_queued(redis: &RedisServer, dir: &Scratch) -> Proc {
    let next = rlock::spawn_quiet(
        rlock(&redis.url())
            .args(["run", "--ttl", "60s", "svc", "--"])
            .args(sh(&format!("touch {}; sleep 30", dir.file("next.held")))),
    );
    expect_within(rlock::LIMIT, "the next holder to queue", || {
        waiting(redis) == 1
    });
    next
}

#[test]
fn the_ready_file_is_gone_before_command_hears_of_a_loss() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let ready = dir.file("ready");
    let seen = dir.file("seen");
    let script = format!(
        "trap 'if [ -e {ready} ]; then echo present > {seen}; else echo absent > {seen}; fi; exit 0' TERM; \
         touch {started}; while :; do sleep 0.05; done",
        started = dir.file("started"),
    );
    let run = spawn(
        rlock(&redis.url())
            .args([
                "run",
                "--ttl",
                "3s",
                "--kill-after",
                "1s",
                "--ready-file",
                &ready,
                "svc",
                "--",
            ])
            .args(sh(&script)),
    );
    expect_within(rlock::LIMIT, "COMMAND to start", || {
        Path::new(&dir.file("started")).exists()
    });
    expect_within(rlock::LIMIT, "the ready file", || {
        Path::new(&ready).exists()
    });
    let out = output(rlock(&redis.url()).args(["release", "--force", "svc"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let out = run.output_within(rlock::LIMIT);
    assert_eq!(code(&out), 70, "{}", show(&out));
    assert_eq!(dir.read("seen").trim(), "absent", "{}", show(&out));
    assert!(!Path::new(&ready).exists());
}

#[test]
fn a_ready_file_that_cannot_be_written_is_refused_before_acquiring() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let ready = dir.file("missing/ready");
    let out =
        output(rlock(&redis.url()).args(["run", "--ready-file", &ready, "svc", "--", "true"]));
    let err = assert_fails(&out, 2);
    assert!(
        err.starts_with(&format!("rlock: --ready-file {ready}: cannot be written (")),
        "{err}"
    );
    // A directory is no file a probe can test (it ran COMMAND with no ready
    // file, and exited 0).
    std::fs::create_dir_all(dir.file("sub")).unwrap();
    for (ready, why) in [
        (dir.file("sub"), "is a directory; name a file in it"),
        (dir.file("ready/"), "ends in /; name a file"),
    ] {
        let out =
            output(rlock(&redis.url()).args(["run", "--ready-file", &ready, "svc", "--", "true"]));
        let err = assert_fails(&out, 2);
        assert!(err.trim_end().ends_with(why), "{err}");
    }
    assert!(redis.keys().is_empty(), "{:?}", redis.keys());
}

/// A ready file a dead run left is gone before the lock is held; one a
/// live run wrote (its RLOCK_PID runs) is that run's.
#[test]
fn a_stale_ready_file_is_removed_before_the_wait() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let holder = hold(&redis, &dir, "svc");
    let stale = dir.file("stale");
    std::fs::write(&stale, "RLOCK_PID=999999999\nRLOCK_NAME=svc\n").unwrap();
    let theirs = dir.file("theirs");
    std::fs::write(
        &theirs,
        format!("RLOCK_PID={}\nRLOCK_NAME=svc\n", holder.pid),
    )
    .unwrap();
    let mut waiters = Vec::new();
    for ready in [&stale, &theirs] {
        waiters.push(rlock::spawn_quiet(rlock(&redis.url()).args([
            "run",
            "--ready-file",
            ready,
            "svc",
            "--",
            "true",
        ])));
    }
    expect_within(rlock::LIMIT, "both runs to wait", || waiting(&redis) == 2);
    assert!(
        !Path::new(&stale).exists(),
        "a stale ready file while waiting"
    );
    assert!(
        Path::new(&theirs).exists(),
        "a live run's ready file was removed"
    );
    drop(waiters);
    release(&dir, "svc");
    assert!(holder.output_within(rlock::LIMIT).status.success());
}

/// rlock stopped past its lease: its guardian stops COMMAND and removes the
/// ready file, before rlock runs again.
#[test]
fn the_guardian_removes_the_ready_file_when_it_stops_command() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let ready = dir.file("ready");
    let run = spawn(
        rlock(&redis.url())
            .args([
                "run",
                "--ttl",
                "3s",
                "--kill-after",
                "1s",
                "--ready-file",
                &ready,
            ])
            .args(["svc", "--", "sleep", "30"]),
    );
    expect_within(rlock::LIMIT, "the ready file", || {
        Path::new(&ready).exists()
    });
    run.signal(libc::SIGSTOP);
    expect_within(Duration::from_secs(5), "the guardian to remove it", || {
        !Path::new(&ready).exists()
    });
    run.signal(libc::SIGCONT);
    let out = run.output_within(rlock::LIMIT);
    assert_eq!(code(&out), 70, "{}", show(&out));
}
