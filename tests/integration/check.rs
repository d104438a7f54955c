//! `rlock check`: one line per check on real servers; the
//! contract's passing server (AOF on, noeviction, a user allowed everything)
//! exits 0; eviction, no AOF and missing rights are named; a server that
//! refuses to say is `unknown`, never a crash; each server of a quorum is
//! checked; a clock apart from this host's warns; a Sentinel's or Cluster's
//! failover timing is judged by `--ttl`.

use std::process::Output;

use crate::acl::RULES;
use crate::support::clock::SteppedServer;
use crate::support::cluster::Cluster;
use crate::support::expect::assert_lines;
use crate::support::quorum;
use crate::support::redis_server::{RedisServer, refusing_port};
use crate::support::rlock::{assert_fails, bare, code, output, rlock, show, stdout};
use crate::support::scratch::Scratch;
use crate::support::sentinel::topology;

/// Every check a reachable Redis server gets, in order.
const CHECKS: &[&str] = &[
    "reachable",
    "user",
    "topology",
    "failover",
    "scripts",
    "script-time",
    "atomic-scripts",
    "blpop-timeout",
    "rights",
    "version",
    "eviction",
    "persistence",
    "replicas",
    "clock",
];

/// A server fit for locks: the contract's example.
const FIT: &[&str] = &["--appendonly", "yes", "--maxmemory-policy", "noeviction"];

/// (result, name, detail) of each line, asserting the line's shape.
fn lines(out: &Output) -> Vec<(String, String, String)> {
    stdout(out)
        .lines()
        .map(|line| {
            let mut words = line.split_whitespace();
            let result = words.next().unwrap_or_default().to_owned();
            let name = words.next().unwrap_or_default().to_owned();
            let detail = words.collect::<Vec<_>>().join(" ");
            assert!(
                ["ok", "warn", "fail", "unknown"].contains(&result.as_str()),
                "line {line:?}: {}",
                show(out)
            );
            assert!(!detail.is_empty(), "line {line:?} says nothing");
            (result, name, detail)
        })
        .collect()
}

fn line<'a>(all: &'a [(String, String, String)], name: &str) -> &'a (String, String, String) {
    all.iter()
        .find(|(_, n, _)| n == name)
        .unwrap_or_else(|| panic!("no {name} line in {all:?}"))
}

fn check(url: &str, extra: &[&str]) -> Output {
    output(rlock(url).arg("check").args(extra))
}

#[test]
fn a_server_without_aof_warns_on_persistence_and_exits_1() {
    let redis = RedisServer::start();
    let out = check(&redis.url(), &[]);
    assert_eq!(code(&out), 1, "{}", show(&out));
    let all = lines(&out);
    let names: Vec<&str> = all.iter().map(|(_, n, _)| n.as_str()).collect();
    assert_eq!(names, CHECKS, "{}", show(&out));
    let (result, _, detail) = line(&all, "persistence");
    assert_eq!(result, "warn");
    assert_lines(
        detail,
        "appendonly no and no RDB save points: any restart loses every hold \
         (a second run can then take a lock whose holder still runs): enable appendonly \
         (CONFIG SET appendonly yes, and in the server's configuration)",
    );
    for (result, name, detail) in &all {
        if name != "persistence" {
            assert_eq!(result, "ok", "{name}: {detail}");
        }
    }
    let err = assert_fails(&out, 1);
    assert_lines(
        &err,
        "rlock: check: 1 warning(s): persistence (see the lines above)",
    );
    assert!(
        redis.keys().is_empty(),
        "probe keys left: {:?}",
        redis.keys()
    );
}

