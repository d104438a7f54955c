//! `rlock check` on one server (README: "Is a server fit for locks?"): what
//! rlock's guarantees rest on, asked of the server itself, one [`Finding`]
//! each. A question the server refuses (CONFIG disabled or renamed, an INFO
//! section or ACL command the user may not run, as managed services do) is
//! `unknown` with the server's own words, never an error: the other checks
//! still run.

use std::time::{Duration, Instant};

use redis::RedisError;

use super::check_clock::clock;
use super::check_failover::{Terms, failover};
use super::check_persistence::persistence;
use super::check_probes::{Reach, Setting, field, is_refusal, probe_keys, refused};
use super::diagnose::server_said;
use super::topology::Source;
use super::{Standalone, StandaloneSession};
use crate::backend::fitness::{Finding, Verdict};
use crate::backend::script;
use crate::error::Cause;

/// The oldest Redis rlock's tests run on; older 6.x is expected to work.
const TESTED_FLOOR: (u32, u32) = (6, 2);

impl Standalone {
    /// Every check on this server (through its sentinels or cluster seeds),
    /// keys probed under `prefix`, the failover timing judged by a lease of
    /// `ttl` with `kill_after` (None: the default). An unreachable server is
    /// one failed finding.
    pub fn check(&self, prefix: &str, ttl: Duration, kill_after: Option<Duration>) -> Vec<Finding> {
        let terms = Terms { ttl, kill_after };
        let server = self.spec.display.as_str();
        let (mut session, reachable) = match self.reach() {
            Ok(reached) => reached,
            Err(detail) => return vec![Finding::new("reachable", server, Verdict::Fail, detail)],
        };
        let reach = match &*session.source {
            Source::Sentinel(_) => Reach::Sentinel,
            Source::Cluster(_) => Reach::Cluster,
            _ => Reach::Single,
        };
        let mut found = vec![("reachable", Verdict::Ok, reachable)];
        found.extend(probes(&mut session, prefix, reach, terms));
        let mut out: Vec<Finding> = found
            .into_iter()
            .map(|(name, verdict, detail)| Finding::new(name, server, verdict, detail))
            .collect();
        out.extend(settings_of_each(&mut session, reach, server));
        // A server that stops answering cannot keep a lease renewed.
        if let Some(cause) = session.lost.take() {
            out.push(Finding::new(
                "answering",
                server,
                Verdict::Fail,
                format!("stopped answering during the check: {cause}"),
            ));
        }
        out
    }

    /// A session whose server answered PING, and what `reachable` says of
    /// it; or why it could not be reached.
    fn reach(&self) -> Result<(StandaloneSession, String), String> {
        let server = &self.spec.display;
        let started = Instant::now();
        let mut session = self.open(self.spec.timeout).map_err(|err| {
            let cause = match err.cause() {
                Cause::Unavailable { cause, .. } | Cause::Unreachable { cause, .. } => {
                    cause.clone()
                }
                _ => err.to_string(),
            };
            format!("{server}: {cause}")
        })?;
        match session.ask(|con| redis::cmd("PING").query::<String>(con)) {
            Ok(_) => {
                let detail = format!(
                    "{} answered PING (connected in {} ms)",
                    session.address(),
                    started.elapsed().as_millis()
                );
                Ok((session, detail))
            }
            Err(err) => Err(format!("{server}: PING: {}", session.diagnosis(&err))),
        }
    }
}

/// What each lock meets: the user, the topology, and the probes, on the node
/// of the probe key's slot.
fn probes(
    session: &mut StandaloneSession,
    prefix: &str,
    reach: Reach,
    terms: Terms,
) -> Vec<(&'static str, Verdict, String)> {
    let mut out = Vec::new();
    let (v, d) = user(session);
    out.push(("user", v, d));
    let (v, d) = session.topology(reach);
    out.push(("topology", v, d));
    let (v, d) = failover(session, reach, terms);
    out.push(("failover", v, d));
    let keys = probe_keys(prefix);
    let (scripts, time) = scripts(session);
    let scripts_run = scripts.0 == Verdict::Ok;
    out.push(("scripts", scripts.0, scripts.1));
    out.push(("script-time", time.0, time.1));
    let (v, d) = if scripts_run {
        session.atomic(&keys.hash)
    } else {
        (Verdict::Unknown, "not tried: scripts do not run".to_owned())
    };
    out.push(("atomic-scripts", v, d));
    let (v, d) = session.blpop(&keys.list);
    out.push(("blpop-timeout", v, d));
    let (v, d) = session.rights(prefix, &keys);
    out.push(("rights", v, d));
    out
}

