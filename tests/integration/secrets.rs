//! Secrets stay in the process: passwords and tokens on COMMAND's command line
//! are not stored with the hold or shown by `status`, and `renew`/`release`
//! take the owner token from RLOCK_TOKEN so it need not be on argv.

use crate::support::expect_within;
use crate::support::redis_server::RedisServer;
use crate::support::rlock::{self, assert_fails, code, rlock, show, spawn_quiet, stdout};

#[test]
fn passwords_and_tokens_on_commands_command_line_are_not_stored_or_shown() {
    let redis = RedisServer::start();
    let url = redis.url();
    let mut holder = spawn_quiet(rlock(&url).args([
        "run",
        "secret",
        "--",
        "sh",
        "-c",
        "sleep 5",
        "redis://:hunter2@127.0.0.1:1/0",
        "--token",
        "tok3n",
        "REDISCLI_AUTH=pa55",
    ]));
    expect_within(rlock::LIMIT, "the hold", || {
        !redis.lock_keys("secret").is_empty()
    });
    let status = rlock::output(rlock(&url).args(["status", "--json", "secret"]));
    assert_eq!(code(&status), 0, "{}", show(&status));
    let shown = stdout(&status);
    let stored: Vec<String> = redis.cmd(&["HVALS", "rlock:{secret}:holders"]);
    let stored = stored.join(" ");
    for text in [&shown, &stored] {
        for secret in ["hunter2", "tok3n", "pa55"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        // (The stored JSON escapes the URL's slashes.)
        for hidden in [":***@127.0.0.1:1", "--token ***", "REDISCLI_AUTH=***"] {
            assert!(text.contains(hidden), "{hidden} not in {text}");
        }
    }
    holder.kill();
}

#[test]
fn renew_and_release_take_the_token_from_rlock_token() {
    let redis = RedisServer::start();
    let url = redis.url();
    let out = rlock::output(rlock(&url).args(["acquire", "--ttl", "30s", "envtok"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let token = stdout(&out).trim().to_owned();
    let renew = rlock::output(
        rlock(&url)
            .env("RLOCK_TOKEN", &token)
            .args(["renew", "envtok"]),
    );
    assert_eq!(code(&renew), 0, "{}", show(&renew));
    let release = rlock::output(
        rlock(&url)
            .env("RLOCK_TOKEN", &token)
            .args(["release", "envtok"]),
    );
    assert_eq!(code(&release), 0, "{}", show(&release));
    let again = rlock::output(
        rlock(&url)
            .env("RLOCK_TOKEN", &token)
            .args(["release", "envtok"]),
    );
    assert_fails(&again, 1);
    // Neither --token nor RLOCK_TOKEN: a usage error naming both.
    let none = rlock::output(rlock(&url).args(["release", "envtok"]));
    let err = assert_fails(&none, 2);
    assert!(
        err.contains("--token") && err.contains("RLOCK_TOKEN"),
        "{err}"
    );
    // --force ignores an RLOCK_TOKEN it inherits (say, inside a run).
    let out = rlock::output(rlock(&url).args(["acquire", "--ttl", "30s", "envtok"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let force = rlock::output(
        rlock(&url)
            .env("RLOCK_TOKEN", &token)
            .args(["release", "--force", "envtok"]),
    );
    assert_eq!(code(&force), 0, "{}", show(&force));
}
