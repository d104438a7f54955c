//! Signals: forwarded to COMMAND exactly once, whether sent with `kill` or typed
//! at a terminal; while waiting they interrupt rlock (128+N), leaving nothing.

use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use crate::support::expect_within;
use crate::support::process::Proc;
use crate::support::redis_server::RedisServer;
use crate::support::rlock::{self, code, rlock, sh, show, spawn, spawn_quiet};
use crate::support::scratch::Scratch;
use crate::support::terminal::spawn_on_terminal;

const NAMES: [(i32, &str); 6] = [
    (libc::SIGHUP, "HUP"),
    (libc::SIGINT, "INT"),
    (libc::SIGQUIT, "QUIT"),
    (libc::SIGTERM, "TERM"),
    (libc::SIGUSR1, "USR1"),
    (libc::SIGUSR2, "USR2"),
];

/// COMMAND that logs every forwarded signal it receives and exits 0 once `stop` exists.
fn recorder(dir: &Scratch) -> String {
    let log = dir.file("signals");
    let traps: String = NAMES
        .iter()
        .map(|(_, n)| format!("trap 'echo {n} >> {log}' {n}; "))
        .collect();
    format!(
        "{traps} echo ready >> {log}; while [ ! -e {stop} ]; do sleep 0.02; done",
        stop = dir.file("stop")
    )
}

fn count(dir: &Scratch, name: &str) -> usize {
    dir.lines("signals").iter().filter(|l| *l == name).count()
}

/// The names of `pid`'s threads.
fn threads(pid: u32) -> Vec<String> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .map(|comm| comm.trim().to_owned())
        .collect()
}

/// Each forwarded signal sent to rlock reaches COMMAND once, whether rlock
/// takes it while it waits for a COMMAND within its first renewal (no signal
/// thread yet) or, past that renewal, on its signal thread.
fn forwarded_once(past_first_renewal: bool) {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let ttl = if past_first_renewal { "1s" } else { "30s" };
    let run = spawn(
        rlock(&redis.url())
            .args(["run", "--ttl", ttl, "fwd", "--"])
            .args(sh(&recorder(&dir))),
    );
    expect_within(rlock::LIMIT, "COMMAND to be ready", || {
        count(&dir, "ready") == 1
    });
    if past_first_renewal {
        expect_within(rlock::LIMIT, "rlock's signal thread", || {
            threads(run.pid).iter().any(|t| t == "signals")
        });
    } else {
        assert!(
            !threads(run.pid).iter().any(|t| t == "signals"),
            "within the first renewal no signal thread runs: {:?}",
            threads(run.pid)
        );
    }
    for (signal, name) in NAMES {
        run.signal(signal);
        expect_within(rlock::LIMIT, &format!("{name} to reach COMMAND"), || {
            count(&dir, name) == 1
        });
    }
    std::fs::write(dir.file("stop"), "").unwrap();
    let out = run.output_within(rlock::LIMIT);
    assert_eq!(
        code(&out),
        0,
        "COMMAND decides when to exit: {}",
        show(&out)
    );
    for (_, name) in NAMES {
        assert_eq!(
            count(&dir, name),
            1,
            "{name} exactly once: {:?}",
            dir.lines("signals")
        );
    }
    assert_eq!(redis.lock_keys("fwd"), Vec::<String>::new());
}

#[test]
fn each_forwarded_signal_sent_with_kill_reaches_command_once() {
    forwarded_once(false);
}

#[test]
fn each_forwarded_signal_reaches_a_command_past_its_first_renewal_once() {
    forwarded_once(true);
}

