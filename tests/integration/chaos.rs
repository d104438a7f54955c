//! Fault injection: contending runs while redis-server is restarted, stopped
//! past the ttl, paused with CLIENT PAUSE, and holders are SIGKILLed. Mutual
//! exclusion must hold (an overlap is allowed only after the earlier holder
//! reported the loss with exit 70), fences must increase with start time, and
//! nothing may be left behind.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::expect_within;
use crate::support::process::{alive, signal};
use crate::support::redis_server::RedisServer;
use crate::support::rlock::{self, rlock, sh};
use crate::support::scratch::Scratch;

/// An rlock pid and its exit code (None: killed by a signal).
type Outcome = (u32, Option<i32>);

/// How long each worker's COMMAND holds the lock: one outlives the ttl, so a
/// stall can make it lose the lease.
const HOLD: [&str; 4] = ["0.1", "0.3", "0.5", "2"];

/// How long faults are injected.
const CHAOS: Duration = Duration::from_secs(15);

#[test]
fn mutual_exclusion_survives_restarts_stalls_pauses_and_killed_holders() {
    // Append-only with fsync on every write: a restart loses no lock or fence.
    let redis = Arc::new(Mutex::new(RedisServer::start_with(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
    ])));
    let url = redis.lock().unwrap().url();
    let dir = Arc::new(Scratch::new());
    let log = dir.file("log");
    let script = |hold: &str| {
        format!(
            "exec 2>/dev/null; echo \"S $(date +%s%N) $RLOCK_FENCE $$ $PPID\" >> {log}; sleep {hold}; \
             echo \"E $(date +%s%N) $RLOCK_FENCE $$ $PPID\" >> {log}"
        )
    };
    let stop = Arc::new(AtomicBool::new(false));
    let running: Arc<Mutex<Vec<u32>>> = Arc::default();
    let outcomes: Arc<Mutex<Vec<Outcome>>> = Arc::default();
    let workers: Vec<_> = HOLD
        .iter()
        .map(|hold| {
            let (url, script, stop, running, outcomes) = (
                url.clone(),
                script(hold),
                stop.clone(),
                running.clone(),
                outcomes.clone(),
            );
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let mut cmd = rlock(&url);
                    cmd.args([
                        "--connect-timeout",
                        "500ms",
                        "run",
                        "--ttl",
                        "1s",
                        "--wait",
                        "5s",
                        "--kill-after",
                        "1s",
                        "chaos",
                        "--",
                    ])
                    .args(sh(&script));
                    let mut run = rlock::spawn_quiet(&mut cmd);
                    running.lock().unwrap().push(run.pid);
                    let status = run.wait_within(Duration::from_secs(60));
                    running.lock().unwrap().retain(|&p| p != run.pid);
                    outcomes.lock().unwrap().push((run.pid, status.code()));
                }
            })
        })
        .collect();

    let mut faults = Vec::new();
    let started = Instant::now();
    let mut turn = 0usize;
    while started.elapsed() < CHAOS {
        std::thread::sleep(Duration::from_millis(700));
        match turn % 4 {
            0 => {
                redis.lock().unwrap().restart();
                faults.push("restart");
            }
            1 => {
                let server = redis.lock().unwrap();
                server.freeze();
                std::thread::sleep(Duration::from_millis(1500));
                server.thaw();
                faults.push("SIGSTOP past the ttl");
            }
            2 => {
                let _: String = redis
                    .lock()
                    .unwrap()
                    .cmd(&["CLIENT", "PAUSE", "1500", "ALL"]);
                faults.push("CLIENT PAUSE");
            }
            _ => {
                if let Some(&pid) = running.lock().unwrap().first() {
                    signal(pid, libc::SIGKILL);
                    faults.push("SIGKILL of a holder");
                }
            }
        }
        turn += 1;
    }
    stop.store(true, Ordering::SeqCst);
    for worker in workers {
        worker.join().unwrap();
    }

    // Intervals by COMMAND pid: (start, end or None if killed, fence, rlock pid).
    let mut starts = std::collections::HashMap::new();
    let mut ends = std::collections::HashMap::new();
    for line in dir.lines("log") {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (t, fence, pid, ppid): (u128, u64, u32, u32) = (
            f[1].parse().unwrap(),
            f[2].parse().unwrap(),
            f[3].parse().unwrap(),
            f[4].parse().unwrap(),
        );
        if f[0] == "S" {
            starts.insert(pid, (t, fence, ppid));
        } else {
            ends.insert(pid, t);
        }
    }
    let codes: std::collections::HashMap<u32, Option<i32>> =
        outcomes.lock().unwrap().iter().copied().collect();
    let mut intervals: Vec<(u128, Option<u128>, u64, u32)> = starts
        .iter()
        .map(|(pid, &(s, fence, ppid))| (s, ends.get(pid).copied(), fence, ppid))
        .collect();
    intervals.sort();
    let losses = codes.values().filter(|c| **c == Some(70)).count();
    let mut overlaps = 0;
    for (i, a) in intervals.iter().enumerate() {
        for b in &intervals[i + 1..] {
            // A killed COMMAND has no end line; the kernel ended it with rlock.
            let Some(a_end) = a.1 else { continue };
            if b.0 < a_end {
                overlaps += 1;
                assert_eq!(
                    codes.get(&a.3),
                    Some(&Some(70)),
                    "overlap without a reported loss: {a:?} {b:?}"
                );
            }
        }
    }
    for pair in intervals.windows(2) {
        assert!(
            pair[0].2 < pair[1].2,
            "fences increase with start time: {pair:?}"
        );
    }
    println!(
        "chaos: {} acquisitions, {} faults, {} losses reported (exit 70), {} overlaps",
        intervals.len(),
        faults.len(),
        losses,
        overlaps
    );
    assert!(intervals.len() >= 5, "the runs made progress");
    for pid in starts.keys() {
        assert!(!alive(*pid), "no orphaned COMMAND: {pid}");
    }
    for (pid, _) in outcomes.lock().unwrap().iter() {
        assert!(!alive(*pid), "no rlock left: {pid}");
    }
    let server = redis.lock().unwrap();
    expect_within(rlock::LIMIT, "every lock key but the fence to go", || {
        server.lock_keys("chaos").is_empty()
    });
}
