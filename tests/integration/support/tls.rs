//! TLS: certificates made by the test with openssl, and the redis-server
//! arguments for a TLS port beside the plain port the test itself uses. The
//! Sentinel and Cluster fixtures take a [`Tls`] to run on TLS ports.

use std::process::{Command, Output};

use super::redis_server::{FREE_PORT, RedisServer};
use super::scratch::Scratch;

/// A directory holding `ca.crt`, `server.{crt,key}` and `client.{crt,key}`
/// (both signed by the CA, for 127.0.0.1 and localhost), and `other-ca.crt`,
/// a second CA nobody uses.
pub struct Tls {
    dir: Scratch,
}

impl Tls {
    pub fn new() -> Self {
        let dir = Scratch::new();
        certificates(&dir);
        Tls { dir }
    }

    /// Path of `name` in the certificates' directory.
    pub fn file(&self, name: &str) -> String {
        self.dir.file(name)
    }

    /// redis-server arguments for a TLS port `port` (the server certificate,
    /// the test CA).
    pub fn server_args(&self, port: u16, clients_need_certificates: bool) -> Vec<String> {
        [
            "--tls-port",
            &port.to_string(),
            "--tls-cert-file",
            &self.file("server.crt"),
            "--tls-key-file",
            &self.file("server.key"),
            "--tls-ca-cert-file",
            &self.file("ca.crt"),
            "--tls-auth-clients",
            if clients_need_certificates {
                "yes"
            } else {
                "no"
            },
        ]
        .map(String::from)
        .to_vec()
    }

    /// A server with a plain port (for the test) and a TLS port (for rlock),
    /// and the `rediss://` URL of the TLS port.
    pub fn server(&self, clients_need_certificates: bool) -> (RedisServer, String) {
        let redis = self.start(clients_need_certificates);
        let port = redis.arg_after("--tls-port").unwrap_or_default().to_owned();
        (redis, format!("rediss://127.0.0.1:{port}"))
    }

    /// A server with a plain port and a TLS port (both chosen again if
    /// either was taken meanwhile: [`FREE_PORT`]).
    pub fn start(&self, clients_need_certificates: bool) -> RedisServer {
        let mut args = self.server_args(0, clients_need_certificates);
        if let Some(at) = args.iter().position(|a| a == "--tls-port") {
            args[at + 1] = FREE_PORT.to_owned();
        }
        RedisServer::start_with(&args.iter().map(String::as_str).collect::<Vec<_>>())
    }
}

/// `redis-cli --tls --cacert CA` against port `port`.
pub fn cli(ca: &str, port: u16, args: &[&str]) -> Output {
    Command::new("redis-cli")
        .args(["--tls", "--cacert", ca, "-p", &port.to_string()])
        .args(args)
        .output()
        .expect("redis-cli must be installed")
}

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
