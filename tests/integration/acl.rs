//! ACL users: the rules the README documents are enough for every command, and
//! a user lacking one of them gets one line naming what it lacks (exit 69),
//! never the password.

use crate::support::redis_server::RedisServer;
use crate::support::rlock::{assert_fails, bare, code, output, sh, show, stdout};

/// The README's rules for a user of rlock's own locks (prefix rlock).
pub(crate) const RULES: &[&str] = &[
    "resetkeys",
    "~rlock:*",
    "resetchannels",
    "-@all",
    "+ping",
    "+auth",
    "+hello",
    "+evalsha",
    "+eval",
    "+script|load",
    "+blpop",
    "+rpush",
    "+pexpire",
    "+multi",
    "+exec",
    "+wait",
    "+scan",
    "+time",
    "+type",
    "+get",
    "+set",
    "+exists",
    "+del",
    "+llen",
    "+pttl",
    "+hget",
    "+hset",
    "+hdel",
    "+hkeys",
    "+hexists",
    "+hincrby",
    "+hlen",
    "+zadd",
    "+zrem",
    "+zscore",
    "+zrange",
    "+zrangebyscore",
    "+zcount",
];

fn user(redis: &RedisServer, name: &str, extra: &[&str]) -> String {
    let mut args = vec!["ACL", "SETUSER", name, "on", ">user-secret-pw"];
    args.extend_from_slice(RULES);
    args.extend_from_slice(extra);
    redis.cmd::<String>(&args);
    format!("redis://{name}:user-secret-pw@127.0.0.1:{}", redis.port)
}

fn rlock_as(url: &str) -> std::process::Command {
    let mut cmd = bare();
    cmd.arg("--url").arg(url);
    cmd
}

#[test]
fn the_documented_rules_are_enough_for_every_command() {
    let redis = RedisServer::start();
    let url = user(&redis, "locker", &[]);
    let out = output(
        rlock_as(&url)
            .args(["run", "a", "--"])
            .args(sh("echo $RLOCK_FENCE")),
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
    let out = output(rlock_as(&url).args(["run", "--shared", "--fair", "a", "b", "--", "true"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let out = output(rlock_as(&url).args(["acquire", "--ttl", "10s", "c"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let token = stdout(&out).trim().to_owned();
    for args in [
        &["renew", "c", "--token", &token][..],
        &["status", "c"],
        &["list"],
        &["release", "--force", "c"],
    ] {
        let out = output(rlock_as(&url).args(args));
        assert_eq!(code(&out), 0, "{args:?}: {}", show(&out));
    }
    let log: Vec<redis::Value> = redis.cmd(&["ACL", "LOG"]);
    assert!(log.is_empty(), "no ACL refusal: {log:?}");
}

#[test]
fn a_user_without_a_rule_gets_one_line_naming_it() {
    let redis = RedisServer::start();
    for (name, extra, says) in [
        ("noeval", &["-evalsha"][..], "may not run EVALSHA"),
        ("nokeys", &["resetkeys", "~other:*"], "key pattern ~rlock:*"),
        ("nohset", &["-hset"], "HSET"),
        ("noblpop", &["-blpop"], "may not run BLPOP"),
    ] {
        let url = user(&redis, name, extra);
        if name == "noblpop" {
            // Only a waiter blocks: hold the lock first.
            let held = output(rlock_as(&url).args(["acquire", "--ttl", "10s", "w"]));
            assert_eq!(code(&held), 0, "{}", show(&held));
        }
        let lock = if name == "noblpop" { "w" } else { "x" };
        let out = output(rlock_as(&url).args(["run", lock, "--", "true"]));
        let err = assert_fails(&out, 69);
        assert!(err.contains(says), "{name}: {err}");
        assert!(!err.contains("user-secret-pw"), "{err}");
    }
}

#[test]
fn a_redisson_user_needs_the_unlock_channel() {
    let redis = RedisServer::start();
    let keys_and_commands = [
        "~jobs:*",
        "~{jobs:*",
        "+subscribe",
        "+unsubscribe",
        "+publish",
    ];
    let url = user(&redis, "nochannels", &keys_and_commands);
    let out = output(rlock_as(&url).args(["run", "--redisson", "jobs:a", "--", "true"]));
    let err = assert_fails(&out, 69);
    assert!(
        err.contains("&redisson_lock__channel:* and &{*}:rlock-int:*"),
        "{err}"
    );
    let mut rules = keys_and_commands.to_vec();
    rules.extend([
        "~redisson_lock__channel:*",
        "&redisson_lock__channel:*",
        "&{jobs:*}:rlock-int:*",
    ]);
    let url = user(&redis, "redissonuser", &rules);
    let out = output(rlock_as(&url).args(["run", "--redisson", "jobs:a", "--", "true"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert!(out.stderr.is_empty(), "{}", show(&out));
}
