//! Every key a script touches is one of the KEYS it was given (Redis's EVAL
//! contract; Dragonfly, Kvrocks and script-checking proxies enforce it). Each
//! test runs real flows with a `MONITOR` connection open and checks every
//! command that ran inside a script (`[0 lua]` in the stream) against the KEYS
//! of the EVAL / EVALSHA that ran it.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::expect_within;
use crate::support::holder::{self, holder};
use crate::support::process::Proc;
use crate::support::redis_server::RedisServer;
use crate::support::rlock::{self, code, output, rlock, show, spawn, spawn_quiet, stdout};
use crate::support::scratch::Scratch;

/// A `MONITOR` connection, its lines collected by a thread.
struct Monitor {
    lines: Arc<Mutex<Vec<String>>>,
    stream: TcpStream,
}

impl Monitor {
    fn start(redis: &RedisServer) -> Self {
        let url = redis.url();
        let addr = url.trim_start_matches("redis://").trim_end_matches('/');
        let mut stream = TcpStream::connect(addr).unwrap();
        stream.write_all(b"MONITOR\r\n").unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut first = String::new();
        reader.read_line(&mut first).unwrap();
        assert_eq!(first.trim_end(), "+OK", "MONITOR started");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in reader.lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap().push(line);
            }
        });
        Monitor { lines, stream }
    }

    /// Waits for a marker command to come through, so every command sent
    /// before it has been read.
    fn settle(&self, redis: &RedisServer) {
        let marker = format!("declared-keys-marker-{}", crate::support::now_ms());
        let _: Option<String> = redis.cmd(&["GET", &marker]);
        expect_within(Duration::from_secs(10), "the MONITOR stream", || {
            self.lines
                .lock()
                .unwrap()
                .iter()
                .any(|l| l.contains(&marker))
        });
    }

    /// (scripts run, commands run inside them, the commands that touched a
    /// key their script was not given).
    fn check(&self, redis: &RedisServer) -> (usize, usize, Vec<String>) {
        self.settle(redis);
        check_lines(&self.lines.lock().unwrap())
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}

/// One MONITOR line: `+<time> [<db> <client>] "cmd" "arg" ...` as the client
/// (`lua` inside a script) and the arguments, unquoted.
fn parse_line(line: &str) -> Option<(String, Vec<String>)> {
    let line = line.strip_prefix('+').unwrap_or(line);
    let open = line.find('[')?;
    let close = open + line[open..].find(']')?;
    let client = line[open + 1..close].split_whitespace().nth(1)?.to_owned();
    let mut args = Vec::new();
    let mut chars = line[close + 1..].chars().peekable();
    while let Some(c) = chars.next() {
        if c != '"' {
            continue;
        }
        let mut bytes = Vec::new();
        while let Some(c) = chars.next() {
            match c {
                '"' => break,
                '\\' => match chars.next()? {
                    'n' => bytes.push(b'\n'),
                    'r' => bytes.push(b'\r'),
                    't' => bytes.push(b'\t'),
                    'a' => bytes.push(7),
                    'b' => bytes.push(8),
                    'x' => {
                        let hex: String = [chars.next()?, chars.next()?].iter().collect();
                        bytes.push(u8::from_str_radix(&hex, 16).ok()?);
                    }
                    other => bytes.extend(other.to_string().as_bytes()),
                },
                other => bytes.extend(other.to_string().as_bytes()),
            }
        }
        args.push(String::from_utf8_lossy(&bytes).into_owned());
    }
    Some((client, args))
}

/// The keys a command run inside a script touches: none for TIME and the
/// publishing commands (a channel is not a key), every argument for the
/// multi-key commands, else the first argument.
fn touched(args: &[String]) -> Vec<String> {
    let Some(cmd) = args.first() else {
        return Vec::new();
    };
    match cmd.to_ascii_lowercase().as_str() {
        "time" | "publish" | "spublish" | "ping" | "echo" => Vec::new(),
        "del" | "exists" | "unlink" | "touch" | "mget" => args[1..].to_vec(),
        _ => args.get(1).cloned().into_iter().collect(),
    }
}

fn check_lines(lines: &[String]) -> (usize, usize, Vec<String>) {
    // The KEYS of the script that runs now. A script runs alone: the
    // commands it runs follow its EVAL / EVALSHA line, before any other
    // client's command.
    let mut given: Option<Vec<String>> = None;
    let (mut scripts, mut inside, mut bad) = (0, 0, Vec::new());
    for line in lines {
        let Some((client, args)) = parse_line(line) else {
            continue;
        };
        if client == "lua" {
            inside += 1;
            let Some(keys) = &given else {
                bad.push(format!("no script to run {line}"));
                continue;
            };
            for key in touched(&args) {
                if !keys.contains(&key) {
                    bad.push(format!("{key} not among {keys:?}: {line}"));
                }
            }
            continue;
        }
        let cmd = args
            .first()
            .map(|c| c.to_ascii_lowercase())
            .unwrap_or_default();
        given = if matches!(cmd.as_str(), "eval" | "evalsha" | "eval_ro" | "evalsha_ro") {
            scripts += 1;
            let n: usize = args.get(2).and_then(|n| n.parse().ok()).unwrap_or(0);
            Some(args.iter().skip(3).take(n).cloned().collect())
        } else {
            None
        };
    }
    (scripts, inside, bad)
}

