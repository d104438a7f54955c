//! Bad input and unusable servers: the documented status and one `rlock:` line,
//! never a panic, a hang, or a secret in the output.

use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;

use crate::support::redis_server::RedisServer;
use crate::support::rlock::{self, assert_fails, bare, code, output, rlock, show, stderr};
use crate::support::scratch::Scratch;

#[test]
fn malformed_urls_are_usage_errors() {
    for url in [
        "http://127.0.0.1:1",
        "not a url",
        "redis://:secretpw@",
        "redis://127.0.0.1:99999",
    ] {
        let out = output(bare().args(["--url", url, "run", "x", "--", "true"]));
        let err = assert_fails(&out, 2);
        assert!(!err.contains("secretpw"), "{err}");
    }
}

#[test]
fn refused_connection_is_unavailable() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = output(rlock(&format!("redis://127.0.0.1:{port}")).args(["run", "x", "--", "true"]));
    let err = assert_fails(&out, 69);
    assert!(
        err.contains(&format!("127.0.0.1:{port}")),
        "names the server: {err}"
    );
}

#[test]
fn silent_server_is_unavailable_within_the_connect_timeout() {
    // Accepts connections (the kernel's backlog) but never answers.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "redis://127.0.0.1:{}",
        listener.local_addr().unwrap().port()
    );
    let start = std::time::Instant::now();
    let out = output(rlock(&url).args(["--connect-timeout", "300ms", "run", "x", "--", "true"]));
    assert_fails(&out, 69);
    assert!(start.elapsed() < rlock::LIMIT);
    drop(listener);
}

#[test]
fn wrong_password_is_unavailable_and_never_echoed() {
    let redis = RedisServer::start_with(&["--requirepass", "right-pw"]);
    let url = format!("redis://:wrong-pw-123@127.0.0.1:{}", redis.port);
    let out = output(bare().args(["--url", &url, "run", "x", "--", "true"]));
    let err = assert_fails(&out, 69);
    assert!(
        !err.contains("wrong-pw-123") && !err.contains("right-pw"),
        "{err}"
    );
    assert!(err.contains("authentication"), "{err}");
    // The right password from REDISCLI_AUTH works.
    let out = output(
        rlock(&redis.url())
            .env("REDISCLI_AUTH", "right-pw")
            .args(["run", "x", "--", "true"]),
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
}

#[test]
fn bad_durations_and_options_are_usage_errors() {
    for args in [
        &["run", "--wait", "soon", "x", "--", "true"][..],
        &["run", "--ttl", "0s", "x", "--", "true"],
        &["run", "--ttl", "5ms", "x", "--", "true"],
        &["run", "--kill-after", "-1s", "x", "--", "true"],
        &["--connect-timeout", "never", "run", "x", "--", "true"],
        &["run", "-E", "300", "x", "--", "true"],
        &["run", "--bogus", "x", "--", "true"],
    ] {
        let out = output(bare().args(args));
        assert_fails(&out, 2);
    }
}

#[test]
fn bad_names_are_usage_errors() {
    let long = "n".repeat(201);
    for name in [
        "has space",
        "tab\there",
        "brace{",
        "}",
        "ctl\u{1}x",
        long.as_str(),
    ] {
        let out = output(bare().args(["run", name, "--", "true"]));
        let err = assert_fails(&out, 2);
        assert!(err.contains("invalid lock name"), "{err}");
        assert!(
            !err.contains('\u{1}'),
            "control characters are escaped: {err:?}"
        );
    }
    let out = output(bare().args(["run", "", "--", "true"]));
    assert_fails(&out, 2);
}

#[test]
fn missing_command_is_a_usage_error() {
    for args in [
        &["run", "x"][..],
        &["run", "x", "--"],
        &["run", "--", "true"],
        &["run"],
    ] {
        let out = output(bare().args(args));
        assert_fails(&out, 2);
    }
}

#[test]
fn commands_that_cannot_run_exit_126_and_127_without_touching_redis() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let script = dir.path().join("not-executable");
    std::fs::write(&script, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = output(rlock(&redis.url()).args(["run", "x", "--"]).arg(&script));
    let err = assert_fails(&out, 126);
    assert!(err.contains("not-executable"), "{err}");
    let out = output(rlock(&redis.url()).args(["run", "x", "--", "no-such-command-rlock-test"]));
    let err = assert_fails(&out, 127);
    assert!(err.contains("no-such-command-rlock-test"), "{err}");
    let out = output(rlock(&redis.url()).args(["run", "x", "--", "/no/such/path"]));
    assert_fails(&out, 127);
    let out = output(rlock(&redis.url()).args(["run", "x", "--"]).arg(dir.path()));
    assert_fails(&out, 126);
    assert_eq!(
        redis.keys(),
        Vec::<String>::new(),
        "nothing was written to Redis"
    );
}

#[test]
fn a_lock_key_of_another_type_is_reported_and_left_alone() {
    let redis = RedisServer::start();
    redis.cmd::<String>(&["SET", "rlock:{taken}", "someone else's value"]);
    let out = output(rlock(&redis.url()).args(["run", "taken", "--", "true"]));
    let err = assert_fails(&out, 69);
    assert!(
        err.contains("taken") && err.contains("holds a string"),
        "{err}"
    );
    assert!(err.contains("will not overwrite"), "{err}");
    for args in [&["status", "taken"][..], &["release", "taken", "--force"]] {
        let out = output(rlock(&redis.url()).args(args));
        let err = assert_fails(&out, 69);
        assert!(err.contains("will not overwrite"), "{err}");
    }
    let value: String = redis.cmd(&["GET", "rlock:{taken}"]);
    assert_eq!(value, "someone else's value");
}

#[test]
fn options_not_yet_supported_are_refused_clearly() {
    for args in [
        &["--url", "redis://a,redis://b", "run", "x", "--", "true"][..],
        &["--url", "rediss://127.0.0.1:1", "run", "x", "--", "true"],
        &["run", "--min-replicas", "1", "x", "--", "true"],
    ] {
        let out = output(bare().args(args));
        let err = assert_fails(&out, 2);
        assert!(err.contains("not supported yet"), "{err}");
    }
    let _ = stderr;
}

#[test]
fn a_fence_key_that_is_not_a_counter_is_reported_before_anything_is_written() {
    let redis = RedisServer::start();
    redis.cmd::<String>(&["SET", "rlock:{f}:fence", "abc"]);
    let out = output(rlock(&redis.url()).args(["run", "f", "--", "true"]));
    let err = assert_fails(&out, 69);
    assert!(err.contains("fencing counter"), "{err}");
    assert_eq!(redis.keys(), ["rlock:{f}:fence"], "no half-written lock");
}

#[test]
fn extreme_values_are_handled_without_a_panic() {
    let redis = RedisServer::start();
    let out =
        output(rlock(&redis.url()).args(["run", "--wait", "500000000000y", "x", "--", "true"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let out = output(rlock(&redis.url()).args(["run", "x", "--", "no\nsuch\ncommand"]));
    let err = assert_fails(&out, 127);
    assert!(err.contains("'no\\nsuch\\ncommand'"), "{err}");
    let out = output(rlock(&redis.url()).args(["run", "--ttl", "10000000y", "x", "--", "true"]));
    assert_fails(&out, 2);
    let args: Vec<String> = (0..5000).map(|i| format!("argument-{i}")).collect();
    let out = output(
        rlock(&redis.url())
            .args(["run", "big", "--", "true"])
            .args(&args),
    );
    assert_eq!(code(&out), 0, "a huge argument list: {}", show(&out));
}
