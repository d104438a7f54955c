//! Direct handoff, step by step through the real scripts: a release makes the
//! head waiter the holder itself and tells it with "g<fence>" on its list, so
//! the waiter needs no second round trip; a waiter that gives up as it is
//! handed the lock gives it back; waiters that did not ask for it are only woken.

use redis::Value;

use crate::support::lua::{deliver, script, undelivered};
use crate::support::redis_server::RedisServer;

const NAME: &str = "handoff";

fn token(c: char) -> String {
    c.to_string().repeat(32)
}

/// acquire with kind `kind` (limit `limit`); `register` and `grant` as the
/// ARGV of acquire.lua. True when it holds.
fn acquire(redis: &RedisServer, who: &str, kind: &str, limit: &str, grant: &str) -> bool {
    let reply = script(
        redis,
        "acquire",
        NAME,
        who,
        &[
            "", "60000", "host", "1", "cmd", "60000", kind, limit, "0", grant,
        ],
    );
    matches!(reply, Value::Array(ref items) if items.first() == Some(&Value::Int(1)))
}

fn holds(redis: &RedisServer, who: &str) -> bool {
    redis.cmd::<i64>(&["HEXISTS", &format!("rlock:{{{NAME}}}:leases"), who]) == 1
}

/// The messages on `who`'s list; a handoff's as "g<fence>", without the
/// waiters first in line it names after it.
fn list(redis: &RedisServer, who: &str) -> Vec<String> {
    let messages: Vec<String> =
        redis.cmd(&["LRANGE", &format!("rlock:{{{NAME}}}:w:{who}"), "0", "-1"]);
    messages
        .into_iter()
        .map(|m| m.split(',').next().unwrap_or_default().to_owned())
        .collect()
}

fn fence(redis: &RedisServer) -> i64 {
    redis.cmd(&["GET", &format!("rlock:{{{NAME}}}:fence")])
}

#[test]
fn a_release_hands_an_exclusive_lock_to_the_head_waiter() {
    let redis = RedisServer::start();
    let [a, b, c] = ['a', 'b', 'c'].map(token);
    assert!(acquire(&redis, &a, "x", "1", "1"));
    assert!(!acquire(&redis, &b, "x", "1", "1"), "b queues");
    assert!(!acquire(&redis, &c, "x", "1", "1"), "c queues behind b");
    script(&redis, "release", NAME, &a, &[]);
    assert!(holds(&redis, &b) && !holds(&redis, &c));
    assert_eq!(list(&redis, &b), [format!("g{}", fence(&redis))]);
    assert!(list(&redis, &c).is_empty(), "c is not woken");
    // b's repeated acquire (its block had timed out) finds its own hold, with
    // the fence it was handed, and clears its list.
    let handed = fence(&redis);
    let reply = script(
        &redis,
        "acquire",
        NAME,
        &b,
        &["", "60000", "host", "1", "cmd", "60000", "x", "1", "0", "1"],
    );
    let Value::Array(items) = reply else {
        panic!("{reply:?}")
    };
    assert_eq!(items[2], Value::Int(handed));
    assert!(list(&redis, &b).is_empty());
    script(&redis, "release", NAME, &b, &[]);
    assert!(holds(&redis, &c));
    let next = list(&redis, &c);
    assert_eq!(next, [format!("g{}", fence(&redis))]);
    assert!(fence(&redis) > handed, "c's fence {next:?} after {handed}");
}

#[test]
fn a_waiter_that_gives_up_as_it_is_handed_the_lock_gives_it_back() {
    let redis = RedisServer::start();
    let [a, b, c] = ['a', 'b', 'c'].map(token);
    assert!(acquire(&redis, &a, "x", "1", "1"));
    assert!(!acquire(&redis, &b, "x", "1", "1"));
    assert!(!acquire(&redis, &c, "x", "1", "1"));
    script(&redis, "release", NAME, &a, &[]);
    assert!(holds(&redis, &b));
    // b's --wait ran out (or a signal came) before it read the handoff.
    script(&redis, "leave", NAME, &b, &[]);
    assert!(!holds(&redis, &b), "b gave the lock back");
    assert!(list(&redis, &b).is_empty(), "nothing left for b");
    assert!(holds(&redis, &c), "and it went on to c");
}