#[test]
fn a_server_with_aof_and_noeviction_passes_with_0() {
    let redis = RedisServer::start_with(FIT);
    let out = check(&redis.url(), &[]);
    assert_eq!(code(&out), 0, "{}", show(&out));
    let all = lines(&out);
    assert_eq!(all.len(), CHECKS.len(), "{}", show(&out));
    for (result, name, detail) in &all {
        assert_eq!(result, "ok", "{name}: {detail}");
    }
    assert!(out.stderr.is_empty(), "{}", show(&out));
    let version = &line(&all, "version").2;
    assert!(
        version.contains("Redis") || version.contains("Valkey"),
        "{version}"
    );
    assert_lines(
        &line(&all, "user").2,
        "authenticated as the default user (ACL WHOAMI), which may run every command \
         on every key: in production give rlock an ACL user of its own, limited to its \
         prefix (README: ACL users)",
    );
    assert_lines(
        &line(&all, "persistence").2,
        "appendonly yes, appendfsync everysec: a restart keeps the holds; \
         a crash of the host loses about the last second of them",
    );
}

#[test]
fn maxmemory_with_volatile_lru_warns_that_held_locks_may_be_evicted() {
    let mut args = vec!["--maxmemory", "3mb", "--maxmemory-policy", "volatile-lru"];
    args.extend_from_slice(&["--appendonly", "yes"]);
    let redis = RedisServer::start_with(&args);
    let out = check(&redis.url(), &[]);
    assert_eq!(code(&out), 1, "{}", show(&out));
    let all = lines(&out);
    let (result, _, detail) = line(&all, "eviction");
    assert_eq!(result, "warn");
    assert_lines(
        detail,
        "maxmemory 3 MB with maxmemory-policy volatile-lru (volatile-* evicts keys \
         with an expiry: every held lock) may evict held locks under memory pressure: \
         use noeviction (CONFIG SET maxmemory-policy noeviction, and in the server's configuration)",
    );
}

#[test]
fn an_unreachable_server_is_one_failed_line_and_exit_69() {
    let (_held, port) = refusing_port();
    let out = check(&format!("redis://127.0.0.1:{port}"), &[]);
    let err = assert_fails(&out, 69);
    assert_lines(
        &err,
        &format!(
            "rlock: check: reachable: 127.0.0.1:{port}: connection refused \
             (is redis-server running on 127.0.0.1:{port}?)"
        ),
    );
    let all = lines(&out);
    assert_eq!(all.len(), 1, "{}", show(&out));
    assert_eq!(
        (all[0].0.as_str(), all[0].1.as_str()),
        ("fail", "reachable")
    );
}

#[test]
fn a_wrong_password_fails_the_reachable_check_without_showing_it() {
    let redis = RedisServer::start_with(&["--requirepass", "right-pw"]);
    let out = check(
        &format!("redis://:wrong-pw-xyz@127.0.0.1:{}", redis.port),
        &[],
    );
    let err = assert_fails(&out, 69);
    assert_lines(
        &err,
        &format!(
            "rlock: check: reachable: 127.0.0.1:{}: authentication failed: \
             wrong user name or password (check the URL or REDISCLI_AUTH)",
            redis.port
        ),
    );
    assert!(!stdout(&out).contains("wrong-pw-xyz") && !err.contains("wrong-pw-xyz"));
}

#[test]
fn config_renamed_away_leaves_eviction_and_persistence_to_info() {
    let redis = RedisServer::start_with(&["--rename-command", "CONFIG", ""]);
    let out = check(&redis.url(), &[]);
    assert_eq!(code(&out), 1, "{}", show(&out));
    let all = lines(&out);
    assert_eq!(all.len(), CHECKS.len(), "{}", show(&out));
    assert_eq!(line(&all, "eviction").0, "ok");
    assert_eq!(line(&all, "persistence").0, "warn");
}

