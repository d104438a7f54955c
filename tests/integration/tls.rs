//! TLS (`rediss://`, `--cacert`, `--cert`, `--key`) against a redis-server with
//! a TLS port, certificates made by the test with openssl: a server the CA
//! vouches for works; an unknown issuer, a missing client certificate and bad
//! files each get one line and their status.

use std::net::TcpListener;
use std::process::Command;

use crate::support::redis_server::{free_port, RedisServer};
use crate::support::rlock::{assert_fails, bare, code, output, show};
use crate::support::scratch::Scratch;

/// A CA, a server certificate for 127.0.0.1 and a client certificate, all
/// signed by the CA, plus a second CA nobody uses.
fn certificates(dir: &Scratch) {
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir.path())
            .output()
            .expect("openssl must be installed (scripts/test installs it)");
        assert!(out.status.success(), "openssl {args:?}: {out:?}");
    };
    for ca in ["ca", "other-ca"] {
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-keyout",
            &format!("{ca}.key"),
            "-out",
            &format!("{ca}.crt"),
            "-subj",
            &format!("/CN=rlock test {ca}"),
        ]);
    }
    std::fs::write(
        dir.file("san.cnf"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .unwrap();
    for who in ["server", "client"] {
        openssl(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            &format!("{who}.key"),
            "-out",
            &format!("{who}.csr"),
            "-subj",
            &format!("/CN={who}"),
        ]);
        openssl(&[
            "x509",
            "-req",
            "-in",
            &format!("{who}.csr"),
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "san.cnf",
            "-out",
            &format!("{who}.crt"),
        ]);
    }
}

/// A server with a plain port (for the test) and a TLS port (for rlock).
fn tls_server(dir: &Scratch, clients_need_certificates: bool) -> (RedisServer, String) {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let redis = RedisServer::start_with(&[
        "--tls-port",
        &port,
        "--tls-cert-file",
        &dir.file("server.crt"),
        "--tls-key-file",
        &dir.file("server.key"),
        "--tls-ca-cert-file",
        &dir.file("ca.crt"),
        "--tls-auth-clients",
        if clients_need_certificates {
            "yes"
        } else {
            "no"
        },
    ]);
    (redis, format!("rediss://127.0.0.1:{port}"))
}

