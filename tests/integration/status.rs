//! `status` and `list`: who holds a lock, never tokens, hostile text sanitized.

use crate::support::expect_within;
use crate::support::holder::{hold, holder};
use crate::support::redis_server::RedisServer;
use crate::support::rlock::{self, code, output, rlock, sh, show, spawn, spawn_quiet, stdout};
use crate::support::scratch::Scratch;

#[test]
fn status_shows_holders_waiters_and_fence_but_no_token() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let _holder = hold(&redis, &dir, "shown");
    let _waiter = spawn_quiet(rlock(&redis.url()).args(["run", "shown", "--", "true"]));
    expect_within(crate::support::rlock::LIMIT, "the waiter", || {
        redis.cmd::<i64>(&["ZCARD", "rlock:{shown}:waiters"]) == 1
    });
    let token: String = redis
        .cmd::<Vec<String>>(&["HKEYS", "rlock:{shown}"])
        .remove(0);
    let out = output(rlock(&redis.url()).args(["status", "shown"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let text = stdout(&out);
    assert!(
        text.contains("shown") && text.contains("exclusive"),
        "{text}"
    );
    assert!(text.contains("held for"), "{text}");
    let out = output(rlock(&redis.url()).args(["status", "--json", "shown"]));
    let json = stdout(&out);
    let fence: String = redis.cmd(&["GET", "rlock:{shown}:fence"]);
    for field in [
        "\"name\":\"shown\"",
        "\"held\":true",
        "\"kind\":\"exclusive\"",
        "\"limit\":1",
        "\"waiting\":1",
        &format!("\"fence\":{fence}"),
        "\"host\":",
        "\"pid\":",
        "\"command\":",
        "\"since\":\"",
        "\"ttl_ms\":",
    ] {
        assert!(json.contains(field), "{field} in {json}");
    }
    assert!(
        !text.contains(&token) && !json.contains(&token),
        "tokens are never shown"
    );
}

#[test]
fn list_finds_held_and_waited_locks_by_pattern_with_scan() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let _a = holder(&redis, &dir, &["--shared"], "app-a", "a");
    let _b = hold(&redis, &dir, "app-b");
    let _other = hold(&redis, &dir, "other");
    redis.cmd::<String>(&["CONFIG", "RESETSTAT"]);
    let out = output(rlock(&redis.url()).args(["list", "--json", "app-*"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let json = stdout(&out);
    assert!(
        json.starts_with('[') && json.trim_end().ends_with(']'),
        "{json}"
    );
    assert!(
        json.contains("\"name\":\"app-a\"") && json.contains("\"kind\":\"shared\""),
        "{json}"
    );
    assert!(json.contains("\"name\":\"app-b\""), "{json}");
    assert!(!json.contains("other"), "{json}");
    let stats: String = redis.cmd(&["INFO", "commandstats"]);
    assert!(
        stats.contains("cmdstat_scan") && !stats.contains("cmdstat_keys"),
        "{stats}"
    );
    let out = output(rlock(&redis.url()).args(["list"]));
    assert!(stdout(&out).contains("other"), "{}", show(&out));
}

#[test]
fn hostile_holder_text_is_sanitized() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let ready = dir.file("ready");
    let release = dir.file("release");
    let _holder = spawn_quiet(
        rlock(&redis.url())
            .args(["run", "evil", "--", "sh", "-c"])
            .arg(format!("touch {ready}; while [ ! -e {release} ]; do sleep 0.02; done # \u{1b}[2J\u{7}\u{202e}"))
            .arg("sh"),
    );
    expect_within(crate::support::rlock::LIMIT, "the holder", || {
        std::path::Path::new(&ready).exists()
    });
    for args in [
        &["status", "evil"][..],
        &["status", "--json", "evil"],
        &["list"],
    ] {
        let out = output(rlock(&redis.url()).args(args));
        let text = stdout(&out);
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}') && !text.contains('\u{202e}'),
            "{text:?}"
        );
    }
}

/// A holder says what it is: `--note` (or RLOCK_NOTE), else the CI job's URL
/// from the CI system's environment; `status`, `--json` and busy messages show
/// it, one line, without passwords. `acquire` records its caller's command line.
#[test]
fn holders_carry_a_note_or_their_ci_job() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let go = dir.file("go");
    let held = |name: &str, env: &[(&str, &str)], opts: &[&str]| {
        let mut cmd = rlock(&redis.url());
        cmd.envs(env.iter().copied())
            .arg("run")
            .args(opts)
            .args([name, "--"])
            .args(sh(&format!("while [ ! -e {go} ]; do sleep 0.02; done")));
        let proc = spawn(&mut cmd);
        expect_within(rlock::LIMIT, "the lock to be held", || {
            redis.cmd::<i64>(&["EXISTS", &format!("rlock:{{{name}}}")]) == 1
        });
        proc
    };
    let _a = held(
        "noted",
        &[],
        &["--note", "nightly\nbackup https://u:pw@ci.example/1"],
    );
    let _b = held(
        "github",
        &[
            ("GITHUB_SERVER_URL", "https://github.com"),
            ("GITHUB_REPOSITORY", "acme/shop"),
            ("GITHUB_RUN_ID", "42"),
        ],
        &[],
    );
    let _c = held(
        "gitlab",
        &[
            ("RLOCK_NOTE", "deploy from laptop"),
            ("CI_JOB_URL", "https://gl/j/7"),
        ],
        &[],
    );
    let _d = held("gitlab-job", &[("CI_JOB_URL", "https://gl/j/8")], &[]);
    let _e = held("jenkins", &[("BUILD_URL", "https://jenkins/job/x/9/")], &[]);
    let _f = held(
        "buildkite",
        &[(
            "BUILDKITE_BUILD_URL",
            "https://buildkite.com/acme/builds/10",
        )],
        &[],
    );
    let out = output(rlock(&redis.url()).args([
        "status",
        "--json",
        "gitlab-job",
        "jenkins",
        "buildkite",
    ]));
    let json = stdout(&out);
    for note in [
        "https://gl/j/8",
        "https://jenkins/job/x/9/",
        "https://buildkite.com/acme/builds/10",
    ] {
        assert!(
            json.contains(&format!("\"note\":\"{note}\"")),
            "{note}: {json}"
        );
    }
    let out = output(rlock(&redis.url()).args(["list", "--json"]));
    assert!(
        stdout(&out).contains("\"note\":\"https://github.com/acme/shop/actions/runs/42\""),
        "list --json: {}",
        show(&out)
    );
    // The waiting line off a terminal and the timeout name the note too.
    let out = output(
        rlock(&redis.url())
            .env_remove("RLOCK_PROGRESS_INTERVAL")
            .args(["run", "--wait", "300ms", "github", "--", "true"]),
    );
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(code(&out), 75, "{err}");
    let noted = err
        .lines()
        .filter(|l| l.contains("note 'https://github.com/acme/shop/actions/runs/42'"))
        .count();
    assert_eq!(noted, 2, "the waiting line and the timeout: {err}");
    let out = output(rlock(&redis.url()).args(["status", "--json", "noted", "github", "gitlab"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let json = stdout(&out);
    assert!(
        json.contains("\"note\":\"nightly backup https://u:***@ci.example/1\""),
        "{json}"
    );
    assert!(
        json.contains("\"note\":\"https://github.com/acme/shop/actions/runs/42\""),
        "{json}"
    );
    assert!(
        json.contains("\"note\":\"deploy from laptop\""),
        "RLOCK_NOTE first: {json}"
    );
    assert!(!json.contains("pw@"), "{json}");
    let out = output(rlock(&redis.url()).args(["status", "github"]));
    assert!(
        stdout(&out).contains("note 'https://github.com/acme/shop/actions/runs/42'"),
        "{}",
        show(&out)
    );
    let out = output(rlock(&redis.url()).args(["run", "--no-wait", "github", "--", "true"]));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(code(&out), 75, "{err}");
    assert!(
        err.contains("note 'https://github.com/acme/shop/actions/runs/42'"),
        "{err}"
    );
    std::fs::write(&go, "").unwrap();
}

/// `acquire` records the command line of the script that called it, not its own.
#[test]
fn acquire_records_the_command_line_of_its_caller() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let script = dir.file("caller.sh");
    std::fs::write(
        &script,
        format!(
            "{} --url {} acquire --ttl 30s scripted >/dev/null\n",
            rlock::bin(),
            redis.url()
        ),
    )
    .unwrap();
    let out = output(std::process::Command::new("sh").args([&script, "some-arg"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let out = output(rlock(&redis.url()).args(["status", "--json", "scripted"]));
    let json = stdout(&out);
    assert!(
        json.contains("caller.sh some-arg"),
        "the caller's command line: {json}"
    );
    assert!(!json.contains("acquire"), "not rlock's own: {json}");
}

/// `status --check NAME...`: nothing printed, 0 when every NAME is held and 1
/// when one is free, for monitoring scripts.
#[test]
fn status_check_answers_with_its_exit_status() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let _holder = hold(&redis, &dir, "watched");
    let check =
        |names: &[&str]| output(rlock(&redis.url()).args(["status", "--check"]).args(names));
    let out = check(&["watched"]);
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert!(
        out.stdout.is_empty() && out.stderr.is_empty(),
        "{}",
        show(&out)
    );
    let out = check(&["watched", "idle"]);
    assert_eq!(code(&out), 1, "{}", show(&out));
    assert!(out.stdout.is_empty(), "{}", show(&out));
    assert_eq!(code(&check(&[])), 2, "--check needs names");
}