#[test]
fn a_server_that_refuses_info_and_config_is_unknown_never_a_crash() {
    let redis = RedisServer::start_with(FIT);
    redis.cmd::<String>(&[
        "ACL", "SETUSER", "shy", "on", ">shy-pw", "~*", "&*", "+@all", "-info", "-config",
    ]);
    let url = format!("redis://shy:shy-pw@127.0.0.1:{}", redis.port);
    let out = check(&url, &[]);
    // Unanswered is not proven fit: exit 0 would say every check passed.
    assert_eq!(code(&out), 1, "{}", show(&out));
    assert_lines(
        String::from_utf8_lossy(&out.stderr).trim(),
        "rlock: check: 4 unknown (the server would not say): version, eviction, persistence, \
         replicas (see the lines above)",
    );
    let all = lines(&out);
    // (After NOPERM, the server's own words.)
    for (name, says) in [
        ("version", "INFO server refused: NOPERM [..]"),
        (
            "eviction",
            "INFO memory refused: NOPERM [..]; CONFIG GET maxmemory refused: NOPERM [..]",
        ),
        (
            "persistence",
            "INFO persistence refused: NOPERM [..]; CONFIG GET appendonly refused: NOPERM [..]",
        ),
        ("replicas", "INFO replication refused: NOPERM [..]"),
    ] {
        let (result, _, detail) = line(&all, name);
        assert_eq!(result, "unknown", "{name}: {detail}");
        assert_lines(detail, says);
    }
    assert_lines(
        &line(&all, "user").2,
        "authenticated as ACL user shy (ACL WHOAMI)",
    );
}

#[test]
fn a_user_without_time_fails_the_rights_check_naming_it_and_exits_69() {
    let redis = RedisServer::start_with(FIT);
    let mut args = vec!["ACL", "SETUSER", "locker", "on", ">locker-pw"];
    args.extend_from_slice(RULES);
    args.push("-time");
    redis.cmd::<String>(&args);
    let out = check(
        &format!("redis://locker:locker-pw@127.0.0.1:{}", redis.port),
        &[],
    );
    let err = assert_fails(&out, 69);
    let all = lines(&out);
    let (result, _, detail) = line(&all, "rights");
    assert_eq!(result, "fail", "{}", show(&out));
    assert_lines(
        detail,
        "this user may not run TIME on keys under rlock: (NOPERM [..]): rlock cannot work; \
         allow +time (see \"ACL users\" in the README)",
    );
    assert_eq!(line(&all, "script-time").0, "fail");
    assert_lines(
        &err,
        &format!(
            "rlock: check: 127.0.0.1:{}: script-time: TIME refused inside a script ([..]): \
             every lock script reads it; allow +time for this user",
            redis.port
        ),
    );
    assert!(!stdout(&out).contains("locker-pw") && !err.contains("locker-pw"));
}

#[test]
fn the_readmes_acl_rules_pass_and_a_user_without_wait_is_warned() {
    let redis = RedisServer::start_with(FIT);
    let mut args = vec!["ACL", "SETUSER", "locker", "on", ">locker-pw"];
    args.extend_from_slice(RULES);
    redis.cmd::<String>(&args);
    let url = format!("redis://locker:locker-pw@127.0.0.1:{}", redis.port);
    let out = check(&url, &[]);
    assert_eq!(code(&out), 0, "{}", show(&out));
    // The rules leave out ACL WHOAMI: the user is the URL's, whose password
    // the server took.
    let (result, _, detail) = line(&lines(&out), "user").clone();
    assert_eq!(result, "ok");
    assert_lines(
        &detail,
        "authenticated as ACL user locker (the URL's); ACL WHOAMI refused: NOPERM [..]",
    );
    redis.cmd::<String>(&["ACL", "SETUSER", "locker", "-wait"]);
    let out = check(&url, &[]);
    assert_eq!(code(&out), 1, "{}", show(&out));
    let all = lines(&out);
    let (result, _, detail) = line(&all, "rights");
    assert_eq!(result, "warn");
    assert_lines(
        detail,
        "this user may not run WAIT (--min-replicas): allow +wait (see \"ACL users\" in the README)",
    );
}