#[test]
fn a_server_the_ca_vouches_for_works_and_others_are_refused() {
    let dir = Scratch::new();
    certificates(&dir);
    let (redis, url) = tls_server(&dir, false);
    let clock = redis.time_us();
    let out = output(
        bare()
            .args(["--url", &url, "--cacert", &dir.file("ca.crt")])
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
            .env("RLOCK_CACERT", dir.file("ca.crt"))
            .args(["--url", &url, "status", "secure"]),
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
    for (what, args) in [
        ("system trust store", vec![]),
        (
            "another CA",
            vec!["--cacert".to_owned(), dir.file("other-ca.crt")],
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
        &dir.file("missing.pem"),
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
    let dir = Scratch::new();
    certificates(&dir);
    let (_redis, url) = tls_server(&dir, true);
    let base = ["--url", &url, "--cacert", &dir.file("ca.crt")];
    let out = output(bare().args(base).args(["run", "mtls", "--", "true"]));
    assert_fails(&out, 69);
    let out = output(bare().args(base).args([
        "--cert",
        &dir.file("client.crt"),
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
                &dir.file("client.crt"),
                "--key",
                &dir.file("client.key"),
            ])
            .args(["run", "mtls", "--", "true"]),
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
}

#[test]
fn the_while_pid_watchdog_gets_the_tls_files_of_the_command_line() {
    let dir = Scratch::new();
    certificates(&dir);
    let (_redis, url) = tls_server(&dir, true);
    let me = std::process::id().to_string();
    let tls = [
        "--cacert",
        &dir.file("ca.crt"),
        "--cert",
        &dir.file("client.crt"),
        "--key",
        &dir.file("client.key"),
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
    let dir = Scratch::new();
    certificates(&dir);
    let (redis, tls_url) = tls_server(&dir, false);
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
        &dir.file("ca.crt"),
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

/// redis-server arguments for a TLS port (server certificate, the test CA),
/// beside the plain port the test itself uses.
fn tls_args(dir: &Scratch, port: u16) -> Vec<String> {
    [
        "--tls-port",
        &port.to_string(),
        "--tls-cert-file",
        &dir.file("server.crt"),
        "--tls-key-file",
        &dir.file("server.key"),
        "--tls-ca-cert-file",
        &dir.file("ca.crt"),
        "--tls-auth-clients",
        "no",
    ]
    .map(String::from)
    .to_vec()
}

/// `redis-cli --tls` against port `port`.
fn tls_cli(dir: &Scratch, port: u16, args: &[&str]) -> std::process::Output {
    Command::new("redis-cli")
        .args([
            "--tls",
            "--cacert",
            &dir.file("ca.crt"),
            "-p",
            &port.to_string(),
        ])
        .args(args)
        .output()
        .expect("redis-cli must be installed")
}

/// A lock through `url` (with the test CA) is held: a second run (not a
/// nested one: it does not inherit the first one's tokens) finds it taken (75)
/// while the first runs, and gets it after.
fn lock_works_through(dir: &Scratch, url: &str, name: &str) {
    let ca = dir.file("ca.crt");
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
    let dir = Scratch::new();
    certificates(&dir);
    let master_tls = free_port();
    let master_args = tls_args(&dir, master_tls);
    let master =
        RedisServer::start_with(&master_args.iter().map(String::as_str).collect::<Vec<_>>());
    let sentinel_port = free_port();
    let conf = dir.file("sentinel.conf");
    std::fs::write(
        &conf,
        format!(
            "port 0\nbind 127.0.0.1\ndir {dir}\ntls-port {sentinel_port}\n\
             tls-cert-file {crt}\ntls-key-file {key}\ntls-ca-cert-file {ca}\n\
             tls-auth-clients no\ntls-replication yes\n\
             sentinel monitor mymaster 127.0.0.1 {master_tls} 1\n",
            dir = dir.path().display(),
            crt = dir.file("server.crt"),
            key = dir.file("server.key"),
            ca = dir.file("ca.crt"),
        ),
    )
    .unwrap();
    let _sentinel = crate::support::process::Proc::new(
        Command::new(crate::support::redis_server::server_bin())
            .arg(&conf)
            .arg("--sentinel")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("redis-server must be installed"),
    );
    crate::support::expect_within(
        crate::support::rlock::LIMIT,
        "the TLS sentinel to name the master",
        || {
            let out = tls_cli(
                &dir,
                sentinel_port,
                &["SENTINEL", "get-master-addr-by-name", "mymaster"],
            );
            String::from_utf8_lossy(&out.stdout).contains(&master_tls.to_string())
        },
    );
    let url = format!("rediss+sentinel://127.0.0.1:{sentinel_port}/mymaster");
    lock_works_through(&dir, &url, "via-tls-sentinel");
    // Taken on the master the sentinel named.
    let fence: Option<String> = master.cmd(&["GET", "rlock:{via-tls-sentinel}:fence"]);
    assert!(fence.is_some(), "the fence is on the TLS master");
}

#[test]
fn rediss_cluster_follows_tls_nodes() {
    let dir = Scratch::new();
    certificates(&dir);
    let tls_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let nodes: Vec<RedisServer> = tls_ports
        .iter()
        .map(|&p| {
            let mut args = tls_args(&dir, p);
            args.extend(
                [
                    "--tls-cluster",
                    "yes",
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                ]
                .map(String::from),
            );
            RedisServer::start_with(&args.iter().map(String::as_str).collect::<Vec<_>>())
        })
        .collect();
    let mut create = Command::new("redis-cli");
    create.args([
        "--tls",
        "--cacert",
        &dir.file("ca.crt"),
        "--cluster",
        "create",
    ]);
    for p in &tls_ports {
        create.arg(format!("127.0.0.1:{p}"));
    }
    let out = create
        .args(["--cluster-replicas", "0", "--cluster-yes"])
        .output()
        .expect("redis-cli must be installed");
    assert!(out.status.success(), "cluster create: {out:?}");
    crate::support::expect_within(crate::support::rlock::LIMIT, "the cluster to be ok", || {
        nodes.iter().all(|n| {
            let info: String = n.cmd(&["CLUSTER", "INFO"]);
            info.contains("cluster_state:ok")
        })
    });
    // Seeds on one node only: the others are reached by following MOVED.
    let url = format!("rediss+cluster://127.0.0.1:{}", tls_ports[0]);
    for name in ["alpha", "bravo", "charlie", "delta"] {
        lock_works_through(&dir, &url, name);
    }
    let holding: Vec<usize> = nodes
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
    let dir = Scratch::new();
    certificates(&dir);
    let (_redis, url) = tls_server(&dir, false);
    let out = output(bare().args(["--url", &url, "--cacert", &dir.file("ca.crt"), "check"]));
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
        &dir.file("other-ca.crt"),
        "check",
    ]));
    let err = assert_fails(&out, 69);
    assert!(err.contains("certificate"), "{err}");
}
