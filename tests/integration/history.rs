//! `rlock history` and `--history N`: every event (acquired, released, busy,
//! max-hold, lost, forced, interrupted) on Redis, Redlock and `file:`; the
//! cap, the idle expiry, 0 = off, and a history that cannot be written never
//! failing a run.

use std::process::{Command, Stdio};

use crate::support::expect_within;
use crate::support::holder::{hold, release};
use crate::support::quorum;
use crate::support::redis_server::RedisServer;
use crate::support::rlock::{self, bare, code, output, rlock, sh, show, spawn, stdout};
use crate::support::scratch::Scratch;

/// One event of `history --json`, read by Python's json module: the fields
/// as text (`null` for null), in the contract's order.
#[derive(Debug)]
struct Seen {
    event: String,
    fields: Vec<(String, String)>,
}

impl Seen {
    fn get(&self, name: &str) -> &str {
        self.fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("no field {name} in {self:?}"))
    }
}

const FIELDS: [&str; 10] = [
    "time",
    "event",
    "host",
    "pid",
    "note",
    "command",
    "fence",
    "waited_ms",
    "held_ms",
    "exit",
];

/// `rlock history NAME --json`, parsed by python3's json module (so the test
/// checks JSON, not our reading of it); every object has every field.
fn history_json(cmd: &mut Command) -> Vec<Seen> {
    let out = output(cmd);
    assert_eq!(code(&out), 0, "{}", show(&out));
    let script = r#"
import json, sys
events = json.load(sys.stdin)
assert isinstance(events, list)
for e in events:
    print("\x1e".join(k + "\x1f" + ("null" if e[k] is None else str(e[k])) for k in sys.argv[1:]))
"#;
    let mut python = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(FIELDS)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    python.stdin.take().unwrap().write_all(&out.stdout).unwrap();
    let parsed = python.wait_with_output().unwrap();
    assert!(
        parsed.status.success(),
        "not JSON with every field: {}\n{}",
        String::from_utf8_lossy(&parsed.stderr),
        stdout(&out)
    );
    String::from_utf8(parsed.stdout)
        .unwrap()
        .lines()
        .map(|line| {
            let fields: Vec<(String, String)> = line
                .split('\x1e')
                .map(|kv| {
                    let (k, v) = kv.split_once('\x1f').unwrap();
                    (k.to_owned(), v.to_owned())
                })
                .collect();
            Seen {
                event: fields[1].1.clone(),
                fields,
            }
        })
        .collect()
}

fn kinds(events: &[Seen]) -> Vec<&str> {
    events.iter().map(|e| e.event.as_str()).collect()
}

#[test]
fn a_run_records_acquired_and_released_with_its_figures_newest_first() {
    let redis = RedisServer::start();
    let out = output(
        rlock(&redis.url())
            .args(["run", "--note", "nightly", "job", "--"])
            .args(sh("sleep 0.2; exit 3")),
    );
    assert_eq!(code(&out), 3, "{}", show(&out));
    let events = history_json(rlock(&redis.url()).args(["history", "job", "--json"]));
    assert_eq!(kinds(&events), ["released", "acquired"], "{events:?}");
    let (released, acquired) = (&events[0], &events[1]);
    assert_eq!(released.get("exit"), "3");
    assert!(released.get("held_ms").parse::<u64>().unwrap() >= 200);
    assert_eq!(released.get("waited_ms"), "null");
    assert_eq!(acquired.get("exit"), "null");
    assert!(acquired.get("waited_ms").parse::<u64>().is_ok());
    assert_eq!(released.get("fence"), acquired.get("fence"));
    assert!(acquired.get("fence").parse::<u64>().unwrap() > 0);
    for e in &events {
        assert_eq!(e.get("note"), "nightly");
        assert!(e.get("command").starts_with("sh -c sleep 0.2"), "{e:?}");
        assert!(e.get("time").ends_with('Z') && e.get("time").contains('T'));
        assert!(e.get("pid").parse::<u32>().is_ok());
    }
    // The human form: one line per event, newest first.
    let out = output(rlock(&redis.url()).args(["history", "job"]));
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(text.lines().next().unwrap().contains("released"), "{text}");
    assert!(text.contains("exit 3"), "{text}");
}

