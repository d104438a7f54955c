//! Sentinel topology: sentinels (the server binary with `--sentinel`) watching
//! a primary as "mymaster", on plain or TLS ports, killed by PID on drop.

use std::process::{Command, Stdio};
use std::time::Duration;

use super::expect_within;
use super::process::Proc;
use super::redis_server::{RedisServer, free_port, server_bin};
use super::rlock::LIMIT;
use super::scratch::Scratch;
use super::tls::{self, Tls};

pub struct Sentinels {
    procs: Vec<Proc>,
    pub ports: Vec<u16>,
    /// The CA the sentinels' TLS ports are trusted with; `None` on plain ports.
    tls_ca: Option<String>,
    _dir: Scratch,
}

/// A primary, a replica in sync with it, and three sentinels watching them.
pub fn topology() -> (RedisServer, RedisServer, Sentinels) {
    let (primary, replica) = RedisServer::with_replica();
    let sentinels = Sentinels::start(&primary);
    (primary, replica, sentinels)
}

impl Sentinels {
    /// Three sentinels watching `primary` as "mymaster" (quorum 2), once each
    /// knows the primary's replica.
    pub fn start(primary: &RedisServer) -> Self {
        let dir = Scratch::new();
        let mut procs = Vec::new();
        let mut ports = Vec::new();
        for i in 0..3 {
            let port = free_port();
            let conf = dir.file(&format!("sentinel-{i}.conf"));
            std::fs::write(
                &conf,
                format!(
                    "port {port}\nbind 127.0.0.1\ndir {}\n\
                     sentinel monitor mymaster 127.0.0.1 {} 2\n\
                     sentinel down-after-milliseconds mymaster 1000\n\
                     sentinel failover-timeout mymaster 5000\n",
                    dir.path().display(),
                    primary.port
                ),
            )
            .unwrap();
            procs.push(spawn(&conf));
            ports.push(port);
        }
        let sentinels = Sentinels {
            procs,
            ports,
            tls_ca: None,
            _dir: dir,
        };
        expect_within(LIMIT, "the sentinels to know the replica", || {
            sentinels.ports.iter().all(|&p| {
                sentinel_cmd(p, &["SENTINEL", "replicas", "mymaster"])
                    .is_some_and(|v| matches!(v, redis::Value::Array(ref a) if !a.is_empty()))
            })
        });
        sentinels
    }

    /// One sentinel on a TLS port only (no plain port), watching the TLS port
    /// `primary_tls_port` as "mymaster" (quorum 1) and replicating over TLS,
    /// once it names that master.
    pub fn start_tls(tls: &Tls, primary_tls_port: u16) -> Self {
        let dir = Scratch::new();
        let port = free_port();
        let conf = dir.file("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "port 0\nbind 127.0.0.1\ndir {dir}\ntls-port {port}\n\
                 tls-cert-file {crt}\ntls-key-file {key}\ntls-ca-cert-file {ca}\n\
                 tls-auth-clients no\ntls-replication yes\n\
                 sentinel monitor mymaster 127.0.0.1 {primary_tls_port} 1\n",
                dir = dir.path().display(),
                crt = tls.file("server.crt"),
                key = tls.file("server.key"),
                ca = tls.file("ca.crt"),
            ),
        )
        .unwrap();
        let sentinels = Sentinels {
            procs: vec![spawn(&conf)],
            ports: vec![port],
            tls_ca: Some(tls.file("ca.crt")),
            _dir: dir,
        };
        expect_within(LIMIT, "the TLS sentinel to name the master", || {
            sentinels.master_port() == Some(primary_tls_port)
        });
        sentinels
    }

    /// `redis+sentinel://` (`rediss+sentinel://` on TLS ports) with every
    /// sentinel, for "mymaster".
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        let scheme = if self.tls_ca.is_some() {
            "rediss+sentinel"
        } else {
            "redis+sentinel"
        };
        format!("{scheme}://{}/mymaster", hosts.join(","))
    }

    /// The master's port as the first sentinel names it.
    pub fn master_port(&self) -> Option<u16> {
        let ask = ["SENTINEL", "get-master-addr-by-name", "mymaster"];
        if let Some(ca) = &self.tls_ca {
            // redis-cli prints the host and the port on a line each.
            let out = tls::cli(ca, self.ports[0], &ask);
            return String::from_utf8_lossy(&out.stdout)
                .lines()
                .nth(1)?
                .trim()
                .parse()
                .ok();
        }
        match sentinel_cmd(self.ports[0], &ask)? {
            redis::Value::Array(a) => redis::from_redis_value::<u16>(a.get(1)?.clone()).ok(),
            _ => None,
        }
    }

    /// Asks the first (plain) sentinel to fail "mymaster" over; `None` when it does
    /// not answer or refuses (e.g. no replica it can promote yet).
    pub fn failover(&self) -> Option<redis::Value> {
        sentinel_cmd(self.ports[0], &["SENTINEL", "FAILOVER", "mymaster"])
    }
}

impl Drop for Sentinels {
    fn drop(&mut self) {
        for proc in &mut self.procs {
            proc.kill();
        }
    }
}

fn spawn(conf: &str) -> Proc {
    let child = Command::new(server_bin())
        .arg(conf)
        .arg("--sentinel")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server must be installed");
    Proc::new(child)
}

/// One command to the sentinel on `port`; `None` when it does not answer or
/// replies with an error.
fn sentinel_cmd(port: u16, args: &[&str]) -> Option<redis::Value> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}")).ok()?;
    let mut con = client
        .get_connection_with_timeout(Duration::from_secs(1))
        .ok()?;
    con.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(&mut con).ok()
}
