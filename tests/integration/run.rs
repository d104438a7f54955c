//! `rlock run` on one server: statuses, exclusion, waiting, renewal,
//! re-entrancy and fencing.

use std::time::Duration;

use crate::support::expect::{assert_has_line, assert_lines};
use crate::support::holder::{hold, release};
use crate::support::redis_server::RedisServer;
use crate::support::rlock::{self, code, output, rlock, sh, show, spawn, spawn_quiet, stdout};
use crate::support::scratch::Scratch;
use crate::support::{expect_within, now_ms};

#[test]
fn exits_with_the_status_of_command() {
    let redis = RedisServer::start();
    for (script, status) in [("exit 0", 0), ("exit 3", 3), ("kill -9 $$", 137)] {
        let out = output(
            rlock(&redis.url())
                .args(["run", "status", "--"])
                .args(sh(script)),
        );
        assert_eq!(code(&out), status, "{script}: {}", show(&out));
    }
    assert_eq!(
        redis.lock_keys("status"),
        Vec::<String>::new(),
        "the lock is released"
    );
}

#[test]
fn an_executable_script_without_a_shebang_runs_with_sh_as_under_execvp() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let script = dir.path().join("no-shebang");
    std::fs::write(&script, format!("echo \"ran: $1\" > {}\n", dir.file("out"))).unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = output(
        rlock(&redis.url())
            .args(["run", "plain", "--"])
            .arg(&script)
            .arg("arg one"),
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert_eq!(dir.read("out"), "ran: arg one\n");
}

#[test]
fn command_gets_name_token_and_fence_and_inherits_stdio() {
    let redis = RedisServer::start();
    let out = output(
        rlock(&redis.url())
            .args(["run", "env-check", "--"])
            .args(sh(
                "echo \"$RLOCK_NAME $RLOCK_TOKEN $RLOCK_FENCE\"; echo err >&2",
            )),
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
    let line = stdout(&out);
    let fields: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(fields[0], "env-check");
    assert_eq!(fields[1].len(), 32, "128-bit token in hex: {line}");
    assert!(fields[1].bytes().all(|b| b.is_ascii_hexdigit()));
    assert!(fields[2].parse::<u64>().unwrap() >= 1);
    assert_eq!(rlock::stderr(&out), "err\n");
}

/// Eight concurrent runs do a non-atomic read-modify-write of a counter file and
/// log their intervals: the count must be exact and no intervals may overlap.
#[test]
fn concurrent_runs_exclude_each_other() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    std::fs::write(dir.path().join("counter"), "0").unwrap();
    let script = format!(
        "s=$(date +%s%N); n=$(cat {c}); sleep 0.05; echo $((n+1)) > {c}; echo \"$s $(date +%s%N) $RLOCK_FENCE\" >> {log}",
        c = dir.file("counter"),
        log = dir.file("intervals")
    );
    let mut runs: Vec<_> = (0..8)
        .map(|_| {
            spawn(
                rlock(&redis.url())
                    .args(["run", "counter", "--"])
                    .args(sh(&script)),
            )
        })
        .collect();
    for run in &mut runs {
        assert!(run.wait_within(rlock::LIMIT).success());
    }
    assert_eq!(dir.read("counter").trim(), "8");
    crate::support::assert_exclusive_with_fences(&dir, "intervals", 8);
    assert_eq!(redis.lock_keys("counter"), Vec::<String>::new());
}

#[test]
fn no_wait_and_conflict_exit_code_when_taken() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let _holder = hold(&redis, &dir, "busy");
    let out = output(rlock(&redis.url()).args(["run", "--no-wait", "busy", "--", "true"]));
    let err = rlock::assert_fails(&out, 75);
    assert_lines(
        &err,
        "rlock: busy: not acquired: held by pid [..] on [..] ('sh -c [..]') for [..]s",
    );
    let out = output(rlock(&redis.url()).args(["run", "-n", "-E", "0", "busy", "--", "false"]));
    assert_eq!(code(&out), 0, "-E 0 skips: {}", show(&out));
    assert_eq!(rlock::stderr(&out), "", "quietly (cron mails any output)");
    let out = output(rlock(&redis.url()).args(["run", "--wait", "0", "busy", "--", "true"]));
    rlock::assert_fails(&out, 75);
    assert_eq!(
        redis.lock_keys("busy"),
        ["rlock:{busy}:leases"],
        "only the holder's keys"
    );
}

