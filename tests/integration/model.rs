//! Model-based test of the Lua scripts: seeded random sequences of acquire,
//! renew, release and lease expiry by several owners and every kind, run
//! against a real server and compared step by step with a small in-memory model
//! of the intended semantics. A failure prints the seed and the steps so far.

use std::collections::BTreeMap;

use redis::Value;

use crate::support::lua::script;
use crate::support::redis_server::RedisServer;

/// The intended semantics: owner → (hold count, kind, limit).
#[derive(Default)]
struct Model {
    holders: BTreeMap<usize, (i64, char, u64)>,
}

impl Model {
    fn compatible(&self, kind: char, limit: u64) -> bool {
        let Some(&(_, held, _)) = self.holders.values().next() else {
            return true;
        };
        if kind == 'x' || held != kind {
            return false;
        }
        if kind == 's' {
            return true;
        }
        let cap = self
            .holders
            .values()
            .map(|h| h.2)
            .min()
            .unwrap_or(limit)
            .min(limit);
        (self.holders.len() as u64) < cap
    }

    /// Granted, and the count after.
    fn acquire(&mut self, owner: usize, kind: char, limit: u64) -> Option<i64> {
        if let Some(h) = self.holders.get(&owner) {
            return Some(h.0); // a repeated request changes nothing
        }
        if !self.compatible(kind, limit) {
            return None;
        }
        self.holders.insert(owner, (1, kind, limit));
        Some(1)
    }

    fn release(&mut self, owner: usize) -> i64 {
        let Some(h) = self.holders.get_mut(&owner) else {
            return -1;
        };
        h.0 -= 1;
        let left = h.0;
        if left == 0 {
            self.holders.remove(&owner);
        }
        left
    }
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) % n
    }
}

const OWNERS: usize = 4;

fn token(owner: usize) -> String {
    format!("{:032x}", owner + 1)
}

fn first_int(v: &Value) -> i64 {
    match v {
        Value::Array(items) => first_int(&items[0]),
        Value::Int(n) => *n,
        other => panic!("unexpected reply {other:?}"),
    }
}

fn server_holders(redis: &RedisServer, name: &str) -> BTreeMap<usize, i64> {
    let fields: Vec<(String, String)> =
        redis.cmd(&["HGETALL", &format!("rlock:{{{name}}}:leases")]);
    fields
        .into_iter()
        .map(|(t, hold)| {
            let count = hold.split('|').next().unwrap().parse().unwrap();
            (usize::from_str_radix(&t, 16).unwrap() - 1, count)
        })
        .collect()
}

fn run_sequence(redis: &RedisServer, seed: u64, steps: usize) {
    let name = format!("model-{seed}");
    let mut model = Model::default();
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut log: Vec<String> = Vec::new();
    for _ in 0..steps {
        let owner = rng.below(OWNERS as u64) as usize;
        let tok = token(owner);
        let step = match rng.below(10) {
            0..=3 => {
                let (kind, limit) = match rng.below(4) {
                    0 | 1 => ('x', 1),
                    2 => ('s', 1),
                    _ => ('m', 2 + rng.below(2)),
                };
                let reply = script(
                    redis,
                    "acquire",
                    &name,
                    &tok,
                    &[
                        "",
                        "60000",
                        "h",
                        "1",
                        "c",
                        "0",
                        &kind.to_string(),
                        &limit.to_string(),
                        "0",
                    ],
                );
                let granted = first_int(&reply) == 1;
                let want = model.acquire(owner, kind, limit);
                log.push(format!("acquire {owner} {kind}{limit} -> {granted}"));
                assert_eq!(granted, want.is_some(), "seed {seed}: {log:#?}");
                None
            }
            4..=6 => {
                let got = first_int(&script(redis, "release", &name, &tok, &[]));
                log.push(format!("release {owner} -> {got}"));
                Some((got, model.release(owner)))
            }
            7 | 8 => {
                let got = first_int(&script(redis, "renew", &name, &tok, &["60000"]));
                log.push(format!("renew {owner} -> {got}"));
                Some((got, i64::from(model.holders.contains_key(&owner))))
            }
            _ => {
                // The owner's lease runs out: move it into the past.
                let holds = format!("rlock:{{{name}}}:leases");
                if model.holders.remove(&owner).is_some() {
                    let hold: String = redis.cmd(&["HGET", &holds, &tok]);
                    let mut fields: Vec<&str> = hold.splitn(3, '|').collect();
                    fields[1] = "1";
                    let _: i64 = redis.cmd(&["HSET", &holds, &tok, &fields.join("|")]);
                }
                log.push(format!("expire {owner}"));
                None
            }
        };
        if let Some((got, want)) = step {
            assert_eq!(got, want, "seed {seed}: {log:#?}");
        }
        // Pruning happens inside the next script: compare after a no-op renew.
        let _ = script(redis, "renew", &name, &token(OWNERS + 1), &["60000"]);
        let want: BTreeMap<usize, i64> = model.holders.iter().map(|(&o, h)| (o, h.0)).collect();
        assert_eq!(server_holders(redis, &name), want, "seed {seed}: {log:#?}");
    }
}

#[test]
fn the_lua_scripts_follow_the_model() {
    let redis = RedisServer::start();
    for seed in 1..=12 {
        run_sequence(&redis, seed, 150);
    }
}