#[test]
fn a_waiter_that_did_not_ask_for_a_handoff_is_only_woken() {
    let redis = RedisServer::start();
    let [a, b] = ['a', 'b'].map(token);
    assert!(acquire(&redis, &a, "x", "1", "1"));
    assert!(
        !acquire(&redis, &b, "x", "1", "0"),
        "b waits for several locks"
    );
    script(&redis, "release", NAME, &a, &[]);
    assert!(!holds(&redis, &b));
    assert_eq!(list(&redis, &b), ["w"]);
    assert!(acquire(&redis, &b, "x", "1", "0"), "b takes it itself");
}

#[test]
fn semaphore_handoffs_respect_every_limit_involved() {
    let redis = RedisServer::start();
    let [a, a2, w1, w2, w3] = ['a', 'b', 'c', 'd', 'e'].map(token);
    assert!(acquire(&redis, &a, "m", "2", "1"));
    assert!(acquire(&redis, &a2, "m", "2", "1"));
    assert!(!acquire(&redis, &w1, "m", "2", "1"), "full");
    assert!(!acquire(&redis, &w2, "m", "1", "1"), "w2 allows one holder");
    assert!(!acquire(&redis, &w3, "m", "2", "1"));
    script(&redis, "release", NAME, &a, &[]);
    assert!(holds(&redis, &w1), "one slot freed: w1 gets it");
    assert!(!holds(&redis, &w2) && list(&redis, &w2).is_empty());
    script(&redis, "release", NAME, &a2, &[]);
    assert!(
        !holds(&redis, &w2),
        "w2's limit of 1 does not allow it beside w1"
    );
    assert!(!holds(&redis, &w3), "w3 is behind w2");
    script(&redis, "release", NAME, &w1, &[]);
    assert!(holds(&redis, &w2), "alone now");
    assert!(!holds(&redis, &w3), "not beside w2, whose limit is 1");
    script(&redis, "release", NAME, &w2, &[]);
    assert!(holds(&redis, &w3));
}

#[test]
fn a_run_of_shared_waiters_is_handed_the_lock_together() {
    let redis = RedisServer::start();
    let [a, r1, r2, w] = ['a', 'b', 'c', 'd'].map(token);
    assert!(acquire(&redis, &a, "x", "1", "1"));
    assert!(!acquire(&redis, &r1, "s", "1", "1"));
    assert!(!acquire(&redis, &r2, "s", "1", "1"));
    assert!(!acquire(&redis, &w, "x", "1", "1"));
    script(&redis, "release", NAME, &a, &[]);
    assert!(holds(&redis, &r1) && holds(&redis, &r2), "both readers");
    assert!(!holds(&redis, &w) && list(&redis, &w).is_empty());
    let fences: Vec<String> = [&r1, &r2].map(|t| list(&redis, t)[0].clone()).to_vec();
    assert_ne!(fences[0], fences[1], "each hold has its own fence");
    script(&redis, "release", NAME, &r1, &[]);
    assert!(!holds(&redis, &w), "r2 still reads");
    script(&redis, "release", NAME, &r2, &[]);
    assert!(holds(&redis, &w));
}

/// Milliseconds of lease `who` has left, by the server's clock.
fn lease_left(redis: &RedisServer, who: &str) -> i64 {
    let hold: String = redis.cmd(&["HGET", &format!("rlock:{{{NAME}}}:leases"), who]);
    let until: i64 = hold.split('|').nth(1).unwrap().parse().unwrap();
    let time: Vec<String> = redis.cmd(&["TIME"]);
    let now = time[0].parse::<i64>().unwrap() * 1000 + time[1].parse::<i64>().unwrap() / 1000;
    until - now
}

