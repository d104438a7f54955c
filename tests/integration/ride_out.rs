//! Riding out the routine: a server outage that leaves the lease provable
//! never stops COMMAND, whenever it starts; one that does not always does.

use std::time::{Duration, Instant};

use crate::support::clock::SteppedServer;
use crate::support::expect::{assert_has_line, assert_lines};
use crate::support::expect_within;
use crate::support::holder::{go, until_go};
use crate::support::process::Proc;
use crate::support::redis_server::RedisServer;
use crate::support::rlock::{self, code, rlock, sh, show, spawn};
use crate::support::scratch::Scratch;

/// Waits for a renewal of `name`'s hold (its key's PTTL jumps back up) and
/// returns when it was seen.
fn next_renewal(redis: &RedisServer, name: &str) -> Instant {
    next_renewal_of(redis, &format!("rlock:{{{name}}}:leases"))
}

/// [`next_renewal`] of the hold kept at `key`.
fn next_renewal_of(redis: &RedisServer, key: &str) -> Instant {
    let mut last: i64 = redis.cmd(&["PTTL", key]);
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        let pttl: i64 = redis.cmd(&["PTTL", key]);
        if pttl > last + 50 {
            return Instant::now();
        }
        last = pttl;
        std::thread::sleep(Duration::from_millis(2));
    }
    panic!("no renewal of {key} seen within 10 s");
}

/// `rlock run --ttl 6s --kill-after 1s NAME` (4.87 s from a renewal sent to
/// SIGTERM, renewed every 0.49 s; every ttl/3 this was 2 s) of a COMMAND
/// that runs until [`go`]`(dir)`.
fn six_second_holder(redis: &RedisServer, dir: &Scratch, opts: &[&str], name: &str) -> Proc {
    spawn(
        rlock(&redis.url())
            .args(opts)
            .args(["run", "--ttl", "6s", "--kill-after", "1s", name, "--"])
            .args(sh(&until_go(dir))),
    )
}

/// Sleeps until `at` (a moment in a fault's timing, not a wait for a condition).
fn sleep_until(at: Instant) {
    std::thread::sleep(at.saturating_duration_since(Instant::now()));
}

/// With `--ttl 6s --kill-after 1s` a failing renewal has 4.87 s before
/// SIGTERM: renewing every ttl/3 (2 s), an outage starting just before a
/// renewal was ridden out only up to 2.9 s. Renewing every tenth of that
/// stretch, a 3.8 s outage is ridden out whenever it starts.
#[test]
fn an_outage_starting_just_before_a_renewal_is_ridden_out() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let holder = six_second_holder(&redis, &dir, &["-v"], "blip");
    let renewed = next_renewal(&redis, "blip");
    // Just before the renewal that renewing every ttl/3 would send next.
    sleep_until(renewed + Duration::from_millis(1800));
    redis.freeze();
    std::thread::sleep(Duration::from_millis(3800));
    redis.thaw();
    // Renewals are confirmed again, well before the lease could end.
    next_renewal(&redis, "blip");
    go(&dir);
    let out = holder.output_within(rlock::LIMIT);
    assert_eq!(code(&out), 0, "{}", show(&out));
    let err = rlock::stderr(&out);
    assert_has_line(
        &err,
        "rlock: blip: renewed every 0.4s; rides out server outages up to 4.3s",
    );
    assert_has_line(
        &err,
        "rlock: blip: renewal failed for [..]s ([..]), then confirmed again",
    );
}

