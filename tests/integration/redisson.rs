//! `--redisson`: rlock and a Java service using Redisson's `getLock(NAME)`
//! exclude and wake each other. The Java side is played by Redisson's own lock
//! and unlock Lua scripts (as Redisson ships them), run from the test.

use std::time::Duration;

use crate::support::redis_server::RedisServer;
use crate::support::rlock::{self, code, output, rlock, sh, show, spawn, spawn_quiet};
use crate::support::scratch::Scratch;
use crate::support::{expect_within, now_ms};

/// RedissonLock.tryLockInnerAsync.
const REDISSON_LOCK: &str = "if ((redis.call('exists', KEYS[1]) == 0) \
    or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then \
    redis.call('hincrby', KEYS[1], ARGV[2], 1); \
    redis.call('pexpire', KEYS[1], ARGV[1]); \
    return nil; \
    end; \
    return redis.call('pttl', KEYS[1]);";

/// RedissonLock.unlockInnerAsync.
const REDISSON_UNLOCK: &str = "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then \
    return nil;\
    end; \
    local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); \
    if (counter > 0) then \
    redis.call('pexpire', KEYS[1], ARGV[2]); \
    return 0; \
    else \
    redis.call('del', KEYS[1]); \
    redis.call('publish', KEYS[2], ARGV[1]); \
    return 1; \
    end; \
    return nil;";

const JAVA_OWNER: &str = "8f2c1a0e-1111-4222-8333-944455556666:57";

fn java_lock(redis: &RedisServer, name: &str) -> Option<i64> {
    redis::cmd("EVAL")
        .arg(REDISSON_LOCK)
        .arg(1)
        .arg(name)
        .arg(30_000)
        .arg(JAVA_OWNER)
        .query(&mut redis.con())
        .unwrap()
}

fn java_unlock(redis: &RedisServer, name: &str) -> Option<i64> {
    redis::cmd("EVAL")
        .arg(REDISSON_UNLOCK)
        .arg(2)
        .arg(name)
        .arg(format!("redisson_lock__channel:{{{name}}}"))
        .arg(0)
        .arg(30_000)
        .arg(JAVA_OWNER)
        .query(&mut redis.con())
        .unwrap()
}

#[test]
fn rlock_waits_for_a_redisson_holder_and_is_woken_by_its_unlock() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    assert_eq!(java_lock(&redis, "orders"), None, "Redisson took the lock");
    let ran = dir.file("ran");
    let mut waiter = spawn(
        rlock(&redis.url())
            .args(["run", "--redisson", "--wait", "20s", "orders", "--"])
            .args(sh(&format!("date +%s%3N > {ran}"))),
    );
    // rlock is subscribed to Redisson's unlock channel once it waits.
    expect_within(rlock::LIMIT, "rlock to subscribe", || {
        let subs: Vec<redis::Value> =
            redis.cmd(&["PUBSUB", "NUMSUB", "redisson_lock__channel:{orders}"]);
        matches!(subs.get(1), Some(redis::Value::Int(1)))
    });
    let out = output(rlock(&redis.url()).args(["run", "--redisson", "-n", "orders", "--", "true"]));
    assert_eq!(
        code(&out),
        75,
        "Redisson's hold excludes rlock: {}",
        show(&out)
    );
    let unlocked_at = now_ms();
    assert_eq!(java_unlock(&redis, "orders"), Some(1));
    assert!(waiter.wait_within(rlock::LIMIT).success());
    let ran_at: u128 = dir.read("ran").trim().parse().unwrap();
    // Woken by the unlock message, not by the 30 s lease running out.
    assert!(
        ran_at - unlocked_at < 10_000,
        "ran {} ms after the unlock",
        ran_at - unlocked_at
    );
    let keys = redis.keys();
    assert_eq!(
        keys,
        ["{orders}:rlock-fence", "{orders}:rlock-history"],
        "nothing but rlock's fence counter and history is left"
    );
}

#[test]
fn redisson_is_excluded_by_rlock_and_woken_by_its_release() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let held = dir.file("held");
    let release = dir.file("release");
    let mut holder = spawn_quiet(
        rlock(&redis.url())
            .args(["run", "--redisson", "orders", "--"])
            .args(sh(&format!(
                "touch {held}; while [ ! -e {release} ]; do sleep 0.02; done"
            ))),
    );
    expect_within(rlock::LIMIT, "rlock to hold", || {
        std::path::Path::new(&held).exists()
    });
    // The key is Redisson's: a hash NAME -> {"<uuid>:<thread>": 1} with a lease.
    let fields: Vec<(String, String)> = redis.cmd(&["HGETALL", "orders"]);
    assert_eq!(fields.len(), 1);
    let (owner, count) = &fields[0];
    assert_eq!(count, "1");
    let (uuid, thread) = owner.rsplit_once(':').unwrap();
    assert_eq!(uuid.len(), 36, "a UUID: {owner}");
    assert_eq!(thread, "1");
    let pttl =
        java_lock(&redis, "orders").expect("Redisson's lock returns the ttl while rlock holds");
    assert!(pttl > 0 && pttl <= 30_000, "{pttl}");
    // A Redisson waiter listens on the unlock channel.
    let mut listener = redis.con();
    let mut pubsub = listener.as_pubsub();
    pubsub.subscribe("redisson_lock__channel:{orders}").unwrap();
    pubsub
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    std::fs::write(&release, "").unwrap();
    let message = pubsub
        .get_message()
        .expect("rlock's release publishes Redisson's unlock message");
    let payload: String = message.get_payload().unwrap();
    assert_eq!(payload, "0");
    drop(pubsub);
    assert!(holder.wait_within(rlock::LIMIT).success());
    assert_eq!(
        java_lock(&redis, "orders"),
        None,
        "Redisson gets the lock now"
    );
}

