//! The Rust library (`rlock::Client`) in this test process, beside the CLI
//! binary, on one real server: each side sees, excludes and wakes the
//! other, fences form one sequence, losses are reported before the lease
//! can end, and 1,000 holds cost one thread and two connections.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::support::expect_within;
use crate::support::redis_server::RedisServer;
use crate::support::rlock::{self, code, output, rlock, sh, show, spawn, stdout};
use crate::support::scratch::Scratch;

/// The library's tests count the process's renewal threads: one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner())
}

/// Waiters `rlock status --json NAME` counts.
fn waiting(redis: &RedisServer, name: &str) -> bool {
    let out = output(rlock(&redis.url()).args(["status", "--json", name]));
    stdout(&out).contains("\"waiting\":1")
}

/// The CLI's `acquire`: the owner token.
fn cli_acquire(redis: &RedisServer, name: &str) -> String {
    let out = output(rlock(&redis.url()).args(["acquire", "--ttl", "30s", name]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    stdout(&out).trim().to_owned()
}

/// The threads of this process named `name`.
fn threads_named(name: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim() == name)
        .count()
}

/// The clients connected to `redis`, but the one asking.
fn connections(redis: &RedisServer) -> usize {
    let list: String = redis.cmd(&["CLIENT", "LIST"]);
    list.lines().count() - 1
}

/// The calling thread's signal mask and the process's dispositions.
fn signal_state() -> Vec<String> {
    std::fs::read_to_string("/proc/thread-self/status")
        .unwrap()
        .lines()
        .filter(|l| {
            ["SigBlk", "SigIgn", "SigCgt"]
                .iter()
                .any(|k| l.starts_with(k))
        })
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_library_hold_is_seen_by_status_and_keeps_cli_runs_out() {
    let _serial = serial();
    let redis = RedisServer::start();
    let client = ::rlock::Client::open(&redis.url()).unwrap();
    let hold = client
        .lock("shared-job")
        .note("nightly compaction")
        .acquire()
        .unwrap();
    let out = output(rlock(&redis.url()).args(["status", "--json", "shared-job"]));
    let json = stdout(&out);
    let program = std::env::args().next().unwrap();
    let program = std::path::Path::new(&program).file_name().unwrap();
    for field in [
        "\"held\":true".to_owned(),
        format!("\"fence\":{}", hold.fence()),
        "\"note\":\"nightly compaction\"".to_owned(),
        format!("\"pid\":{},", std::process::id()),
        format!("\"command\":\"{}\"", program.to_string_lossy()),
    ] {
        assert!(json.contains(&field), "{field} in {json}");
    }
    let run = output(rlock(&redis.url()).args(["run", "--no-wait", "shared-job", "--", "true"]));
    assert_eq!(code(&run), 75, "{}", show(&run));
    assert!(!hold.is_lost());
    hold.release().unwrap();
    let run = output(rlock(&redis.url()).args(["run", "--no-wait", "shared-job", "--", "true"]));
    assert_eq!(code(&run), 0, "{}", show(&run));
}

#[test]
fn a_library_waiter_is_woken_by_a_cli_release_and_busy_without_a_wait() {
    let _serial = serial();
    let redis = RedisServer::start();
    let client = ::rlock::Client::open(&redis.url()).unwrap();
    let token = cli_acquire(&redis, "handover");
    let err = client.lock("handover").acquire().unwrap_err();
    assert!(err.is_busy(), "{err}");
    assert_eq!(err.exit_code(), 75);
    assert!(
        err.to_string()
            .starts_with("handover: not acquired: held by pid "),
        "{err}"
    );
    let signals = signal_state();
    let waiter = {
        let client = client.clone();
        std::thread::spawn(move || {
            let hold = client
                .lock("handover")
                .wait(Duration::from_secs(10))
                .acquire();
            (Instant::now(), hold)
        })
    };
    expect_within(rlock::LIMIT, "the library to wait", || {
        waiting(&redis, "handover")
    });
    let released = Instant::now();
    let out = output(rlock(&redis.url()).args(["release", "handover", "--token", &token]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let (acquired, hold) = waiter.join().unwrap();
    let hold = hold.unwrap();
    let woke = acquired.saturating_duration_since(released);
    assert!(
        woke < Duration::from_secs(1),
        "woken {woke:?} after the release"
    );
    assert_eq!(signals, signal_state(), "the library left signals alone");
    hold.release().unwrap();
}

#[test]
fn a_cli_waiter_is_woken_by_a_library_release_and_by_a_drop() {
    let _serial = serial();
    let redis = RedisServer::start();
    let client = ::rlock::Client::open(&redis.url()).unwrap();
    for drop_it in [false, true] {
        let hold = client.lock("wake-cli").acquire().unwrap();
        let mut cli = spawn(rlock(&redis.url()).args([
            "run", "--wait", "10s", "--ttl", "30s", "wake-cli", "--", "true",
        ]));
        expect_within(rlock::LIMIT, "the CLI to wait", || {
            waiting(&redis, "wake-cli")
        });
        let released = Instant::now();
        if drop_it {
            drop(hold);
        } else {
            hold.release().unwrap();
        }
        let status = cli.wait_within(rlock::LIMIT);
        assert_eq!(status.code(), Some(0));
        let took = released.elapsed();
        assert!(took < Duration::from_secs(1), "drop {drop_it}: {took:?}");
    }
}

/// `Client::status` and `Client::list` read what `rlock status` reads: a
/// CLI run's holder (pid, note, fence, lease), a waiter, a free lock.
#[test]
fn the_library_reads_a_cli_holder_as_status_does() {
    let _serial = serial();
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let client = ::rlock::Client::open(&redis.url()).unwrap();
    let mut cli = spawn(
        rlock(&redis.url())
            .args(["run", "--note", "from the shell", "read-me", "--"])
            .args(sh(&format!(
                "echo $RLOCK_FENCE > {}; while [ ! -e {} ]; do sleep 0.05; done",
                dir.file("fence"),
                dir.file("go")
            ))),
    );
    expect_within(rlock::LIMIT, "the CLI to hold", || {
        std::fs::read_to_string(dir.file("fence")).is_ok_and(|f| f.ends_with('\n'))
    });
    let fence: u64 = std::fs::read_to_string(dir.file("fence"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let states = client.status(["read-me", "free-one"]).unwrap();
    let names: Vec<&str> = states.iter().map(::rlock::LockState::name).collect();
    assert_eq!(names, ["read-me", "free-one"]);
    let (held, free) = (&states[0], &states[1]);
    assert!(held.is_held() && !held.is_shared() && held.limit().is_none());
    assert_eq!(held.fence(), fence);
    let holder = &held.holders()[0];
    assert_eq!(holder.pid(), Some(cli.pid));
    assert!(holder.since().is_some());
    assert_eq!(held.disagreement(), None);
    assert_eq!(holder.note(), "from the shell");
    assert!(
        holder
            .lease_left()
            .is_some_and(|left| left > Duration::ZERO)
    );
    assert!(!free.is_held() && free.holders().is_empty());
    let listed = client.list("read-*").unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].name(), "read-me");
    assert_eq!(
        client.status(["bad name"]).unwrap_err().kind(),
        ::rlock::ErrorKind::Usage
    );
    std::fs::write(dir.file("go"), "").unwrap();
    assert_eq!(cli.wait_within(rlock::LIMIT).code(), Some(0));
    assert!(!client.status(["read-me"]).unwrap()[0].is_held());
}

#[test]
fn fences_of_the_library_and_the_cli_form_one_increasing_sequence() {
    let _serial = serial();
    let redis = RedisServer::start();
    let client = ::rlock::Client::open(&redis.url()).unwrap();
    let mut fences = Vec::new();
    for _ in 0..3 {
        let hold = client.lock("fenced").acquire().unwrap();
        fences.push(hold.fence());
        hold.release().unwrap();
        let out = output(
            rlock(&redis.url())
                .args(["run", "-n", "fenced", "--"])
                .args(sh("echo $RLOCK_FENCE")),
        );
        assert_eq!(code(&out), 0, "{}", show(&out));
        fences.push(stdout(&out).trim().parse().unwrap());
    }
    assert!(fences.windows(2).all(|w| w[0] < w[1]), "{fences:?}");
}

#[test]
fn a_forced_release_is_reported_lost_within_a_renewal_period() {
    let _serial = serial();
    let redis = RedisServer::start();
    let client = ::rlock::Client::open(&redis.url()).unwrap();
    // Renewed every 193 ms (a tenth of what a failing renewal has).
    let hold = client
        .lock("forced")
        .ttl(Duration::from_secs(3))
        .acquire()
        .unwrap();
    let lost = hold.lost();
    assert_eq!(lost.wait_timeout(Duration::from_millis(300)), None);
    let forced = Instant::now();
    let out = output(rlock(&redis.url()).args(["release", "--force", "forced"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let loss = lost.wait_timeout(rlock::LIMIT).expect("a loss");
    let took = forced.elapsed();
    assert!(took < Duration::from_millis(193 + 500), "{took:?}");
    assert!(hold.is_lost());
    assert_eq!(loss.lock(), "forced");
    assert!(
        loss.cause()
            .starts_with("lock lost: the server says it is no longer ours (released by force"),
        "{loss}"
    );
    let err = hold.release().unwrap_err();
    assert_eq!(err.kind(), ::rlock::ErrorKind::Lost);
    assert_eq!(err.exit_code(), 70);
    assert_eq!(err.to_string(), loss.to_string());
}

#[test]
fn a_stopped_server_is_reported_before_the_lease_could_end() {
    let _serial = serial();
    let redis = RedisServer::start();
    let client = ::rlock::Client::open(&redis.url()).unwrap();
    let ttl = Duration::from_secs(3);
    let hold = client.lock("stopped").ttl(ttl).acquire().unwrap();
    let lost = hold.lost();
    // Renewed a few times first.
    assert_eq!(lost.wait_timeout(Duration::from_millis(600)), None);
    let frozen = Instant::now();
    redis.freeze();
    let loss = lost.wait_timeout(rlock::LIMIT);
    let noticed = frozen.elapsed();
    redis.thaw();
    let loss = loss.expect("a loss");
    // The last renewal the server confirmed was sent at most one period
    // (193 ms) before the freeze, and the lease runs a ttl from its sending
    // or later: the notice must come before that, with the grace (1 s, a
    // third of the ttl) to spare.
    let lease_ends_no_earlier = ttl - Duration::from_millis(193);
    assert!(
        noticed + Duration::from_millis(500) < lease_ends_no_earlier,
        "noticed {noticed:?} after the freeze"
    );
    assert!(noticed > Duration::from_millis(1500), "{noticed:?}");
    assert!(hold.is_lost());
    assert!(
        loss.cause()
            .starts_with("lock lost: lease could not be renewed before it expired ("),
        "{loss}"
    );
    assert!(hold.release().unwrap_err().loss().is_some());
}

/// One client's renewal thread, held up in a long hold's renewal on a
/// stalled server, cannot tell a short hold's loss in time: the wait for
/// that loss wakes by the clock, before the short lease could end.
#[test]
fn a_loss_is_told_in_time_while_another_holds_renewal_is_stuck() {
    let _serial = serial();
    let redis = RedisServer::start();
    let client = ::rlock::Client::open(&redis.url()).unwrap();
    let long = client
        .lock("stuck-long")
        .ttl(Duration::from_secs(60))
        .acquire()
        .unwrap();
    let taken = Instant::now();
    // The long hold is renewed every 4.8 s, the short one every 0.3 s: the
    // short one is taken at 4.6 s and the fault comes at 4.7 s, so the long
    // hold's renewal, due first, waits on the stalled server (the moments of
    // the fault, not waits for a condition).
    std::thread::sleep(Duration::from_millis(4600).saturating_sub(taken.elapsed()));
    let ttl = Duration::from_secs(6);
    let short = client.lock("stuck-short").ttl(ttl).acquire().unwrap();
    let short_taken = Instant::now();
    std::thread::sleep(Duration::from_millis(4700).saturating_sub(taken.elapsed()));
    redis.freeze();
    let loss = short.lost().wait_timeout(Duration::from_secs(40));
    let noticed = short_taken.elapsed();
    redis.thaw();
    let loss = loss.expect("a loss");
    // Where `rlock run` sends SIGTERM: the grace (a third of the ttl) before
    // the end of the lease the last confirmed renewal proves.
    assert!(
        noticed < ttl - ttl / 3 + Duration::from_millis(200),
        "told {noticed:?} after the 6 s hold was taken: {loss}"
    );
    assert!(short.is_lost());
    // Not read as a suspension of the process: it ran all along.
    assert!(
        loss.cause()
            .starts_with("lock lost: lease could not be renewed before it expired ("),
        "{loss}"
    );
    drop(long);
}

#[test]
fn a_thousand_holds_use_one_thread_and_two_connections() {
    let _serial = serial();
    let redis = RedisServer::start();
    expect_within(
        rlock::LIMIT,
        "other clients' renewal threads to end",
        || threads_named("rlock-renewer") == 0,
    );
    let client = ::rlock::Client::open(&redis.url()).unwrap();
    let one = client.lock("many-0").acquire().unwrap();
    // The thread names itself once it runs.
    expect_within(rlock::LIMIT, "the renewal thread", || {
        threads_named("rlock-renewer") == 1
    });
    assert_eq!(connections(&redis), 1, "one connection renews");
    let mut holds = vec![one];
    for i in 1..1000 {
        holds.push(client.lock(&format!("many-{i}")).acquire().unwrap());
    }
    let tasks = std::fs::read_dir("/proc/self/task").unwrap().count();
    assert_eq!(threads_named("rlock-renewer"), 1);
    assert!(tasks < 64, "{tasks} threads in the process");
    assert_eq!(
        connections(&redis),
        2,
        "one renews, one acquires and releases"
    );
    // Two renewal periods (1.9 s each): every hold renewed, none lost.
    std::thread::sleep(Duration::from_secs(4));
    assert!(holds.iter().all(|h| !h.is_lost()));
    let pttl: i64 = redis.cmd(&["PTTL", "rlock:{many-0}:leases"]);
    assert!(pttl > 26_000, "renewed: {pttl} ms left");
    let released = Instant::now();
    for hold in holds {
        hold.release().unwrap();
    }
    eprintln!("1,000 releases in {:?}", released.elapsed());
    assert_eq!(connections(&redis), 2);
    drop(client);
    expect_within(
        rlock::LIMIT,
        "the renewal thread to end with its client",
        || threads_named("rlock-renewer") == 0,
    );
}

#[test]
fn several_locks_are_taken_all_or_none() {
    let _serial = serial();
    let redis = RedisServer::start();
    let client = ::rlock::Client::open(&redis.url()).unwrap();
    let _token = cli_acquire(&redis, "pair-b");
    let err = client.lock_all(["pair-a", "pair-b"]).acquire().unwrap_err();
    assert!(err.is_busy(), "{err}");
    let run = output(rlock(&redis.url()).args(["run", "-n", "pair-a", "--", "true"]));
    assert_eq!(
        code(&run),
        0,
        "nothing kept of a partial hold: {}",
        show(&run)
    );
    let hold = client.lock("pair-a").and("pair-c").acquire().unwrap();
    assert_eq!(hold.fences().len(), 2);
    let run = output(rlock(&redis.url()).args(["run", "-n", "pair-c", "--", "true"]));
    assert_eq!(code(&run), 75, "{}", show(&run));
}

#[test]
fn file_locks_work_through_the_library() {
    let _serial = serial();
    let dir = Scratch::new();
    let url = format!("file:{}", dir.path().display());
    let client = ::rlock::Client::open(&url).unwrap();
    let hold = client.lock("local").acquire().unwrap();
    let run = output(rlock(&url).args(["run", "-n", "local", "--", "true"]));
    assert_eq!(code(&run), 75, "{}", show(&run));
    assert!(client.lock("local").acquire().unwrap_err().is_busy());
    hold.release().unwrap();
    let run = output(rlock(&url).args(["run", "-n", "local", "--", "true"]));
    assert_eq!(code(&run), 0, "{}", show(&run));
}

#[test]
fn bad_input_is_a_usage_error() {
    let client = ::rlock::Client::open("redis://127.0.0.1:1").unwrap();
    let err = client.lock("").acquire().unwrap_err();
    assert_eq!(
        (err.kind(), err.exit_code()),
        (::rlock::ErrorKind::Usage, 2)
    );
    // A lease too long to count in Redis's milliseconds (Duration::MAX, a
    // natural "never expire") was taken as held while nothing was stored.
    for ttl in [
        Duration::from_millis(10),
        Duration::MAX,
        Duration::from_secs(367 * 86_400),
    ] {
        let err = client.lock("x").ttl(ttl).acquire().unwrap_err();
        assert_eq!(err.kind(), ::rlock::ErrorKind::Usage, "{ttl:?}: {err}");
        assert!(err.to_string().contains("at most 1 year"), "{err}");
    }
    let err = ::rlock::Client::open("http://127.0.0.1").unwrap_err();
    assert_eq!(err.kind(), ::rlock::ErrorKind::Usage, "{err}");
    let err = client.lock("x").acquire().unwrap_err();
    assert_eq!(err.kind(), ::rlock::ErrorKind::Unavailable, "{err}");
    // A limit asked for is checked whatever else is: 0 never, above 1
    // never on a quorum (which cannot count holders), shared or not.
    for shared_first in [false, true] {
        let err = if shared_first {
            client.lock("x").shared().limit(0).acquire()
        } else {
            client.lock("x").limit(0).shared().acquire()
        }
        .unwrap_err();
        assert_eq!(err.kind(), ::rlock::ErrorKind::Usage, "{err}");
    }
    let quorum =
        ::rlock::Client::open("redis://127.0.0.1:1,redis://127.0.0.1:2,redis://127.0.0.1:3")
            .unwrap();
    let err = quorum.lock("x").shared().limit(3).acquire().unwrap_err();
    assert_eq!(err.kind(), ::rlock::ErrorKind::Usage, "{err}");
}

/// The examples, built by `cargo test` (or here, when only this binary was).
fn example(name: &str) -> std::process::Command {
    let dir = std::path::Path::new(env!("CARGO_BIN_EXE_rlock"))
        .parent()
        .unwrap()
        .join("examples");
    let bin = dir.join(name);
    if !bin.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let built = std::process::Command::new(cargo)
            .args(["build", "--example", name])
            .status()
            .unwrap();
        assert!(built.success());
    }
    std::process::Command::new(bin)
}

#[test]
fn the_examples_run_against_a_real_server() {
    let redis = RedisServer::start();
    let out = rlock::output(example("once").arg(redis.url()));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let said = stdout(&out);
    assert!(
        said.starts_with("compacting under fence ") && said.ends_with("\nreleased\n"),
        "{said}"
    );
    let _token = cli_acquire(&redis, "nightly");
    let out = rlock::output(example("once").arg(redis.url()));
    assert_eq!(code(&out), 75, "{}", show(&out));
    let out = output(rlock(&redis.url()).args(["release", "--force", "nightly"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let out = rlock::output(example("service").args([&redis.url(), "3"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert!(
        stdout(&out).ends_with("batch 2\nreleased\n"),
        "{}",
        show(&out)
    );
    // A loss stops the work and ends the service with 70.
    let mut service = spawn(example("service").args([&redis.url(), "600"]));
    expect_within(rlock::LIMIT, "the service to hold", || {
        code(&output(
            rlock(&redis.url()).args(["run", "-n", "nightly", "--", "true"]),
        )) == 75
    });
    let out = output(rlock(&redis.url()).args(["release", "--force", "nightly"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let status = service.wait_within(Duration::from_secs(5));
    assert_eq!(status.code(), Some(70));
}
