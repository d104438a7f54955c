//! Secrets stay in the process: passwords and tokens on COMMAND's command line
//! are not stored with the hold or shown by `status`, and `renew`/`release`
//! take the owner token from RLOCK_TOKEN so it need not be on argv.

use crate::support::expect::assert_lines;
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
    let stored: Vec<String> = redis.cmd(&["HVALS", "rlock:{secret}:leases"]);
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
    assert_lines(
        &err,
        "rlock: envtok: the owner token is needed: --token TOKEN, or RLOCK_TOKEN in the environment; \
         to remove any holder's hold (break-glass): rlock release --force envtok",
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

/// Every process whose command line (world-readable in /proc/PID/cmdline)
/// contains `secret`.
fn processes_showing(secret: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let shown = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            shown.contains(secret).then(|| format!("{pid}: {shown}"))
        })
        .collect()
}

/// With the password in RLOCK_URL and the token in RLOCK_TOKEN, no process
/// rlock runs or leaves running shows either in /proc/PID/cmdline: not a
/// holding `run` nor its guardian, not the `acquire --while-pid` keeper, not a
/// `renew` stuck on a stalled server.
#[test]
fn no_process_shows_the_password_or_the_token_on_its_command_line() {
    let password = format!("cmdline-pw-{}", std::process::id());
    let redis = RedisServer::start_with(&["--requirepass", &password]);
    let url = format!("redis://:{password}@127.0.0.1:{}", redis.port);
    let dir = crate::support::scratch::Scratch::new();

    let mut holder = spawn_quiet(
        rlock::bare()
            .env("RLOCK_URL", &url)
            .args(["run", "held", "--", "sleep", "30"]),
    );
    expect_within(rlock::LIMIT, "the hold", || {
        !redis.lock_keys("held").is_empty()
    });

    let token_file = dir.file("token");
    let stop = dir.file("stop");
    let script = format!(
        "{bin} acquire --ttl 2s --while-pid $$ kept > {token_file} || exit 9; \
         while [ ! -e {stop} ]; do sleep 0.02; done",
        bin = rlock::bin()
    );
    let mut shell = spawn_quiet(
        std::process::Command::new("sh")
            .env("RLOCK_URL", &url)
            .args(["-c", &script]),
    );
    expect_within(rlock::LIMIT, "the token", || {
        dir.read("token").trim().len() == 32
    });
    let token = dir.read("token").trim().to_owned();

    // A renew that waits on a stopped server is still running when looked at.
    redis.freeze();
    let mut renew = spawn_quiet(
        rlock::bare()
            .env("RLOCK_URL", &url)
            .env("RLOCK_TOKEN", &token)
            .args(["--connect-timeout", "20s", "renew", "kept"]),
    );
    let seen_running = crate::support::wait_until(rlock::LIMIT, || {
        std::fs::read(format!("/proc/{}/cmdline", renew.pid))
            .is_ok_and(|c| c.windows(5).any(|w| w == b"renew"))
    });
    let shown = [processes_showing(&password), processes_showing(&token)];
    redis.thaw();
    assert!(seen_running, "the renew process was not seen");
    assert!(
        shown[0].is_empty(),
        "password on a command line: {:?}",
        shown[0]
    );
    assert!(
        shown[1].is_empty(),
        "token on a command line: {:?}",
        shown[1]
    );
    assert_eq!(renew.wait_within(rlock::LIMIT).code(), Some(0));
    std::fs::write(&stop, "").unwrap();
    assert!(shell.wait_within(rlock::LIMIT).success());
    holder.kill();
}