#[test]
fn keys_typed_at_a_terminal_reach_command_once() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let (mut run, mut terminal, _) = spawn_on_terminal(
        rlock(&redis.url())
            .args(["run", "tty", "--"])
            .args(sh(&recorder(&dir))),
    );
    expect_within(rlock::LIMIT, "COMMAND to be ready", || {
        count(&dir, "ready") == 1
    });
    terminal.write_all(b"\x03").unwrap(); // ^C
    expect_within(rlock::LIMIT, "^C to reach COMMAND", || {
        count(&dir, "INT") == 1
    });
    terminal.write_all(b"\x1c").unwrap(); // ^\
    expect_within(rlock::LIMIT, "^\\ to reach COMMAND", || {
        count(&dir, "QUIT") == 1
    });
    run.signal(libc::SIGTERM);
    expect_within(rlock::LIMIT, "TERM to reach COMMAND", || {
        count(&dir, "TERM") == 1
    });
    std::fs::write(dir.file("stop"), "").unwrap();
    let status = run.wait_within(rlock::LIMIT);
    assert_eq!(
        status.code(),
        Some(0),
        "rlock survives keys typed at COMMAND"
    );
    for name in ["INT", "QUIT", "TERM"] {
        assert_eq!(
            count(&dir, name),
            1,
            "{name} exactly once: {:?}",
            dir.lines("signals")
        );
    }
}

fn state(pid: u32) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit(')')
        .next()
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or("")
        .to_owned()
}

#[test]
fn suspending_command_at_the_terminal_suspends_rlock_until_continued() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    // bash builtins only: a ^Z that lands while a shell forks can stop the
    // child alone, and then COMMAND itself never stops.
    let script = format!(
        "echo $$ > {pid}; while [ ! -e {stop} ]; do read -t 0.02 x; done; exit 0",
        pid = dir.file("pid"),
        stop = dir.file("stop")
    );
    let (mut run, mut terminal, _) = spawn_on_terminal(rlock(&redis.url()).args([
        "run", "--ttl", "60s", "suspend", "--", "bash", "-c", &script,
    ]));
    expect_within(rlock::LIMIT, "COMMAND to start", || {
        !dir.read("pid").trim().is_empty()
    });
    let command: u32 = dir.read("pid").trim().parse().unwrap();
    terminal.write_all(b"\x1a").unwrap(); // ^Z
    expect_within(rlock::LIMIT, "COMMAND and rlock to stop", || {
        state(command) == "T" && state(run.pid) == "T"
    });
    run.signal(libc::SIGCONT); // what the shell's `fg` does
    expect_within(rlock::LIMIT, "COMMAND to continue", || {
        state(command) != "T"
    });
    std::fs::write(dir.file("stop"), "").unwrap();
    assert_eq!(run.wait_within(rlock::LIMIT).code(), Some(0));
}

/// A run holding lock `queue` for two minutes, once its COMMAND has started.
fn queue_held(redis: &RedisServer, dir: &Scratch) -> Proc {
    let held = dir.file("held");
    let holder = spawn_quiet(
        rlock(&redis.url())
            .args(["run", "queue", "--"])
            .args(sh(&format!("touch {held}; sleep 120"))),
    );
    expect_within(rlock::LIMIT, "the holder to start", || {
        std::path::Path::new(&held).exists()
    });
    holder
}

fn interrupt_while_waiting(signal: i32, status: i32) {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let _holder = queue_held(&redis, &dir);
    let waiter = spawn(rlock(&redis.url()).args(["run", "queue", "--", "true"]));
    expect_within(rlock::LIMIT, "the waiter to block", || {
        redis.cmd::<i64>(&["ZCARD", "rlock:{queue}:waiters"]) == 1
    });
    waiter.signal(signal);
    let out = waiter.output_within(rlock::LIMIT);
    let err = rlock::assert_fails(&out, status);
    assert!(
        err.contains("queue") && err.contains("interrupted"),
        "{err}"
    );
    assert_eq!(
        redis.lock_keys("queue"),
        ["rlock:{queue}:leases"],
        "the waiter left nothing behind"
    );
}