/// The server's own settings: on a Cluster, of every master in turn (a lock
/// lives on the master of its slot), each line naming it.
fn settings_of_each(session: &mut StandaloneSession, reach: Reach, server: &str) -> Vec<Finding> {
    let masters = match reach {
        Reach::Cluster => match cluster_masters(session) {
            Ok(masters) => masters,
            Err(why) => return vec![Finding::new("settings", server, Verdict::Unknown, why)],
        },
        _ => Vec::new(),
    };
    if masters.is_empty() {
        return settings(session, reach)
            .into_iter()
            .map(|(name, verdict, detail)| Finding::new(name, server, verdict, detail))
            .collect();
    }
    let mut out = Vec::new();
    for master in masters {
        session.node = Some(master.clone());
        session.con = None;
        for (name, verdict, detail) in settings(session, reach) {
            out.push(Finding::new(
                name,
                &master,
                verdict,
                format!("{master}: {detail}"),
            ));
        }
    }
    out
}

/// The checks of one server's own settings.
fn settings(session: &mut StandaloneSession, reach: Reach) -> Vec<(&'static str, Verdict, String)> {
    let (v, d) = version(session);
    let mut out = vec![("version", v, d)];
    let (v, d) = eviction(session);
    out.push(("eviction", v, d));
    let (v, d) = persistence(session);
    out.push(("persistence", v, d));
    let (v, d) = replicas(session, reach);
    out.push(("replicas", v, d));
    let (v, d) = clock(session);
    out.push(("clock", v, d));
    out
}

/// A Cluster's masters (`CLUSTER SLOTS`), or why they are not known.
fn cluster_masters(session: &mut StandaloneSession) -> Result<Vec<String>, String> {
    session
        .ask(|con| {
            redis::cmd("CLUSTER")
                .arg("SLOTS")
                .query::<Vec<redis::Value>>(con)
        })
        .map(|slots| super::list::masters_of(&slots))
        .map_err(|err| refused("CLUSTER SLOTS", &err))
}

/// `ACL WHOAMI`: the user rlock is authenticated as (known from the URL
/// when the server will not say: a least-privilege user need not be allowed it).
fn user(session: &mut StandaloneSession) -> (Verdict, String) {
    match session.ask(|con| redis::cmd("ACL").arg("WHOAMI").query::<String>(con)) {
        // Works, so ok (a fit server passes whatever its user); the
        // production checklist's advice goes in the detail.
        Ok(name) if name == "default" => (
            Verdict::Ok,
            "authenticated as the default user (ACL WHOAMI), which may run every command on every key: in production give rlock an ACL user of its own, limited to its prefix (README: ACL users)".into(),
        ),
        Ok(name) => (
            Verdict::Ok,
            format!("authenticated as ACL user {name} (ACL WHOAMI)"),
        ),
        // Refused: the connection authenticated, so it is the user the URL
        // names when a password went with it, else the default user.
        Err(err) if is_refusal(&err) => {
            let settings = session.spec.info.redis_settings();
            let with_password =
                settings.password().is_some() || session.spec.password_from.is_some();
            let user = match settings.username() {
                Some(user) if with_password => format!("ACL user {user} (the URL's)"),
                _ => "the default user (the URL sends no user with a password)".into(),
            };
            (
                Verdict::Ok,
                format!("authenticated as {user}; {}", refused("ACL WHOAMI", &err)),
            )
        }
        Err(err) => (Verdict::Unknown, refused("ACL WHOAMI", &err)),
    }
}

