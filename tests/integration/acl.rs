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
    "+hgetall",
    "+hset",
    "+hdel",
    "+hexists",
    "+hincrby",
    "+hlen",
    "+zadd",
    "+zrem",
    "+zscore",
    "+zrange",
    "+zrangebyscore",
    "+zcount",
    "+xadd",
    "+xdel",
    "+xrevrange",
    "+info",
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
        ("nohgetall", &["-hgetall"], "HGETALL"),
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

/// A user refused one of the write commands the scripts use: Redis would not
/// undo what a script wrote before the refusal, so the scripts ask first and
/// write nothing. Whatever a refused run leaves has an expiry (the fencing
/// counter aside, which outlives every hold by design).
#[test]
fn a_write_refused_part_way_leaves_no_key_without_an_expiry() {
    let redis = RedisServer::start();
    let extra = [
        "+subscribe",
        "+unsubscribe",
        "+publish",
        "~x",
        "~{x}:rlock-fence",
        "~redisson_lock__channel:*",
        "&redisson_lock__channel:*",
        "&{*}:rlock-int:*",
    ];
    for lacks in ["-pexpire", "-zadd", "-hset", "-hincrby", "-rpush", "-set"] {
        let mut rules = extra.to_vec();
        rules.push(lacks);
        let url = user(&redis, &format!("no{}", &lacks[1..]), &rules);
        // A --redisson lock is one hash: HINCRBY, PEXPIRE and the fence's SET.
        // rlock's own scripts write a hold's count with HSET: no HINCRBY.
        let redisson = ["-pexpire", "-hincrby", "-set"].contains(&lacks);
        let mut kinds: Vec<&[&str]> = Vec::new();
        if lacks != "-hincrby" {
            kinds.extend([&["--no-wait"][..], &["--shared"], &["--limit", "2"]]);
        }
        if redisson {
            kinds.push(&["--redisson"]);
        }
        for kind in &kinds {
            let out = output(
                rlock_as(&url)
                    .arg("run")
                    .args(*kind)
                    .args(["x", "--", "true"]),
            );
            let err = assert_fails(&out, 69);
            assert!(
                err.contains("nothing was written"),
                "{lacks} {kind:?}: {err}"
            );
            assert!(
                err.contains(&lacks[1..].to_uppercase()),
                "{lacks} {kind:?}: {err}"
            );
            for key in redis.keys() {
                let pttl: i64 = redis.cmd(&["PTTL", &key]);
                assert!(
                    pttl >= 0 || key.contains("fence"),
                    "{lacks} {kind:?}: {key} has no expiry"
                );
            }
        }
    }
}

/// `status` writes nothing, so a user without the write commands may run it:
/// the scripts' check for refused writes is only in the scripts that write.
#[test]
fn a_user_without_write_commands_may_still_look() {
    let redis = RedisServer::start();
    let writer = user(&redis, "writer", &[]);
    let held = output(rlock_as(&writer).args(["acquire", "--ttl", "30s", "seen"]));
    assert_eq!(code(&held), 0, "{}", show(&held));
    let reader = user(
        &redis,
        "reader",
        &[
            "-set", "-hset", "-hdel", "-hincrby", "-zadd", "-zrem", "-pexpire", "-del", "-rpush",
        ],
    );
    let out = output(rlock_as(&reader).args(["status", "seen"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert!(stdout(&out).contains("seen"), "{}", show(&out));
    let out = output(rlock_as(&reader).args(["run", "--no-wait", "other", "--", "true"]));
    let err = assert_fails(&out, 69);
    assert!(err.contains("nothing was written"), "{err}");
}

/// A command refused inside a script is named, with the server's cause, on
/// every server version: Redis 6.2 and 7 name only the script's line, Redis 8
/// and Valkey the command.
#[test]
fn a_command_refused_inside_a_script_is_named() {
    let redis = RedisServer::start();
    let url = user(&redis, "notime", &["-time"]);
    let out = output(rlock_as(&url).args(["run", "x", "--", "true"]));
    let err = assert_fails(&out, 69);
    assert!(err.contains("refused TIME inside rlock's script"), "{err}");
    assert!(!err.contains("ZCOUNT"), "only the refused command: {err}");
    assert!(!err.contains("user-secret-pw"), "{err}");

    let renamed = RedisServer::start_with(&["--rename-command", "TIME", ""]);
    let out = output(rlock_as(&renamed.url()).args(["run", "x", "--", "true"]));
    let err = assert_fails(&out, 69);
    assert!(err.contains("refused TIME inside rlock's script"), "{err}");
    assert!(
        err.to_lowercase().contains("unknown"),
        "the server's cause: {err}"
    );

    let no_scripts = RedisServer::start_with(&["--rename-command", "EVALSHA", ""]);
    let out = output(rlock_as(&no_scripts.url()).args(["run", "x", "--", "true"]));
    let err = assert_fails(&out, 69);
    assert!(err.contains("runs no Lua scripts"), "{err}");
}
