//! `--password-command`: the password a command prints, fetched again for
//! each new connection (short-lived cloud tokens rotate under a long hold);
//! a command that fails says why with its stderr's first line (exit 69),
//! never with the password; it is refused beside another password.

use std::time::{Duration, Instant};

use crate::support::expect::assert_lines;
use crate::support::expect_within;
use crate::support::quorum;
use crate::support::redis_server::RedisServer;
use crate::support::rlock::{self, assert_fails, code, rlock, sh, show, spawn, stderr};
use crate::support::scratch::Scratch;

/// A command that prints `pw-N` on its Nth run, counting its runs in `count`.
fn rotating(dir: &Scratch) -> String {
    let count = dir.file("count");
    format!(
        "n=$(( $(cat {count} 2>/dev/null || echo 0) + 1 )); echo $n > {count}.tmp; \
         mv {count}.tmp {count}; echo pw-$n"
    )
}

fn runs(dir: &Scratch) -> u64 {
    std::fs::read_to_string(dir.file("count")).map_or(0, |n| n.trim().parse().unwrap())
}

/// Connections the server has accepted, asked on one connection of the test's.
fn accepted(admin: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("stats").query(admin).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("total_connections_received:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// The command runs once for each new connection, not once per run: each
/// `rlock` invocation runs it as often as it connects, and the watchdog's
/// reconnect after its connection was dropped runs it again and gets the
/// next password (the earlier ones no longer work by then).
#[test]
fn the_command_runs_for_each_new_connection() {
    let redis = RedisServer::start();
    let mut user = vec!["ACL", "SETUSER", "job", "on", "~*", "&*", "+@all"];
    let passwords: Vec<String> = (1..=40).map(|n| format!(">pw-{n}")).collect();
    user.extend(passwords.iter().map(String::as_str));
    redis.cmd::<String>(&user);
    let mut admin = redis.con();
    let dir = Scratch::new();
    let url = format!("redis://job@127.0.0.1:{}", redis.port);
    let command = rotating(&dir);

    let before = accepted(&mut admin);
    let out = rlock::output(
        rlock(&url)
            .arg("--password-command")
            .arg(&command)
            .args(["run", "rotating", "--", "true"]),
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
    let connections = accepted(&mut admin) - before;
    assert!(runs(&dir) >= 1);
    assert_eq!(runs(&dir), connections, "one run per connection");

    let (ran, before) = (runs(&dir), accepted(&mut admin));
    let out = rlock::output(
        rlock(&url)
            .env("RLOCK_PASSWORD_COMMAND", &command)
            .args(["status", "rotating"]),
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert_eq!(runs(&dir) - ran, accepted(&mut admin) - before);
    assert!(runs(&dir) > ran, "status ran it again");

    let (started, stop) = (dir.file("started"), dir.file("stop"));
    let holder = spawn(
        rlock(&url)
            .arg("--password-command")
            .arg(&command)
            .args(["run", "--ttl", "2s", "rotating", "--"])
            .args(sh(&format!(
                "touch {started}; until [ -e {stop} ]; do sleep 0.05; done"
            ))),
    );
    expect_within(rlock::LIMIT, "the hold", || {
        std::path::Path::new(&started).exists()
    });
    let ran = runs(&dir);
    // The passwords handed out so far stop working, and the holder's
    // connection is dropped: its next renewal must reconnect.
    for n in 1..=ran {
        redis.cmd::<String>(&["ACL", "SETUSER", "job", &format!("<pw-{n}")]);
    }
    let killed: i64 = redis.cmd(&["CLIENT", "KILL", "USER", "job"]);
    assert!(killed >= 1, "the holder's connection was dropped");
    expect_within(rlock::LIMIT, "the watchdog to reconnect", || {
        runs(&dir) > ran
    });
    std::fs::write(&stop, "").unwrap();
    let out = holder.output_within(rlock::LIMIT);
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert!(!stderr(&out).contains("pw-"), "{}", show(&out));
}

/// A command that fails, prints nothing or hangs fails the connection with
/// exit 69 and its stderr's first line, never what it printed on stdout.
#[test]
fn a_failing_command_is_unavailable_with_its_first_stderr_line() {
    let redis = RedisServer::start_with(&["--requirepass", "pw-secret"]);
    let url = redis.url();
    let fails = |command: &str| {
        let out = rlock::output(
            rlock(&url)
                .arg("--password-command")
                .arg(command)
                .args(["run", "x", "--", "true"]),
        );
        let err = assert_fails(&out, 69);
        assert!(!err.contains("pw-secret"), "{err}");
        err
    };
    let server = format!("127.0.0.1:{}", redis.port);
    assert_lines(
        &fails("echo pw-secret; echo 'token expired: run az login' >&2; echo more >&2; exit 1"),
        &format!(
            "rlock: x: server {server} unavailable: --password-command failed: \
             token expired: run az login"
        ),
    );
    assert_lines(
        &fails("exit 0"),
        &format!(
            "rlock: x: server {server} unavailable: --password-command failed: \
             it printed no password"
        ),
    );
    assert_lines(
        &fails("exit 3"),
        &format!(
            "rlock: x: server {server} unavailable: --password-command failed: \
             it exited with status 3"
        ),
    );
    let started = Instant::now();
    assert_lines(
        &fails("echo pw-secret; sleep 60"),
        &format!(
            "rlock: x: server {server} unavailable: --password-command failed: \
             it did not finish within 10s"
        ),
    );
    assert!(started.elapsed() < Duration::from_secs(15));
    // A wrong password points at the command, not at the URL or REDISCLI_AUTH.
    assert_lines(
        &fails("echo wrong-one"),
        &format!(
            "rlock: x: server {server} unavailable: authentication failed: wrong user name or \
             password (check the URL's user and what --password-command prints)"
        ),
    );

    let out = rlock::output(
        rlock(&url)
            .arg("--password-command")
            .arg("echo pw-secret")
            .args(["run", "x", "--", "true"]),
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
}

/// Refused beside a password in the URL or --password-file (exit 2, one
/// line); a Redlock quorum takes it for every server.
#[test]
fn the_command_is_refused_beside_another_password_and_works_for_a_quorum() {
    let dir = Scratch::new();
    let file = dir.path().join("password");
    std::fs::write(&file, "pw\n").unwrap();
    let out = rlock::output(
        rlock("redis://:pw@127.0.0.1:1")
            .args(["--password-command", "echo pw"])
            .args(["run", "x", "--", "true"]),
    );
    assert_lines(
        &assert_fails(&out, 2),
        "rlock: --password-command and a password in the URL: give the password once",
    );
    let out = rlock::output(
        rlock("redis://127.0.0.1:1")
            .args(["--password-command", "echo pw"])
            .env("RLOCK_PASSWORD_FILE", &file)
            .args(["run", "x", "--", "true"]),
    );
    assert_lines(
        &assert_fails(&out, 2),
        "rlock: --password-file and --password-command: give the password once",
    );

    let servers = quorum::servers_with(3, &["--requirepass", "pw-q"]);
    let out = rlock::output(
        quorum::over(&servers.iter().collect::<Vec<_>>())
            .args(["--password-command", "echo pw-q"])
            .args(["run", "q", "--", "true"]),
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
}
