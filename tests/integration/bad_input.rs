//! Bad input and unusable servers beyond the table in `sweep`: a password that
//! works after one that does not, options refused until they land, extreme
//! values that must still work.

use crate::support::expect::assert_lines;
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
    assert_lines(
        &err,
        &format!(
            "rlock: x: server 127.0.0.1:{} unavailable: authentication failed: \
             wrong user name or password (check the URL or REDISCLI_AUTH)",
            redis.port
        ),
    );
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
    assert_lines(&err, "rlock: x: command not found: 'no\\nsuch\\ncommand'");
    let out = output(rlock(&redis.url()).args(["run", "--ttl", "10000000y", "x", "--", "true"]));
    assert_fails(&out, 2);
    let args: Vec<String> = (0..5000).map(|i| format!("argument-{i}")).collect();
    let out = output(
        rlock(&redis.url())
            .args(["run", "big", "--", "true"])
            .args(&args),
    );
    assert_eq!(code(&out), 0, "a huge argument list: {}", show(&out));
    // A count no history holds is a usage error, not the server's.
    for limit in ["0", "9223372036854775808"] {
        let out = output(rlock(&redis.url()).args(["history", "x", "--limit", limit]));
        let err = assert_fails(&out, 2);
        assert_lines(
            &err,
            &format!("rlock: invalid value '{limit}' for '--limit <N>': [..]"),
        );
    }
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
    assert_lines(
        &err,
        "rlock: x: invalid value '' for '--url <URL>': empty URL; \
         usage: rlock run [OPTIONS] <NAME>... [-- <COMMAND>...] (see 'rlock run --help')",
    );
    // The same for the password's command (it failed as the server unavailable, 69).
    let out = output(
        rlock(&redis.url())
            .env("RLOCK_PASSWORD_COMMAND", "")
            .args(["run", "x", "--", "true"]),
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
    let out =
        output(rlock(&redis.url()).args(["run", "--password-command", "", "x", "--", "true"]));
    let err = assert_fails(&out, 2);
    assert_lines(
        &err,
        "rlock: x: invalid value '' for '--password-command <CMD>': empty command; usage: [..]",
    );
}