/// The server's name and version (`INFO server`): Redis before 6.0 cannot
/// block for less than a second; before the tested floor it is untested.
fn version(session: &mut StandaloneSession) -> (Verdict, String) {
    let info = match session.info_section("server") {
        Ok(info) => info,
        Err(err) => return (Verdict::Unknown, refused("INFO server", &err)),
    };
    if field(&info, "redis_mode") == Some("sentinel") {
        return (
            Verdict::Fail,
            "this is a Sentinel, not a Redis server: use redis+sentinel://HOST:PORT/MASTER".into(),
        );
    }
    if let Some(v) = field(&info, "valkey_version") {
        return (Verdict::Ok, format!("Valkey {v}"));
    }
    if let Some(v) = field(&info, "dragonfly_version") {
        return (
            Verdict::Warn,
            format!(
                "Dragonfly {v}: not tested with rlock; run the other checks' probes before relying on it"
            ),
        );
    }
    let name = match field(&info, "server_name") {
        Some(name) if !name.is_empty() => name.to_owned(),
        _ => "Redis".to_owned(),
    };
    let Some(v) = field(&info, "redis_version") else {
        return (Verdict::Unknown, "INFO server names no version".into());
    };
    let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    if major < 6 {
        (
            Verdict::Fail,
            format!(
                "{name} {v}: rlock needs Redis 6.0 or newer (sub-second BLPOP timeouts, ACL users): upgrade"
            ),
        )
    } else if (major, minor) < TESTED_FLOOR {
        (
            Verdict::Warn,
            format!(
                "{name} {v}: older than {}.{}, the oldest version rlock is tested on: upgrade",
                TESTED_FLOOR.0, TESTED_FLOOR.1
            ),
        )
    } else {
        (Verdict::Ok, format!("{name} {v}"))
    }
}