/// With the defaults, the figure `-v` gives is the contract's.
#[test]
fn the_defaults_ride_out_seventeen_seconds() {
    let redis = RedisServer::start();
    let out = rlock::output(rlock(&redis.url()).args(["-v", "run", "d", "--", "true"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    let err = rlock::stderr(&out);
    assert_has_line(
        &err,
        "rlock: d: renewed every 1.9s; rides out server outages up to 17.4s",
    );
}

/// An outage longer than the lease can prove still stops COMMAND (exit 70)
/// before the lease can end, and no other run gets in before that.
#[test]
fn an_outage_past_the_ride_out_still_stops_command() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let started = Instant::now();
    let holder = spawn(
        rlock(&redis.url())
            .args([
                "-v",
                "run",
                "--ttl",
                "3s",
                "--kill-after",
                "500ms",
                "long",
                "--",
            ])
            .args(sh(&format!("touch {}; sleep 30", dir.file("held")))),
    );
    expect_within(rlock::LIMIT, "COMMAND to start", || {
        std::path::Path::new(&dir.file("held")).exists()
    });
    redis.freeze();
    let frozen = Instant::now();
    let out = holder.output_within(rlock::LIMIT);
    let ended = frozen.elapsed();
    redis.thaw();
    assert_eq!(code(&out), 70, "{}", show(&out));
    let err = rlock::stderr(&out);
    // The loss is said first, then what could not be done after it.
    let lost = err
        .find("long: lock lost: lease could not be renewed")
        .unwrap_or_else(|| panic!("{err}"));
    let unreleased = err
        .find("could not release")
        .unwrap_or_else(|| panic!("{err}"));
    assert!(lost < unreleased, "{err}");
    // 3 s lease: SIGTERM by 2.4 s after the last renewal; rlock exits within
    // --kill-after + 3 s of SIGTERM even though the server does not answer.
    assert!(
        ended < Duration::from_secs(6),
        "exited {ended:?} after the stall began ({:?} after start)",
        started.elapsed()
    );
}

/// A hold found gone, then the server stalls while COMMAND (ignoring
/// SIGTERM) is stopped: asking the server why the hold is gone used to wait
/// the whole --connect-timeout (10 s here), past the `--kill-after` + 3 s an
/// ending after a loss has.
#[test]
fn an_ending_after_a_hold_found_gone_is_prompt_with_a_stalled_server() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let termed = dir.file("termed");
    let holder = spawn(
        rlock(&redis.url())
            .args([
                "run",
                "--ttl",
                "3s",
                "--kill-after",
                "1s",
                "--connect-timeout",
                "10s",
            ])
            .args(["gone", "--"])
            .args(sh(&format!(
                "trap 'touch {termed}' TERM; touch {}; while :; do sleep 0.1; done",
                dir.file("held")
            ))),
    );
    expect_within(rlock::LIMIT, "COMMAND to start", || {
        std::path::Path::new(&dir.file("held")).exists()
    });
    let _: i64 = redis.cmd(&["DEL", "rlock:{gone}:leases"]);
    expect_within(rlock::LIMIT, "SIGTERM to COMMAND", || {
        std::path::Path::new(&termed).exists()
    });
    redis.freeze();
    let termed_at = Instant::now();
    let out = holder.output_within(rlock::LIMIT);
    let ended = termed_at.elapsed();
    redis.thaw();
    assert_eq!(code(&out), 70, "{}", show(&out));
    let err = rlock::stderr(&out);
    assert!(
        err.lines().find(|l| l.starts_with("rlock:")).is_some_and(
            |l| l.starts_with("rlock: gone: lock lost: the server says it is no longer ours")
        ),
        "the loss line first: {err}"
    );
    assert!(
        ended < Duration::from_secs(4),
        "exited {ended:?} after SIGTERM (--kill-after 1s + 3 s)"
    );
}

/// A grant read after the `--wait` deadline (the holder's lease lapsed while
/// the server stalled across the deadline) is given back: exit 75, COMMAND
/// never started, and the lock is free again.
#[test]
fn a_grant_read_after_the_wait_deadline_is_given_back() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let holder = rlock::output(rlock(&redis.url()).args(["acquire", "--ttl", "1500ms", "late"]));
    assert_eq!(code(&holder), 0, "{}", show(&holder));
    let started = dir.file("started");
    let waiter =
        spawn(rlock(&redis.url()).args(["run", "--wait", "1s", "late", "--", "touch", &started]));
    std::thread::sleep(Duration::from_millis(300));
    redis.freeze();
    // Past the waiter's deadline and the holder's lease.
    std::thread::sleep(Duration::from_millis(2200));
    redis.thaw();
    let out = waiter.output_within(rlock::LIMIT);
    let err = rlock::assert_fails(&out, 75);
    assert_lines(
        &err,
        "rlock: late: not acquired: acquired only [..]s after --wait 1s ran out \
         (the server answered late); given back",
    );
    assert!(
        !std::path::Path::new(&started).exists(),
        "COMMAND started late"
    );
    // The hold given back leaves no `acquired` event that no run kept: the
    // waiter's one event is its `busy`.
    let history = rlock::output(rlock(&redis.url()).args(["history", "late", "--json"]));
    assert_eq!(code(&history), 0, "{}", show(&history));
    let text = String::from_utf8_lossy(&history.stdout);
    let waiter: Vec<&str> = text.split('}').filter(|e| e.contains("touch")).collect();
    assert_eq!(waiter.len(), 1, "{text}");
    assert!(waiter[0].contains("\"event\":\"busy\""), "{text}");
    let next = rlock::output(rlock(&redis.url()).args(["run", "-n", "late", "--", "true"]));
    assert_eq!(code(&next), 0, "{}", show(&next));
}

