//! Bad input and unusable servers beyond the table in `sweep`: a password that
//! works after one that does not, options refused until they land, extreme
//! values that must still work.

use crate::support::redis_server::RedisServer;
use crate::support::rlock::{assert_fails, bare, code, output, rlock, show};

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

#[test]
fn an_empty_rlock_url_counts_as_unset_but_an_empty_url_option_is_refused() {
    let redis = RedisServer::start();
    let out = output(
        bare()
            .env("RLOCK_URL", "")
            .env("REDIS_URL", redis.url())
            .args(["run", "x", "--", "true"]),
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
    let out = output(
        bare()
            .env("REDIS_URL", redis.url())
            .args(["run", "--url", "", "x", "--", "true"]),
    );
    let err = assert_fails(&out, 2);
    assert!(err.contains("empty URL"), "{err}");
}