/// SCRIPT LOAD and EVALSHA of a script that reads TIME, as the lock scripts do.
fn scripts(session: &mut StandaloneSession) -> ((Verdict, String), (Verdict, String)) {
    let not_tried = (Verdict::Unknown, "not tried: scripts do not run".to_owned());
    let fail = |what: &str, err: &RedisError| {
        (
            Verdict::Fail,
            format!(
                "{what} refused: {}; rlock's locks are Lua scripts (see \"ACL users\" in the README)",
                server_said(err)
            ),
        )
    };
    let sha = match session.ask(|con| {
        redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(script::CHECK_SCRIPT.code())
            .query::<String>(con)
    }) {
        Ok(sha) => sha,
        Err(err) => return (fail("SCRIPT LOAD", &err), not_tried),
    };
    let reply = session.ask(|con| {
        redis::cmd("EVALSHA")
            .arg(&sha)
            .arg(0)
            .query::<Vec<redis::Value>>(con)
    });
    let reply = match reply {
        Ok(reply) => reply,
        Err(err) => return (fail("EVALSHA", &err), not_tried),
    };
    let ran = matches!(reply.first(), Some(redis::Value::Int(1)));
    let clock = reply.get(1).cloned().unwrap_or(redis::Value::Nil);
    let loaded = (
        Verdict::Ok,
        "a script loads (SCRIPT LOAD) and runs (EVALSHA)".to_owned(),
    );
    let time = if ran {
        (
            Verdict::Ok,
            "a script may read the server's clock (TIME), which sets every lease's end".to_owned(),
        )
    } else {
        let why = match clock {
            redis::Value::BulkString(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            redis::Value::SimpleString(text) => text,
            other => format!("{other:?}"),
        };
        (
            Verdict::Fail,
            format!(
                "TIME refused inside a script ({}): every lock script reads it; allow +time for this user",
                without_lua_position(&one_line(&why))
            ),
        )
    };
    (loaded, time)
}

/// `maxmemory` with an evicting policy may drop a held lock's keys.
fn eviction(session: &mut StandaloneSession) -> (Verdict, String) {
    let max = session.setting(&Setting::new("memory", "maxmemory", "maxmemory"));
    let policy = session.setting(&Setting::new(
        "memory",
        "maxmemory_policy",
        "maxmemory-policy",
    ));
    let (max, policy) = match (max, policy) {
        (Ok(max), Ok(policy)) => (max, policy),
        (Err(why), _) | (_, Err(why)) => return (Verdict::Unknown, why),
    };
    let max = bytes(&max);
    if max == "0" {
        return (
            Verdict::Ok,
            format!("no maxmemory (maxmemory-policy {policy}): keys are never evicted"),
        );
    }
    if policy == "noeviction" {
        return (
            Verdict::Ok,
            format!(
                "maxmemory {max} with maxmemory-policy noeviction: held locks are never evicted (writes fail when memory is full)"
            ),
        );
    }
    let which = if policy.starts_with("volatile") {
        " (volatile-* evicts keys with an expiry: every held lock)"
    } else {
        ""
    };
    (
        Verdict::Warn,
        format!(
            "maxmemory {max} with maxmemory-policy {policy}{which} may evict held locks under memory pressure: use noeviction (CONFIG SET maxmemory-policy noeviction, and in the server's configuration)"
        ),
    )
}

/// Replicas connected to the master (`INFO replication`).
fn replicas(session: &mut StandaloneSession, reach: Reach) -> (Verdict, String) {
    let info = match session.info_section("replication") {
        Ok(info) => info,
        Err(err) => return (Verdict::Unknown, refused("INFO replication", &err)),
    };
    if field(&info, "role") == Some("slave") {
        let master = match (field(&info, "master_host"), field(&info, "master_port")) {
            (Some(host), Some(port)) => format!(
                " of {}",
                crate::backend::url::host_port(host, port.parse().unwrap_or(0))
            ),
            _ => String::new(),
        };
        return (
            Verdict::Fail,
            format!(
                "this server is a replica{master}: locks are written on the master; point rlock at the master (or at its sentinels)"
            ),
        );
    }
    let count: usize = field(&info, "connected_slaves")
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let online = (0..count)
        .filter(|i| field(&info, &format!("slave{i}")).is_some_and(|s| s.contains("state=online")))
        .count();
    match (count, reach) {
        (0, Reach::Sentinel) => (
            Verdict::Warn,
            "no replica connected: the sentinels have nothing to fail over to".into(),
        ),
        (0, Reach::Cluster) => (
            Verdict::Ok,
            "no replicas (if this master fails, the locks in its slots cannot be taken until it is back)".into(),
        ),
        (0, Reach::Single) => (
            Verdict::Ok,
            "no replicas (none needed for one server; --min-replicas N needs N)".into(),
        ),
        (n, _) => (
            Verdict::Ok,
            format!("{n} replica(s) connected, {online} online (--min-replicas up to {online} can be met)"),
        ),
    }
}

/// A byte count as INFO gives it, shown in MB or GB (e.g. `3mb` is `3 MB`).
fn bytes(text: &str) -> String {
    const MB: u64 = 1024 * 1024;
    match text.trim().parse::<u64>() {
        Ok(n) if n >= 1024 * MB && n % (1024 * MB) == 0 => format!("{} GB", n / (1024 * MB)),
        Ok(n) if n >= MB && n % MB == 0 => format!("{} MB", n / MB),
        Ok(n) if n >= MB => format!("{:.1} MB", n as f64 / MB as f64),
        _ => text.trim().to_owned(),
    }
}

/// A Lua error without its `@user_script: 8: ` position (Redis 6 adds it).
fn without_lua_position(text: &str) -> &str {
    match text.strip_prefix("@user_script:") {
        Some(rest) => rest
            .trim_start()
            .trim_start_matches(|c: char| c.is_ascii_digit())
            .trim_start_matches(':')
            .trim_start(),
        None => text,
    }
}

fn one_line(text: &str) -> String {
    text.split(['\n', '\r'])
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_sizes_read_as_configured() {
        assert_eq!(bytes("3145728"), "3 MB");
        assert_eq!(bytes("1073741824"), "1 GB");
        assert_eq!(bytes("1000"), "1000");
        assert_eq!(bytes("0"), "0");
    }

    #[test]
    fn lua_positions_are_dropped() {
        assert_eq!(
            without_lua_position(
                "@user_script: 8: The user executing the script can't run this command"
            ),
            "The user executing the script can't run this command"
        );
        assert_eq!(without_lua_position("ERR ACL failure"), "ERR ACL failure");
    }
}
