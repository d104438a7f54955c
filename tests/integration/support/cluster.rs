//! Redis Cluster topology: three masters joined by `redis-cli --cluster
//! create`, no replicas.

use std::process::Command;

use super::expect_within;
use super::redis_server::RedisServer;
use super::rlock::LIMIT;

pub struct Cluster {
    pub nodes: Vec<RedisServer>,
}

impl Cluster {
    /// Three masters sharing the slots, once every node reports `cluster_state:ok`.
    pub fn start() -> Self {
        let nodes: Vec<RedisServer> = (0..3)
            .map(|_| {
                RedisServer::start_with(&[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                ])
            })
            .collect();
        let mut create = Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        for node in &nodes {
            create.arg(format!("127.0.0.1:{}", node.port));
        }
        let out = create
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .expect("redis-cli must be installed");
        assert!(out.status.success(), "cluster create: {out:?}");
        expect_within(LIMIT, "the cluster to be ok", || {
            nodes.iter().all(|n| {
                let info: String = n.cmd(&["CLUSTER", "INFO"]);
                info.contains("cluster_state:ok")
            })
        });
        Cluster { nodes }
    }

    /// `redis+cluster://` seeded with two of the three nodes.
    pub fn url(&self) -> String {
        format!(
            "redis+cluster://127.0.0.1:{},127.0.0.1:{}",
            self.nodes[0].port, self.nodes[1].port
        )
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
