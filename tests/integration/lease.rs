//! The lease's end: COMMAND is dead before the lease rlock can prove could
//! end, whatever holds rlock up, and every run whose lease could have lapsed
//! under COMMAND exits 70 saying what happened.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::expect::{assert_has_line, assert_lines};
use crate::support::holder::{go, until_go};
use crate::support::process::{Proc, alive};
use crate::support::quorum;
use crate::support::redis_server::RedisServer;
use crate::support::rlock::{self, code, rlock, sh, show, spawn};
use crate::support::scratch::Scratch;
use crate::support::{expect_within, wait_until};

/// Starts `rlock run OPTS NAME -- sh -c SCRIPT` against `redis`; see [`holder_with`].
fn holder(
    redis: &RedisServer,
    dir: &Scratch,
    opts: &[&str],
    name: &str,
    script: &str,
) -> (Proc, u32, Instant) {
    holder_with(rlock(&redis.url()), dir, opts, name, script)
}

/// Starts `BASE run OPTS NAME -- sh -c SCRIPT`, where SCRIPT writes its pid to
/// `pid` first; returns rlock, COMMAND's pid, and when rlock was started.
fn holder_with(
    mut base: Command,
    dir: &Scratch,
    opts: &[&str],
    name: &str,
    script: &str,
) -> (Proc, u32, Instant) {
    let started = Instant::now();
    let script = format!("echo $$ > {}; {script}", dir.file("pid"));
    let proc = spawn(
        base.arg("run")
            .args(opts)
            .args([name, "--"])
            .args(sh(&script)),
    );
    expect_within(rlock::LIMIT, "COMMAND to start", || {
        !dir.read("pid").trim().is_empty()
    });
    let pid = dir.read("pid").trim().parse().unwrap();
    (proc, pid, started)
}