#[test]
fn a_handoff_read_late_restarts_the_lease_the_waiter_counts_from_its_request() {
    let redis = RedisServer::start();
    let [a, b] = ['a', 'b'].map(token);
    let short = |who: &str| {
        script(
            &redis,
            "acquire",
            NAME,
            who,
            &["", "1000", "host", "1", "cmd", "1000", "x", "1", "0", "1"],
        )
    };
    assert!(matches!(short(&a), Value::Array(ref i) if i[0] == Value::Int(1)));
    assert!(matches!(short(&b), Value::Array(ref i) if i[0] == Value::Int(0)));
    script(&redis, "release", NAME, &a, &[]);
    assert!(holds(&redis, &b), "handed to b");
    // b was stopped and missed the handoff; its next request finds the hold
    // and counts a full lease from that request, so the server must too.
    std::thread::sleep(std::time::Duration::from_millis(600));
    assert!(matches!(short(&b), Value::Array(ref i) if i[0] == Value::Int(1)));
    let left = lease_left(&redis, &b);
    assert!(left > 900, "the server has {left} ms left");
}

#[test]
fn a_hold_removed_before_its_handoff_is_read_leaves_no_stale_handoff() {
    let redis = RedisServer::start();
    let [a, b, c] = ['a', 'b', 'c'].map(token);
    assert!(acquire(&redis, &a, "x", "1", "1"));
    assert!(!acquire(&redis, &b, "x", "1", "1"));
    script(&redis, "release", NAME, &a, &[]);
    assert!(holds(&redis, &b));
    // An operator forces the lock free before b read its handoff.
    script(&redis, "force", NAME, &token('0'), &[]);
    assert!(
        list(&redis, &b).is_empty(),
        "the handoff went with the hold"
    );
    assert!(acquire(&redis, &c, "x", "1", "1"));
    assert!(!acquire(&redis, &b, "x", "1", "1"), "b queues behind c");
    assert!(
        list(&redis, &b).is_empty(),
        "nothing on b's list says it holds"
    );
}

#[test]
fn a_handed_over_lease_ends_when_the_waiters_registration_would_have() {
    let redis = RedisServer::start();
    let [a, b] = ['a', 'b'].map(token);
    assert!(acquire(&redis, &a, "x", "1", "1"));
    // b asks for a 60 s lease but registers for 2 s only.
    let reply = script(
        &redis,
        "acquire",
        NAME,
        &b,
        &["", "60000", "host", "1", "cmd", "2000", "x", "1", "0", "1"],
    );
    assert!(matches!(reply, Value::Array(ref i) if i[0] == Value::Int(0)));
    script(&redis, "release", NAME, &a, &[]);
    assert!(holds(&redis, &b));
    let left = lease_left(&redis, &b);
    assert!(
        (1..=2000).contains(&left),
        "a dead waiter would keep the lock {left} ms"
    );
}

#[test]
fn a_handoff_message_does_not_outlive_the_hold_it_announces() {
    let redis = RedisServer::start();
    let [a, b, c] = ['a', 'b', 'c'].map(token);
    // ttl 1000 ms, registration 1000 ms (rlock registers for its ttl).
    let req = |who: &str| {
        script(
            &redis,
            "acquire",
            NAME,
            who,
            &["", "1000", "host", "1", "cmd", "1000", "x", "1", "0", "1"],
        )
    };
    assert!(matches!(req(&a), Value::Array(ref i) if i[0] == Value::Int(1)));
    assert!(matches!(req(&b), Value::Array(ref i) if i[0] == Value::Int(0)));
    // a releases 500 ms after b registered: b's lease ends with its
    // registration, about 500 ms from then.
    std::thread::sleep(std::time::Duration::from_millis(500));
    script(&redis, "release", NAME, &a, &[]);
    assert!(holds(&redis, &b));
    // b does not read its list in time; its hold lapses, no script runs.
    crate::support::expect_within(
        std::time::Duration::from_secs(3),
        "b's hold to expire",
        || !holds(&redis, &b),
    );
    assert!(matches!(req(&c), Value::Array(ref i) if i[0] == Value::Int(1)));
    let stale = list(&redis, &b);
    assert!(
        stale.is_empty(),
        "c holds the lock, and b's BLPOP would read {stale:?}"
    );
}