/// A hold a release hands over to a waiter that reads it only after its
/// `--wait` deadline (the waiter was stopped meanwhile) is given back with
/// the `acquired` event that release wrote for it: no run kept the hold.
#[test]
fn a_handed_over_hold_read_after_the_deadline_takes_its_event_back() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let holder = rlock::output(rlock(&redis.url()).args(["acquire", "--ttl", "30s", "handed"]));
    assert_eq!(code(&holder), 0, "{}", show(&holder));
    let token = rlock::stdout(&holder).trim().to_owned();
    let started = dir.file("started");
    let waiter =
        spawn(rlock(&redis.url()).args(["run", "--wait", "1s", "handed", "--", "touch", &started]));
    let asked = Instant::now();
    expect_within(rlock::LIMIT, "the waiter to stand in line", || {
        redis.cmd::<i64>(&["ZCARD", "rlock:{handed}:waiters"]) == 1
    });
    // The fault: the waiter stops, the release hands it the lock, and it
    // reads the grant only after its deadline.
    waiter.signal(libc::SIGSTOP);
    let released = rlock::output(
        rlock(&redis.url())
            .args(["release", "handed"])
            .env("RLOCK_TOKEN", &token),
    );
    assert_eq!(code(&released), 0, "{}", show(&released));
    expect_within(rlock::LIMIT, "the release to hand the lock over", || {
        redis.cmd::<i64>(&["ZCARD", "rlock:{handed}:waiters"]) == 0
    });
    std::thread::sleep(Duration::from_millis(1500).saturating_sub(asked.elapsed()));
    waiter.signal(libc::SIGCONT);
    let out = waiter.output_within(rlock::LIMIT);
    let err = rlock::assert_fails(&out, 75);
    assert_lines(
        &err,
        "rlock: handed: not acquired: acquired only [..]s after --wait 1s ran out \
         (the server answered late); given back",
    );
    assert!(
        !std::path::Path::new(&started).exists(),
        "COMMAND started late"
    );
    let history = rlock::output(rlock(&redis.url()).args(["history", "handed", "--json"]));
    assert_eq!(code(&history), 0, "{}", show(&history));
    let text = String::from_utf8_lossy(&history.stdout);
    let waiter: Vec<&str> = text.split('}').filter(|e| e.contains("touch")).collect();
    assert_eq!(
        waiter.len(),
        1,
        "the waiter's one event is its busy: {text}"
    );
    assert!(waiter[0].contains("\"event\":\"busy\""), "{text}");
    let next = rlock::output(rlock(&redis.url()).args(["run", "-n", "handed", "--", "true"]));
    assert_eq!(code(&next), 0, "{}", show(&next));
}