/// When `pid` died (polled every millisecond), or None if it outlived `within`.
fn death(pid: u32, within: Duration) -> Option<Instant> {
    let until = Instant::now() + within;
    while Instant::now() < until {
        if !alive(pid) {
            return Some(Instant::now());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    None
}

/// When `pid` was last seen alive (the moment before the look that found
/// it so), once it has died; None if it outlived `within`. Unlike
/// [`death`], a test thread that is not scheduled for a while between two
/// looks cannot make a timely death look late.
fn last_seen_alive(pid: u32, within: Duration) -> Option<Instant> {
    let until = Instant::now() + within;
    let mut seen = Instant::now();
    while seen < until {
        let before = Instant::now();
        if !alive(pid) {
            return Some(seen);
        }
        seen = before;
        std::thread::sleep(Duration::from_millis(1));
    }
    None
}

/// The first defect: rlock stopped (SIGSTOP) past its lease while
/// COMMAND ran used to exit 0 once continued, though another run had taken
/// the lock meanwhile. The guardian stops COMMAND at the lease's end, and
/// rlock, continued, says so.
fn suspended_holder(stop_after: Duration) {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let (holder, pid, _) = holder(&redis, &dir, &["--ttl", "1s"], "paused", "sleep 3");
    // The fault's moment in the holder's life (before or after its watchdog
    // thread starts), not a wait for a condition.
    std::thread::sleep(stop_after);
    holder.signal(libc::SIGSTOP);
    let stopped = Instant::now();
    // COMMAND dies while rlock is stopped: no one else may get in beside it.
    let died = death(pid, Duration::from_secs(3)).expect("COMMAND stopped at the lease's end");
    assert!(
        died.duration_since(stopped) < Duration::from_secs(1),
        "COMMAND died {:?} after rlock was stopped",
        died.duration_since(stopped)
    );
    expect_within(Duration::from_secs(3), "the lease to lapse", || {
        let out = rlock::output(rlock(&redis.url()).args(["run", "-n", "paused", "--", "true"]));
        out.status.success()
    });
    holder.signal(libc::SIGCONT);
    let out = holder.output_within(rlock::LIMIT);
    let err = rlock::assert_fails(&out, 70);
    assert_lines(
        &err,
        "rlock: paused: lock lost: lease lapsed while rlock was suspended for [..]; \
         COMMAND was stopped",
    );
}

#[test]
fn an_rlock_stopped_before_its_watchdog_starts_reports_the_lapsed_lease() {
    suspended_holder(Duration::from_millis(100));
}

#[test]
fn an_rlock_stopped_while_its_watchdog_runs_reports_the_lapsed_lease() {
    suspended_holder(Duration::from_millis(500));
}

/// Starts a holder whose COMMAND waits for a file, takes its hold away with
/// `lose` (before the first renewal, at 5 s), lets another run take the
/// lock, then lets COMMAND end: the holder
/// must exit 70, having found the hold gone at release, with the cause the
/// server shows (`says`).
fn hold_gone_at_release(
    redis: &mut RedisServer,
    name: &str,
    says: &str,
    lose: impl FnOnce(&mut RedisServer),
) {
    let dir = Scratch::new();
    let (holder, _, _) = holder(redis, &dir, &["--ttl", "15s"], name, &until_go(&dir));
    lose(redis);
    let other = rlock::output(rlock(&redis.url()).args(["run", "-n", name, "--", "true"]));
    assert_eq!(code(&other), 0, "{}", show(&other));
    go(&dir);
    let out = holder.output_within(rlock::LIMIT);
    let err = rlock::assert_fails(&out, 70);
    assert_lines(
        &err,
        &format!(
            "rlock: {name}: lock lost: it was no longer ours at release ({says}), \
             so COMMAND may have run beside another holder"
        ),
    );
}

/// The second defect: a hold removed under a COMMAND that ends before the
/// first renewal was noticed only at release, and not reported.
#[test]
fn a_hold_forced_away_under_a_short_command_is_reported_at_release() {
    let says = "released by force or deleted by another client: \
                the server neither restarted nor evicted keys";
    hold_gone_at_release(&mut RedisServer::start(), "forced", says, |redis| {
        let force = rlock::output(rlock(&redis.url()).args(["release", "--force", "forced"]));
        assert_eq!(code(&force), 0, "{}", show(&force));
    });
}

/// The same when a restart without persistence lost the hold: the release's
/// connection died with the server, and a new one finds the hold gone.
#[test]
fn a_hold_lost_in_a_restart_is_reported_at_release() {
    // INFO's uptime is in whole seconds: a restart shows once the hold is
    // more than a second older than the restarted server.
    hold_gone_at_release(
        &mut RedisServer::start(),
        "restarted",
        "lost in a server restart: the server has been up for [..]s, the hold began [..]s ago \
         (without appendonly, a restart keeps only what the server last saved)",
        |redis| {
            std::thread::sleep(Duration::from_millis(2000));
            redis.restart();
        },
    );
}

/// A restart moments after the hold began: INFO's whole-second uptime
/// cannot tell which came first, so the restart is named as the likely cause
/// (it used to read "the server neither restarted nor evicted keys").
#[test]
fn a_restart_moments_after_the_hold_began_is_named_as_most_likely() {
    hold_gone_at_release(
        &mut RedisServer::start(),
        "restarted-young",
        // Definite once the hold is a second older than the server (a
        // slow test machine): loss.rs's unit test tells the two apart.
        "[..]lost in a server restart: the server has been up for [..]",
        |redis| redis.restart(),
    );
}

/// The third and fourth defects: with the server stalled, SIGTERM came after
/// the lease's end (a socket timeout is no timer), and SIGKILL `--kill-after`
/// later. Now the whole group is dead before the lease could end on the
/// server, which counts it from a moment after rlock was started.
#[test]
fn a_command_ignoring_sigterm_is_dead_before_the_lease_can_end() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let (holder, pid, started) = holder(
        &redis,
        &dir,
        &["--ttl", "1s"],
        "deadline",
        "trap '' TERM; while :; do sleep 0.01; done",
    );
    redis.freeze();
    let seen = last_seen_alive(pid, Duration::from_secs(3));
    let looked = Instant::now();
    redis.thaw();
    let seen = seen.expect("COMMAND was killed");
    assert!(
        seen.duration_since(started) < Duration::from_millis(1000),
        "COMMAND was alive {:?} after rlock started, past its 1s lease",
        seen.duration_since(started)
    );
    // A death long after the lease, missed by a look made late, still shows.
    assert!(
        looked.duration_since(started) < Duration::from_millis(1500),
        "COMMAND was found dead {:?} after rlock started",
        looked.duration_since(started)
    );
    let out = holder.output_within(rlock::LIMIT);
    // One line: the loss, with the renewals' cause.
    assert_eq!(rlock::code(&out), 70, "{}", rlock::show(&out));
    let err = rlock::stderr(&out);
    assert_lines(
        &err,
        &format!(
            "rlock: deadline: lock lost: lease could not be renewed before it expired \
             (deadline: server 127.0.0.1:{} unavailable: no reply within [..]ms); \
             COMMAND was stopped",
            redis.port
        ),
    );
}

/// SIGTERM leaves COMMAND its `--kill-after` inside the lease: a COMMAND that
/// takes 200 ms to clean up finishes, and still before the lease could end.
#[test]
fn sigterm_leaves_the_grace_inside_the_lease() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let script = format!(
        "exec 2>/dev/null; trap 'sleep 0.2; echo clean > {}; exit 3' TERM; while :; do sleep 0.01; done",
        dir.file("clean")
    );
    let (holder, pid, started) = holder(
        &redis,
        &dir,
        &["--ttl", "1s", "--kill-after", "300ms"],
        "graceful",
        &script,
    );
    redis.freeze();
    let died = death(pid, Duration::from_secs(3));
    redis.thaw();
    let died = died.expect("COMMAND ended");
    assert!(
        died.duration_since(started) < Duration::from_millis(1000),
        "COMMAND ended {:?} after rlock started",
        died.duration_since(started)
    );
    assert_eq!(dir.read("clean").trim(), "clean", "COMMAND had its grace");
    let out = holder.output_within(rlock::LIMIT);
    assert_eq!(code(&out), 70, "{}", show(&out));
}

