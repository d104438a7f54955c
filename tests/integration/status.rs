//! `status` and `list`: who holds a lock, never tokens, hostile text sanitized.

use crate::support::expect::{assert_has_line, assert_lines};
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
        .cmd::<Vec<String>>(&["HKEYS", "rlock:{shown}:leases"])
        .remove(0);
    let out = output(rlock(&redis.url()).args(["status", "shown"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let text = stdout(&out);
    assert_lines(
        &text,
        &format!(
            "server 127.0.0.1:{} db 0 prefix rlock
NAME  STATE      HOLDERS WAITING
shown exclusive        1       1
  pid {} on [..] ('sh -c [..]') held for [..], lease left [..]
  waiting: pid {} on [..] for [..]",
            redis.port, _holder.pid, _waiter.pid
        ),
    );
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
    assert_has_line(&stdout(&out), "other [..]");
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
            redis.cmd::<i64>(&["EXISTS", &format!("rlock:{{{name}}}:leases")]) == 1
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
    // The waiting line and the timeout.
    assert_lines(
        &err,
        "rlock: 20[..]Z waiting for github: held by pid [..] on [..] \
         ('sh -c [..]', note 'https://github.com/acme/shop/actions/runs/42') \
         for [..]; 1st in line; waited [..]
rlock: github: not acquired: still held after waiting 300ms; held by pid [..] on [..] \
         ('sh -c [..]', note 'https://github.com/acme/shop/actions/runs/42') for [..]",
    );
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
    assert_has_line(
        &stdout(&out),
        "  pid [..] on [..] ('sh -c [..]', note 'https://github.com/acme/shop/actions/runs/42') \
         held for [..], lease left [..]",
    );
    let out = output(rlock(&redis.url()).args(["run", "--no-wait", "github", "--", "true"]));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(code(&out), 75, "{err}");
    assert_lines(
        &err,
        "rlock: github: not acquired: held by pid [..] on [..] \
         ('sh -c [..]', note 'https://github.com/acme/shop/actions/runs/42') for [..]",
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

/// `status` and `list` never say "free" for a lock they could not
/// see: a lock directory this user may not read, one that does not exist
/// (and is not created by the read), an unreachable server: 69, one line.
#[test]
fn status_and_list_exit_69_when_they_cannot_see_the_locks() {
    let dir = Scratch::new();
    let locks = dir.file("locks");
    let url = format!("file:{locks}");
    let go = dir.file("go");
    let _holder = spawn_quiet(
        rlock(&url)
            .args(["run", "held-by-root", "--"])
            .args(sh(&format!("while [ ! -e {go} ]; do sleep 0.02; done"))),
    );
    expect_within(rlock::LIMIT, "the file: lock to be held", || {
        let out = output(rlock(&url).args(["status", "--check", "held-by-root"]));
        code(&out) == 0
    });
    let root = crate::support::process::is_root();
    if !root {
        std::fs::set_permissions(&locks, std::os::unix::fs::PermissionsExt::from_mode(0o000))
            .unwrap();
    }
    for args in [
        &["status", "held-by-root"][..],
        &["status", "--check", "held-by-root"],
        &["status", "--json", "held-by-root"],
        &["status"],
        &["list"],
    ] {
        let mut cmd = rlock(&url);
        cmd.args(args);
        let mut cmd = if root {
            crate::support::process::as_other_user(&cmd)
        } else {
            cmd
        };
        let out = output(&mut cmd);
        let err = rlock::assert_fails(&out, 69);
        assert_lines(
            &err,
            &format!(
                "rlock: server {url} unavailable: cannot read the lock directory {locks}: \
                 permission denied; run as the user whose jobs lock there (or root)"
            ),
        );
        assert!(out.stdout.is_empty(), "{args:?}: {}", show(&out));
    }
    if !root {
        std::fs::set_permissions(&locks, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .unwrap();
    }
    std::fs::write(&go, "").unwrap();

    // A missing DIR: nothing seen, and a read never creates it.
    let missing = dir.file("missing");
    for args in [&["status", "x"][..], &["status", "--check", "x"], &["list"]] {
        let out = output(rlock(&format!("file:{missing}")).args(args));
        let err = rlock::assert_fails(&out, 69);
        assert_lines(
            &err,
            &format!(
                "rlock: server file:{missing} unavailable: the lock directory {missing} \
                 does not exist, so no lock there can be seen \
                 (no rlock has locked in it yet, or the --url names another DIR)"
            ),
        );
        assert!(
            !std::path::Path::new(&missing).exists(),
            "{args:?} created DIR"
        );
    }

    // An unreachable server: the line names what was asked for (the NAMEs,
    // the pattern), nothing when all of them were.
    let (_socket, port) = crate::support::redis_server::refusing_port();
    for (args, label) in [
        (&["status", "x"][..], "x: "),
        (&["status", "--check", "x"], "x: "),
        (&["status"], ""),
        (&["list"], "*: "),
    ] {
        let out = output(rlock(&format!("redis://127.0.0.1:{port}")).args(args));
        let err = rlock::assert_fails(&out, 69);
        assert!(
            err.starts_with(&format!(
                "rlock: {label}server 127.0.0.1:{port} unavailable"
            )),
            "{args:?}: {err}"
        );
    }
}

/// The human output starts with the server(s) asked and its JSON
/// carries `"server"`; a free lock reads `free`; a semaphore shows
/// holders/limit; the fence is shown with -v (always in JSON); waiters are
/// listed with host, pid, note and how long they have waited.
#[test]
fn status_names_its_server_and_shows_free_locks_semaphores_and_waiters() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let server = format!("127.0.0.1:{}", redis.port);
    let _held = hold(&redis, &dir, "busy");
    let _waiter = spawn_quiet(rlock(&redis.url()).args([
        "run",
        "--note",
        "second in line",
        "busy",
        "--",
        "true",
    ]));
    expect_within(rlock::LIMIT, "the waiter", || {
        redis.cmd::<i64>(&["ZCARD", "rlock:{busy}:waiters"]) == 1
    });
    let _slot = holder(&redis, &dir, &["--limit", "3"], "slots", "slot-a");
    let _slot2 = holder(&redis, &dir, &["--limit", "3"], "slots", "slot-b");

    let out = output(rlock(&redis.url()).args(["status", "busy", "idle", "slots"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let text = stdout(&out);
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some(format!("server {server} db 0 prefix rlock").as_str()),
        "{text}"
    );
    let row = |name: &str| -> Vec<String> {
        text.lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} in {text}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(row("idle"), ["idle", "free", "0", "0"], "{text}");
    assert_eq!(row("busy"), ["busy", "exclusive", "1", "1"], "{text}");
    assert_eq!(row("slots"), ["slots", "semaphore", "2/3", "0"], "{text}");
    assert_lines(
        &text,
        &format!(
            "server {server} db 0 prefix rlock
NAME  STATE      HOLDERS WAITING
busy  exclusive        1       1
  pid [..] on [..] ('sh -c [..]') held for [..], lease left [..]
  waiting: pid {} on [..] (note 'second in line') for [..]
idle  free             0       0
slots semaphore      2/3       0
  pid {} on [..] ('sh -c [..]') held for [..], lease left [..]
  pid {} on [..] ('sh -c [..]') held for [..], lease left [..]",
            _waiter.pid, _slot.pid, _slot2.pid
        ),
    );
    assert!(!text.contains("fence"), "the fence only with -v: {text}");
    let fence: String = redis.cmd(&["GET", "rlock:{busy}:fence"]);
    assert!(!text.contains(&fence), "{text}");
    let out = output(rlock(&redis.url()).args(["-v", "status", "busy"]));
    assert_has_line(&stdout(&out), &format!("  fence {fence}"));

    let out = output(rlock(&redis.url()).args(["status", "--json", "busy", "idle"]));
    let json = stdout(&out);
    assert_eq!(json.lines().count(), 2, "{json}");
    for line in json.lines() {
        assert!(line.contains(&format!("\"server\":\"{server}\"")), "{line}");
    }
    assert!(
        json.contains("\"waiting\":1,\"waiters\":[{\"host\":\""),
        "{json}"
    );
    assert!(
        json.contains("\"note\":\"second in line\",\"waiting_ms\":"),
        "{json}"
    );
    assert!(
        json.contains("\"name\":\"idle\"") && json.contains("\"held\":false"),
        "{json}"
    );
    let out = output(rlock(&redis.url()).args(["list", "--json"]));
    assert!(
        stdout(&out).contains(&format!("\"server\":\"{server}\"")),
        "{}",
        show(&out)
    );
    let out = output(rlock(&redis.url()).args(["list"]));
    assert!(
        stdout(&out).starts_with(&format!("server {server} db 0 prefix rlock\n")),
        "{}",
        show(&out)
    );

    // file: and a quorum name theirs.
    let locks = dir.file("locks");
    let out = output(rlock(&format!("file:{locks}")).args(["run", "f", "--", "true"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let out = output(rlock(&format!("file:{locks}")).args(["status", "f"]));
    assert!(
        stdout(&out).starts_with(&format!("file:{locks}\n")),
        "{}",
        show(&out)
    );
    let (b, c) = (RedisServer::start(), RedisServer::start());
    let out =
        output(rlock(&redis.url()).args(["--url", &b.url(), "--url", &c.url(), "status", "q"]));
    assert!(
        stdout(&out).starts_with("quorum of 3: 127.0.0.1:"),
        "{}",
        show(&out)
    );
}

/// -v names the server and where the setting came from; a locking
/// run off a terminal that falls back to the default server says so once
/// (-q silences it).
#[test]
fn every_command_can_say_which_server_it_asks_and_why() {
    let redis = RedisServer::start();
    let server = format!("127.0.0.1:{}", redis.port);
    let url = redis.url();
    let from = |how: &str| match how {
        "--url" => rlock(&url),
        var => {
            let mut cmd = rlock::bare();
            cmd.env(var, &url);
            cmd
        }
    };
    for how in ["--url", "RLOCK_URL", "REDIS_URL"] {
        for args in [
            &["-v", "run", "v", "--", "true"][..],
            &["-v", "status", "v"],
        ] {
            let out = output(from(how).args(args));
            assert_eq!(code(&out), 0, "{}", show(&out));
            let err = rlock::stderr(&out);
            assert_has_line(
                &err,
                &format!("rlock: server {server} db 0 prefix rlock (from {how})"),
            );
        }
    }
    let out = output(rlock::bare().args(["run", "-n", "default-note", "--", "true"]));
    let err = rlock::stderr(&out);
    assert_eq!(
        err.matches(
            "no --url, RLOCK_URL or REDIS_URL: locking on the default server 127.0.0.1:6379"
        )
        .count(),
        1,
        "{}",
        show(&out)
    );
    let out = output(rlock::bare().args(["-q", "run", "-n", "default-note", "--", "true"]));
    assert!(!rlock::stderr(&out).contains("default"), "{}", show(&out));
}

/// `file:` waiters are listed too (this host, pid, note, waiting
/// for), first come first.
#[test]
fn file_waiters_are_listed_with_their_note() {
    let dir = Scratch::new();
    let url = format!("file:{}", dir.file("locks"));
    let go = dir.file("go");
    let _holder = spawn_quiet(
        rlock(&url)
            .args(["run", "f", "--"])
            .args(sh(&format!("while [ ! -e {go} ]; do sleep 0.02; done"))),
    );
    expect_within(rlock::LIMIT, "the holder", || {
        code(&output(rlock(&url).args(["status", "--check", "f"]))) == 0
    });
    let waiter = spawn_quiet(rlock(&url).args(["run", "--note", "local wait", "f", "--", "true"]));
    expect_within(rlock::LIMIT, "the waiter", || {
        stdout(&output(rlock(&url).args(["status", "--json", "f"]))).contains("\"waiting\":1")
    });
    let json = stdout(&output(rlock(&url).args(["status", "--json", "f"])));
    assert!(
        json.contains(&format!(
            "\"waiters\":[{{\"host\":\"{}\",\"pid\":{},\"note\":\"local wait\",\"waiting_ms\":",
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .unwrap()
                .trim(),
            waiter.pid
        )),
        "{json}"
    );
    let text = stdout(&output(rlock(&url).args(["status", "f"])));
    assert_has_line(
        &text,
        &format!(
            "  waiting: pid {} on {} (note 'local wait') for [..]",
            waiter.pid,
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .unwrap()
                .trim(),
        ),
    );
    std::fs::write(&go, "").unwrap();
}

/// `list` reads the states of many locks a hundred to a round trip (issue
/// 28): every lock is there, held, in name order, after a SCRIPT FLUSH too;
/// a lock that cannot be read in a batch is still named in the error.
#[test]
fn list_of_hundreds_of_locks_reads_them_in_batches_and_names_a_bad_one() {
    let redis = RedisServer::start();
    // Three batches: the first lock alone, a hundred, the rest (and output
    // that fits in a pipe).
    let names: Vec<String> = (0..150).map(|i| format!("many-{i:03}")).collect();
    for chunk in names.chunks(15) {
        let mut procs: Vec<_> = chunk
            .iter()
            .map(|name| {
                rlock(&redis.url())
                    .args(["acquire", "--ttl", "5m", name])
                    .stdout(std::process::Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for proc in &mut procs {
            assert!(proc.wait().unwrap().success());
        }
    }
    redis.cmd::<String>(&["SCRIPT", "FLUSH"]);
    redis.cmd::<String>(&["CONFIG", "RESETSTAT"]);
    let out = output(rlock(&redis.url()).args(["list", "--json", "many-*"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let json = stdout(&out);
    let listed: Vec<&str> = json
        .split("\"name\":\"")
        .skip(1)
        .map(|rest| &rest[..rest.find('"').unwrap()])
        .collect();
    assert_eq!(listed, names, "every lock, in name order");
    assert_eq!(json.matches("\"held\":true").count(), names.len(), "{json}");
    let stats: String = redis.cmd(&["INFO", "commandstats"]);
    assert!(
        stats.contains(&format!("cmdstat_evalsha:calls={},", names.len() + 1)),
        "one status each, and the first again after loading the script: {stats}"
    );
    redis.cmd::<String>(&["SET", "rlock:{many-120}:fence", "abc"]);
    let out = output(rlock(&redis.url()).args(["list", "many-*"]));
    assert_eq!(code(&out), 69, "{}", show(&out));
    let err = crate::support::rlock::stderr(&out);
    assert_lines(
        &err,
        "rlock: many-120: key rlock:{many-120}:fence holds a value that is not a fencing counter; \
         rlock will not overwrite it",
    );
}
