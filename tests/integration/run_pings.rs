//! `run --ping URL`: what a monitor hears of real runs, recorded by a local
//! HTTP(S) server. `start` once the lock is taken, the exit status after the
//! release (success, COMMAND's failure, `--max-hold`, a loss), `log` for a
//! run skipped because the lock was taken (with and without `-E 0`), each
//! run under a run id of its own; a monitor that is down changes nothing.

use crate::support::expect::assert_lines;
use crate::support::holder::{go, hold, release, until_go};
use crate::support::http_server::{HttpServer, Request};
use crate::support::redis_server::RedisServer;
use crate::support::rlock::{self, assert_fails, code, output, rlock, sh, show, spawn};
use crate::support::scratch::Scratch;
use crate::support::tls::Tls;

/// Each request as (path, rid).
fn seen(requests: &[Request]) -> Vec<(String, String)> {
    requests
        .iter()
        .map(|r| (r.path.clone(), r.param("rid").unwrap_or("").to_owned()))
        .collect()
}

/// The two requests of one run: start, then `status`, under one run id.
fn assert_started_and_ended(requests: &[Request], status: &str) -> String {
    let seen = seen(requests);
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0].0, "/hc/start", "{seen:?}");
    assert_eq!(seen[1].0, format!("/hc/{status}"), "{seen:?}");
    assert_eq!(seen[0].1, seen[1].1, "one run id: {seen:?}");
    assert_eq!(seen[0].1.len(), 36, "a UUID: {seen:?}");
    requests[1].body_text()
}

#[test]
fn a_run_pings_start_then_its_exit_status_under_one_run_id() {
    let redis = RedisServer::start();
    let monitor = HttpServer::http();
    let ping = monitor.url("/hc");
    let ok = output(rlock(&redis.url()).args(["run", "--ping", &ping, "job", "--", "true"]));
    assert_eq!(code(&ok), 0, "{}", show(&ok));
    assert_eq!(rlock::stderr(&ok), "");
    let body = assert_started_and_ended(&monitor.wait_for(2, rlock::LIMIT), "0");
    assert_eq!(body, "");

    let monitor = HttpServer::http();
    let failed = output(
        rlock(&redis.url())
            .env("RLOCK_PING", monitor.url("/hc"))
            .args(["run", "job", "--"])
            .args(sh("exit 3")),
    );
    assert_eq!(code(&failed), 3, "{}", show(&failed));
    // The body is the line rlock said of the run's end.
    let body = assert_started_and_ended(&monitor.wait_for(2, rlock::LIMIT), "3");
    assert_lines(&body, "job: released after [..] (COMMAND exited 3)");

    let monitor = HttpServer::http();
    let capped = output(rlock(&redis.url()).args([
        "run",
        "--ping",
        &monitor.url("/hc"),
        "--max-hold",
        "200ms",
        "job",
        "--",
        "sleep",
        "10",
    ]));
    assert_eq!(code(&capped), 124, "{}", show(&capped));
    let body = assert_started_and_ended(&monitor.wait_for(2, rlock::LIMIT), "124");
    assert_lines(
        &body,
        "job: COMMAND ran past --max-hold 200ms and was stopped [..]",
    );
}

#[test]
fn a_run_skipped_because_the_lock_is_taken_pings_log_with_its_cause() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let mut holder = hold(&redis, &dir, "nightly");
    for (flags, status) in [(&["-n"][..], 75), (&["-n", "-E", "0"][..], 0)] {
        let monitor = HttpServer::http();
        let skipped = output(
            rlock(&redis.url())
                .args(["run", "--ping", &monitor.url("/hc")])
                .args(flags)
                .args(["nightly", "--", "true"]),
        );
        assert_eq!(code(&skipped), status, "{}", show(&skipped));
        let requests = monitor.wait_for(1, rlock::LIMIT);
        let seen = seen(&requests);
        assert_eq!(seen.len(), 1, "{flags:?}: {seen:?}");
        assert_eq!(seen[0].0, "/hc/log", "{flags:?}: {seen:?}");
        let body = requests[0].body_text();
        assert!(
            body.starts_with("nightly: ") && body.contains("held by pid"),
            "{flags:?}: {body}"
        );
    }
    release(&dir, "nightly");
    assert_eq!(holder.wait_within(rlock::LIMIT).code(), Some(0));
}