/// A signal ends a wait for a release at once, whenever it comes: while
/// rlock starts, asks, registers or blocks. The waits block for 30 s
/// (--ttl 60s), so a signal that was lost would show as a wait that lasts.
#[test]
fn a_signal_at_any_moment_of_a_wait_ends_it_at_once() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let _holder = queue_held(&redis, &dir);
    let blocked = spawn(rlock(&redis.url()).args(["run", "--ttl", "60s", "queue", "--", "true"]));
    expect_within(rlock::LIMIT, "the waiter to block", || {
        redis.cmd::<i64>(&["ZCARD", "rlock:{queue}:waiters"]) == 1
    });
    blocked.signal(libc::SIGTERM);
    assert_eq!(code(&blocked.output_within(rlock::LIMIT)), 143);
    for i in 0..30u64 {
        let waiter =
            spawn_quiet(rlock(&redis.url()).args(["run", "--ttl", "60s", "queue", "--", "true"]));
        // The moment of the signal, the fault this test injects: from rlock's
        // start-up to its blocked read.
        std::thread::sleep(Duration::from_micros(i * 300));
        let sent = std::time::Instant::now();
        waiter.signal(libc::SIGINT);
        let out = waiter.output_within(rlock::LIMIT);
        // Before rlock has set its signals up, SIGINT kills it: the same
        // status to the shell (130), nothing taken yet.
        let status = out.status.code().or(out.status.signal().map(|s| 128 + s));
        assert_eq!(
            status,
            Some(130),
            "signal after {} µs: {}",
            i * 300,
            show(&out)
        );
        assert!(
            sent.elapsed() < Duration::from_secs(5),
            "a signal after {} µs took {:?} to end the wait",
            i * 300,
            sent.elapsed()
        );
    }
    assert_eq!(
        redis.cmd::<i64>(&["ZCARD", "rlock:{queue}:waiters"]),
        0,
        "the waiters left nothing behind"
    );
}

/// A waiter blocked on `queue`, spawned from `command` (rlock's arguments
/// after it), once it stands in line on `redis`.
fn blocked_waiter(redis: &RedisServer, mut command: std::process::Command) -> Proc {
    let waiter = spawn_quiet(&mut command);
    expect_within(rlock::LIMIT, "the waiter to block", || {
        redis.cmd::<i64>(&["ZCARD", "rlock:{queue}:waiters"]) == 1
    });
    waiter
}

/// How long the process took to end after a signal, and how it ended.
fn ended_after(mut proc: Proc, signal: i32) -> (Duration, std::process::ExitStatus) {
    let sent = std::time::Instant::now();
    proc.signal(signal);
    let status = proc.wait_within(rlock::LIMIT);
    (sent.elapsed(), status)
}

/// SIGALRM is not one rlock forwards: sent from outside (`timeout -s ALRM`),
/// it ends a waiting rlock by its default action.
#[test]
fn an_alarm_from_outside_still_ends_a_waiting_rlock() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let _holder = queue_held(&redis, &dir);
    let mut command = rlock(&redis.url());
    command.args(["run", "--ttl", "60s", "queue", "--", "true"]);
    let (took, status) = ended_after(blocked_waiter(&redis, command), libc::SIGALRM);
    assert_eq!(status.signal(), Some(libc::SIGALRM), "{status:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
}

/// With SIGALRM ignored when rlock starts (it stays ignored, for COMMAND
/// too), a wait a signal ends still ends at once.
#[test]
fn with_alarm_ignored_at_start_a_signal_still_ends_a_wait_at_once() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let _holder = queue_held(&redis, &dir);
    let mut command = std::process::Command::new("sh");
    command.args([
        "-c",
        "trap '' ALRM; exec \"$@\"",
        "sh",
        &rlock::bin(),
        "--url",
        &redis.url(),
        "run",
        "--ttl",
        "60s",
        "queue",
        "--",
        "true",
    ]);
    let (took, status) = ended_after(blocked_waiter(&redis, command), libc::SIGINT);
    assert_eq!(status.code(), Some(130), "{status:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
}

