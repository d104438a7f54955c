//! TLS (`rediss://`, `--cacert`, `--cert`, `--key`) against a redis-server with
//! a TLS port, certificates made by the test with openssl: a server the CA
//! vouches for works; an unknown issuer, a missing client certificate and bad
//! files each get one line and their status.

use std::net::TcpListener;
use std::process::Command;

use crate::support::redis_server::RedisServer;
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