#[test]
fn a_lost_lock_pings_70_with_the_loss_as_its_body() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let monitor = HttpServer::http();
    let run = spawn(
        rlock(&redis.url())
            .args([
                "run",
                "--ping",
                &monitor.url("/hc"),
                "--ttl",
                "3s",
                "lost",
                "--",
            ])
            .args(sh(&until_go(&dir))),
    );
    let started = monitor.wait_for(1, rlock::LIMIT);
    assert_eq!(seen(&started)[0].0, "/hc/start");
    let force = output(rlock(&redis.url()).args(["release", "--force", "lost"]));
    assert_eq!(code(&force), 0, "{}", show(&force));
    let out = run.output_within(rlock::LIMIT);
    go(&dir);
    assert_fails(&out, 70);
    let body = assert_started_and_ended(&monitor.wait_for(2, rlock::LIMIT), "70");
    assert!(body.contains("lock lost"), "{body}");
}

#[test]
fn pings_over_https_trust_the_cacert_given() {
    let redis = RedisServer::start();
    let tls = Tls::new();
    let monitor = HttpServer::https(&tls);
    let out = output(rlock(&redis.url()).args([
        "run",
        "--cacert",
        &tls.file("ca.crt"),
        "--ping",
        &monitor.url("/hc"),
        "job",
        "--",
        "true",
    ]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert_started_and_ended(&monitor.wait_for(2, rlock::LIMIT), "0");
}

#[test]
fn a_monitor_that_is_down_changes_nothing_but_a_verbose_line() {
    let redis = RedisServer::start();
    // A port nobody listens on: the server is stopped once bound.
    let url = {
        let monitor = HttpServer::http();
        monitor.url("/hc")
    };
    let quiet = output(rlock(&redis.url()).args(["run", "--ping", &url, "job", "--", "true"]));
    assert_eq!(code(&quiet), 0, "{}", show(&quiet));
    assert_eq!(rlock::stderr(&quiet), "");
    let failed = output(
        rlock(&redis.url())
            .args(["run", "-v", "--ping", &url, "job", "--"])
            .args(sh("exit 4")),
    );
    assert_eq!(code(&failed), 4, "{}", show(&failed));
    let err = rlock::stderr(&failed);
    assert!(err.contains("rlock: ping to http://127.0.0.1:"), "{err}");
}

/// A monitor that reads and never answers: the run's end waits a short
/// bound for it, not every retry of every ping (15 s, and the exit status
/// was never sent), and says with -v what was not done.
#[test]
fn a_monitor_that_never_answers_holds_the_end_for_a_short_bound() {
    let redis = RedisServer::start();
    let monitor = HttpServer::http();
    monitor.stall();
    let started = std::time::Instant::now();
    let out = output(
        rlock(&redis.url())
            .args(["run", "-v", "--ping", &monitor.url("/hc"), "job", "--"])
            .args(sh("exit 4")),
    );
    let took = started.elapsed();
    assert_eq!(code(&out), 4, "{}", show(&out));
    assert!(took < std::time::Duration::from_secs(9), "held {took:?}");
    // Said by the sending thread (timed out) or by the run's end (not
    // sent), whichever saw it first.
    let err = rlock::stderr(&out);
    assert!(err.contains("rlock: ping to http://127.0.0.1:"), "{err}");
}

#[test]
fn a_ping_url_that_is_not_http_is_refused_without_quoting_it() {
    let out = output(rlock("redis://127.0.0.1:1").args([
        "run",
        "--ping",
        "ftp://secret-key@example.com/x",
        "job",
        "--",
        "true",
    ]));
    let err = assert_fails(&out, 2);
    assert!(err.starts_with("rlock: --ping: "), "{err}");
    assert!(!err.contains("secret-key"), "{err}");
}

/// A run nested in COMMAND inherits neither RLOCK_PING nor RLOCK_READY_FILE:
/// it told the monitor the job ended, and removed the ready file, while the
/// outer run still held its lock.
#[test]
fn a_nested_run_neither_pings_nor_removes_the_outer_ready_file() {
    let redis = RedisServer::start();
    let monitor = HttpServer::http();
    let dir = Scratch::new();
    let ready = dir.file("ready");
    let script = format!(
        "'{bin}' --url '{url}' run inner -- true && test -e '{ready}' && echo kept",
        bin = env!("CARGO_BIN_EXE_rlock"),
        url = redis.url(),
    );
    let out = output(
        rlock(&redis.url())
            .env("RLOCK_PING", monitor.url("/hc"))
            .env("RLOCK_READY_FILE", &ready)
            .args(["run", "outer", "--"])
            .args(sh(&script)),
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert_eq!(rlock::stdout(&out).trim(), "kept", "{}", show(&out));
    // The inner run's pings, had it sent any, came before the outer's end.
    assert_started_and_ended(&monitor.wait_for(2, rlock::LIMIT), "0");
}
