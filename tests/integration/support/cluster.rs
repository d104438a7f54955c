//! Redis Cluster topology: three masters joined by `redis-cli --cluster
//! create`, no replicas, on plain or TLS ports.

use std::process::Command;

use super::expect_within;
use super::redis_server::{FREE_PORT, RedisServer};
use super::rlock::LIMIT;
use super::tls::Tls;

pub struct Cluster {
    /// The nodes; the test reaches each on its plain port.
    pub nodes: Vec<RedisServer>,
    /// The nodes' TLS ports, in the order of `nodes` (empty without TLS).
    pub tls_ports: Vec<u16>,
}

impl Cluster {
    /// Three masters sharing the slots, once every node reports `cluster_state:ok`.
    pub fn start() -> Self {
        Self::start_with(None)
    }

    /// [`start`](Self::start) with a TLS port on each node (`--tls-cluster
    /// yes`: the cluster bus and the addresses the nodes give out are TLS),
    /// the cluster created through the TLS ports.
    pub fn start_tls(tls: &Tls) -> Self {
        Self::start_with(Some(tls))
    }

    /// Three masters, each with a replica (six nodes; the replicas are
    /// `nodes[3..]`), a node timeout of one second: failovers in seconds.
    pub fn start_with_replicas() -> Self {
        Self::create(None, 6)
    }

    fn start_with(tls: Option<&Tls>) -> Self {
        Self::create(tls, 3)
    }

    fn create(tls: Option<&Tls>, count: usize) -> Self {
        let nodes: Vec<RedisServer> = (0..count)
            .map(|_| {
                let mut args = Vec::new();
                if let Some(tls) = tls {
                    args = tls.server_args(0, false);
                    // Chosen with the node's port, again if either was taken.
                    if let Some(at) = args.iter().position(|a| a == "--tls-port") {
                        args[at + 1] = FREE_PORT.to_owned();
                    }
                    args.extend(["--tls-cluster", "yes"].map(String::from));
                }
                args.extend(
                    [
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        "nodes.conf",
                    ]
                    .map(String::from),
                );
                if count > 3 {
                    args.extend(["--cluster-node-timeout", "1000"].map(String::from));
                }
                RedisServer::start_with(&args.iter().map(String::as_str).collect::<Vec<_>>())
            })
            .collect();
        let tls_ports: Vec<u16> = match tls {
            Some(_) => nodes
                .iter()
                .map(|n| {
                    n.arg_after("--tls-port")
                        .and_then(|p| p.parse().ok())
                        .unwrap()
                })
                .collect(),
            None => Vec::new(),
        };
        let mut create = Command::new("redis-cli");
        match tls {
            Some(tls) => {
                create.args(["--tls", "--cacert", &tls.file("ca.crt")]);
                create.args(["--cluster", "create"]);
                for port in &tls_ports {
                    create.arg(format!("127.0.0.1:{port}"));
                }
            }
            None => {
                create.args(["--cluster", "create"]);
                for node in &nodes {
                    create.arg(format!("127.0.0.1:{}", node.port));
                }
            }
        }
        let out = create
            .args([
                "--cluster-replicas",
                if count > 3 { "1" } else { "0" },
                "--cluster-yes",
            ])
            .output()
            .expect("redis-cli must be installed");
        assert!(out.status.success(), "cluster create: {out:?}");
        expect_within(LIMIT, "the cluster to be ok", || {
            nodes.iter().all(|n| {
                let info: String = n.cmd(&["CLUSTER", "INFO"]);
                info.contains("cluster_state:ok")
            })
        });
        if count > 3 {
            expect_within(LIMIT, "every master's replica to be in sync", || {
                nodes.iter().all(|n| {
                    let info: String = n.cmd(&["INFO", "replication"]);
                    info.contains("role:slave") || info.contains("state=online")
                })
            });
        }
        Cluster { nodes, tls_ports }
    }

    /// `redis+cluster://` seeded with two of the three nodes.
    pub fn url(&self) -> String {
        format!(
            "redis+cluster://127.0.0.1:{},127.0.0.1:{}",
            self.nodes[0].port, self.nodes[1].port
        )
    }

    /// The index of the replica of the node at `master`.
    pub fn replica_of(&self, master: usize) -> usize {
        let port = format!("master_port:{}", self.nodes[master].port);
        self.nodes
            .iter()
            .position(|n| n.cmd::<String>(&["INFO", "replication"]).contains(&port))
            .expect("every master has a replica")
    }

    /// The index of the node serving `slot` (the one holding keys in it).
    pub fn owner(&self, slot: i64) -> usize {
        self.nodes
            .iter()
            .position(|n| n.cmd::<i64>(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]) > 0)
            .expect("some node has the lock's keys")
    }

    /// The node serving `key`'s slot (the one that answers without MOVED).
    pub fn node_of(&self, key: &str) -> &RedisServer {
        self.nodes
            .iter()
            .find(|n| {
                redis::cmd("EXISTS")
                    .arg(key)
                    .query::<i64>(&mut n.con())
                    .is_ok()
            })
            .expect("a node serves the slot")
    }
}