/// A Redlock wait (on one of the servers, with the signal thread) ends at a
/// signal at once, leaving nothing in any server's queue.
#[test]
fn a_signal_ends_a_redlock_wait_at_once() {
    let servers = crate::support::quorum::servers(3);
    let refs: Vec<&RedisServer> = servers.iter().collect();
    let dir = Scratch::new();
    let held = dir.file("held");
    let _holder = spawn_quiet(
        crate::support::quorum::over(&refs)
            .args(["run", "queue", "--"])
            .args(sh(&format!("touch {held}; sleep 120"))),
    );
    expect_within(rlock::LIMIT, "the holder to start", || {
        std::path::Path::new(&held).exists()
    });
    let mut command = crate::support::quorum::over(&refs);
    command.args(["run", "--ttl", "60s", "queue", "--", "true"]);
    let waiter = spawn_quiet(&mut command);
    expect_within(rlock::LIMIT, "the waiter to block", || {
        refs.iter()
            .any(|r| r.cmd::<i64>(&["ZCARD", "rlock:{queue}:waiters"]) == 1)
    });
    let (took, status) = ended_after(waiter, libc::SIGINT);
    assert_eq!(status.code(), Some(130), "{status:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    for server in &refs {
        assert_eq!(server.cmd::<i64>(&["ZCARD", "rlock:{queue}:waiters"]), 0);
    }
}

#[test]
fn sigint_while_waiting_exits_130_and_leaves_nothing() {
    interrupt_while_waiting(libc::SIGINT, 130);
}

#[test]
fn sigterm_while_waiting_exits_143_and_leaves_nothing() {
    interrupt_while_waiting(libc::SIGTERM, 143);
}

#[test]
fn a_waiter_that_gives_up_passes_the_wake_up_on() {
    // Two waiters; the first is interrupted right as the lock is released. The
    // second must still get the lock promptly, not after a lease timeout.
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let mut holder = crate::support::holder::hold(&redis, &dir, "handoff");
    let mut first = spawn_quiet(
        rlock(&redis.url()).args(["run", "--ttl", "60s", "handoff", "--", "sleep", "60"]),
    );
    expect_within(rlock::LIMIT, "the first waiter", || {
        redis.cmd::<i64>(&["ZCARD", "rlock:{handoff}:waiters"]) == 1
    });
    let mut second =
        spawn(rlock(&redis.url()).args(["run", "--ttl", "60s", "handoff", "--", "true"]));
    expect_within(rlock::LIMIT, "the second waiter", || {
        redis.cmd::<i64>(&["ZCARD", "rlock:{handoff}:waiters"]) == 2
    });
    first.signal(libc::SIGSTOP);
    crate::support::holder::release(&dir, "handoff");
    assert!(holder.wait_within(rlock::LIMIT).success());
    first.signal(libc::SIGINT);
    first.signal(libc::SIGCONT);
    let status = first.wait_within(rlock::LIMIT);
    assert_eq!(status.code(), Some(130), "the first waiter gave up");
    let status = second.wait_within(Duration::from_secs(20));
    assert!(status.success(), "second waiter ran: {status:?}");
}

#[test]
fn a_waiter_stopped_and_continued_keeps_waiting() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let mut holder = crate::support::holder::hold(&redis, &dir, "pause");
    let mut waiter =
        spawn(rlock(&redis.url()).args(["run", "--ttl", "60s", "pause", "--", "true"]));
    expect_within(rlock::LIMIT, "the waiter to block", || {
        redis.cmd::<i64>(&["ZCARD", "rlock:{pause}:waiters"]) == 1
    });
    waiter.signal(libc::SIGSTOP);
    expect_within(rlock::LIMIT, "the waiter to stop", || {
        state(waiter.pid) == "T"
    });
    waiter.signal(libc::SIGCONT);
    expect_within(rlock::LIMIT, "the waiter to run again", || {
        state(waiter.pid) != "T"
    });
    assert!(waiter.try_status().is_none(), "still waiting after SIGCONT");
    crate::support::holder::release(&dir, "pause");
    assert!(holder.wait_within(rlock::LIMIT).success());
    let out = waiter.output_within(rlock::LIMIT);
    assert_eq!(code(&out), 0, "{}", show(&out));
}