/// Runs python3 on `json`: fails the test unless it parses and has the
/// contract's shape.
fn assert_json_shape(json: &str, servers: usize) {
    let script = format!(
        "import json,sys\n\
         d=json.loads(sys.stdin.read())\n\
         assert isinstance(d['server'], str), d\n\
         assert len(d['checks']) >= {}, d\n\
         for c in d['checks']:\n    assert c['result'] in ('ok','warn','fail','unknown'), c\n    assert c['name'] and c['detail'] and c['server'], c\n\
         assert len({{c['server'] for c in d['checks']}} - {{d['server']}}) == {}, d\n",
        CHECKS.len() * servers,
        if servers > 1 { servers } else { 0 },
    );
    let mut child = std::process::Command::new("python3")
        .args(["-c", &script])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(json.as_bytes())
        .unwrap();
    assert!(
        child.wait().unwrap().success(),
        "not the contract's JSON: {json}"
    );
}

#[test]
fn json_has_the_server_and_its_checks() {
    let redis = RedisServer::start();
    let out = check(&redis.url(), &["--json"]);
    assert_eq!(code(&out), 1, "{}", show(&out));
    let json = stdout(&out);
    assert_eq!(json.lines().count(), 1, "{json}");
    assert!(json.contains(&format!("\"server\":\"127.0.0.1:{}\"", redis.port)));
    for name in ["persistence", "failover", "clock"] {
        assert!(
            json.contains(&format!("\"name\":\"{name}\",\"server\"")),
            "{name}: {json}"
        );
    }
    assert!(json.contains("\"result\":\"warn\""), "{json}");
    assert_json_shape(&json, 1);
}

#[test]
fn each_server_of_a_quorum_is_checked_and_the_quorum_decides_the_exit() {
    let mut servers = quorum::servers_with(3, FIT);
    let urls = || {
        servers
            .iter()
            .map(|s| s.url())
            .collect::<Vec<_>>()
            .join(",")
    };
    let all_up = urls();
    let out = check(&all_up, &[]);
    assert_eq!(code(&out), 0, "{}", show(&out));
    let all = lines(&out);
    assert_eq!(all.len(), 3 * CHECKS.len() + 1, "{}", show(&out));
    for server in &servers {
        let here = format!("127.0.0.1:{}", server.port);
        let count = all
            .iter()
            .filter(|(_, _, d)| {
                d.strip_prefix(&here)
                    .is_some_and(|rest| rest.starts_with([':', ' ']))
            })
            .count();
        assert_eq!(count, CHECKS.len(), "{here} {}", show(&out));
    }
    let (result, _, detail) = line(&all, "quorum");
    assert_eq!(result, "ok");
    assert_lines(detail, "Redlock over 3 servers, quorum 2: 3 fit for locks");
    let json = stdout(&output(rlock(&all_up).args(["check", "--json"])));
    assert_json_shape(&json, 3);

    // One down: the quorum carries on, with a warning.
    servers[0].stop();
    let out = check(&all_up, &[]);
    assert_eq!(code(&out), 1, "{}", show(&out));
    let all = lines(&out);
    assert_eq!(line(&all, "reachable").0, "fail");
    assert_eq!(line(&all, "quorum").0, "warn");

    // Two down: no quorum.
    servers[1].stop();
    let out = check(&all_up, &[]);
    let err = assert_fails(&out, 69);
    assert_lines(
        &err,
        "rlock: check: Redlock over 3 servers, quorum 2: 1 fit for locks; a lock needs 2: \
         fix the failures above",
    );
    assert_eq!(line(&lines(&out), "quorum").0, "fail");
}