/// A waiter stopped and continued while the lock was handed to it (its
/// read of the grant interrupted, it asks again and finds the hold its
/// own) runs COMMAND, and the lock's history has one `acquired` event for
/// it: the one the release wrote.
#[test]
fn a_handed_over_hold_found_on_asking_again_is_recorded_once() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let holder = rlock::output(rlock(&redis.url()).args(["acquire", "--ttl", "30s", "once"]));
    assert_eq!(code(&holder), 0, "{}", show(&holder));
    let token = rlock::stdout(&holder).trim().to_owned();
    let started = dir.file("started");
    let waiter =
        spawn(rlock(&redis.url()).args(["run", "--wait", "30s", "once", "--", "touch", &started]));
    expect_within(rlock::LIMIT, "the waiter to stand in line", || {
        redis.cmd::<i64>(&["ZCARD", "rlock:{once}:waiters"]) == 1
    });
    waiter.signal(libc::SIGSTOP);
    let released = rlock::output(
        rlock(&redis.url())
            .args(["release", "once"])
            .env("RLOCK_TOKEN", &token),
    );
    assert_eq!(code(&released), 0, "{}", show(&released));
    waiter.signal(libc::SIGCONT);
    let out = waiter.output_within(rlock::LIMIT);
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert!(std::path::Path::new(&started).exists(), "COMMAND ran");
    let history = rlock::output(rlock(&redis.url()).args(["history", "once", "--json"]));
    let text = String::from_utf8_lossy(&history.stdout);
    let acquired = text
        .split('}')
        .filter(|e| e.contains("touch") && e.contains("\"event\":\"acquired\""))
        .count();
    assert_eq!(acquired, 1, "{text}");
}

/// Holds `jump` over `servers` (run with `opts`), steps the clocks of the
/// first `stepped` of them forward 60 s after two renewals seen at `key` on
/// the first (the second has the first's reading), and checks that another
/// run got the lock and the holder ended with 70, naming the clock.
fn a_forward_step_ends_the_run(
    servers: &[SteppedServer],
    stepped: usize,
    key: &str,
    opts: &[&str],
) {
    let urls: Vec<String> = servers.iter().map(|s| s.redis.url()).collect();
    let run = || {
        let mut cmd = crate::support::quorum::rlock(&urls);
        cmd.arg("run").args(opts);
        cmd
    };
    let dir = Scratch::new();
    let holder = spawn(
        run()
            .args(["--ttl", "6s", "jump", "--"])
            .args(sh(&format!("touch {}; sleep 30", dir.file("held")))),
    );
    expect_within(rlock::LIMIT, "COMMAND to start", || {
        std::path::Path::new(&dir.file("held")).exists()
    });
    next_renewal_of(&servers[0].redis, key);
    next_renewal_of(&servers[0].redis, key);
    for server in &servers[..stepped] {
        server.step_to(60_000);
    }
    let other = rlock::output(run().args(["-n", "jump", "--", "true"]));
    assert_eq!(
        code(&other),
        0,
        "the step ended the lease: {}",
        show(&other)
    );
    let out = holder.output_within(rlock::LIMIT);
    let err = rlock::assert_fails(&out, 70);
    assert_lines(
        &err,
        "rlock: jump: lock lost: the server's clock jumped forward 60s, \
         which ended the lease under COMMAND; COMMAND was stopped",
    );
}

/// The server's clock stepped forward 60 s under a 6 s lease ended it at
/// once (another run got the lock): the holder's next renewal ends the run
/// with 70, naming the clock.
#[test]
fn a_forward_clock_step_that_ended_the_lease_is_a_loss_naming_the_clock() {
    a_forward_step_ends_the_run(&[SteppedServer::start()], 1, "rlock:{jump}:leases", &[]);
}

/// A forward step that ends the lease on a majority of a Redlock quorum is
/// a loss naming the clock, as on one server.
#[test]
fn a_forward_clock_step_on_a_quorums_majority_is_a_loss_naming_the_clock() {
    let servers: Vec<SteppedServer> = (0..3).map(|_| SteppedServer::start()).collect();
    a_forward_step_ends_the_run(&servers, 2, "rlock:{jump}:leases", &[]);
}