#[test]
fn stopping_command_from_outside_does_not_stop_rlock() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let script = format!(
        "echo $$ > {pid}; while [ ! -e {stop} ]; do read -t 0.02 x; done; exit 0",
        pid = dir.file("pid"),
        stop = dir.file("stop")
    );
    let (mut run, _terminal, _) = spawn_on_terminal(rlock(&redis.url()).args([
        "run", "--ttl", "60s", "outside", "--", "bash", "-c", &script,
    ]));
    expect_within(rlock::LIMIT, "COMMAND to start", || {
        !dir.read("pid").trim().is_empty()
    });
    let command: u32 = dir.read("pid").trim().parse().unwrap();
    crate::support::process::signal(command, libc::SIGSTOP);
    expect_within(rlock::LIMIT, "COMMAND to stop", || state(command) == "T");
    crate::support::process::signal(command, libc::SIGCONT);
    expect_within(rlock::LIMIT, "COMMAND to continue", || {
        state(command) != "T"
    });
    assert_ne!(state(run.pid), "T", "rlock follows only job-control stops");
    std::fs::write(dir.file("stop"), "").unwrap();
    assert_eq!(run.wait_within(rlock::LIMIT).code(), Some(0));
}

#[test]
fn a_signal_while_a_silent_server_holds_the_request_exits_128_plus_n() {
    // Accepts connections but never answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!(
        "redis://127.0.0.1:{}",
        listener.local_addr().unwrap().port()
    );
    let run = spawn(rlock(&url).args(["--connect-timeout", "1s", "run", "silent", "--", "true"]));
    let mut accepted = Vec::new();
    expect_within(rlock::LIMIT, "rlock to connect", || {
        match listener.accept() {
            Ok((stream, _)) => {
                accepted.push(stream);
                true
            }
            Err(_) => false,
        }
    });
    run.signal(libc::SIGINT);
    // At most the connect timeout: the reply wait is bounded, then the signal wins.
    let out = run.output_within(Duration::from_secs(10));
    let err = rlock::assert_fails(&out, 130);
    assert!(
        err.contains("silent") && err.contains("interrupted"),
        "{err}"
    );
}

#[test]
fn under_a_job_control_shell_rlock_keeps_renewing_while_command_owns_the_terminal() {
    // bash with job control gives the foreground job (rlock) the terminal; rlock
    // hands it to COMMAND and is then a background process of that terminal,
    // which must not stop it (SIGTTOU) when it takes the terminal or writes.
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let bin = &crate::support::rlock::bin();
    let line = format!(
        "set -m; stty tostop; {bin} -v --url {url} run --ttl 1s jobs -- sh -c 'touch {started}; sleep 2'; echo $? > {rc}",
        url = redis.url(),
        started = dir.file("started"),
        rc = dir.file("rc"),
    );
    let mut cmd = std::process::Command::new("bash");
    cmd.args(["--norc", "--noprofile", "-c", &line]);
    let (mut shell, _terminal, _) = spawn_on_terminal(&mut cmd);
    expect_within(rlock::LIMIT, "COMMAND to start", || {
        dir.path().join("started").exists()
    });
    let deadline = std::time::Instant::now() + rlock::LIMIT;
    while !dir.path().join("rc").exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "rlock under bash never finished"
        );
        let out = rlock::output(rlock(&redis.url()).args(["run", "-n", "jobs", "--", "true"]));
        let done = dir.path().join("rc").exists();
        assert!(
            done || code(&out) == 75,
            "the lock stays held: {}",
            show(&out)
        );
        assert!(shell.try_status().is_none() || done, "shell ended early");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(shell.wait_within(rlock::LIMIT).success());
    assert_eq!(dir.read("rc").trim(), "0");
}