#[test]
fn redisson_mode_refuses_other_kinds() {
    let out = output(rlock::bare().args(["run", "--redisson", "--shared", "x", "--", "true"]));
    rlock::assert_fails(&out, 2);
}

fn evalsha_calls(redis: &RedisServer) -> u64 {
    let info: String = redis.cmd(&["INFO", "commandstats"]);
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:calls="))
        .map_or(0, |rest| rest.split(',').next().unwrap().parse().unwrap())
}

#[test]
fn several_redisson_names_wait_quietly_and_wake_on_the_right_unlock() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    assert_eq!(java_lock(&redis, "second"), None);
    let ran = dir.file("ran");
    let mut waiter = spawn(
        rlock(&redis.url())
            .args([
                "run",
                "--redisson",
                "--wait",
                "20s",
                "first",
                "second",
                "--",
            ])
            .args(sh(&format!("touch {ran}"))),
    );
    expect_within(
        rlock::LIMIT,
        "rlock to subscribe to the lock it waits for",
        || {
            let subs: Vec<redis::Value> =
                redis.cmd(&["PUBSUB", "NUMSUB", "redisson_lock__channel:{second}"]);
            matches!(subs.get(1), Some(redis::Value::Int(1)))
        },
    );
    let before = evalsha_calls(&redis);
    let pause = std::time::Instant::now();
    while pause.elapsed() < Duration::from_millis(500) {
        assert!(waiter.try_status().is_none(), "still waiting");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(evalsha_calls(&redis) - before <= 4, "waiting, not spinning");
    assert_eq!(java_unlock(&redis, "second"), Some(1));
    assert!(waiter.wait_within(Duration::from_secs(10)).success());
    assert!(std::path::Path::new(&ran).exists());
}

/// A lock in Redisson's layout is visible: `status --redisson
/// NAME` (kind `redisson`; in JSON exclusive, layout redisson; the holder as far as the layout tells, never its
/// owner field), `status --check --redisson`, `list --redisson PATTERN`; a
/// run waiting on it says a Redisson client holds it, not "queued behind
/// other waiters".
#[test]
fn status_and_list_see_redisson_locks() {
    let redis = RedisServer::start();
    assert_eq!(java_lock(&redis, "orders"), None);
    // A hash that is not a lock, which list --redisson leaves out.
    redis.cmd::<i64>(&["HSET", "orders-config", "size", "3"]);
    let out = output(rlock(&redis.url()).args(["status", "--redisson", "orders", "idle"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let text = rlock::stdout(&out);
    assert!(
        text.contains("\norders ") && text.contains(" redisson "),
        "{text}"
    );
    assert!(
        text.contains("a Redisson client (Redisson thread 57, 1 hold(s)"),
        "{text}"
    );
    assert!(text.contains("lease left"), "{text}");
    assert!(
        !text.contains(JAVA_OWNER),
        "the owner field is a capability: {text}"
    );
    let idle = text.lines().find(|l| l.starts_with("idle ")).unwrap();
    assert!(idle.contains(" free "), "{text}");
    let out = output(rlock(&redis.url()).args(["status", "--redisson", "--json", "orders"]));
    let json = rlock::stdout(&out);
    assert!(
        json.contains("\"held\":true,\"kind\":\"exclusive\"")
            && json.contains("\"layout\":\"redisson\"")
            && json.contains("\"ttl_ms\":"),
        "{json}"
    );
    assert!(!json.contains("8f2c1a0e"), "{json}");
    let out = output(rlock(&redis.url()).args(["status", "--check", "--redisson", "orders"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let out = output(rlock(&redis.url()).args(["list", "--redisson", "ord*"]));
    let text = rlock::stdout(&out);
    assert!(text.contains("\norders "), "{}", show(&out));
    assert!(!text.contains("orders-config"), "{text}");

    // A run waiting on it on a terminal.
    let (mut run, _terminal, screen) =
        crate::support::terminal::spawn_on_terminal(rlock(&redis.url()).args([
            "run",
            "--redisson",
            "--wait",
            "1500ms",
            "orders",
            "--",
            "true",
        ]));
    let text = || String::from_utf8_lossy(&screen.lock().unwrap()).into_owned();
    assert_eq!(run.wait_within(rlock::LIMIT).code(), Some(75));
    expect_within(rlock::LIMIT, "the verdict", || {
        text().contains("not acquired")
    });
    assert!(text().contains("held by a Redisson client"), "{}", text());
    assert!(
        !text().contains("queued behind other waiters"),
        "{}",
        text()
    );

    assert_eq!(java_unlock(&redis, "orders"), Some(1));
    let out = output(rlock(&redis.url()).args(["status", "--check", "--redisson", "orders"]));
    assert_eq!(code(&out), 1, "{}", show(&out));
}