/// The fifth defect: an acquisition held up longer than a third of the lease
/// (here by CLIENT PAUSE) started COMMAND on a lease nearly gone, and it was
/// stopped at once. Now rlock renews first and COMMAND runs.
#[test]
fn a_slow_acquisition_renews_before_command_starts() {
    let redis = RedisServer::start();
    redis.cmd::<String>(&["CLIENT", "PAUSE", "1500", "ALL"]);
    let out = rlock::output(
        rlock(&redis.url())
            .args(["-v", "run", "--ttl", "1s", "slow", "--"])
            .args(sh("sleep 0.4; exit 4")),
    );
    assert_eq!(code(&out), 4, "{}", show(&out));
    assert_has_line(
        &rlock::stderr(&out),
        "rlock: renewed before starting COMMAND: the acquisition took [..] ms",
    );
}

/// A `--kill-after` that cannot fit in the lease is cut to a third of it, and
/// rlock says so.
#[test]
fn a_kill_after_longer_than_the_lease_allows_is_capped_with_a_note() {
    let redis = RedisServer::start();
    let out = rlock::output(rlock(&redis.url()).args([
        "run",
        "--ttl",
        "1s",
        "--kill-after",
        "5s",
        "capped",
        "--",
        "true",
    ]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let err = rlock::stderr(&out);
    assert!(
        err.starts_with("rlock: capped: --kill-after 5s capped to 333ms"),
        "{err}"
    );
}

/// A run that ends in time keeps COMMAND's status, even when renewals went
/// on for several leases, and says only that the lock was released.
#[test]
fn a_run_renewed_many_times_keeps_its_status() {
    let redis = RedisServer::start();
    let out = rlock::output(
        rlock(&redis.url())
            .args(["run", "--ttl", "300ms", "renewed", "--"])
            .args(sh("sleep 1.2; exit 5")),
    );
    assert_eq!(code(&out), 5, "{}", show(&out));
    crate::support::expect::assert_lines(
        &rlock::stderr(&out),
        "rlock: renewed: released after [..]s (COMMAND exited 5)",
    );
    assert!(wait_until(Duration::from_secs(1), || redis
        .lock_keys("renewed")
        .is_empty()));
}

/// A release whose reply did not come in time (the server stalled) may have
/// been carried out: that is no proof the hold was lost, and the run keeps
/// COMMAND's status.
#[test]
fn a_release_stalled_past_its_timeout_is_not_called_lost() {
    let redis = RedisServer::start_with(&["--enable-debug-command", "yes"]);
    let dir = Scratch::new();
    let (holder, _, _) = holder(
        &redis,
        &dir,
        &["--connect-timeout", "500ms", "--ttl", "30s"],
        "stall",
        &until_go(&dir),
    );
    // Opened before the server sleeps: a PING on it that gets no reply shows
    // the sleep has begun.
    let mut probe = redis.con();
    probe
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let url = redis.url();
    let sleeper = std::thread::spawn(move || {
        rlock::output(Command::new("redis-cli").args(["-u", &url, "DEBUG", "SLEEP", "1.5"]))
    });
    expect_within(Duration::from_secs(5), "the server to sleep", || {
        redis::cmd("PING").query::<String>(&mut probe).is_err()
    });
    go(&dir);
    let out = holder.output_within(rlock::LIMIT);
    sleeper.join().unwrap();
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert_has_line(
        &rlock::stderr(&out),
        &format!(
            "rlock: stall: could not release (server 127.0.0.1:{} unavailable: \
             no reply within 500ms); it expires within 30s",
            redis.port
        ),
    );
}

/// Redlock: one server that never had the hold saying "not ours" at release,
/// while the quorum that had it does not answer, proves nothing.
#[test]
fn a_redlock_minority_without_the_hold_does_not_make_it_lost() {
    let servers = quorum::servers(3);
    let dir = Scratch::new();
    // Someone else holds it on the third server only.
    let other =
        rlock::output(rlock(&servers[2].url()).args(["acquire", "--ttl", "60s", "minority"]));
    assert_eq!(code(&other), 0, "{}", show(&other));
    let (holder, _, _) = holder_with(
        quorum::rlock(servers.iter().map(RedisServer::url)),
        &dir,
        &["--connect-timeout", "300ms", "--ttl", "30s"],
        "minority",
        &until_go(&dir),
    );
    servers[0].freeze();
    servers[1].freeze();
    go(&dir);
    let out = holder.output_within(rlock::LIMIT);
    servers[0].thaw();
    servers[1].thaw();
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert_has_line(
        &rlock::stderr(&out),
        "rlock: minority: could not release ([..] unavailable: no quorum: \
         0 of 3 servers answered, 2 needed ([..])); it expires within 30s",
    );
}

/// A server with `maxmemory` and an evicting policy (managed caches default
/// to volatile-lru, which evicts keys with a TTL: every key of a held lock)
/// filled until the lock's keys are evicted. The holder's one line names the
/// eviction, found at release (before any renewal) or at a renewal.
#[test]
fn a_hold_evicted_under_memory_pressure_is_named() {
    let mut redis =
        RedisServer::start_with(&["--maxmemory", "3mb", "--maxmemory-policy", "volatile-lru"]);
    hold_gone_at_release(
        &mut redis,
        "evicted",
        "most likely evicted under memory pressure (maxmemory-policy volatile-lru, \
         [..] keys evicted since the server started; use noeviction)",
        |redis| {
            fill_until_evicted(redis, "evicted");
        },
    );

    let dir = Scratch::new();
    let (holder, _, _) = holder(
        &redis,
        &dir,
        &["--ttl", "1500ms"],
        "renewed",
        &until_go(&dir),
    );
    // Past the first renewal (the acquire and a renewal: two scripts run).
    expect_within(rlock::LIMIT, "the first renewal", || {
        evalsha_calls(&redis) >= 2
    });
    fill_until_evicted(&redis, "renewed");
    let out = holder.output_within(rlock::LIMIT);
    let err = rlock::assert_fails(&out, 70);
    // At a renewal the cause is either "most likely evicted … since the
    // server started" or "evicted … while it was held", as the server's
    // eviction count is read before or after the eviction.
    assert_lines(
        &err,
        "rlock: renewed: lock lost: the server says it is no longer ours \
         ([..]evicted under memory pressure[..]maxmemory-policy volatile-lru[..]\
         use noeviction)); COMMAND was stopped",
    );
}

/// Writes 2 KB values with an expiry until lock `name`'s keys are gone, then
/// empties the server.
fn fill_until_evicted(redis: &RedisServer, name: &str) {
    let mut con = redis.con();
    let value = "v".repeat(2048);
    for batch in 0..100 {
        let mut pipe = redis::pipe();
        for i in 0..500 {
            pipe.cmd("SET")
                .arg(format!("fill:{batch}:{i}"))
                .arg(&value)
                .arg("EX")
                .arg(600)
                .ignore();
        }
        let () = pipe.query(&mut con).unwrap();
        if redis.lock_keys(name).is_empty() {
            // Room again, so that the next holder is not evicted in turn.
            let () = redis::cmd("FLUSHALL").query(&mut con).unwrap();
            return;
        }
    }
    panic!("{name}'s keys were never evicted");
}

/// How many EVALSHA calls the server has carried out (INFO commandstats:
/// calls less failed calls, such as a NOSCRIPT before a script is loaded).
fn evalsha_calls(redis: &RedisServer) -> u64 {
    let info: String = redis.cmd(&["INFO", "commandstats"]);
    let Some(stats) = info
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:"))
    else {
        return 0;
    };
    let field = |name: &str| -> u64 {
        stats
            .split(',')
            .find_map(|f| f.strip_prefix(name))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    field("calls=").saturating_sub(field("failed_calls="))
}