/// `--password-file` is read again for each new connection: a password that
/// rotates during a long hold (cloud IAM tokens last minutes) still lets the
/// watchdog reconnect; a file others may read is refused; nothing prints it.
#[test]
fn a_password_file_is_read_again_at_each_connection() {
    use std::os::unix::fs::PermissionsExt;
    let redis = RedisServer::start();
    redis.cmd::<String>(&[
        "ACL",
        "SETUSER",
        "job",
        "on",
        ">first-pw-1",
        "~*",
        "&*",
        "+@all",
    ]);
    let dir = crate::support::scratch::Scratch::new();
    let file = dir.path().join("password");
    std::fs::write(&file, "first-pw-1\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let url = format!("redis://job@127.0.0.1:{}", redis.port);
    let started = dir.file("started");

    let holder = crate::support::rlock::spawn(
        rlock(&url)
            .arg("--password-file")
            .arg(&file)
            .args(["run", "--ttl", "1s", "rotating", "--"])
            .args(crate::support::rlock::sh(&format!(
                "touch {started}; sleep 3"
            ))),
    );
    expect_within(rlock::LIMIT, "the hold", || {
        std::path::Path::new(&started).exists()
    });
    // Rotate: a new password in the file and on the server, and every
    // connection of the user dropped, so that the next renewal reconnects.
    std::fs::write(&file, "second-pw-2\n").unwrap();
    redis.cmd::<String>(&["ACL", "SETUSER", "job", "resetpass", ">second-pw-2"]);
    let killed: i64 = redis.cmd(&["CLIENT", "KILL", "USER", "job"]);
    assert!(killed >= 1, "the holder's connection was dropped");
    let out = holder.output_within(rlock::LIMIT);
    assert_eq!(code(&out), 0, "{}", show(&out));

    let out = rlock::output(
        rlock(&url)
            .arg("--password-file")
            .arg(&file)
            .args(["status", "rotating"]),
    );
    assert_eq!(code(&out), 0, "{}", show(&out));

    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = rlock::output(
        rlock(&url)
            .arg("--password-file")
            .arg(&file)
            .args(["run", "x", "--", "true"]),
    );
    let err = assert_fails(&out, 2);
    assert_lines(
        &err,
        &format!(
            "rlock: --password-file {} may be read by group or others: chmod 600 it",
            file.display()
        ),
    );
    assert!(!err.contains("second-pw-2"), "{err}");

    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let with_pw = format!("redis://job:second-pw-2@127.0.0.1:{}", redis.port);
    let out = rlock::output(
        rlock(&with_pw)
            .arg("--password-file")
            .arg(&file)
            .args(["run", "x", "--", "true"]),
    );
    let err = assert_fails(&out, 2);
    assert_lines(
        &err,
        "rlock: --password-file and a password in the URL: give the password once",
    );
    assert!(!err.contains("second-pw-2"), "{err}");
}

/// Whoever can read Redis learns no owner token: rlock's layout keeps only a
/// digest of each (holders and waiters alike), and what it keeps is nothing
/// `release`, `renew` or RLOCK_TOKENS accept.
#[test]
fn no_owner_token_is_readable_in_redis() {
    let redis = RedisServer::start();
    let url = redis.url();
    let out = rlock::output(rlock(&url).args(["acquire", "--ttl", "30s", "vault"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let token = stdout(&out).trim().to_owned();
    let dir = crate::support::scratch::Scratch::new();
    let seen = dir.file("waiter-token");
    // A waiter, registered behind the hold, with its own token.
    let waiter = spawn_quiet(
        rlock(&url)
            .args(["run", "--wait", "20s", "vault", "--"])
            .args(crate::support::rlock::sh(&format!(
                "echo $RLOCK_TOKEN > {seen}"
            ))),
    );
    expect_within(rlock::LIMIT, "the waiter to register", || {
        redis.cmd::<i64>(&["ZCARD", "rlock:{vault}:waiters"]) == 1
    });
    // Every key and everything in it, the history stream's events included.
    let dump = || {
        let mut everything = String::new();
        for key in redis.keys() {
            everything.push_str(&key);
            let kind: String = redis.cmd(&["TYPE", &key]);
            let values: Vec<String> = match kind.as_str() {
                "hash" => redis.cmd(&["HGETALL", &key]),
                "zset" => redis.cmd(&["ZRANGE", &key, "0", "-1", "WITHSCORES"]),
                "list" => redis.cmd(&["LRANGE", &key, "0", "-1"]),
                "string" => vec![redis.cmd(&["GET", &key])],
                "stream" => {
                    let entries: Vec<(String, Vec<String>)> =
                        redis.cmd(&["XRANGE", &key, "-", "+"]);
                    entries
                        .into_iter()
                        .flat_map(|(id, fields)| std::iter::once(id).chain(fields))
                        .collect()
                }
                other => panic!("{key} is a {other}"),
            };
            everything.push_str(&values.join(" "));
        }
        everything
    };
    let everything = dump();
    assert!(
        everything.contains("acquired"),
        "the acquisition is in the history: {everything}"
    );
    assert!(
        !everything.contains(&token),
        "the token is stored: {everything}"
    );
    // What is stored in its place opens nothing.
    let stored: Vec<String> = redis.cmd(&["HKEYS", "rlock:{vault}:leases"]);
    assert_eq!(stored.len(), 1);
    let out = rlock::output(rlock(&url).args(["release", "vault", "--token", &stored[0]]));
    assert_eq!(code(&out), 1, "{}", show(&out));
    let out = rlock::output(rlock(&url).args(["renew", "vault", "--token", &stored[0]]));
    assert_eq!(code(&out), 1, "{}", show(&out));
    let out = rlock::output(
        rlock(&url)
            .args(["run", "-n", "vault", "--", "true"])
            .env("RLOCK_TOKENS", &stored[0]),
    );
    assert_eq!(code(&out), 75, "a digest re-enters nothing: {}", show(&out));
    // The token itself still renews and releases, and the waiter then runs.
    let out = rlock::output(rlock(&url).args(["renew", "vault", "--token", &token]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let out = rlock::output(rlock(&url).args(["release", "vault", "--token", &token]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let out = waiter.output_within(rlock::LIMIT);
    assert_eq!(code(&out), 0, "{}", show(&out));
    let waiter_token = std::fs::read_to_string(&seen).unwrap();
    assert!(
        !everything.contains(waiter_token.trim()),
        "the waiter's token is stored"
    );
    // The history now holds both holds' events (the waiter's handed over by
    // the release): neither token, nor the digest standing for either.
    let after = dump();
    assert!(after.contains("released"), "{after}");
    for secret in [&token, waiter_token.trim(), &stored[0]] {
        assert!(!after.contains(secret), "{secret} is stored: {after}");
    }
}

/// Names ending in KEY, CREDENTIAL(S) or SECRET, `--api-key X`,
/// `-pX` and `Authorization: Bearer X` (also inside an `sh -c` string) are
/// masked in the stored command line too.
#[test]
fn keys_credentials_api_keys_glued_passwords_and_bearer_tokens_are_not_stored() {
    let redis = RedisServer::start();
    let url = redis.url();
    let mut holder = spawn_quiet(rlock(&url).args([
        "run",
        "masked",
        "--",
        "sh",
        "-c",
        "sleep 5; curl -H 'Authorization: Bearer b3arer' https://x",
        "AWS_SECRET_ACCESS_KEY=k3y",
        "GOOGLE_CREDENTIALS=cr3d",
        "--api-key",
        "ap1",
        "-pmysq1",
    ]));
    expect_within(rlock::LIMIT, "the hold", || {
        !redis.lock_keys("masked").is_empty()
    });
    let status = rlock::output(rlock(&url).args(["status", "masked"]));
    assert_eq!(code(&status), 0, "{}", show(&status));
    let shown = stdout(&status);
    let stored: Vec<String> = redis.cmd(&["HVALS", "rlock:{masked}:leases"]);
    let stored = stored.join(" ");
    for text in [&shown, &stored] {
        for secret in ["b3arer", "k3y", "cr3d", "ap1", "mysq1"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        for hidden in [
            "Bearer ***",
            "AWS_SECRET_ACCESS_KEY=***",
            "GOOGLE_CREDENTIALS=***",
            "--api-key ***",
            "-p***",
        ] {
            assert!(text.contains(hidden), "{hidden} not in {text}");
        }
    }
    holder.kill();
}
