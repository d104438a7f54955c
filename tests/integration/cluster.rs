//! Redis Cluster (`redis+cluster://`): three masters made with `redis-cli
//! --cluster create`. Locks in different slots all work (every script touches
//! one slot), and a held lock's slot can be moved to another master under a
//! holder and a waiter: MOVED and ASK are followed, the holder keeps renewing,
//! the waiter gets the lock after it.

use crate::support::cluster::Cluster;
use crate::support::expect_within;
use crate::support::holder::{assert_rode_out, replicated_holder, span, timed_job};
use crate::support::rlock::{self, bare, code, output, sh, show, spawn, stdout};
use crate::support::scratch::Scratch;

#[test]
fn locks_in_every_slot_work() {
    let cluster = Cluster::start();
    let nodes = &cluster.nodes;
    let url = cluster.url();
    let names = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"];
    let mut fences = Vec::new();
    for name in names {
        let clock = nodes[0].time_us();
        let out = output(
            bare()
                .args(["--url", &url, "run", name, "--"])
                .args(sh("echo $RLOCK_FENCE")),
        );
        assert_eq!(code(&out), 0, "{name}: {}", show(&out));
        let fence: u64 = stdout(&out).trim().parse().unwrap();
        assert!(
            fence > clock,
            "{name}: fence {fence} from the clock ({clock} before)"
        );
        fences.push(fence);
    }
    // The names are spread over the three masters.
    let slots: Vec<usize> = names
        .iter()
        .map(|n| {
            let slot: i64 = nodes[0].cmd(&["CLUSTER", "KEYSLOT", &format!("rlock:{{{n}}}:fence")]);
            cluster.owner(slot)
        })
        .collect();
    assert!(
        slots.iter().any(|&o| o != slots[0]),
        "names on one node only: {slots:?}"
    );
    for ((name, &node), fence) in names.iter().zip(&slots).zip(&fences) {
        let counter: u64 = nodes[node].cmd(&["GET", &format!("rlock:{{{name}}}:fence")]);
        assert_eq!(
            counter, *fence,
            "{name}: the counter on the master of its slot"
        );
    }
    let out = output(bare().args([
        "--url", &url, "run", "--shared", "alpha", "bravo", "charlie", "--", "true",
    ]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let out = output(bare().args(["--url", &url, "run", "--limit", "2", "delta", "--", "true"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
}

#[test]
fn a_held_lock_follows_its_slot_to_another_master() {
    let cluster = Cluster::start();
    let nodes = &cluster.nodes;
    let url = cluster.url();
    let dir = Scratch::new();
    let holder = spawn(
        bare()
            .args(["--url", &url, "run", "--ttl", "1500ms", "moving", "--"])
            .args(sh(&timed_job(&dir, "holder", "3"))),
    );
    expect_within(rlock::LIMIT, "the holder to hold", || {
        std::path::Path::new(&dir.file("holder.held")).exists()
    });
    let waiter = spawn(
        bare()
            .args(["--url", &url, "run", "--ttl", "1500ms", "moving", "--"])
            .args(sh(&timed_job(&dir, "waiter", "0.1"))),
    );
    let slot: i64 = nodes[0].cmd(&["CLUSTER", "KEYSLOT", "rlock:{moving}:leases"]);
    let from = cluster.owner(slot);
    expect_within(rlock::LIMIT, "the waiter to queue", || {
        nodes[from].cmd::<i64>(&["ZCARD", "rlock:{moving}:waiters"]) == 1
    });
    let to = (from + 1) % 3;
    let id = |n: usize| nodes[n].cmd::<String>(&["CLUSTER", "MYID"]);
    let (from_id, to_id, slot) = (id(from), id(to), slot.to_string());
    nodes[to].cmd::<String>(&["CLUSTER", "SETSLOT", &slot, "IMPORTING", &from_id]);
    nodes[from].cmd::<String>(&["CLUSTER", "SETSLOT", &slot, "MIGRATING", &to_id]);
    let keys: Vec<String> = nodes[from].cmd(&["CLUSTER", "GETKEYSINSLOT", &slot, "100"]);
    let port = nodes[to].port.to_string();
    let mut migrate = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
    migrate.extend(keys.iter().map(String::as_str));
    nodes[from].cmd::<String>(&migrate);
    for node in nodes {
        node.cmd::<String>(&["CLUSTER", "SETSLOT", &slot, "NODE", &to_id]);
    }
    let holder = holder.output_within(rlock::LIMIT);
    assert_eq!(
        code(&holder),
        0,
        "the holder renewed on the new master: {}",
        show(&holder)
    );
    let waiter = waiter.output_within(rlock::LIMIT);
    assert_eq!(code(&waiter), 0, "{}", show(&waiter));
    let (h, w) = (
        span(&dir, "holder").expect("holder"),
        span(&dir, "waiter").expect("waiter"),
    );
    assert!(
        h.1 <= w.0,
        "the waiter ran while the holder held: {h:?} {w:?}"
    );
    assert!(nodes[to].cmd::<i64>(&["EXISTS", "rlock:{moving}:fence"]) == 1);
}

/// RedissonLock.tryLockInnerAsync.
const REDISSON_LOCK: &str = "if ((redis.call('exists', KEYS[1]) == 0) \
    or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then \
    redis.call('hincrby', KEYS[1], ARGV[2], 1); \
    redis.call('pexpire', KEYS[1], ARGV[1]); \
    return nil; \
    end; \
    return redis.call('pttl', KEYS[1]);";

/// RedissonLock.unlockInnerAsync as recent Redisson versions run it: the
/// publish command comes as ARGV[4], SPUBLISH on a Redis 7 Cluster (its
/// default shardedSubscriptionMode), and KEYS[3] is its unlock latch.
const REDISSON_UNLOCK: &str = "local val = redis.call('get', KEYS[3]); \
    if val ~= false then return tonumber(val); end; \
    if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; \
    local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); \
    if (counter > 0) then \
    redis.call('pexpire', KEYS[1], ARGV[2]); \
    redis.call('set', KEYS[3], 0, 'px', ARGV[5]); \
    return 0; \
    else \
    redis.call('del', KEYS[1]); \
    redis.call(ARGV[4], KEYS[2], ARGV[1]); \
    redis.call('set', KEYS[3], 1, 'px', ARGV[5]); \
    return 1; \
    end;";

const JAVA_OWNER: &str = "8f2c1a0e-1111-4222-8333-944455556666:57";

/// Redisson on a Redis 7 Cluster publishes its unlocks with SPUBLISH and
/// listens with SSUBSCRIBE: a waiting rlock wakes at a Redisson unlock, and a
/// Redisson waiter at an rlock release, long before the 30 s lease would run out.
#[test]
fn redisson_and_rlock_wake_each_other_on_a_cluster_by_sharded_pub_sub() {
    let cluster = Cluster::start();
    let url = cluster.url();
    let channel = "redisson_lock__channel:{orders}";
    let node = cluster.node_of("orders");
    let locked: Option<i64> = redis::cmd("EVAL")
        .arg(REDISSON_LOCK)
        .arg(1)
        .arg("orders")
        .arg(30_000)
        .arg(JAVA_OWNER)
        .query(&mut node.con())
        .unwrap();
    assert_eq!(locked, None, "Redisson took the lock");
    let waiter = spawn(bare().args([
        "--url",
        &url,
        "run",
        "--redisson",
        "--wait",
        "25s",
        "orders",
        "--",
        "true",
    ]));
    expect_within(rlock::LIMIT, "rlock to listen on the shard channel", || {
        let subs: Vec<redis::Value> = node.cmd(&["PUBSUB", "SHARDNUMSUB", channel]);
        matches!(subs.get(1), Some(redis::Value::Int(1)))
    });
    let unlocked: Option<i64> = redis::cmd("EVAL")
        .arg(REDISSON_UNLOCK)
        .arg(3)
        .arg("orders")
        .arg(channel)
        .arg("redisson_unlock_latch:{orders}:c0ffee")
        .arg(0)
        .arg(30_000)
        .arg(JAVA_OWNER)
        .arg("SPUBLISH")
        .arg(13_000)
        .query(&mut node.con())
        .unwrap();
    assert_eq!(unlocked, Some(1));
    let out = waiter.output_within(std::time::Duration::from_secs(10));
    assert_eq!(code(&out), 0, "woken by SPUBLISH: {}", show(&out));

    // A Redisson waiter listens with SSUBSCRIBE at the slot's node.
    let dir = Scratch::new();
    let go = dir.file("go");
    let holder = spawn(
        bare()
            .args(["--url", &url, "run", "--redisson", "orders", "--"])
            .args(sh(&format!("while [ ! -e {go} ]; do sleep 0.01; done"))),
    );
    expect_within(rlock::LIMIT, "rlock to hold", || {
        node.cmd::<i64>(&["EXISTS", "orders"]) == 1
    });
    let mut java = node.con();
    java.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    java.send_packed_command(&redis::cmd("SSUBSCRIBE").arg(channel).get_packed_command())
        .unwrap();
    java.recv_response().unwrap();
    std::fs::write(&go, "").unwrap();
    let message = java.recv_response().expect("an unlock message within 10 s");
    assert!(format!("{message:?}").contains("smessage"), "{message:?}");
    let out = holder.output_within(rlock::LIMIT);
    assert_eq!(code(&out), 0, "{}", show(&out));
}

/// `rlock check` on a cluster: the topology names its nodes, the
/// probes run on the node of the probe key's slot, and each master's
/// settings are checked.
#[test]
fn check_reports_the_cluster_and_checks_a_node() {
    let cluster = Cluster::start();
    let out = output(bare().args(["--url", &cluster.url(), "check"]));
    // The fixtures run without AOF: persistence warns.
    assert_eq!(code(&out), 1, "{}", show(&out));
    let text = stdout(&out);
    assert!(
        text.lines().any(
            |l| l.starts_with("ok      topology") && l.contains("Cluster: state ok, 3 node(s)")
        ),
        "{text}"
    );
    for node in &cluster.nodes {
        let here = format!("127.0.0.1:{}: ", node.port);
        for check in ["version", "eviction", "persistence", "replicas"] {
            assert!(
                text.lines().any(|l| l.contains(check) && l.contains(&here)),
                "{check} of {here}: {text}"
            );
        }
    }
    for check in ["scripts", "atomic-scripts", "rights", "blpop-timeout"] {
        assert!(
            text.lines()
                .any(|l| l.starts_with("ok") && l.contains(check)),
            "{check}: {text}"
        );
    }
}

/// A migration slower than the lease: while the slot is MIGRATING/IMPORTING
/// every script that declares all the lock's keys gets TRYAGAIN (before and
/// after the keys move). The holder renews from the holds' key alone, on
/// whichever node has it; a `--no-wait` probe answers 75 (held), not 69; once
/// the slot has moved, the release wakes a waiter through the new owner.
#[test]
fn a_migration_longer_than_the_lease_keeps_the_hold() {
    let cluster = Cluster::start();
    let nodes = &cluster.nodes;
    let url = cluster.url();
    let dir = Scratch::new();
    let go = dir.file("go");
    let holder = spawn(
        bare()
            .args(["--url", &url, "run", "--ttl", "2s", "slow", "--"])
            .args(sh(&format!(
                "touch {}; while [ ! -e {go} ]; do sleep 0.01; done; {}",
                dir.file("held"),
                timed_job(&dir, "holder", "0")
            ))),
    );
    expect_within(rlock::LIMIT, "the holder to hold", || {
        std::path::Path::new(&dir.file("held")).exists()
    });
    let slot: i64 = nodes[0].cmd(&["CLUSTER", "KEYSLOT", "rlock:{slow}:leases"]);
    let from = cluster.owner(slot);
    let waiter = spawn(
        bare()
            .args(["-v", "--url", &url, "run", "--ttl", "30s", "slow", "--"])
            .args(sh(&timed_job(&dir, "waiter", "0"))),
    );
    expect_within(rlock::LIMIT, "the waiter to queue", || {
        nodes[from].cmd::<i64>(&["ZCARD", "rlock:{slow}:waiters"]) == 1
    });
    let to = (from + 1) % 3;
    let id = |n: usize| nodes[n].cmd::<String>(&["CLUSTER", "MYID"]);
    let (from_id, to_id, slot) = (id(from), id(to), slot.to_string());
    nodes[to].cmd::<String>(&["CLUSTER", "SETSLOT", &slot, "IMPORTING", &from_id]);
    nodes[from].cmd::<String>(&["CLUSTER", "SETSLOT", &slot, "MIGRATING", &to_id]);
    let probe =
        || rlock::output(bare().args(["--url", &url, "run", "--no-wait", "slow", "--", "true"]));
    // Migrating, no key moved yet: longer than the 2 s lease.
    let until = std::time::Instant::now() + std::time::Duration::from_millis(2500);
    let out = probe();
    assert_eq!(code(&out), 75, "a probe while migrating: {}", show(&out));
    std::thread::sleep(until.saturating_duration_since(std::time::Instant::now()));
    let port = nodes[to].port.to_string();
    // The holds moved, the fence and history not yet (a reshard moves keys
    // in batches): the holds' key is asked for on the importing node.
    let migrate_keys = |keys: &[&str]| {
        let mut migrate = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
        migrate.extend(keys);
        nodes[from].cmd::<String>(&migrate);
    };
    migrate_keys(&["rlock:{slow}:leases"]);
    let until = std::time::Instant::now() + std::time::Duration::from_millis(2500);
    let out = probe();
    assert_eq!(
        code(&out),
        75,
        "a probe while the keys are split: {}",
        show(&out)
    );
    std::thread::sleep(until.saturating_duration_since(std::time::Instant::now()));
    let keys: Vec<String> = nodes[from].cmd(&["CLUSTER", "GETKEYSINSLOT", &slot, "100"]);
    migrate_keys(&keys.iter().map(String::as_str).collect::<Vec<_>>());
    // Every key moved, the slot still importing: again longer than the lease.
    let until = std::time::Instant::now() + std::time::Duration::from_millis(2500);
    let out = probe();
    assert_eq!(code(&out), 75, "a probe while importing: {}", show(&out));
    std::thread::sleep(until.saturating_duration_since(std::time::Instant::now()));
    for node in nodes {
        node.cmd::<String>(&["CLUSTER", "SETSLOT", &slot, "NODE", &to_id]);
    }
    // The waiter waited through the migration, and is in line on the new owner.
    expect_within(rlock::LIMIT, "the waiter to queue on the new owner", || {
        nodes[to].cmd::<i64>(&["ZCARD", "rlock:{slow}:waiters"]) == 1
    });
    std::fs::write(&go, "").unwrap();
    let holder = holder.output_within(rlock::LIMIT);
    assert_eq!(
        code(&holder),
        0,
        "the hold survived the migration: {}",
        show(&holder)
    );
    let waiter = waiter.output_within(rlock::LIMIT);
    assert_eq!(code(&waiter), 0, "{}", show(&waiter));
    let (h, w) = (
        span(&dir, "holder").expect("holder"),
        span(&dir, "waiter").expect("waiter"),
    );
    assert!(
        h.1 <= w.0,
        "the waiter ran while the holder held: {h:?} {w:?}"
    );
    // Woken by the release, not by the 30 s lease running out.
    assert!(
        w.0 - h.1 < 2000,
        "the waiter started {} ms after the release",
        w.0 - h.1
    );
}

/// A Cluster failover of the lock's master, with a hold replicated
/// (`--min-replicas 1`) and a ttl that rides the switch out: COMMAND runs to
/// its end (exit 0) while the renewals follow the slot to the promoted
/// replica, and a `--no-wait` probe meanwhile finds the lock taken (75).
fn a_replicated_hold_rides_out(fail_over: impl FnOnce(&mut Cluster, usize, usize)) {
    let mut cluster = Cluster::start_with_replicas();
    let url = cluster.url();
    let dir = Scratch::new();
    let holder = replicated_holder(&url, &dir);
    let slot: i64 = cluster.nodes[0].cmd(&["CLUSTER", "KEYSLOT", "rlock:{kept}:leases"]);
    let master = cluster.owner(slot);
    let replica = cluster.replica_of(master);
    fail_over(&mut cluster, master, replica);
    expect_within(
        std::time::Duration::from_secs(20),
        "the replica to be a master",
        || {
            cluster.nodes[replica]
                .cmd::<String>(&["INFO", "replication"])
                .contains("role:master")
        },
    );
    // (CLUSTERDOWN, 69, until the nodes agree a master serves every slot.)
    expect_within(rlock::LIMIT, "the cluster to be ok again", || {
        (0..cluster.nodes.len()).filter(|n| *n != master).all(|n| {
            let info: String = cluster.nodes[n].cmd(&["CLUSTER", "INFO"]);
            info.contains("cluster_state:ok")
        })
    });
    assert_rode_out(holder, &url, &cluster.nodes[replica], &dir);
}

#[test]
fn a_forced_cluster_failover_keeps_the_hold() {
    a_replicated_hold_rides_out(|cluster, _, replica| {
        let node = &cluster.nodes[replica];
        node.cmd::<String>(&["CLUSTER", "FAILOVER"]);
        // A manual failover the master does not agree to in time is
        // abandoned (seen on Redis 6.2 on a loaded machine): forced then.
        let promoted = crate::support::wait_until(std::time::Duration::from_secs(8), || {
            node.cmd::<String>(&["INFO", "replication"])
                .contains("role:master")
        });
        if !promoted {
            node.cmd::<String>(&["CLUSTER", "FAILOVER", "FORCE"]);
        }
    });
}

#[test]
fn a_killed_cluster_master_keeps_a_replicated_hold() {
    a_replicated_hold_rides_out(|cluster, master, _| cluster.nodes[master].stop());
}

/// A reshard sets the slot's new owner on each node in turn: meanwhile the
/// old owner sends rlock to the new one, which, still importing, sends it
/// back. A run then follows the redirections a little apart until the nodes
/// agree, within its limit, instead of failing (69) after five of them.
#[test]
fn a_slot_whose_nodes_disagree_for_a_moment_is_followed_until_they_agree() {
    let cluster = Cluster::start();
    let nodes = &cluster.nodes;
    let url = cluster.url();
    let slot: i64 = nodes[0].cmd(&["CLUSTER", "KEYSLOT", "rlock:{bounce}:leases"]);
    let serves = |n: &&crate::support::redis_server::RedisServer| {
        redis::cmd("EXISTS")
            .arg("rlock:{bounce}:leases")
            .query::<i64>(&mut n.con())
            .is_ok()
    };
    let from = nodes.iter().position(|n| serves(&n)).expect("an owner");
    let to = (from + 1) % 3;
    let id = |n: usize| nodes[n].cmd::<String>(&["CLUSTER", "MYID"]);
    let (from_id, to_id, slot) = (id(from), id(to), slot.to_string());
    nodes[to].cmd::<String>(&["CLUSTER", "SETSLOT", &slot, "IMPORTING", &from_id]);
    nodes[from].cmd::<String>(&["CLUSTER", "SETSLOT", &slot, "MIGRATING", &to_id]);
    // The old owner knows the new one; the new one still imports.
    nodes[from].cmd::<String>(&["CLUSTER", "SETSLOT", &slot, "NODE", &to_id]);
    let probe = spawn(bare().args(["--url", &url, "run", "--no-wait", "bounce", "--", "true"]));
    // How long the nodes disagree (the fault), not a wait for a condition.
    std::thread::sleep(std::time::Duration::from_millis(300));
    for n in [to, (from + 2) % 3] {
        nodes[n].cmd::<String>(&["CLUSTER", "SETSLOT", &slot, "NODE", &to_id]);
    }
    let out = probe.output_within(rlock::LIMIT);
    assert_eq!(code(&out), 0, "{}", show(&out));
}