#[test]
fn wait_gives_up_after_the_duration_and_leaves_nothing() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let _holder = hold(&redis, &dir, "slow");
    let out = output(
        rlock(&redis.url()).args(["run", "--wait", "300ms", "-E", "9", "slow", "--", "true"]),
    );
    let err = rlock::assert_fails(&out, 9);
    assert_lines(
        &err,
        "rlock: slow: not acquired: still held after waiting 300ms; \
         held by pid [..] on [..] ('sh -c [..]') for [..]s",
    );
    let keys = redis.lock_keys("slow");
    assert_eq!(keys, ["rlock:{slow}:leases"], "no waiter left behind");
}

#[test]
fn waiter_is_woken_by_the_release() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let mut holder = hold(&redis, &dir, "w");
    let started = dir.file("waiter-ran");
    let mut waiter = spawn(
        rlock(&redis.url())
            .args(["run", "--wait", "20s", "w", "--"])
            .args(sh(&format!("date +%s%3N > {started}"))),
    );
    expect_within(rlock::LIMIT, "the waiter to register", || {
        redis.cmd::<i64>(&["ZCARD", "rlock:{w}:waiters"]) == 1
    });
    let released_at = now_ms();
    release(&dir, "w");
    assert!(holder.wait_within(rlock::LIMIT).success());
    assert!(waiter.wait_within(rlock::LIMIT).success());
    let ran_at: u128 = dir.read("waiter-ran").trim().parse().unwrap();
    // Push wake-up: the waiter ran right after the release, not after the
    // holder's 30 s lease would have run out.
    assert!(
        ran_at - released_at < 10_000,
        "woken {} ms after the release",
        ran_at - released_at
    );
    assert_eq!(redis.lock_keys("w"), Vec::<String>::new());
}

#[test]
fn a_short_ttl_is_renewed_for_a_longer_command() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let ready = dir.file("ready");
    let mut holder = spawn(
        rlock(&redis.url())
            .args(["run", "--ttl", "1s", "renewed", "--"])
            .args(sh(&format!("touch {ready}; sleep 3"))),
    );
    expect_within(rlock::LIMIT, "the holder to start", || {
        std::path::Path::new(&ready).exists()
    });
    // Throughout the 3 s command the lock stays held by it (a waiter is refused).
    let deadline = std::time::Instant::now() + Duration::from_millis(2500);
    while std::time::Instant::now() < deadline {
        let out = output(rlock(&redis.url()).args(["run", "-n", "renewed", "--", "true"]));
        assert_eq!(code(&out), 75, "lock must stay held: {}", show(&out));
        let pttl: i64 = redis.cmd(&["PTTL", "rlock:{renewed}:leases"]);
        assert!(
            pttl > 0 && pttl <= 1000,
            "ttl stays within the lease: {pttl}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(holder.wait_within(rlock::LIMIT).success());
}

#[test]
fn nested_run_of_the_same_lock_reenters_and_releases_only_its_hold() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let bin = &crate::support::rlock::bin();
    let url = redis.url();
    let script = format!(
        "echo \"$RLOCK_TOKEN $RLOCK_FENCE\" > {outer}; \
         {bin} --url {url} run -n nest -- sh -c 'echo \"$RLOCK_TOKEN $RLOCK_FENCE\"' > {inner} || exit 11; \
         {bin} --url {url} run -n nest -- true; echo $? > {sibling}; \
         redis-cli -p {port} hget rlock:{{nest}}:leases $(printf %s $RLOCK_TOKEN | sha1sum | cut -c1-32) | cut -d'|' -f1 > {count}",
        outer = dir.file("outer"),
        inner = dir.file("inner"),
        sibling = dir.file("sibling"),
        count = dir.file("count"),
        port = redis.port,
    );
    let out = output(rlock(&url).args(["run", "nest", "--"]).args(sh(&script)));
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert_eq!(
        dir.read("outer"),
        dir.read("inner"),
        "same token and fence when re-entering"
    );
    assert_eq!(
        dir.read("sibling").trim(),
        "0",
        "a second nested run re-enters too"
    );
    assert_eq!(
        dir.read("count").trim(),
        "1",
        "nested exits released only their own holds"
    );
    assert_eq!(redis.lock_keys("nest"), Vec::<String>::new());
}