#[test]
fn file_urls_check_the_lock_directory() {
    let dir = Scratch::new();
    let locks = dir.path().join("locks");
    let out = output(
        bare()
            .arg("--url")
            .arg(format!("file:{}", locks.display()))
            .arg("check"),
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
    let all = lines(&out);
    assert_eq!(line(&all, "directory").0, "ok");
    assert_eq!(line(&all, "topology").0, "ok");
}

#[test]
fn a_stalled_server_fails_within_the_connect_timeout_not_once_per_check() {
    let redis = RedisServer::start();
    redis.freeze();
    let started = std::time::Instant::now();
    let out = output(rlock(&redis.url()).args(["--connect-timeout", "1s", "check"]));
    let took = started.elapsed();
    redis.thaw();
    let err = assert_fails(&out, 69);
    assert_lines(
        &err,
        &format!(
            "rlock: check: reachable: 127.0.0.1:{}: PING: no reply within 1s",
            redis.port
        ),
    );
    assert!(took < std::time::Duration::from_secs(5), "took {took:?}");
    let all = lines(&out);
    assert_eq!(all.len(), 1, "{}", show(&out));
    assert_eq!(
        (all[0].0.as_str(), all[0].1.as_str()),
        ("fail", "reachable")
    );
}

/// A server that runs a script's commands one by one (here a proxy in front
/// of Redis that does so for the probe's script) fails the atomicity check:
/// rlock cannot exclude anything there.
#[test]
fn a_server_running_scripts_as_separate_commands_fails_the_atomicity_check() {
    use std::io::BufRead;
    let redis = RedisServer::start_with(FIT);
    let root = env!("CARGO_MANIFEST_DIR");
    let mut child = std::process::Command::new("python3")
        .arg(format!(
            "{root}/tests/integration/support/non_atomic_proxy.py"
        ))
        .arg(redis.port.to_string())
        .arg(format!("{root}/src/backend/lua/check_atomic.lua"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    let stdout_pipe = child.stdout.take().unwrap();
    let _proxy = crate::support::process::Proc::new(child);
    let mut port = String::new();
    std::io::BufReader::new(stdout_pipe)
        .read_line(&mut port)
        .unwrap();
    let port = port.trim();
    assert!(!port.is_empty(), "the proxy did not start");
    let out = check(&format!("redis://127.0.0.1:{port}"), &[]);
    let err = assert_fails(&out, 69);
    let says = "another connection read the counter at [..] while each script adds 1000 \
                (read [..]): it saw a script half done, so the server does not run scripts \
                atomically and no lock excludes anything there; use Redis or Valkey \
                (or the server's transaction mode)";
    assert_lines(
        &err,
        &format!("rlock: check: 127.0.0.1:{port}: atomic-scripts: {says}"),
    );
    let all = lines(&out);
    let (result, _, detail) = line(&all, "atomic-scripts");
    assert_eq!(result, "fail", "{}", show(&out));
    assert_lines(detail, says);
    // Everything else about the server behind the proxy is fine.
    for (result, name, detail) in &all {
        if name != "atomic-scripts" {
            assert_eq!(result, "ok", "{name}: {detail}");
        }
    }
}

#[test]
fn one_server_has_no_failover_to_ride_out_and_a_clock_in_step_with_this_host() {
    let redis = RedisServer::start_with(FIT);
    let out = check(&redis.url(), &[]);
    assert_eq!(code(&out), 0, "{}", show(&out));
    let all = lines(&out);
    let (result, _, detail) = line(&all, "failover");
    assert_eq!(result, "ok", "{detail}");
    assert_lines(
        detail,
        "no Sentinel or Cluster: no automatic failover; \
         the lease rides out server outages up to 17.4s (--ttl 30s, --kill-after 10s)",
    );
    let (result, _, detail) = line(&all, "clock");
    assert_eq!(result, "ok", "{detail}");
    assert_lines(detail, "server clock 0.0[..]s [..] this host (±[..]s)");
    // A short ttl is no warning on one server: there is no failover to outlast.
    let out = check(&redis.url(), &["--ttl", "3s"]);
    assert_eq!(code(&out), 0, "{}", show(&out));
    let all = lines(&out);
    let detail = &line(&all, "failover").2;
    assert_lines(
        detail,
        "no Sentinel or Cluster: no automatic failover; \
         the lease rides out server outages up to 1.7s (--ttl 3s, --kill-after 1s)",
    );
}

#[test]
fn a_server_clock_seconds_apart_from_this_hosts_warns_naming_ntp() {
    let server = SteppedServer::start();
    server.step_to(5_000);
    let out = check(&server.redis.url(), &[]);
    let err = assert_fails(&out, 1);
    assert_lines(
        &err,
        "rlock: check: 2 warning(s): persistence, clock (see the lines above)",
    );
    let all = lines(&out);
    let (result, _, detail) = line(&all, "clock");
    assert_eq!(result, "warn", "{}", show(&out));
    assert!((4.5..5.5).contains(&seconds_apart(detail)), "{detail}");
    assert_lines(
        detail,
        "server clock [..]s ahead of this host (±[..]s): run NTP (chrony, ntpd or systemd-timesyncd) on both hosts; \
         rlock judges leases by the server's clock alone, but the times `status` shows \
         and `history`'s timestamps mix both clocks",
    );
    server.step_to(-5_000);
    let out = check(&server.redis.url(), &[]);
    let all = lines(&out);
    let (result, _, detail) = line(&all, "clock");
    assert_eq!(result, "warn", "{}", show(&out));
    assert!((4.5..5.5).contains(&seconds_apart(detail)), "{detail}");
    assert_lines(
        detail,
        "server clock [..]s behind this host (±[..]s): run NTP (chrony, ntpd or systemd-timesyncd) on both hosts; \
         rlock judges leases by the server's clock alone, but the times `status` shows \
         and `history`'s timestamps mix both clocks",
    );
}

/// The seconds in a clock line: `server clock 5.002s ahead of ...`.
fn seconds_apart(detail: &str) -> f64 {
    detail
        .strip_prefix("server clock ")
        .and_then(|rest| rest.split_once('s'))
        .and_then(|(secs, _)| secs.parse().ok())
        .unwrap_or_else(|| panic!("no seconds in {detail:?}"))
}

#[test]
fn a_sentinel_failover_is_judged_by_the_ttl_and_a_short_one_warns_with_the_fix() {
    let (_primary, _replica, sentinels) = topology();
    let url = sentinels.url();
    // The fixtures run without AOF: persistence warns whatever the failover.
    let out = check(&url, &[]);
    assert_eq!(code(&out), 1, "{}", show(&out));
    let all = lines(&out);
    let (result, _, detail) = line(&all, "failover");
    assert_eq!(result, "ok", "{}", show(&out));
    // support/sentinel.rs: down-after 1000 ms, failover-timeout 5000 ms.
    assert_lines(
        detail,
        "Sentinel: down-after-milliseconds 1000, failover-timeout 5000 \
         (a failover that fails is tried again after twice that); a failover takes about 4.0s \
         (an estimate: down-after-milliseconds plus ~3s of election and promotion), \
         within the 17.4s outage the lease rides out (--ttl 30s, --kill-after 10s)",
    );
    assert_eq!(line(&all, "clock").0, "ok", "{}", show(&out));

    let out = check(&url, &["--ttl", "3s"]);
    let err = assert_fails(&out, 1);
    assert_lines(
        &err,
        "rlock: check: 2 warning(s): failover, persistence (see the lines above)",
    );
    let (result, _, detail) = line(&lines(&out), "failover").clone();
    assert_eq!(result, "warn", "{}", show(&out));
    assert_lines(
        &detail,
        "Sentinel: down-after-milliseconds 1000, failover-timeout 5000 \
         (a failover that fails is tried again after twice that); a failover takes about 4.0s \
         (an estimate: down-after-milliseconds plus ~3s of election and promotion), \
         longer than the 1.7s outage the lease rides out (--ttl 3s, --kill-after 1s): \
         a holder's COMMAND may be stopped (exit 70) by a failover; \
         use --ttl 7s or more, or a shorter down-after-milliseconds",
    );

    // RLOCK_TTL is read as run reads it.
    let out = output(rlock(&url).arg("check").env("RLOCK_TTL", "3s"));
    assert_eq!(line(&lines(&out), "failover").0, "warn", "{}", show(&out));
}

#[test]
fn sentinels_that_refuse_sentinel_master_leave_the_failover_unknown() {
    let (_primary, _replica, sentinels) = topology();
    for port in &sentinels.ports {
        let mut con = redis::Client::open(format!("redis://127.0.0.1:{port}"))
            .unwrap()
            .get_connection()
            .unwrap();
        let _: String = redis::cmd("ACL")
            .arg("SETUSER")
            .arg("default")
            .arg("-sentinel|master")
            .query(&mut con)
            .unwrap();
    }
    let out = check(&sentinels.url(), &["--ttl", "3s"]);
    let all = lines(&out);
    let (result, _, detail) = line(&all, "failover");
    assert_eq!(result, "unknown", "{}", show(&out));
    assert_lines(
        detail,
        "sentinel 127.0.0.1:[..]: SENTINEL MASTER refused: NOPERM [..]: \
         the failover timing is unknown",
    );
    // The master is still found: only the timing could not be read.
    assert_eq!(line(&all, "topology").0, "ok", "{}", show(&out));
}

#[test]
fn a_cluster_failover_is_judged_by_its_node_timeout_against_the_ttl() {
    let cluster = Cluster::start();
    let url = cluster.url();
    // Redis's default cluster-node-timeout, 15 s: about 18 s, longer than
    // the 17.4 s the default lease rides out.
    let out = check(&url, &[]);
    assert_eq!(code(&out), 1, "{}", show(&out));
    let all = lines(&out);
    let (result, _, detail) = line(&all, "failover");
    assert_eq!(result, "warn", "{}", show(&out));
    assert_lines(
        detail,
        "Cluster: cluster-node-timeout 15000 (on 127.0.0.1:[..]); a failover takes about 18.0s \
         (an estimate: cluster-node-timeout plus ~3s of election and promotion), \
         longer than the 17.4s outage the lease rides out (--ttl 30s, --kill-after 10s): \
         a holder's COMMAND may be stopped (exit 70) by a failover; \
         use --ttl 31s or more, or a shorter cluster-node-timeout",
    );

    for node in &cluster.nodes {
        node.cmd::<String>(&["CONFIG", "SET", "cluster-node-timeout", "2000"]);
    }
    let out = check(&url, &[]);
    let all = lines(&out);
    let (result, _, detail) = line(&all, "failover");
    assert_eq!(result, "ok", "{}", show(&out));
    assert_lines(
        detail,
        "Cluster: cluster-node-timeout 2000 (on 127.0.0.1:[..]); a failover takes about 5.0s \
         (an estimate: cluster-node-timeout plus ~3s of election and promotion), \
         within the 17.4s outage the lease rides out (--ttl 30s, --kill-after 10s)",
    );
    // The clock of every master is read.
    for node in &cluster.nodes {
        let here = format!("127.0.0.1:{}: ", node.port);
        assert!(
            all.iter()
                .any(|(r, n, d)| r == "ok" && n == "clock" && d.starts_with(&here)),
            "clock of {here}: {}",
            show(&out)
        );
    }

    let out = check(&url, &["--ttl", "3s"]);
    let all = lines(&out);
    let (result, _, detail) = line(&all, "failover");
    assert_eq!(result, "warn", "{}", show(&out));
    assert_lines(
        detail,
        "Cluster: cluster-node-timeout 2000 (on 127.0.0.1:[..]); a failover takes about 5.0s \
         (an estimate: cluster-node-timeout plus ~3s of election and promotion), \
         longer than the 1.7s outage the lease rides out (--ttl 3s, --kill-after 1s): \
         a holder's COMMAND may be stopped (exit 70) by a failover; \
         use --ttl 9s or more, or a shorter cluster-node-timeout",
    );

    // A user who may not run CONFIG cannot read the node timeout.
    for node in &cluster.nodes {
        node.cmd::<String>(&[
            "ACL", "SETUSER", "shy", "on", ">shy-pw", "~*", "&*", "+@all", "-config",
        ]);
    }
    let seeds = url.replace("redis+cluster://", "redis+cluster://shy:shy-pw@");
    let out = check(&seeds, &[]);
    let (result, _, detail) = line(&lines(&out), "failover").clone();
    assert_eq!(result, "unknown", "{}", show(&out));
    assert_lines(
        &detail,
        "CONFIG GET cluster-node-timeout refused: NOPERM [..]: the failover timing is unknown",
    );
}
