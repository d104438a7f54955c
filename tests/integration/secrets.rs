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

/// Issue 25: names ending in KEY, CREDENTIAL(S) or SECRET, `--api-key X`,
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
    let stored: Vec<String> = redis.cmd(&["HVALS", "rlock:{masked}:holders"]);
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