#[test]
fn an_inherited_token_does_not_enter_a_lock_it_does_not_hold() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let _other = hold(&redis, &dir, "other");
    let bin = &crate::support::rlock::bin();
    let script = format!("{bin} --url {} run -n other -- true", redis.url());
    let out = output(
        rlock(&redis.url())
            .args(["run", "mine", "--"])
            .args(sh(&script)),
    );
    assert_eq!(code(&out), 75, "{}", show(&out));
}

#[test]
fn fence_strictly_increases_over_twenty_runs() {
    let redis = RedisServer::start();
    let mut last = 0u64;
    for _ in 0..20 {
        let out = output(
            rlock(&redis.url())
                .args(["run", "fenced", "--"])
                .args(sh("echo $RLOCK_FENCE")),
        );
        let fence: u64 = stdout(&out).trim().parse().unwrap();
        assert!(fence > last, "{fence} after {last}");
        last = fence;
    }
}

/// Successful calls of `command` from INFO commandstats (a NOSCRIPT reply,
/// answered by loading the script, counts as a failed call).
fn calls(redis: &RedisServer, command: &str) -> u64 {
    let info: String = redis.cmd(&["INFO", "commandstats"]);
    let prefix = format!("cmdstat_{command}:");
    let Some(stats) = info.lines().find_map(|l| l.strip_prefix(&prefix)) else {
        return 0;
    };
    let field = |name: &str| -> u64 {
        stats
            .split(',')
            .find_map(|kv| kv.strip_prefix(name))
            .map_or(0, |v| v.parse().unwrap())
    };
    field("calls=") - field("failed_calls=")
}

#[test]
fn a_release_hands_the_lock_to_one_waiter_not_all() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let mut holder = hold(&redis, &dir, "herd");
    const WAITERS: usize = 6;
    let mut waiters: Vec<_> = (0..WAITERS)
        .map(|_| {
            spawn_quiet(rlock(&redis.url()).args(["run", "--ttl", "60s", "herd", "--", "true"]))
        })
        .collect();
    expect_within(rlock::LIMIT, "all waiters to block", || {
        redis.cmd::<i64>(&["ZCARD", "rlock:{herd}:waiters"]) == WAITERS as i64
    });
    redis.cmd::<String>(&["CONFIG", "RESETSTAT"]);
    release(&dir, "herd");
    assert!(holder.wait_within(rlock::LIMIT).success());
    for waiter in &mut waiters {
        assert!(waiter.wait_within(rlock::LIMIT).success());
    }
    // One release by the holder, then per waiter only its release: each release
    // hands the lock to the next waiter (no second round trip to take it), and a
    // herd would add a failed acquire for every waiter woken in vain. The
    // holder took the lock before anyone waited, so its release was not given
    // the first waiter's list: one wake.lua call delivers that handoff. Each
    // handoff names the waiters then first in line, whose lists the new
    // holder's release is given.
    let scripts = calls(&redis, "evalsha") + calls(&redis, "eval");
    assert_eq!(
        scripts,
        2 + WAITERS as u64,
        "{}",
        redis.cmd::<String>(&["INFO", "commandstats"])
    );
    assert_eq!(redis.lock_keys("herd"), Vec::<String>::new());
}