/// Usage errors keep clap's suggestions and point at the subcommand's help,
/// and flock's habits get a hint: COMMAND after `--`, or `-c STRING`, which
/// runs STRING with `sh -c`. Still one `rlock:` line and exit 2.
#[test]
fn usage_errors_suggest_and_flock_habits_get_hints() {
    let dir = crate::support::scratch::Scratch::new();
    let url = format!("file:{}", dir.file("locks"));
    let err = assert_fails(&output(bare().arg("stauts")), 2);
    assert_lines(
        &err,
        "rlock: unrecognized subcommand 'stauts'; a similar subcommand exists: 'status'; \
         usage: rlock [OPTIONS] <SUBCOMMAND> (see 'rlock --help')",
    );
    let err = assert_fails(
        &output(bare().args(["run", "--wiat", "5", "x", "--", "true"])),
        2,
    );
    assert_lines(
        &err,
        "rlock: unexpected argument '--wiat' found; a similar argument exists: '--wait'; \
         usage: rlock run [OPTIONS] <NAME>... [-- <COMMAND>...] (see 'rlock run --help')",
    );
    let err = assert_fails(
        &output(bare().args(["--url", &url, "run", "demo", "./backup.sh"])),
        2,
    );
    // The subcommand's usage.
    assert_lines(
        &err,
        "rlock: demo: the following required arguments were not provided: <COMMAND>...; \
         COMMAND goes after --: rlock run NAME -- COMMAND [ARGS...], or rlock run NAME -c 'STRING'; \
         usage: rlock run [OPTIONS] <NAME>... [-- <COMMAND>...] (see 'rlock run --help')",
    );
    // flock's `flock LOCK ls -l`: not a hint to pass `-l` as a value.
    let err = assert_fails(
        &output(bare().args(["--url", &url, "run", "demo", "ls", "-l"])),
        2,
    );
    assert_lines(
        &err,
        "rlock: demo: unexpected argument '-l' found; \
         COMMAND goes after --: rlock run NAME -- COMMAND [ARGS...], or rlock run NAME -c 'STRING'; \
         usage: rlock run [OPTIONS] <NAME>... [-- <COMMAND>...] (see 'rlock run --help')",
    );
    // A bad value inside a subcommand points at that subcommand's help.
    for (args, says) in [
        (
            &["run", "--ttl", "5x", "x", "--", "true"][..],
            "rlock: x: invalid value '5x' for '--ttl <DUR>': unknown time unit \"x\", \
             supported units: ns, us/µs, ms, sec, min, hours, days, weeks, months, years \
             (and few variations); \
             usage: rlock run [OPTIONS] <NAME>... [-- <COMMAND>...] (see 'rlock run --help')",
        ),
        (
            &["completions", "bsh"],
            "rlock: invalid value 'bsh' for '<SHELL>' \
             [possible values: bash, elvish, fish, powershell, zsh]; \
             a similar value exists: 'bash'; \
             usage: rlock completions [OPTIONS] <SHELL> (see 'rlock completions --help')",
        ),
    ] {
        let err = assert_fails(&output(bare().args(args)), 2);
        assert_lines(&err, says);
    }
    // The line names the lock when the command line names one (§4).
    let err = assert_fails(&output(bare().args(["--url", &url, "run", "t3w"])), 2);
    assert_lines(
        &err,
        "rlock: t3w: the following required arguments were not provided: <COMMAND>...; \
         COMMAND goes after --: rlock run NAME -- COMMAND [ARGS...], or rlock run NAME -c 'STRING'; \
         usage: rlock run [OPTIONS] <NAME>... [-- <COMMAND>...] (see 'rlock run --help')",
    );
    let err = assert_fails(
        &output(bare().args(["--url", &url, "run", "-w", "abc", "t3w", "--", "true"])),
        2,
    );
    // The subcommand's own usage, not clap's echo of the options given.
    assert_lines(
        &err,
        "rlock: t3w: invalid value 'abc' for '--wait <DUR>': expected number at 0 (or forever); \
         usage: rlock run [OPTIONS] <NAME>... [-- <COMMAND>...] (see 'rlock run --help')",
    );
    // A NAME that begins with `-` goes between two `--` (§7 allows it).
    let out = output(bare().args([
        "--url",
        &url,
        "run",
        "--",
        "-x",
        "--",
        "sh",
        "-c",
        "echo \"$RLOCK_NAME\"",
    ]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "-x\n");
    // -c STRING, as flock's -c.
    let out = output(bare().args(["--url", &url, "run", "demo", "-c", "echo hi | tr a-z A-Z"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "HI\n");
    let out = output(bare().args(["--url", &url, "run", "-c", "exit 3", "demo"]));
    assert_eq!(code(&out), 3, "{}", show(&out));
    // A whole shell command line as one word after `--`.
    let err = assert_fails(
        &output(bare().args(["--url", &url, "run", "demo", "--", "echo hi | tr a-z A-Z"])),
        127,
    );
    assert_lines(
        &err,
        "rlock: demo: command not found: 'echo hi | tr a-z A-Z' (COMMAND runs without a shell: \
         for a shell command line use -c 'STRING' or -- sh -c 'STRING')",
    );
}

/// A duration's unit written apart from its number (`--wait 10 m`) is
/// refused with both readings and how to write each, not taken for a second
/// lock nor joined to the number; a misspelt option does not make its value
/// the lock's name; a bare lease of 1000 or more (a PX habit: 8h 20m for
/// 30000) is refused with a hint.
#[test]
fn a_stray_unit_is_no_lock_and_a_bare_lease_of_1000_is_refused() {
    let redis = RedisServer::start();
    for (args, hint) in [
        (
            &["run", "--wait", "10", "m", "demo", "--", "true"][..],
            "rlock: 'm' after --wait 10 is a NAME or a unit: lock named 'm'? write --wait 10s m; \
             10 minutes? write --wait 10m (see 'rlock run --help')",
        ),
        (
            &["run", "--timeout", "10", "min", "demo", "--", "true"],
            "rlock: 'min' after --timeout 10 is a NAME or a unit: lock named 'min'? \
             write --timeout 10s min; 10 minutes? write --timeout 10min (see 'rlock run --help')",
        ),
        (
            &["run", "--ttl", "30", "s", "demo", "--", "true"],
            "rlock: 's' after --ttl 30 is a NAME or a unit: lock named 's'? write --ttl 30s s; \
             30 seconds? write --ttl 30s (see 'rlock run --help')",
        ),
        (
            &["acquire", "-w", "5", "s", "demo"],
            "rlock: 's' after -w 5 is a NAME or a unit: lock named 's'? write -w 5s s; \
             5 seconds? write -w 5s (see 'rlock acquire --help')",
        ),
        (
            &["run", "--ttl", "30000", "demo", "--", "true"],
            "rlock: demo: invalid value '30000' for '--ttl <DUR>': a bare number is seconds, \
             and 30000 seconds is a long lease: did you mean 30000ms? \
             (write 30000s if you meant seconds); \
             usage: rlock run [OPTIONS] <NAME>... [-- <COMMAND>...] (see 'rlock run --help')",
        ),
        (
            &["acquire", "--ttl", "1000", "demo"],
            "rlock: demo: invalid value '1000' for '--ttl <DUR>': a bare number is seconds, \
             and 1000 seconds is a long lease: did you mean 1000ms? \
             (write 1000s if you meant seconds); \
             usage: rlock acquire [OPTIONS] <NAME> (see 'rlock acquire --help')",
        ),
    ] {
        let err = assert_fails(&output(rlock(&redis.url()).args(args)), 2);
        assert_lines(&err, hint);
        assert!(
            redis.keys().is_empty(),
            "{args:?} locked: {:?}",
            redis.keys()
        );
    }
    let out = output(rlock(&redis.url()).args(["run", "--ttl", "999", "demo", "--", "true"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    // The misspelt option's value is not named as the lock.
    let err = assert_fails(
        &output(rlock(&redis.url()).args(["run", "--wiat", "10m", "demo", "--", "true"])),
        2,
    );
    assert_lines(
        &err,
        "rlock: unexpected argument '--wiat' found; a similar argument exists: '--wait'; \
         usage: rlock run [OPTIONS] <NAME>... [-- <COMMAND>...] (see 'rlock run --help')",
    );
}

/// Lock NAMEs that are also units (`us`, `days`, `sec`, `y`, `m`): after
/// a bare number the line is refused with both readings, nothing locked;
/// after a value given with `=` or one that carries its unit, they are the
/// locks run takes (issue 37).
#[test]
fn names_that_look_like_units_are_locks_when_the_wait_says_where_it_ends() {
    let redis = RedisServer::start();
    for (name, meant) in [("us", "60 microseconds"), ("days", "60 days")] {
        let err = assert_fails(
            &output(rlock(&redis.url()).args(["run", "--wait", "60", name, "--", "true"])),
            2,
        );
        assert_lines(
            &err,
            &format!(
                "rlock: '{name}' after --wait 60 is a NAME or a unit: lock named '{name}'? \
                 write --wait 60s {name}; {meant}? write --wait 60{name} (see 'rlock run --help')"
            ),
        );
        assert!(redis.keys().is_empty(), "{:?}", redis.keys());
    }
    let runs_under = |args: &[&str], name: &str| {
        let out = output(rlock(&redis.url()).args(["run"]).args(args).args([
            "--",
            "sh",
            "-c",
            "echo \"$RLOCK_NAME\"",
        ]));
        assert_eq!(code(&out), 0, "{args:?}: {}", show(&out));
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("{name}\n"),
            "{args:?}"
        );
    };
    for name in ["us", "days", "sec", "y", "m"] {
        runs_under(&["--wait=60", name], name);
        runs_under(&["--wait", "60s", name], name);
    }
    runs_under(&["-w", "1m", "days"], "days");
    runs_under(&["--timeout=10", "min"], "min");
}

/// Newcomers' slips get the fix in their one line (issue 37): a forgotten
/// `run` (flock's and consul's word order) the `run` line meant; `release`
/// without a token `--force`; a query string, which rlock does not read, how
/// to give a password (refused, exit 2, the password never shown); a script
/// without its execute bit `chmod +x` (126).
#[test]
fn newcomers_slips_get_the_fix() {
    let dir = crate::support::scratch::Scratch::new();
    let url = format!("file:{}", dir.file("locks"));
    let err = assert_fails(
        &output(bare().args(["--url", &url, "deploy-prod", "--", "./deploy.sh"])),
        2,
    );
    assert_lines(
        &err,
        "rlock: unrecognized subcommand 'deploy-prod'; to run COMMAND under the lock \
         'deploy-prod': rlock run deploy-prod -- ./deploy.sh; \
         usage: rlock [OPTIONS] <SUBCOMMAND> (see 'rlock --help')",
    );
    let err = assert_fails(&output(bare().args(["nightly", "./backup.sh", "-v"])), 2);
    assert_lines(
        &err,
        "rlock: unrecognized subcommand 'nightly'; to run COMMAND under the lock \
         'nightly': rlock run nightly -- ./backup.sh ...; \
         usage: rlock [OPTIONS] <SUBCOMMAND> (see 'rlock --help')",
    );

    let redis = RedisServer::start();
    let err = assert_fails(&output(rlock(&redis.url()).args(["release", "deploy"])), 2);
    assert_lines(
        &err,
        "rlock: deploy: the owner token is needed: --token TOKEN, or RLOCK_TOKEN in the \
         environment; to remove any holder's hold (break-glass): rlock release --force deploy",
    );

    for url in [
        format!("redis://127.0.0.1:{}?password=s3cret-q", redis.port),
        format!(
            "redis://127.0.0.1:{}/0?user=u&password=s3cret-q",
            redis.port
        ),
    ] {
        let err = assert_fails(&output(bare().args(["--url", &url, "status", "x"])), 2);
        assert_lines(
            &err,
            "rlock: invalid --url: a redis:// URL's query string (?...) takes only protocol; \
             rlock would ignore the rest, so a password there would never be sent; write \
             redis://[USER]:PASSWORD@host:port, or give it in --password-file FILE or REDISCLI_AUTH",
        );
        assert!(!err.contains("s3cret-q"), "{err}");
    }
    let err = assert_fails(
        &output(bare().args(["--url", "unix:///tmp/x.sock?db=1&foo=1", "status", "x"])),
        2,
    );
    assert_lines(
        &err,
        "rlock: invalid --url: a unix:// URL's query string (?...) takes only protocol, db, \
         user, pass; rlock would ignore the rest, so a password there would never be sent; \
         write unix:///PATH?pass=PASSWORD, or give it in --password-file FILE or REDISCLI_AUTH",
    );
    let out = output(bare().args([
        "--url",
        &format!("redis://127.0.0.1:{}/?protocol=resp2", redis.port),
        "status",
        "x",
    ]));
    assert_eq!(code(&out), 0, "a parameter redis-rs reads: {}", show(&out));

    let script = dir.file("deploy.sh");
    std::fs::write(&script, "#!/bin/sh\necho deployed\n").unwrap();
    let err = assert_fails(
        &output(bare().args(["--url", &url, "run", "deploy", "--", &script])),
        126,
    );
    assert_lines(
        &err,
        &format!(
            "rlock: deploy: cannot execute '{script}': permission denied \
             (no execute permission: chmod +x '{script}')"
        ),
    );
}

/// Messages say what is wrong and how to fix it: URL typos name
/// the wrong part and list the schemes; a password written as the user
/// gets the shape for a password alone (and is not echoed); no CA store is
/// said as such; a `file:` directory that refuses a lock names itself, what
/// was being done, and the fix; a huge NAME is cut in the message.
#[test]
fn messages_name_the_wrong_part_and_the_fix() {
    for (url, says) in [
        (
            "reddis://127.0.0.1:1",
            "rlock: invalid --url: unknown scheme 'reddis://': did you mean redis://?",
        ),
        (
            "localhost",
            "rlock: invalid --url 'localhost': no scheme; write redis://localhost:6379",
        ),
        (
            "127.0.0.1:6379",
            "rlock: invalid --url '127.0.0.1:6379': no scheme; write redis://127.0.0.1:6379",
        ),
        (
            "http://127.0.0.1:1",
            "rlock: invalid --url: scheme 'http://' is not one of rlock's; \
             expected redis://[user:password@]host[:port][/db]",
        ),
    ] {
        let err = assert_fails(&output(bare().args(["--url", url, "status", "x"])), 2);
        assert_lines(
            &err,
            &format!(
                "{says} (schemes: redis://, rediss://, redis+sentinel://, rediss+sentinel://, \
                 redis+cluster://, rediss+cluster://, unix://, file:DIR)"
            ),
        );
    }

    let redis = RedisServer::start_with(&["--requirepass", "s3cret-pw"]);
    let url = format!("redis://s3cret-pw@127.0.0.1:{}", redis.port);
    let err = assert_fails(
        &output(bare().args(["--url", &url, "run", "-n", "x", "--", "true"])),
        69,
    );
    assert_lines(
        &err,
        &format!(
            "rlock: x: server 127.0.0.1:{} unavailable: the server needs a password, \
             and the URL has a user name but no password: a password alone is written \
             redis://:PASSWORD@host (note the colon), or put it in REDISCLI_AUTH or --password-file",
            redis.port
        ),
    );
    assert!(!err.contains("s3cret-pw"), "{err}");

    let (_socket, port) = crate::support::redis_server::refusing_port();
    let err = assert_fails(
        &output(
            bare()
                .env("SSL_CERT_DIR", "/nonexistent-ca-dir")
                .env("SSL_CERT_FILE", "/nonexistent-ca-file")
                .args([
                    "--url",
                    &format!("rediss://127.0.0.1:{port}"),
                    "status",
                    "x",
                ]),
        ),
        69,
    );
    // The parenthesis is the system's own account of what it tried.
    assert_lines(
        &err,
        &format!(
            "rlock: x: server 127.0.0.1:{port} unavailable: no system CA certificates ([..]): \
             install ca-certificates, or pass --cacert FILE"
        ),
    );

    let name = "n".repeat(10_000);
    let err = assert_fails(
        &output(bare().args(["--url", "redis://127.0.0.1:1", "status", &name])),
        2,
    );
    assert_lines(
        &err,
        &format!(
            "rlock: invalid lock name '{}'… (10000 bytes): longer than 200 bytes",
            "n".repeat(60)
        ),
    );

    // A lock directory this user may not write in.
    let dir = crate::support::scratch::Scratch::new();
    let locks = dir.path().join("locks");
    std::fs::create_dir(&locks).unwrap();
    let url = format!("file:{}", locks.display());
    let root = crate::support::process::is_root();
    let mut cmd = bare();
    cmd.args(["--url", &url, "run", "-n", "x", "--", "true"]);
    let mut cmd = if root {
        // As nobody, who may read the root-owned 0755 directory but not write in it.
        crate::support::process::as_other_user(&cmd)
    } else {
        std::fs::set_permissions(&locks, std::os::unix::fs::PermissionsExt::from_mode(0o555))
            .unwrap();
        cmd
    };
    let err = assert_fails(&output(&mut cmd), 69);
    assert_lines(
        &err,
        &format!(
            "rlock: x: server this host only ({locks}) unavailable: \
             lock directory {locks} is not writable by this user \
             (opening the lock's gate file: [..]): \
             run as the user the directory belongs to, or choose another DIR",
            locks = locks.display()
        ),
    );
}