#[test]
fn signals_ignored_when_rlock_starts_stay_ignored() {
    // What nohup does: SIGHUP ignored for rlock and for COMMAND.
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let bin = &crate::support::rlock::bin();
    let line = format!(
        "trap '' HUP; exec {bin} --url {url} run nohup -- sh -c 'echo $$ > {pid}; while [ ! -e {stop} ]; do sleep 0.02; done'",
        url = redis.url(),
        pid = dir.file("pid"),
        stop = dir.file("stop"),
    );
    let mut run = spawn(std::process::Command::new("sh").args(["-c", &line]));
    expect_within(rlock::LIMIT, "COMMAND to start", || {
        !dir.read("pid").trim().is_empty()
    });
    let command: u32 = dir.read("pid").trim().parse().unwrap();
    run.signal(libc::SIGHUP);
    crate::support::process::signal(command, libc::SIGHUP);
    // A forwarded or default HUP would end COMMAND (129) before the USR1 that
    // follows (lower-numbered pending signals are delivered first).
    run.signal(libc::SIGUSR1);
    let status = run.wait_within(rlock::LIMIT);
    assert_eq!(
        status.code(),
        Some(128 + libc::SIGUSR1),
        "HUP stayed ignored: {status:?}"
    );
}

#[test]
fn command_suspended_past_its_lease_is_not_continued() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let ticks = dir.file("ticks");
    let script = format!(
        "exec 2>/dev/null; echo $$ > {pid}; while :; do echo t >> {ticks}; read -t 0.02 x; done",
        pid = dir.file("pid")
    );
    let (mut run, mut terminal, _) = spawn_on_terminal(
        rlock(&redis.url())
            .args(["run", "--ttl", "1500ms", "expire", "--"])
            .args(["bash", "-c", &script]),
    );
    expect_within(rlock::LIMIT, "COMMAND to start", || {
        !dir.read("pid").trim().is_empty()
    });
    let command: u32 = dir.read("pid").trim().parse().unwrap();
    terminal.write_all(b"\x1a").unwrap(); // ^Z
    expect_within(rlock::LIMIT, "COMMAND and rlock to stop", || {
        state(command) == "T" && state(run.pid) == "T"
    });
    // Someone else takes the lock once the lease has run out.
    let out =
        rlock::output(rlock(&redis.url()).args(["run", "--wait", "10s", "expire", "--", "true"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let before = dir.lines("ticks").len();
    run.signal(libc::SIGCONT); // `fg`
    let status = run.wait_within(rlock::LIMIT);
    assert_eq!(status.code(), Some(70), "lease lost while suspended");
    assert_eq!(
        dir.lines("ticks").len(),
        before,
        "COMMAND never ran again without the lock"
    );
}

#[test]
fn a_waiting_run_on_a_terminal_shows_who_holds_the_lock_then_clears_the_line() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let _holder = crate::support::holder::hold(&redis, &dir, "shown");
    let (mut run, _terminal, screen) = spawn_on_terminal(rlock(&redis.url()).args([
        "run",
        "shown",
        "--",
        "sh",
        "-c",
        "echo GOT-IT",
    ]));
    let text = || String::from_utf8_lossy(&screen.lock().unwrap()).into_owned();
    expect_within(rlock::LIMIT, "the waiting line", || {
        text().contains("waiting for shown")
    });
    assert!(text().contains("held by pid"), "{}", text());
    crate::support::holder::release(&dir, "shown");
    assert!(run.wait_within(rlock::LIMIT).success());
    expect_within(rlock::LIMIT, "COMMAND's output", || {
        text().contains("GOT-IT")
    });
    let all = text();
    let cleared = all.rfind("\x1b[2K").unwrap();
    assert!(
        cleared < all.find("GOT-IT").unwrap(),
        "the line is cleared before COMMAND runs"
    );
}

/// The rows a terminal shows, from what was written to it: `\r\x1b[2K`
/// erases the row, `\r` returns, `\n` starts a new row. Each written stretch
/// between those is one (possibly partial) row's text.
fn rows(raw: &str) -> Vec<String> {
    raw.replace("\r\x1b[2K", "\n")
        .replace("\r\n", "\n")
        .split(['\n', '\r'])
        .filter(|row| !row.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Whether a terminal row is the waiting line for `wide` (the words
/// "waiting for" are left out on a narrow terminal), not a message.
fn waiting_line(row: &str) -> bool {
    row.contains("waiting for wide")
        || row.starts_with("rlock: wide: held by")
        || row.starts_with("rlock: wide: server unreachable")
}

/// The waiting line never exceeds the terminal's width (a long
/// command is shortened), is erased before any other stderr line (here the
/// verdict and the outage messages), and says "server unreachable for ..."
/// while the server is down instead of a stale holder.
#[test]
fn the_waiting_line_fits_the_terminal_and_is_erased_before_other_lines() {
    let mut redis = RedisServer::start();
    let long = format!("sleep 60 # {}", "x".repeat(300));
    let _holder = spawn_quiet(
        rlock(&redis.url())
            .args([
                "run",
                "--ttl",
                "60s",
                "--note",
                &"n".repeat(150),
                "wide",
                "--",
            ])
            .args(sh(&long)),
    );
    expect_within(rlock::LIMIT, "the holder", || {
        redis.cmd::<i64>(&["EXISTS", "rlock:{wide}:leases"]) == 1
    });
    let waiters: Vec<_> = [60u16, 100, 200]
        .into_iter()
        .map(|columns| {
            let (run, terminal, screen) = crate::support::terminal::spawn_on_terminal_of(
                rlock(&redis.url()).args(["run", "--wait", "2500ms", "wide", "--", "true"]),
                columns,
            );
            (columns, run, terminal, screen)
        })
        .collect();
    for (columns, mut run, _terminal, screen) in waiters {
        let status = run.wait_within(rlock::LIMIT);
        assert_eq!(status.code(), Some(75), "{columns} columns");
        let text = || String::from_utf8_lossy(&screen.lock().unwrap()).into_owned();
        expect_within(rlock::LIMIT, "the verdict", || {
            text().contains("not acquired")
        });
        let all = text();
        let drawn: Vec<String> = rows(&all);
        assert!(
            drawn.iter().filter(|r| waiting_line(r)).count() >= 2,
            "{columns}: redrawn: {all:?}"
        );
        for row in &drawn {
            // (Ordinary message lines may wrap: they end in a newline.)
            assert!(
                !waiting_line(row) || row.chars().count() < usize::from(columns),
                "{columns} columns: {} wide: {row:?}",
                row.chars().count()
            );
            assert!(
                row.matches("rlock: ").count() <= 1,
                "{columns}: glued: {row:?}"
            );
        }
        if columns == 200 {
            assert!(all.contains("held by pid"), "{all:?}");
        }
        // The verdict starts a row of its own: the line was erased first.
        let verdict = all.find("rlock: wide: not acquired").unwrap();
        assert!(all[..verdict].ends_with("\r\x1b[2K"), "{all:?}");
    }

    // The server goes away while a run waits: the line says so.
    let (mut run, _terminal, screen) = crate::support::terminal::spawn_on_terminal_of(
        rlock(&redis.url()).args(["run", "--wait", "20s", "wide", "--", "true"]),
        100,
    );
    let text = || String::from_utf8_lossy(&screen.lock().unwrap()).into_owned();
    expect_within(rlock::LIMIT, "the waiting line", || {
        text().contains("held by pid")
    });
    redis.stop();
    expect_within(rlock::LIMIT, "the outage on the line", || {
        text().contains("wide: server unreachable for ")
    });
    let all = text();
    for row in rows(&all) {
        assert!(!waiting_line(&row) || row.chars().count() < 100, "{row:?}");
        assert!(row.matches("rlock: ").count() <= 1, "glued: {row:?}");
    }
    redis.respawn();
    // The server lost the hold with its data (no persistence): the run gets in.
    assert!(run.wait_within(rlock::LIMIT).success(), "{}", text());
}