#[test]
fn server_comes_from_rlock_url_then_redis_url() {
    let redis = RedisServer::start();
    let unused = "redis://127.0.0.1:1";
    let out = output(
        rlock::bare()
            .env("RLOCK_URL", redis.url())
            .env("REDIS_URL", unused)
            .args(["run", "e", "--", "true"]),
    );
    assert_eq!(
        code(&out),
        0,
        "RLOCK_URL wins over REDIS_URL: {}",
        show(&out)
    );
    let out = output(
        rlock::bare()
            .env("REDIS_URL", redis.url())
            .args(["run", "e", "--", "true"]),
    );
    assert_eq!(code(&out), 0, "REDIS_URL is the fallback: {}", show(&out));
    let out = output(rlock::bare().env("RLOCK_URL", unused).args([
        "--url",
        &redis.url(),
        "run",
        "e",
        "--",
        "true",
    ]));
    assert_eq!(code(&out), 0, "--url wins: {}", show(&out));
    let out = output(
        rlock::bare()
            .env("RLOCK_PREFIX", "custom")
            .env("RLOCK_URL", redis.url())
            .args(["run", "p", "--"])
            .args(sh("echo $RLOCK_FENCE")),
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert_eq!(
        redis.keys(),
        [
            "custom:{p}:fence",
            "custom:{p}:history",
            "rlock:{e}:fence",
            "rlock:{e}:history"
        ],
        "--prefix namespaces the keys"
    );
}

#[test]
fn nested_runs_reenter_an_outer_lock_through_an_inner_one() {
    let redis = RedisServer::start();
    let bin = &crate::support::rlock::bin();
    let url = redis.url();
    let out = output(
        rlock(&url)
            .args([
                "run", "outer", "--", bin, "--url", &url, "run", "inner", "--", bin,
            ])
            .args([
                "--url",
                &url,
                "run",
                "--wait",
                "5s",
                "outer",
                "--",
                "sh",
                "-c",
                "echo reentered",
            ]),
    );
    assert_eq!(code(&out), 0, "a -> b -> a re-enters a: {}", show(&out));
    assert_eq!(stdout(&out), "reentered\n");
    assert_eq!(redis.lock_keys("outer"), Vec::<String>::new());
    assert_eq!(redis.lock_keys("inner"), Vec::<String>::new());
}

#[test]
fn processes_command_leaves_behind_are_stopped_before_the_release() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let script = format!("sleep 60 & echo $! > {}", dir.file("left"));
    let out = output(
        rlock(&redis.url())
            .args(["run", "--kill-after", "1s", "leftover", "--"])
            .args(sh(&script)),
    );
    assert_eq!(code(&out), 0, "COMMAND's own status: {}", show(&out));
    assert_has_line(
        &rlock::stderr(&out),
        "rlock: leftover: COMMAND exited but left processes running in its process group; \
         stopping them before releasing the lock",
    );
    let left: u32 = dir.read("left").trim().parse().unwrap();
    assert!(
        !crate::support::process::alive(left),
        "the background process was stopped"
    );
    assert_eq!(redis.lock_keys("leftover"), Vec::<String>::new());
}