/// A Redisson-layout hold (`--redisson`) reads the server's clock too: a
/// backward step is undone at the next renewal, and a forward one that
/// ended its lease is a loss naming the clock.
#[test]
fn clock_steps_under_a_redisson_hold_are_named() {
    let server = SteppedServer::start();
    let redis = &server.redis;
    let dir = Scratch::new();
    let holder = spawn(
        rlock(&redis.url())
            .args(["run", "--redisson", "--ttl", "6s", "back", "--"])
            .args(sh(&until_go(&dir))),
    );
    next_renewal_of(redis, "back");
    next_renewal_of(redis, "back");
    server.step_to(-60_000);
    expect_within(
        Duration::from_secs(3),
        "the lease set back to the ttl",
        || {
            let pttl: i64 = redis.cmd(&["PTTL", "back"]);
            (0..=6_000).contains(&pttl)
        },
    );
    go(&dir);
    let out = holder.output_within(rlock::LIMIT);
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert_has_line(
        &rlock::stderr(&out),
        "rlock: back: the server's clock jumped back 60s; the lease is set back to 6s",
    );
    server.step_to(0);
    a_forward_step_ends_the_run(&[server], 1, "jump", &["--redisson"]);
}

/// Stepped back 60 s, the server would keep a 6 s lease for 66 s (a dead
/// holder's lock with it): the next renewal sets it back to the ttl.
#[test]
fn a_backward_clock_step_does_not_leave_a_lease_longer_than_the_ttl() {
    let server = SteppedServer::start();
    let redis = &server.redis;
    let dir = Scratch::new();
    let holder = spawn(
        rlock(&redis.url())
            .args(["run", "--ttl", "6s", "back", "--"])
            .args(sh(&until_go(&dir))),
    );
    next_renewal(redis, "back");
    next_renewal(redis, "back");
    server.step_to(-60_000);
    let key = "rlock:{back}:leases";
    expect_within(
        Duration::from_secs(3),
        "the lease set back to the ttl",
        || {
            let pttl: i64 = redis.cmd(&["PTTL", key]);
            (0..=6_000).contains(&pttl)
        },
    );
    go(&dir);
    let out = holder.output_within(rlock::LIMIT);
    assert_eq!(code(&out), 0, "{}", show(&out));
    let err = rlock::stderr(&out);
    assert_has_line(
        &err,
        "rlock: back: the server's clock jumped back 60s; the lease is set back to 6s",
    );
}

/// `CLIENT PAUSE` (as a planned maintenance does it) for longer than
/// renewing every ttl/3 rode out, within what the lease rides out now.
#[test]
fn a_client_pause_within_the_ride_out_keeps_command_running() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let holder = six_second_holder(&redis, &dir, &[], "paused");
    let renewed = next_renewal(&redis, "paused");
    // Just before the renewal that renewing every ttl/3 would send next.
    sleep_until(renewed + Duration::from_millis(1800));
    redis.cmd::<String>(&["CLIENT", "PAUSE", "3800", "ALL"]);
    std::thread::sleep(Duration::from_millis(3800));
    next_renewal(&redis, "paused");
    go(&dir);
    let out = holder.output_within(rlock::LIMIT);
    assert_eq!(code(&out), 0, "{}", show(&out));
}