/// Not acquired (`-n`, `--wait` running out, with `-E`), a waiter stopped by
/// a signal, a run stopped by --max-hold.
#[test]
fn busy_interrupted_and_max_hold_are_recorded_with_their_status() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let mut holder = hold(&redis, &dir, "contended");
    let out = output(rlock(&redis.url()).args(["run", "-n", "-E", "9", "contended", "--", "true"]));
    assert_eq!(code(&out), 9, "{}", show(&out));
    let out = output(rlock(&redis.url()).args(["run", "-w", "200ms", "contended", "--", "true"]));
    assert_eq!(code(&out), 75, "{}", show(&out));
    let mut waiter = spawn(rlock(&redis.url()).args(["run", "contended", "--", "true"]));
    expect_within(rlock::LIMIT, "the waiter to queue", || {
        redis.cmd::<i64>(&["ZCARD", "rlock:{contended}:waiters"]) == 1
    });
    waiter.signal(libc::SIGTERM);
    assert_eq!(waiter.wait_within(rlock::LIMIT).code(), Some(143));
    let events = history_json(rlock(&redis.url()).args(["history", "contended", "--json"]));
    assert_eq!(
        kinds(&events),
        ["interrupted", "busy", "busy", "acquired"],
        "{events:?}"
    );
    assert_eq!(events[0].get("exit"), "143");
    assert_eq!(events[1].get("exit"), "75");
    assert!(events[1].get("waited_ms").parse::<u64>().unwrap() >= 200);
    assert_eq!(events[2].get("exit"), "9");
    release(&dir, "contended");
    holder.wait_within(rlock::LIMIT);

    let out = output(
        rlock(&redis.url())
            .args(["run", "--max-hold", "200ms", "capped", "--"])
            .args(sh("sleep 30")),
    );
    assert_eq!(code(&out), 124, "{}", show(&out));
    let events = history_json(rlock(&redis.url()).args(["history", "capped", "--json"]));
    assert_eq!(kinds(&events), ["max-hold", "acquired"], "{events:?}");
    assert_eq!(events[0].get("exit"), "124");
}