/// The client that released died before it delivered its outbox (wake.lua):
/// the waiter it made the holder is never told, and looks again when its block
/// times out (half its ttl at most), finding the hold its own.
#[test]
fn a_handoff_lost_between_the_two_calls_costs_only_latency() {
    use crate::support::rlock::{self, rlock, sh, spawn_quiet};
    let redis = RedisServer::start();
    let dir = crate::support::scratch::Scratch::new();
    let a = token('a');
    assert!(acquire(&redis, &a, "x", "1", "1"));
    let started = std::time::Instant::now();
    let mut waiter = spawn_quiet(
        rlock(&redis.url())
            .args(["run", "--ttl", "2s", NAME, "--"])
            .args(sh(&format!("echo $RLOCK_FENCE > {}", dir.file("fence")))),
    );
    crate::support::expect_within(rlock::LIMIT, "the waiter to queue", || {
        redis.cmd::<i64>(&["ZCARD", &format!("rlock:{{{NAME}}}:waiters")]) == 1
    });
    let reply = undelivered(&redis, "release", NAME, &a, &[]);
    let Value::Array(outbox) = &reply[1] else {
        panic!("{reply:?}")
    };
    assert_eq!(outbox.len(), 2, "one handoff not delivered: {reply:?}");
    let handed = fence(&redis);
    assert!(waiter.wait_within(rlock::LIMIT).success());
    let took = started.elapsed();
    assert!(
        took < std::time::Duration::from_secs(3),
        "the waiter looked again within half its ttl: {took:?}"
    );
    let ran: i64 = dir.read("fence").trim().parse().unwrap();
    assert_eq!(ran, handed, "it ran under the hold it was handed");
}

/// wake.lua checks each message against the lock as it is when it runs: a
/// handoff delivered late, after its hold was ended, or a wake-up for a waiter
/// that left, is dropped, never read.
#[test]
fn a_late_delivery_of_an_ended_hold_or_a_departed_waiter_is_dropped() {
    let redis = RedisServer::start();
    let [a, b, c] = ['a', 'b', 'c'].map(token);
    assert!(acquire(&redis, &a, "x", "1", "1"));
    assert!(!acquire(&redis, &b, "x", "1", "1"));
    let reply = undelivered(&redis, "release", NAME, &a, &[]);
    let outbox: Vec<String> = redis::FromRedisValue::from_redis_value(reply[1].clone()).unwrap();
    assert!(
        holds(&redis, &b) && outbox[1].starts_with('g'),
        "{outbox:?}"
    );
    script(&redis, "force", NAME, &c, &[]);
    assert_eq!(deliver(&redis, NAME, &c, &outbox), 0);
    assert!(
        list(&redis, &b).is_empty(),
        "no handoff for a hold forced away"
    );

    assert!(acquire(&redis, &a, "x", "1", "1"));
    assert!(!acquire(&redis, &b, "x", "1", "0"), "b is only to be woken");
    let reply = undelivered(&redis, "release", NAME, &a, &[]);
    let outbox: Vec<String> = redis::FromRedisValue::from_redis_value(reply[1].clone()).unwrap();
    assert_eq!(outbox, [b.clone(), "w".to_owned()]);
    script(&redis, "leave", NAME, &b, &[]);
    assert_eq!(deliver(&redis, NAME, &c, &outbox), 0);
    assert!(list(&redis, &b).is_empty(), "no wake-up for a waiter gone");
}