/// After the `FAILOVER` command a plain URL names a replica: the holder's
/// renewals get READONLY, and the run ends (70) saying the server became a
/// replica, before its lease could end. (The lease leaves room for the
/// failover's own pause of writes under load: a renewal held there past the
/// deadline would end the run with no answer to name.)
#[test]
fn a_server_demoted_by_the_failover_command_is_named() {
    let (primary, replica) = RedisServer::with_replica();
    // (FAILOVER is Redis 6.2's: every server of the matrix has it.)
    let dir = Scratch::new();
    let holder = spawn(
        rlock(&primary.url())
            .args(["run", "--ttl", "10s", "--kill-after", "1s", "demoted", "--"])
            .args(sh(&format!("touch {}; sleep 30", dir.file("held")))),
    );
    expect_within(rlock::LIMIT, "COMMAND to start", || {
        std::path::Path::new(&dir.file("held")).exists()
    });
    let _: String = primary.cmd(&["FAILOVER", "TO", "127.0.0.1", &replica.port.to_string()]);
    expect_within(rlock::LIMIT, "the primary to be a replica", || {
        primary
            .cmd::<String>(&["INFO", "replication"])
            .contains("role:slave")
    });
    let out = holder.output_within(rlock::LIMIT);
    assert_eq!(code(&out), 70, "{}", show(&out));
    let err = rlock::stderr(&out);
    // One line: the loss, with the renewals' cause.
    assert_lines(
        &err,
        "rlock: demoted: lock lost: lease could not be renewed before it expired \
         (demoted: server 127.0.0.1:[..] unavailable: the server became a replica \
         (READONLY: a failover, or the FAILOVER command); the lock lives on its master: \
         use a redis+sentinel:// URL, or a host name that follows the master); \
         COMMAND was stopped",
    );
}

/// `forever` and `infinity` wherever a wait is given: `--wait`,
/// `--unreachable-wait` and their variables. A standby told to wait out the
/// server forever is still waiting long after `--unreachable-wait 1s` gave up.
#[test]
fn waits_may_be_forever() {
    let redis = RedisServer::start();
    for (args, env) in [
        (vec!["run", "--wait", "forever"], None),
        (vec!["run", "--unreachable-wait", "infinity"], None),
        (vec!["run"], Some(("RLOCK_WAIT", "infinity"))),
        (vec!["run"], Some(("RLOCK_UNREACHABLE_WAIT", "forever"))),
    ] {
        let mut cmd = rlock(&redis.url());
        cmd.args(&args).args(["f", "--", "true"]);
        if let Some((k, v)) = env {
            cmd.env(k, v);
        }
        let out = rlock::output(&mut cmd);
        assert_eq!(code(&out), 0, "{args:?} {env:?}: {}", show(&out));
    }
    let (_refusing, port) = crate::support::redis_server::refusing_port();
    let url = format!("redis://127.0.0.1:{port}");
    let gave_up =
        rlock::output(rlock(&url).args(["run", "--unreachable-wait", "1s", "f", "--", "true"]));
    assert_eq!(code(&gave_up), 69, "{}", show(&gave_up));
    let mut standby =
        spawn(rlock(&url).args(["run", "--unreachable-wait", "forever", "f", "--", "true"]));
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        standby.try_status().is_none(),
        "a standby waiting forever gave up"
    );
    standby.signal(libc::SIGTERM);
    let out = standby.output_within(rlock::LIMIT);
    let err = rlock::stderr(&out);
    assert_lines(
        &err,
        &format!(
            "rlock: f: server 127.0.0.1:{port} unavailable: connection refused \
             (is redis-server running on 127.0.0.1:{port}?); \
             waiting for it as long as it takes (--unreachable-wait forever)
rlock: f: interrupted by SIGTERM while waiting; nothing acquired"
        ),
    );
}

/// A server back a moment before SIGTERM is due is heard in time: some
/// renewal is always out while it is stalled (one that timed out is sent
/// again at once), so its answer comes as the server resumes. (With retries
/// 500 ms apart, a server back between two of them was not.)
#[test]
fn a_server_back_just_before_sigterm_is_heard_in_time() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let holder = six_second_holder(&redis, &dir, &[], "late");
    let renewed = next_renewal(&redis, "late");
    redis.freeze();
    // SIGTERM is due 4.87 s after the last confirmed renewal was sent.
    sleep_until(renewed + Duration::from_millis(4650));
    redis.thaw();
    next_renewal(&redis, "late");
    go(&dir);
    let out = holder.output_within(rlock::LIMIT);
    assert_eq!(code(&out), 0, "{}", show(&out));
}