/// flock's habit: `-w 0.5` is half a second, `--ttl 30` thirty seconds.
#[test]
fn a_bare_number_is_a_duration_in_seconds() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let _holder = hold(&redis, &dir, "bare");
    let start = std::time::Instant::now();
    let out = output(rlock(&redis.url()).args(["run", "-w", "0.5", "bare", "--", "true"]));
    assert_eq!(code(&out), 75, "{}", show(&out));
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(500) && waited < Duration::from_secs(10),
        "waited {waited:?}"
    );
    let out = output(rlock(&redis.url()).args(["run", "--ttl", "30", "other", "--", "true"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
}

/// Off a terminal (cron, CI), a waiting run says so: a timestamped line when
/// it starts waiting and then every --progress-interval, naming the holder;
/// a timeout names the holder too; -q silences the lines.
#[test]
fn a_waiting_run_logs_progress_off_a_terminal() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let _holder = hold(&redis, &dir, "busy");
    let waiting = |extra: &[&str]| {
        let mut cmd = rlock(&redis.url());
        cmd.env_remove("RLOCK_PROGRESS_INTERVAL");
        cmd.arg("run").args(extra).args(["busy", "--", "true"]);
        output(&mut cmd)
    };
    // The default: one line at the start of a short wait.
    let out = waiting(&["--wait", "1s"]);
    assert_eq!(code(&out), 75, "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    // Timestamped, its place in the queue; the timeout names the holder.
    assert_lines(
        &err,
        "rlock: 20[..]Z waiting for busy: held by pid [..] on [..] ('sh -c [..]') \
         for [..]s; 1st in line; waited 0s
rlock: busy: not acquired: still held after waiting 1s; \
         held by pid [..] on [..] ('sh -c [..]') for [..]s",
    );
    // Every interval while it waits.
    let out = waiting(&["--wait", "2500ms", "--progress-interval", "1s"]);
    assert_eq!(code(&out), 75, "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let progress = err
        .lines()
        .filter(|l| l.contains("waiting for busy"))
        .count();
    assert!((3..=4).contains(&progress), "a line a second: {err}");
    // Behind another waiter: second in line.
    let mut first =
        spawn_quiet(rlock(&redis.url()).args(["run", "--wait", "20s", "busy", "--", "true"]));
    expect_within(rlock::LIMIT, "the first waiter", || {
        stdout(&output(
            rlock(&redis.url()).args(["status", "--json", "busy"]),
        ))
        .contains("\"waiting\":1")
    });
    let out = waiting(&["--wait", "300ms"]);
    assert_eq!(code(&out), 75, "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_lines(
        &err,
        "rlock: 20[..]Z waiting for busy: held by pid [..] on [..] ('sh -c [..]') \
         for [..]s; 2nd in line; waited 0s
rlock: busy: not acquired: still held after waiting 300ms; \
         held by pid [..] on [..] ('sh -c [..]') for [..]s",
    );
    first.kill();
    // -q: the exit status alone.
    let out = waiting(&["-q", "--wait", "500ms"]);
    assert_eq!(code(&out), 75, "{}", show(&out));
    assert!(out.stderr.is_empty(), "{}", show(&out));
    // --progress-interval 0: no line, the verdict only.
    let out = waiting(&["--wait", "500ms", "--progress-interval", "0"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).lines().count(),
        1,
        "{}",
        show(&out)
    );
}

/// `-v` names the server it uses (host:port, never the URL), and with `-E 0`
/// still says the run was skipped and why; without `-v` a skip is silent.
#[test]
fn verbose_names_the_server_and_a_skip_by_e0() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let _holder = hold(&redis, &dir, "nb");
    let url = format!("redis://:pw-not-shown@127.0.0.1:{}", redis.port);
    redis.cmd::<String>(&["CONFIG", "SET", "requirepass", "pw-not-shown"]);
    let out = output(rlock(&url).args(["-v", "run", "--no-wait", "-E", "0", "nb", "--", "true"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_lines(
        &err,
        &format!(
            "rlock: server 127.0.0.1:{port} db 0 prefix rlock (from --url)
rlock: nb: using 127.0.0.1:{port}
rlock: skipped (exit 0 by -E 0): nb: not acquired: \
             held by pid [..] on [..] ('sh -c [..]') for [..]s",
            port = redis.port
        ),
    );
    assert!(!err.contains("pw-not-shown"), "{err}");
    let out = output(rlock(&url).args(["run", "--no-wait", "-E", "0", "nb", "--", "true"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert!(out.stderr.is_empty(), "{}", show(&out));
}

/// Every run and acquire option may come from the environment (as etcdctl's
/// ETCDCTL_*); the command line wins over the environment, and two opposite
/// options given together in one place are a usage error.
#[test]
fn options_come_from_the_environment_and_the_command_line_wins() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let _holder = hold(&redis, &dir, "envy");
    let run = |env: &[(&str, &str)], args: &[&str]| {
        let mut cmd = rlock(&redis.url());
        cmd.envs(env.iter().copied())
            .arg("run")
            .args(args)
            .args(["envy", "--", "true"]);
        let start = std::time::Instant::now();
        (output(&mut cmd), start.elapsed())
    };
    let (out, took) = run(
        &[("RLOCK_WAIT", "0.5"), ("RLOCK_CONFLICT_EXIT_CODE", "3")],
        &[],
    );
    assert_eq!(code(&out), 3, "{}", show(&out));
    assert!(took >= Duration::from_millis(500), "waited {took:?}");
    let (out, took) = run(&[("RLOCK_WAIT", "1m")], &["--no-wait"]);
    assert_eq!(code(&out), 75, "{}", show(&out));
    assert!(took < Duration::from_secs(10), "--no-wait won: {took:?}");
    let (out, _) = run(&[("RLOCK_WAIT", "1m"), ("RLOCK_NO_WAIT", "1")], &[]);
    assert_eq!(code(&out), 2, "{}", show(&out));
    assert_lines(
        &rlock::stderr(&out),
        "rlock: envy: RLOCK_WAIT and RLOCK_NO_WAIT cannot be used together; \
         usage: rlock run [OPTIONS] <NAME>... [-- <COMMAND>...] (see 'rlock run --help')",
    );
    // A flag the environment sets false is not given: no conflict.
    for off in ["0", "false", ""] {
        let (out, took) = run(&[("RLOCK_WAIT", "0.3"), ("RLOCK_NO_WAIT", off)], &[]);
        assert_eq!(code(&out), 75, "RLOCK_NO_WAIT={off:?}: {}", show(&out));
        assert!(took >= Duration::from_millis(300), "waited {took:?}");
    }
    let (out, _) = run(
        &[("RLOCK_SHARED", "false"), ("RLOCK_LIMIT", "2")],
        &["--no-wait"],
    );
    assert_eq!(code(&out), 75, "RLOCK_SHARED=false: {}", show(&out));
    let (out, _) = run(&[], &["--shared", "--limit", "2"]);
    assert_eq!(code(&out), 2, "{}", show(&out));
    let (out, _) = run(&[("RLOCK_SHARED", "1")], &["--limit", "2", "--no-wait"]);
    assert_eq!(
        code(&out),
        75,
        "--limit wins over RLOCK_SHARED: {}",
        show(&out)
    );
    let help = output(rlock(&redis.url()).args(["run", "--help"]));
    let text = String::from_utf8_lossy(&help.stdout).into_owned();
    for var in ::rlock::cli::option_variables() {
        assert!(text.contains(&format!("env: {var}")), "{var} in --help");
    }
}

/// flock(1)'s spellings: -x/--exclusive (the default; not with
/// --shared), --timeout (= --wait), --nonblock and --nb (= --no-wait), on
/// run and acquire; --nb is not "corrected" to another option.
#[test]
fn flock_spellings_are_accepted() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    for args in [&["-x"][..], &["--exclusive"]] {
        let out = output(
            rlock(&redis.url())
                .arg("run")
                .args(args)
                .args(["free", "--", "true"]),
        );
        assert_eq!(code(&out), 0, "{args:?}: {}", show(&out));
    }
    let out = output(rlock(&redis.url()).args(["run", "-x", "--shared", "free", "--", "true"]));
    rlock::assert_fails(&out, 2);
    let _held = hold(&redis, &dir, "taken");
    for args in [
        &["run", "--nb", "taken", "--", "true"][..],
        &["run", "--nonblock", "taken", "--", "true"],
        &["run", "--timeout", "0.2", "taken", "--", "true"],
        &["run", "--timeout=200ms", "-x", "taken", "--", "true"],
        &["acquire", "--nb", "taken"],
        &["acquire", "--exclusive", "--nonblock", "taken"],
        &["acquire", "--timeout", "0.2", "taken"],
    ] {
        let out = output(rlock(&redis.url()).args(args));
        let err = rlock::assert_fails(&out, 75);
        assert!(!err.contains("unreachable-wait"), "{args:?}: {err}");
    }
}
