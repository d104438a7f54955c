//! Fences never go back, even when the counter behind them is lost: a new
//! hold's fence is the larger of the counter + 1 and the clock in
//! microseconds (the server's TIME; the host's clock for file:), so a
//! redis-server restarted without its data, a Redlock quorum of such servers,
//! or a file: counter that was removed still hands out larger fences. Fences
//! have 16 digits and stay below 2^53: each path they take (the counter, the
//! holder's record, a handoff, the environment, status) keeps every digit.

use redis::Value;

use crate::support::lua::script;
use crate::support::quorum;
use crate::support::redis_server::RedisServer;
use crate::support::rlock::{bare, code, output, rlock, sh, show, stdout};
use crate::support::scratch::Scratch;

/// 2^52: above today's clock in microseconds (about 1.7e15), so a counter
/// set just below it decides the next fence, and the fence has 16 digits.
const BIG: u64 = 1 << 52;

/// RLOCK_FENCE of one `rlock OPTS run [RUN_OPTS] NAME`.
fn fence(mut cmd: std::process::Command, run_opts: &[&str], name: &str) -> u64 {
    let out = output(
        cmd.arg("run")
            .args(run_opts)
            .arg(name)
            .arg("--")
            .args(sh("echo $RLOCK_FENCE")),
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
    stdout(&out).trim().parse().unwrap()
}

#[test]
fn fences_keep_increasing_after_redis_restarts_without_its_data() {
    let mut redis = RedisServer::start();
    let own = fence(rlock(&redis.url()), &[], "jobs");
    let redisson = fence(rlock(&redis.url()), &["--redisson"], "orders");
    redis.restart();
    assert_eq!(
        redis.keys(),
        Vec::<String>::new(),
        "the restart lost the data"
    );
    let own_after = fence(rlock(&redis.url()), &[], "jobs");
    let redisson_after = fence(rlock(&redis.url()), &["--redisson"], "orders");
    assert!(own_after > own, "fence {own_after} after {own}");
    assert!(
        redisson_after > redisson,
        "--redisson fence {redisson_after} after {redisson}"
    );
}

/// 30 days in ms: how long a fence counter outlives the last fence handed out.
const FENCE_IDLE_MS: i64 = 30 * 24 * 3600 * 1000;

/// A counter's remaining life is about 30 days (a minute of slack for the run).
fn lives_about_30_days(redis: &RedisServer, key: &str) {
    let pttl: i64 = redis.cmd(&["PTTL", key]);
    assert!(
        (FENCE_IDLE_MS - 60_000..=FENCE_IDLE_MS).contains(&pttl),
        "{key}: PTTL {pttl}"
    );
}

#[test]
fn fence_counters_expire_30_days_after_the_last_fence_and_fences_still_increase() {
    let redis = RedisServer::start();
    let first = fence(rlock(&redis.url()), &[], "idle");
    let redisson = fence(rlock(&redis.url()), &["--redisson"], "idle-r");
    lives_about_30_days(&redis, "rlock:{idle}:fence");
    lives_about_30_days(&redis, "{idle-r}:rlock-fence");
    // A handoff hands out a fence too: the counter's life starts again.
    redis.cmd::<i64>(&["PEXPIRE", "rlock:{idle}:fence", "600000"]);
    let dir = Scratch::new();
    let mut holder = crate::support::holder::hold(&redis, &dir, "idle");
    let mut waiter = crate::support::rlock::spawn_quiet(
        rlock(&redis.url())
            .args(["run", "idle", "--"])
            .args(sh(&format!("echo $RLOCK_FENCE > {}", dir.file("handed")))),
    );
    crate::support::expect_within(crate::support::rlock::LIMIT, "the waiter to queue", || {
        redis.cmd::<i64>(&["ZCARD", "rlock:{idle}:waiters"]) == 1
    });
    redis.cmd::<i64>(&["PEXPIRE", "rlock:{idle}:fence", "600000"]);
    crate::support::holder::release(&dir, "idle");
    assert!(holder.wait_within(crate::support::rlock::LIMIT).success());
    assert!(waiter.wait_within(crate::support::rlock::LIMIT).success());
    lives_about_30_days(&redis, "rlock:{idle}:fence");
    let handed: u64 = dir.read("handed").trim().parse().unwrap();
    assert!(handed > first, "handed {handed} after {first}");
    // The counter gone (as after 30 idle days), fences still go up.
    redis.cmd::<i64>(&["DEL", "rlock:{idle}:fence", "{idle-r}:rlock-fence"]);
    let after = fence(rlock(&redis.url()), &[], "idle");
    let redisson_after = fence(rlock(&redis.url()), &["--redisson"], "idle-r");
    assert!(after > handed, "fence {after} after {handed}");
    assert!(
        redisson_after > redisson,
        "fence {redisson_after} after {redisson}"
    );
    lives_about_30_days(&redis, "rlock:{idle}:fence");
}

#[test]
fn redlock_fences_keep_increasing_when_a_quorum_restarts_without_its_data() {
    let mut servers = quorum::servers(3);
    let all = |servers: &[RedisServer]| quorum::rlock(servers.iter().map(RedisServer::url));
    let before = fence(all(&servers), &[], "rl");
    servers[0].restart();
    servers[1].restart();
    // The only server that remembers the fence does not answer: the quorum
    // is the two that forgot it.
    servers[2].freeze();
    let after = fence(all(&servers), &[], "rl");
    servers[2].thaw();
    assert!(after > before, "fence {after} after {before}");
}

#[test]
fn file_fences_keep_increasing_when_the_counter_file_is_removed() {
    let dir = Scratch::new();
    let local = || {
        let mut cmd = bare();
        cmd.arg("--url").arg(format!("file:{}", dir.file("locks")));
        cmd
    };
    let before = fence(local(), &[], "nightly");
    std::fs::remove_file(dir.path().join("locks").join("nightly.fence")).unwrap();
    let after = fence(local(), &[], "nightly");
    assert!(after > before, "fence {after} after {before}");
}

/// The counter is not flushed to the disk (an acquisition would cost two
/// flushes), so a power cut can leave it older, empty, or as zeroes; the
/// clock still gives a larger fence, and an empty counter is no error.
#[test]
fn file_fences_keep_increasing_when_a_power_cut_leaves_the_counter_empty_or_zeroed() {
    let dir = Scratch::new();
    let local = || {
        let mut cmd = bare();
        cmd.arg("--url").arg(format!("file:{}", dir.file("locks")));
        cmd
    };
    let counter = dir.path().join("locks").join("nightly.fence");
    let mut last = fence(local(), &[], "nightly");
    for lost in [&b""[..], b"\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", b"1"] {
        std::fs::write(&counter, lost).unwrap();
        let next = fence(local(), &[], "nightly");
        assert!(next > last, "fence {next} after {last}");
        last = next;
    }
}

/// A 16-digit fence through the scripts: the counter, the holder's record, a
/// repeated acquire (which reads the record) and a handoff ("g<fence>").
#[test]
fn a_16_digit_fence_round_trips_exactly_through_the_scripts() {
    let redis = RedisServer::start();
    let [a, b] = ['a', 'b'].map(|c| c.to_string().repeat(32));
    redis.cmd::<String>(&["SET", "rlock:{big}:fence", &(BIG - 1).to_string()]);
    let acquire = |who: &str| {
        let args = ["", "60000", "host", "1", "cmd", "60000", "x", "1", "0", "1"];
        match script(&redis, "acquire", "big", who, &args) {
            Value::Array(items) => items,
            other => panic!("{other:?}"),
        }
    };
    let held = acquire(&a);
    assert_eq!(held[0], Value::Int(1));
    assert_eq!(held[2], Value::Int(BIG as i64));
    assert_eq!(
        redis.cmd::<String>(&["GET", "rlock:{big}:fence"]),
        BIG.to_string()
    );
    let record: String = redis.cmd(&["HGET", "rlock:{big}:leases", &a]);
    assert!(record.contains(&format!("\"fence\":\"{BIG}\"")), "{record}");
    assert_eq!(acquire(&a)[2], Value::Int(BIG as i64), "a repeated acquire");
    assert_eq!(
        acquire(&b)[0],
        Value::Int(0),
        "b waits, to be handed the lock"
    );
    script(&redis, "release", "big", &a, &[]);
    let handed: Vec<String> = redis.cmd(&["LRANGE", &format!("rlock:{{big}}:w:{b}"), "0", "-1"]);
    assert_eq!(handed, [format!("g{}", BIG + 1)]);
    assert_eq!(acquire(&b)[2], Value::Int(BIG as i64 + 1));
}

/// The same through the binary: RLOCK_FENCE and a nested run's (which reads
/// the holder's record), `status --json`, and a --redisson lock.
#[test]
fn a_16_digit_fence_reaches_command_and_status_exactly() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    redis.cmd::<String>(&["SET", "rlock:{big}:fence", &(BIG - 1).to_string()]);
    let bin = &crate::support::rlock::bin();
    let url = redis.url();
    let script = format!(
        "echo $RLOCK_FENCE; {bin} --url {url} run -n big -- sh -c 'echo $RLOCK_FENCE'; \
         {bin} --url {url} status --json big > {status}",
        status = dir.file("status"),
    );
    let out = output(rlock(&url).args(["run", "big", "--"]).args(sh(&script)));
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert_eq!(
        stdout(&out),
        format!("{BIG}\n{BIG}\n"),
        "outer and nested run"
    );
    let status = dir.read("status");
    assert!(status.contains(&format!("\"fence\":{BIG}")), "{status}");
    redis.cmd::<String>(&["SET", "{orders}:rlock-fence", &(BIG - 1).to_string()]);
    assert_eq!(fence(rlock(&url), &["--redisson"], "orders"), BIG);
    assert_eq!(
        redis.cmd::<String>(&["GET", "{orders}:rlock-fence"]),
        BIG.to_string()
    );
}