/// `release --force` records whose hold it removed and by whom; the run that
/// held it notices, stops COMMAND, exits 70 and records `lost` with the cause.
#[test]
fn a_forced_release_records_forced_and_the_holder_records_lost() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let mut holder =
        crate::support::holder::holder(&redis, &dir, &["--ttl", "1s"], "victim", "victim");
    let out = output(rlock(&redis.url()).args(["release", "--force", "victim"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert_eq!(holder.wait_within(rlock::LIMIT).code(), Some(70));
    let events = history_json(rlock(&redis.url()).args(["history", "victim", "--json"]));
    assert_eq!(kinds(&events), ["lost", "forced", "acquired"], "{events:?}");
    let (lost, forced, acquired) = (&events[0], &events[1], &events[2]);
    assert_eq!(forced.get("pid"), acquired.get("pid"), "whose hold");
    assert_eq!(forced.get("fence"), acquired.get("fence"));
    assert!(
        forced.get("note").starts_with("forced by pid "),
        "{forced:?}"
    );
    assert_eq!(lost.get("exit"), "70");
    assert_ne!(lost.get("note"), "null", "the cause: {lost:?}");
    assert_eq!(lost.get("pid"), acquired.get("pid"));
}

/// The scripting commands record too: acquire, then release --token.
#[test]
fn acquire_and_release_are_recorded() {
    let redis = RedisServer::start();
    let out = output(rlock(&redis.url()).args(["acquire", "--ttl", "10s", "scripted"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let token = stdout(&out).trim().to_owned();
    let out = output(rlock(&redis.url()).args(["release", "scripted", "--token", &token]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let events = history_json(rlock(&redis.url()).args(["history", "scripted", "--json"]));
    assert_eq!(kinds(&events), ["released", "acquired"], "{events:?}");
}

/// `--history N` keeps the last N events; the history expires 31 days after
/// it was created or after the first fence of the latest day (so at least 30
/// days after its last event); 0 (or RLOCK_HISTORY=0) records nothing.
#[test]
fn the_history_is_capped_expires_when_idle_and_0_turns_it_off() {
    let redis = RedisServer::start();
    for i in 0..6 {
        let out = output(
            rlock(&redis.url())
                .args(["run", "--history", "4", "capped", "--"])
                .args(sh(&format!("exit {i}"))),
        );
        assert_eq!(code(&out), i, "{}", show(&out));
    }
    assert_eq!(redis.cmd::<i64>(&["XLEN", "rlock:{capped}:history"]), 4);
    let events = history_json(rlock(&redis.url()).args(["history", "capped", "--json"]));
    assert_eq!(
        kinds(&events),
        ["released", "acquired", "released", "acquired"]
    );
    assert_eq!(events[0].get("exit"), "5");
    let limited =
        history_json(rlock(&redis.url()).args(["history", "capped", "--json", "--limit", "1"]));
    assert_eq!(limited.len(), 1);
    let ttl: i64 = redis.cmd(&["PTTL", "rlock:{capped}:history"]);
    let day = 24 * 3600 * 1000;
    assert!(
        ttl > 31 * day - 60_000 && ttl <= 31 * day,
        "expires 31 days after the first fence of the day: {ttl}"
    );

    let out = output(rlock(&redis.url()).args(["run", "--history", "0", "off", "--", "true"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let out = output(
        rlock(&redis.url())
            .env("RLOCK_HISTORY", "0")
            .args(["run", "-n", "off", "--", "true"]),
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert_eq!(redis.cmd::<i64>(&["EXISTS", "rlock:{off}:history"]), 0);
    let out = output(rlock(&redis.url()).args(["history", "off"]));
    assert_eq!(stdout(&out), "no events recorded for off\n");
}

/// A history key that is not a stream (another program's) is never touched,
/// and the run goes on as if history were off: same status, no message.
#[test]
fn a_history_that_cannot_be_written_never_fails_a_run() {
    let redis = RedisServer::start();
    redis.cmd::<String>(&["SET", "rlock:{taken}:history", "not ours"]);
    let out = output(
        rlock(&redis.url())
            .args(["run", "taken", "--"])
            .args(sh("exit 4")),
    );
    assert_eq!(code(&out), 4, "{}", show(&out));
    // Nothing but the run's closing line.
    crate::support::expect::assert_lines(
        &rlock::stderr(&out),
        "rlock: taken: released after [..]s (COMMAND exited 4)",
    );
    let out = output(rlock(&redis.url()).args(["run", "-n", "taken", "--", "true"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert_eq!(
        redis.cmd::<String>(&["GET", "rlock:{taken}:history"]),
        "not ours"
    );
    assert_eq!(redis.cmd::<i64>(&["PTTL", "rlock:{taken}:history"]), -1);
    let out = output(rlock(&redis.url()).args(["history", "taken"]));
    let err = rlock::assert_fails(&out, 69);
    assert!(
        err.contains("rlock:{taken}:history is not a stream"),
        "{err}"
    );
}

/// Redlock: every server records the events; history reads the first that
/// answers, and still answers with one server gone.
#[test]
fn under_redlock_every_server_records_and_history_reads_one() {
    let servers = quorum::servers(3);
    let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    let all = || quorum::rlock(&urls);
    let out = output(all().args(["run", "shared-job", "--"]).args(sh("exit 2")));
    assert_eq!(code(&out), 2, "{}", show(&out));
    for server in &servers {
        assert_eq!(
            server.cmd::<i64>(&["XLEN", "rlock:{shared-job}:history"]),
            2,
            "acquired and released on every server"
        );
    }
    let mut servers = servers;
    servers[0].stop();
    let events = history_json(all().args(["history", "shared-job", "--json"]));
    assert_eq!(kinds(&events), ["released", "acquired"], "{events:?}");
    assert_eq!(events[0].get("exit"), "2");
}

/// file:DIR keeps a capped history file beside the locks.
#[test]
fn file_locks_keep_a_capped_history_in_dir() {
    let dir = Scratch::new();
    let url = format!("file:{}", dir.file("locks"));
    for i in 0..5 {
        let out = output(
            bare()
                .args(["--url", &url, "run", "--history", "3", "local-job", "--"])
                .args(sh(&format!("exit {i}"))),
        );
        assert_eq!(code(&out), i, "{}", show(&out));
    }
    let events = history_json(bare().args(["--url", &url, "history", "local-job", "--json"]));
    assert_eq!(
        kinds(&events),
        ["released", "acquired", "released"],
        "{events:?}"
    );
    assert_eq!(events[0].get("exit"), "4");
    assert!(std::path::Path::new(&dir.file("locks/local-job.history")).exists());

    // Busy on file: too; 0 records nothing.
    let mut holder = spawn(
        bare()
            .args(["--url", &url, "run", "busy-local", "--"])
            .args(sh(&format!("touch {}; sleep 30", dir.file("held")))),
    );
    expect_within(rlock::LIMIT, "the holder", || {
        std::path::Path::new(&dir.file("held")).exists()
    });
    let out = output(bare().args(["--url", &url, "run", "-n", "busy-local", "--", "true"]));
    assert_eq!(code(&out), 75, "{}", show(&out));
    holder.kill();
    let events = history_json(bare().args(["--url", &url, "history", "busy-local", "--json"]));
    assert_eq!(kinds(&events), ["busy", "acquired"], "{events:?}");
    let out = output(bare().args([
        "--url",
        &url,
        "run",
        "--history",
        "0",
        "quiet",
        "--",
        "true",
    ]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert!(!std::path::Path::new(&dir.file("locks/quiet.history")).exists());
}

/// A waiter handed the lock by a release (no round trip of its own) is
/// recorded by that release: its `acquired` comes after the holder's
/// `released`, with the time it waited.
#[test]
fn a_hold_handed_over_is_recorded_by_the_release_that_hands_it() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let mut holder = hold(&redis, &dir, "relay");
    let mut waiter =
        spawn(rlock(&redis.url()).args(["run", "--note", "second", "relay", "--", "true"]));
    expect_within(rlock::LIMIT, "the waiter to queue", || {
        redis.cmd::<i64>(&["ZCARD", "rlock:{relay}:waiters"]) == 1
    });
    std::thread::sleep(std::time::Duration::from_millis(300));
    release(&dir, "relay");
    assert!(holder.wait_within(rlock::LIMIT).success());
    assert!(waiter.wait_within(rlock::LIMIT).success());
    let events = history_json(rlock(&redis.url()).args(["history", "relay", "--json"]));
    assert_eq!(
        kinds(&events),
        ["released", "acquired", "released", "acquired"],
        "{events:?}"
    );
    let handed = &events[1];
    assert_eq!(handed.get("note"), "second");
    assert!(
        handed.get("waited_ms").parse::<u64>().unwrap() >= 300,
        "{handed:?}"
    );
    assert_eq!(handed.get("fence"), events[0].get("fence"));
    assert_eq!(handed.get("pid"), events[0].get("pid"));
}

/// A run nested in a run of the same lock re-enters it: no event of its own.
#[test]
fn a_reentry_records_nothing_of_its_own() {
    let redis = RedisServer::start();
    let bin = rlock::bin();
    let url = redis.url();
    let out = output(
        rlock(&url)
            .args(["run", "outer", "--"])
            .args(sh(&format!("'{bin}' --url '{url}' run outer -- true"))),
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
    let events = history_json(rlock(&redis.url()).args(["history", "outer", "--json"]));
    assert_eq!(kinds(&events), ["released", "acquired"], "{events:?}");
}

/// `acquire --while-pid`: the keeper records `released` when the process
/// the hold followed exits, on Redis and with file:.
#[test]
fn a_while_pid_hold_records_its_release_when_the_process_exits() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let bin = rlock::bin();
    for url in [redis.url(), format!("file:{}", dir.file("locks"))] {
        let script =
            format!("'{bin}' --url '{url}' acquire --while-pid $$ kept >/dev/null && sleep 0.2");
        let status = Command::new("sh")
            .args(["-c", &script])
            .env_remove("RLOCK_URL")
            .status()
            .unwrap();
        assert!(status.success());
        let mut events = Vec::new();
        expect_within(rlock::LIMIT, "the keeper to record the release", || {
            events = history_json(bare().args(["--url", &url, "history", "kept", "--json"]));
            events.first().is_some_and(|e| e.event == "released")
        });
        assert_eq!(
            events[0].get("pid"),
            events[1].get("pid"),
            "{url}: {events:?}"
        );
        assert_eq!(events[1].event, "acquired");
        assert!(events[0].get("held_ms").parse::<u64>().unwrap() >= 200);
    }
}

/// A user whose ACL rules predate the history (no XADD, no XREVRANGE) still
/// locks as before: the run's status and output are its own, nothing is
/// recorded, and `history` says why it cannot read (69).
#[test]
fn a_user_without_xadd_still_locks_and_records_nothing() {
    let redis = RedisServer::start();
    let mut args = vec!["ACL", "SETUSER", "older", "on", ">older-secret-pw"];
    args.extend(
        crate::acl::RULES
            .iter()
            .filter(|r| !matches!(**r, "+xadd" | "+xrevrange")),
    );
    redis.cmd::<String>(&args);
    let url = format!("redis://older:older-secret-pw@127.0.0.1:{}", redis.port);
    let out = output(
        bare()
            .args(["--url", &url, "run", "old-rules", "--"])
            .args(sh("exit 5")),
    );
    assert_eq!(code(&out), 5, "{}", show(&out));
    // Nothing but the run's closing line.
    crate::support::expect::assert_lines(
        &rlock::stderr(&out),
        "rlock: old-rules: released after [..]s (COMMAND exited 5)",
    );
    let out = output(bare().args(["--url", &url, "run", "-n", "old-rules", "--", "true"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert_eq!(
        redis.cmd::<i64>(&["EXISTS", "rlock:{old-rules}:history"]),
        0
    );
    let out = output(bare().args(["--url", &url, "history", "old-rules"]));
    assert_eq!(code(&out), 69, "{}", show(&out));
    assert!(!rlock::stderr(&out).contains("older-secret-pw"));
}

/// The history's expiry is restarted by the first fence handed out on a new
/// UTC day, not by every event: one command per acquisition and per release.
/// The day of the last fence is the counter's (fences follow the clock).
#[test]
fn the_historys_expiry_is_restarted_once_a_day() {
    let redis = RedisServer::start();
    let url = redis.url();
    let out = output(rlock(&url).args(["run", "daily", "--", "true"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let history = "rlock:{daily}:history";
    // Later the same day: the expiry is not touched.
    redis.cmd::<i64>(&["PEXPIRE", history, "5000000"]);
    let out = output(rlock(&url).args(["run", "daily", "--", "true"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let ttl: i64 = redis.cmd(&["PTTL", history]);
    assert!(ttl <= 5_000_000, "not restarted on the same day: {ttl}");
    // The last fence from yesterday: the next acquisition restarts it.
    let yesterday = redis.time_us() - 86_400_000_000 - 1_000_000;
    redis.cmd::<String>(&["SET", "rlock:{daily}:fence", &yesterday.to_string()]);
    let out = output(rlock(&url).args(["run", "daily", "--", "true"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let ttl: i64 = redis.cmd(&["PTTL", history]);
    let day = 24 * 3600 * 1000;
    assert!(ttl > 31 * day - 60_000, "restarted on a new day: {ttl}");
    assert_eq!(redis.cmd::<i64>(&["XLEN", history]), 6);
}

/// The EVALSHA calls the server has carried out (INFO commandstats).
fn evalsha_calls(redis: &RedisServer) -> u64 {
    let info: String = redis.cmd(&["INFO", "commandstats"]);
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:"))
        .and_then(|stats| {
            let field = |name: &str| -> Option<u64> {
                stats
                    .split(',')
                    .find_map(|kv| kv.strip_prefix(name))
                    .and_then(|v| v.parse().ok())
            };
            Some(field("calls=")? - field("failed_calls=").unwrap_or(0))
        })
        .unwrap_or(0)
}

/// A run of several names: each acquiring script records its hold (no round
/// trip of its own: one script per lock to take it and one to release it),
/// and a round that took one lock and found the next taken gives the first
/// back with its event: no `acquired` is left for a hold no run kept.
#[test]
fn several_names_record_in_their_scripts_and_a_round_given_back_leaves_nothing() {
    let redis = RedisServer::start();
    let plain = output(rlock(&redis.url()).args(["run", "c", "d", "--", "true"]));
    assert_eq!(code(&plain), 0, "{}", show(&plain));
    let before = evalsha_calls(&redis);
    let out = output(rlock(&redis.url()).args(["run", "c", "d", "--", "true"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert_eq!(
        evalsha_calls(&redis) - before,
        4,
        "two acquires and two releases"
    );
    for name in ["c", "d"] {
        let events = history_json(rlock(&redis.url()).args(["history", name, "--json"]));
        assert_eq!(
            kinds(&events),
            ["released", "acquired", "released", "acquired"],
            "{name}: {events:?}"
        );
    }

    let dir = Scratch::new();
    let mut holder = hold(&redis, &dir, "pair-b");
    let mut waiter =
        spawn(rlock(&redis.url()).args(["run", "--wait", "30s", "pair-a", "pair-b", "--", "true"]));
    expect_within(rlock::LIMIT, "the run to wait for pair-b", || {
        redis.cmd::<i64>(&["ZCARD", "rlock:{pair-b}:waiters"]) == 1
    });
    let events = history_json(rlock(&redis.url()).args(["history", "pair-a", "--json"]));
    assert_eq!(kinds(&events), Vec::<&str>::new(), "{events:?}");
    release(&dir, "pair-b");
    assert!(holder.wait_within(rlock::LIMIT).success());
    assert!(waiter.wait_within(rlock::LIMIT).success());
    let events = history_json(rlock(&redis.url()).args(["history", "pair-a", "--json"]));
    assert_eq!(kinds(&events), ["released", "acquired"], "{events:?}");
    assert_eq!(events[0].get("fence"), events[1].get("fence"));
}

/// `--redisson`: the events go with Redisson's own scripts (in the same round
/// trip), with the hold's fence; a lock that another holds records nothing
/// for the run that did not get it but its `busy`.
#[test]
fn redisson_locks_record_acquired_and_released_with_the_fence() {
    let redis = RedisServer::start();
    let out = output(rlock(&redis.url()).args(["run", "--redisson", "orders", "--", "true"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let events =
        history_json(rlock(&redis.url()).args(["history", "--redisson", "orders", "--json"]));
    assert_eq!(kinds(&events), ["released", "acquired"], "{events:?}");
    assert_eq!(events[0].get("fence"), events[1].get("fence"));
    assert!(events[1].get("fence").parse::<u64>().unwrap() > 0);
    assert_eq!(events[0].get("exit"), "0");

    let dir = Scratch::new();
    let mut holder = spawn(
        rlock(&redis.url())
            .args(["run", "--redisson", "orders", "--"])
            .args(sh(&format!(
                "touch {}; while [ ! -e {} ]; do sleep 0.05; done",
                dir.file("held"),
                dir.file("go")
            ))),
    );
    expect_within(rlock::LIMIT, "the holder", || {
        dir.path().join("held").exists()
    });
    let busy =
        output(rlock(&redis.url()).args(["run", "--redisson", "-n", "orders", "--", "true"]));
    assert_eq!(code(&busy), 75, "{}", show(&busy));
    std::fs::write(dir.file("go"), "").unwrap();
    assert!(holder.wait_within(rlock::LIMIT).success());
    let events =
        history_json(rlock(&redis.url()).args(["history", "--redisson", "orders", "--json"]));
    assert_eq!(
        kinds(&events),
        ["released", "busy", "acquired", "released", "acquired"],
        "{events:?}"
    );
}

/// A hold handed to a waiter by a script other than a release (here
/// `release --force`, which ends the hold and lets the first waiter in) is
/// recorded with the history cap the waiter registered.
#[test]
fn a_hold_handed_over_by_a_forced_release_is_recorded() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let mut holder = hold(&redis, &dir, "seized");
    let mut waiter =
        spawn(rlock(&redis.url()).args(["run", "--note", "next", "seized", "--", "true"]));
    expect_within(rlock::LIMIT, "the waiter to queue", || {
        redis.cmd::<i64>(&["ZCARD", "rlock:{seized}:waiters"]) == 1
    });
    let out = output(rlock(&redis.url()).args(["release", "--force", "seized"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert!(waiter.wait_within(rlock::LIMIT).success());
    release(&dir, "seized");
    assert_eq!(holder.wait_within(rlock::LIMIT).code(), Some(70));
    let events = history_json(rlock(&redis.url()).args(["history", "seized", "--json"]));
    let handed: Vec<&Seen> = events
        .iter()
        .filter(|e| e.event == "acquired" && e.get("note") == "next")
        .collect();
    assert_eq!(handed.len(), 1, "{events:?}");
    assert_ne!(handed[0].get("waited_ms"), "null", "{events:?}");
}
