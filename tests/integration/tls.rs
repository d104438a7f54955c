//! TLS (`rediss://`, `--cacert`, `--cert`, `--key`) against a redis-server with
//! a TLS port, certificates made by the test with openssl: a server the CA
//! vouches for works; an unknown issuer, a missing client certificate and bad
//! files each get one line and their status.

use crate::support::cluster::Cluster;
use crate::support::expect_within;
use crate::support::rlock::{LIMIT, assert_fails, bare, code, output, show, spawn_quiet};
use crate::support::sentinel::Sentinels;
use crate::support::tls::Tls;

#[test]
fn a_server_the_ca_vouches_for_works_and_others_are_refused() {
    let tls = Tls::new();
    let (redis, url) = tls.server(false);
    let clock = redis.time_us();
    let out = output(
        bare()
            .args(["--url", &url, "--cacert", &tls.file("ca.crt")])
            .args(["run", "secure", "--", "true"]),
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
    let fence: u64 = redis.cmd(&["GET", "rlock:{secure}:fence"]);
    assert!(
        fence > clock,
        "taken on that server: fence {fence} after {clock}"
    );
    // The same CA from the environment, as redis-cli's names suggest.
    let out = output(
        bare()
            .env("RLOCK_CACERT", tls.file("ca.crt"))
            .args(["--url", &url, "status", "secure"]),
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
    for (what, args) in [
        ("system trust store", vec![]),
        (
            "another CA",
            vec!["--cacert".to_owned(), tls.file("other-ca.crt")],
        ),
    ] {
        let out = output(
            bare()
                .args(["--url", &url])
                .args(&args)
                .args(["run", "secure", "--", "true"]),
        );
        let err = assert_fails(&out, 69);
        assert!(err.contains("certificate"), "{what}: {err}");
    }
    let out = output(bare().args([
        "--url",
        &url,
        "--cacert",
        &tls.file("missing.pem"),
        "run",
        "secure",
        "--",
        "true",
    ]));
    let err = assert_fails(&out, 2);
    assert!(err.contains("cannot read --cacert"), "{err}");
}

#[test]
fn a_server_that_wants_a_client_certificate_gets_one_with_cert_and_key() {
    let tls = Tls::new();
    let (_redis, url) = tls.server(true);
    let base = ["--url", &url, "--cacert", &tls.file("ca.crt")];
    let out = output(bare().args(base).args(["run", "mtls", "--", "true"]));
    assert_fails(&out, 69);
    let out = output(bare().args(base).args([
        "--cert",
        &tls.file("client.crt"),
        "run",
        "mtls",
        "--",
        "true",
    ]));
    let err = assert_fails(&out, 2);
    assert!(err.contains("--cert and --key go together"), "{err}");
    let out = output(
        bare()
            .args(base)
            .args([
                "--cert",
                &tls.file("client.crt"),
                "--key",
                &tls.file("client.key"),
            ])
            .args(["run", "mtls", "--", "true"]),
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
}

#[test]
fn the_while_pid_watchdog_gets_the_tls_files_of_the_command_line() {
    let tls = Tls::new();
    let (_redis, url) = tls.server(true);
    let me = std::process::id().to_string();
    let tls = [
        "--cacert",
        &tls.file("ca.crt"),
        "--cert",
        &tls.file("client.crt"),
        "--key",
        &tls.file("client.key"),
    ];
    let out = output(bare().args(["--url", &url]).args(tls).args([
        "acquire",
        "--ttl",
        "600ms",
        "--while-pid",
        &me,
        "kept",
    ]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let token = crate::support::rlock::stdout(&out).trim().to_owned();
    // Past its ttl: only a watchdog that reaches the server has kept it.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let out = output(
        bare()
            .args(["--url", &url])
            .args(tls)
            .args(["release", "kept", "--token", &token]),
    );
    assert_eq!(code(&out), 0, "still held: {}", show(&out));
}

#[test]
fn tls_on_one_end_only_gets_a_hint_at_the_other_scheme() {
    let tls = Tls::new();
    let (redis, tls_url) = tls.server(false);
    let plain_to_tls = tls_url.replacen("rediss://", "redis://", 1);
    let out = output(bare().args(["--url", &plain_to_tls, "run", "x", "--", "true"]));
    let err = assert_fails(&out, 69);
    assert!(
        err.contains("if this is a TLS port, use rediss://"),
        "{err}"
    );
    let tls_to_plain = format!("rediss://127.0.0.1:{}", redis.port);
    let out = output(bare().args([
        "--url",
        &tls_to_plain,
        "--cacert",
        &tls.file("ca.crt"),
        "--connect-timeout",
        "300ms",
        "status",
        "x",
    ]));
    let err = assert_fails(&out, 69);
    assert!(
        err.contains("if this is a plain port, use redis://"),
        "{err}"
    );
}

/// A lock through `url` (with the test CA) is held: a second run (not a
/// nested one: it does not inherit the first one's tokens) finds it taken (75)
/// while the first runs, and gets it after.
fn lock_works_through(tls: &Tls, url: &str, name: &str) {
    let ca = tls.file("ca.crt");
    let rlock = |args: &[&str]| {
        let mut cmd = bare();
        cmd.args(["--url", url, "--cacert", &ca]).args(args);
        cmd
    };
    let probe = format!(
        "env -u RLOCK_TOKENS -u RLOCK_TOKEN \"$RLOCK_BIN\" --url '{url}' --cacert {ca} run --no-wait {name} -- true; \
         echo \"inner $?\""
    );
    let out = output(
        rlock(&["run", name, "--"])
            .env("RLOCK_BIN", crate::support::rlock::bin())
            .args(crate::support::rlock::sh(&probe)),
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("inner 75"),
        "held while the first ran: {}",
        show(&out)
    );
    let out = output(&mut rlock(&["run", "--no-wait", name, "--", "true"]));
    assert_eq!(code(&out), 0, "released after: {}", show(&out));
}

#[test]
fn rediss_sentinel_finds_a_tls_master_through_tls_sentinels() {
    let tls = Tls::new();
    let master = tls.start(false);
    let master_tls: u16 = master
        .arg_after("--tls-port")
        .and_then(|p| p.parse().ok())
        .unwrap();
    let sentinel = Sentinels::start_tls(&tls, master_tls);
    let url = sentinel.url();
    lock_works_through(&tls, &url, "via-tls-sentinel");
    // Taken on the master the sentinel named.
    let fence: Option<String> = master.cmd(&["GET", "rlock:{via-tls-sentinel}:fence"]);
    assert!(fence.is_some(), "the fence is on the TLS master");
}

#[test]
fn rediss_cluster_follows_tls_nodes() {
    let tls = Tls::new();
    let cluster = Cluster::start_tls(&tls);
    // Seeds on one node only: the others are reached by following MOVED.
    let url = format!("rediss+cluster://127.0.0.1:{}", cluster.tls_ports[0]);
    for name in ["alpha", "bravo", "charlie", "delta"] {
        lock_works_through(&tls, &url, name);
    }
    let holding: Vec<usize> = cluster
        .nodes
        .iter()
        .map(|n| n.cmd::<Vec<String>>(&["KEYS", "rlock:*:fence"]).len())
        .collect();
    assert!(
        holding.iter().filter(|&&n| n > 0).count() > 1,
        "the locks' slots span several TLS nodes: {holding:?}"
    );
}

/// `rlock check` over TLS: the checks run through the TLS
/// connection; an untrusted certificate fails `reachable` (exit 69).
#[test]
fn check_runs_over_tls_and_an_untrusted_certificate_fails_reachable() {
    let tls = Tls::new();
    let (_redis, url) = tls.server(false);
    let out = output(bare().args(["--url", &url, "--cacert", &tls.file("ca.crt"), "check"]));
    // The fixture runs without AOF: persistence warns.
    assert_eq!(code(&out), 1, "{}", show(&out));
    let text = crate::support::rlock::stdout(&out);
    for check in ["reachable", "scripts", "atomic-scripts", "rights"] {
        assert!(
            text.lines()
                .any(|l| l.starts_with("ok ") && l.contains(check)),
            "{check}: {text}"
        );
    }
    let out = output(bare().args([
        "--url",
        &url,
        "--cacert",
        &tls.file("other-ca.crt"),
        "check",
    ]));
    let err = assert_fails(&out, 69);
    assert!(err.contains("certificate"), "{err}");
}

/// A signal ends a wait over TLS at once too (there the wait keeps its signal
/// thread: TLS reads again after an interrupted read). The wait blocks for
/// 30 s (--ttl 60s), so a signal that had to wait for it would show.
#[test]
fn a_signal_ends_a_wait_over_tls_at_once() {
    let tls = Tls::new();
    let (redis, url) = tls.server(false);
    let ca = tls.file("ca.crt");
    let run = |name: &str, command: &[&str]| {
        let mut cmd = bare();
        cmd.args([
            "--url", &url, "--cacert", &ca, "run", "--ttl", "60s", name, "--",
        ])
        .args(command);
        cmd
    };
    let mut holder = spawn_quiet(&mut run("tls-queue", &["sleep", "60"]));
    expect_within(LIMIT, "the holder to take the lock", || {
        redis.cmd::<i64>(&["EXISTS", "rlock:{tls-queue}:leases"]) == 1
    });
    let waiter = spawn_quiet(&mut run("tls-queue", &["true"]));
    expect_within(LIMIT, "the waiter to block", || {
        redis.cmd::<i64>(&["ZCARD", "rlock:{tls-queue}:waiters"]) == 1
    });
    let sent = std::time::Instant::now();
    waiter.signal(libc::SIGINT);
    let out = waiter.output_within(LIMIT);
    assert_eq!(code(&out), 130, "{}", show(&out));
    assert!(
        sent.elapsed() < std::time::Duration::from_secs(5),
        "the signal took {:?} to end the wait",
        sent.elapsed()
    );
    holder.kill();
}