fn assert_declared(monitor: &Monitor, redis: &RedisServer, least: usize) {
    let (scripts, inside, bad) = monitor.check(redis);
    assert!(
        scripts >= least && inside > scripts,
        "the flows ran scripts: {scripts} scripts, {inside} commands"
    );
    assert!(
        bad.is_empty(),
        "{} of {inside} commands in {scripts} scripts touched keys not given:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

fn waiting(redis: &RedisServer, name: &str, n: i64) {
    expect_within(rlock::LIMIT, &format!("{n} waiters on {name}"), || {
        redis.cmd::<i64>(&["ZCARD", &format!("rlock:{{{name}}}:wexp")]) == n
    });
}

fn succeeds(mut run: Proc, what: &str) {
    let status = run.wait_within(rlock::LIMIT);
    assert!(status.success(), "{what}: {status:?}");
}

fn run_true(redis: &RedisServer, opts: &[&str]) -> Proc {
    spawn_quiet(
        rlock(&redis.url())
            .arg("run")
            .args(opts)
            .args(["--", "true"]),
    )
}

#[test]
fn the_parser_sees_an_undeclared_key() {
    let lines = [
        r#"+1.0 [0 127.0.0.1:1] "EVALSHA" "abc" "2" "k1" "k\"2" "arg""#,
        r#"+1.1 [0 lua] "HSET" "k1" "f" "v""#,
        r#"+1.2 [0 lua] "DEL" "k\"2" "k3""#,
        r#"+1.3 [0 lua] "TIME""#,
        r#"+1.4 [0 127.0.0.1:2] "GET" "k9""#,
    ]
    .map(str::to_owned);
    let (scripts, inside, bad) = check_lines(&lines);
    assert_eq!((scripts, inside), (1, 3));
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(bad[0].starts_with("k3 not among"), "{bad:?}");
}

/// Each kind alone, then with waiters of mixed kinds queued behind a holder and
/// handed the lock in turn.
#[test]
fn every_kind_and_a_queue_of_mixed_kinds_touch_only_their_keys() {
    let redis = RedisServer::start();
    let monitor = Monitor::start(&redis);
    let dir = Scratch::new();
    for opts in [
        &["solo"][..],
        &["--shared", "solo"],
        &["--limit", "2", "solo"],
        &["--fair", "solo"],
        &["one", "two"],
    ] {
        succeeds(run_true(&redis, opts), &format!("{opts:?}"));
    }

    // Exclusive, fair, shared and exclusive again behind an exclusive holder.
    let held = holder(&redis, &dir, &["--ttl", "60s"], "mix", "mix");
    let mut runs = Vec::new();
    for (i, opts) in [
        &["mix"][..],
        &["--fair", "mix"],
        &["--shared", "mix"],
        &["--shared", "mix"],
        &["--fair", "--shared", "mix"],
        &["mix"],
    ]
    .iter()
    .enumerate()
    {
        runs.push(run_true(&redis, opts));
        waiting(&redis, "mix", i as i64 + 1);
    }
    holder::release(&dir, "mix");
    succeeds(held, "the holder");
    for run in runs {
        succeeds(run, "a waiter");
    }

    // Semaphore waiters behind a full semaphore.
    let mut holders = Vec::new();
    for tag in ["s1", "s2"] {
        holders.push(holder(&redis, &dir, &["--limit", "2"], "sem", tag));
    }
    let mut runs = Vec::new();
    for i in 0..3 {
        runs.push(run_true(&redis, &["--limit", "2", "sem"]));
        waiting(&redis, "sem", i + 1);
    }
    holder::release(&dir, "s1");
    holder::release(&dir, "s2");
    for run in holders.into_iter().chain(runs) {
        succeeds(run, "a semaphore run");
    }

    // Shared holders, a writer waiting, readers behind it.
    let reader = holder(&redis, &dir, &["--shared"], "rw", "reader");
    let writer = run_true(&redis, &["rw"]);
    waiting(&redis, "rw", 1);
    let readers: Vec<Proc> = (0..2)
        .map(|i| {
            let run = run_true(&redis, &["--shared", "rw"]);
            waiting(&redis, "rw", i + 2);
            run
        })
        .collect();
    holder::release(&dir, "reader");
    succeeds(reader, "the reader");
    succeeds(writer, "the writer");
    for run in readers {
        succeeds(run, "a reader");
    }

    // Several names, one of them taken.
    let held = holder(&redis, &dir, &[], "second", "second");
    let both = run_true(&redis, &["first", "second"]);
    waiting(&redis, "second", 1);
    holder::release(&dir, "second");
    succeeds(held, "the holder of second");
    succeeds(both, "the run of both");

    assert_declared(&monitor, &redis, 30);
    // The history (on by default) is written inside acquire and release, and
    // so among what was checked: the stream is one of their KEYS.
    let lines = monitor.lines.lock().unwrap();
    let history_writes = lines
        .iter()
        .filter_map(|l| parse_line(l))
        .filter(|(client, args)| {
            client == "lua"
                && args.first().is_some_and(|c| c.eq_ignore_ascii_case("xadd"))
                && args.get(1).is_some_and(|k| k == "rlock:{mix}:history")
        })
        .count();
    // The holder's acquired and released, and each of the six waiters'
    // acquired (handed over by a release, or its own) and released.
    assert!(
        history_writes >= 14,
        "{history_writes} history writes for mix"
    );
}

/// Waiters that leave: on `--wait` running out, and on SIGINT; each stood
/// ahead of readers its departure lets in. A holder killed, pruned when its
/// lease has run out.
#[test]
fn waiters_leaving_on_timeout_and_on_interrupt_touch_only_their_keys() {
    let redis = RedisServer::start();
    let monitor = Monitor::start(&redis);
    let dir = Scratch::new();

    let reader = holder(&redis, &dir, &["--shared"], "timeout", "t");
    let writer =
        spawn_quiet(rlock(&redis.url()).args(["run", "--wait", "1s", "timeout", "--", "true"]));
    waiting(&redis, "timeout", 1);
    let behind = run_true(&redis, &["--shared", "timeout"]);
    waiting(&redis, "timeout", 2);
    let out = writer.output_within(rlock::LIMIT);
    assert_eq!(code(&out), 75, "{}", show(&out));
    succeeds(behind, "the reader let in when the writer gave up");
    holder::release(&dir, "t");
    succeeds(reader, "the first reader");

    let reader = holder(&redis, &dir, &["--shared"], "signal", "s");
    let writer = spawn(rlock(&redis.url()).args(["run", "signal", "--", "true"]));
    waiting(&redis, "signal", 1);
    let behind = run_true(&redis, &["--shared", "signal"]);
    waiting(&redis, "signal", 2);
    writer.signal(libc::SIGINT);
    let out = writer.output_within(rlock::LIMIT);
    assert_eq!(code(&out), 130, "{}", show(&out));
    succeeds(behind, "the reader let in when the writer was interrupted");
    holder::release(&dir, "s");
    succeeds(reader, "the first reader");

    // A holder killed: its lease runs out, and a waiter's look prunes it and
    // lets in the head of the queue (maybe another waiter).
    let mut killed = holder(&redis, &dir, &["--ttl", "1s"], "killed", "k");
    let waiters: Vec<Proc> = (0..3)
        .map(|i| {
            let run = run_true(&redis, &["--ttl", "1s", "killed"]);
            waiting(&redis, "killed", i + 1);
            run
        })
        .collect();
    killed.kill();
    for run in waiters {
        succeeds(run, "a waiter behind a killed holder");
    }

    assert_declared(&monitor, &redis, 8);
}

/// `release --force` with waiters, acquire / renew / release by token with a
/// waiter handed the lock, and `--redisson`.
#[test]
fn force_scripting_and_redisson_touch_only_their_keys() {
    let redis = RedisServer::start();
    let monitor = Monitor::start(&redis);
    let dir = Scratch::new();

    let mut held = holder(&redis, &dir, &["--ttl", "60s"], "forced", "forced");
    let waiters: Vec<Proc> = (0..2)
        .map(|i| {
            let run = run_true(&redis, &["forced"]);
            waiting(&redis, "forced", i + 1);
            run
        })
        .collect();
    let out = output(rlock(&redis.url()).args(["release", "--force", "forced"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    for run in waiters {
        succeeds(run, "a waiter after release --force");
    }
    held.kill();

    let out = output(rlock(&redis.url()).args(["acquire", "--ttl", "30s", "scripted"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let token = stdout(&out).trim().to_owned();
    let waiter = run_true(&redis, &["scripted"]);
    waiting(&redis, "scripted", 1);
    let out = output(rlock(&redis.url()).args(["renew", "scripted", "--token", &token]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let out = output(rlock(&redis.url()).args(["release", "scripted", "--token", &token]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    succeeds(waiter, "the waiter handed the lock by release");

    let held = holder(&redis, &dir, &["--redisson"], "theirs", "theirs");
    let waiter = run_true(&redis, &["--redisson", "theirs"]);
    expect_within(
        rlock::LIMIT,
        "the Redisson-layout waiter to subscribe",
        || {
            let subs: Vec<redis::Value> =
                redis.cmd(&["PUBSUB", "NUMSUB", "redisson_lock__channel:{theirs}"]);
            subs.get(1) == Some(&redis::Value::Int(1))
        },
    );
    holder::release(&dir, "theirs");
    succeeds(held, "the Redisson-layout holder");
    succeeds(waiter, "the Redisson-layout waiter");
    let out = output(rlock(&redis.url()).args(["status", "scripted"]));
    assert_eq!(code(&out), 0, "{}", show(&out));

    assert_declared(&monitor, &redis, 10);
}
