//! Why a hold was found gone, as far as the server can tell: read once, with
//! INFO, when a renewal or a release finds the hold missing. A restart shows
//! as an uptime shorter than the hold; an eviction as `evicted_keys` grown
//! under an evicting `maxmemory-policy` (managed caches default to
//! `volatile-lru`, which evicts keys with a TTL: every key of a held lock).

use std::time::Duration;

/// How long the server is asked why a hold is gone: a loss's whole ending
/// (the release and the history after it) has 2.5 s.
pub(super) const ASKING_WHY: Duration = Duration::from_millis(500);

/// What INFO says that bears on a lost hold.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Snapshot {
    pub uptime: Option<Duration>,
    pub evicted: Option<u64>,
    pub policy: Option<String>,
    pub maxmemory: Option<u64>,
    /// The server was promoted from a replica since it started (a failover;
    /// `second_repl_offset` is -1 on a server that was always a master).
    pub promoted: bool,
}

/// Reads the fields of INFO's `server`, `memory` and `stats` sections.
pub(super) fn parse(info: &str) -> Snapshot {
    let mut snapshot = Snapshot::default();
    for line in info.lines() {
        let Some((field, value)) = line.trim_end().split_once(':') else {
            continue;
        };
        match field {
            "uptime_in_seconds" => snapshot.uptime = value.parse().ok().map(Duration::from_secs),
            "evicted_keys" => snapshot.evicted = value.parse().ok(),
            "maxmemory_policy" => snapshot.policy = Some(value.to_owned()),
            "maxmemory" => snapshot.maxmemory = value.parse().ok(),
            "second_repl_offset" => snapshot.promoted = value.parse::<i64>().is_ok_and(|o| o >= 0),
            _ => {}
        }
    }
    snapshot
}

/// The likely cause, for the one line that reports the loss. `evicted_before`
/// is `evicted_keys` while the hold was known to be ours (None: not read);
/// `held_for` how long ago the hold began (None: not known here);
/// `reconnected` whether the asking session's connection was replaced since
/// it last saw the hold (a restart closes every connection).
pub(super) fn cause(
    now: &Snapshot,
    evicted_before: Option<u64>,
    held_for: Option<Duration>,
    reconnected: bool,
) -> String {
    if let (Some(uptime), Some(held_for)) = (now.uptime, held_for) {
        // The uptime is a difference of whole seconds of the wall clock: the
        // server may have been up for up to a second more or less.
        const SLACK: Duration = Duration::from_secs(1);
        if uptime + SLACK <= held_for {
            return format!(
                "lost in a server restart: the server has been up for {}, the hold began {} ago \
                 {WITHOUT_AOF}",
                seconds(uptime),
                seconds(held_for)
            );
        }
        if reconnected && uptime < held_for + SLACK {
            return format!(
                "most likely lost in a server restart: the server has been up for about {}, \
                 as long as the hold (it began {} ago) {WITHOUT_AOF}",
                seconds(uptime),
                crate::lock::lease::tenths(held_for)
            );
        }
    }
    let policy = now.policy.as_deref().unwrap_or_default();
    let evicting = now.maxmemory.unwrap_or(0) > 0 && !policy.is_empty() && policy != "noeviction";
    let evicted = now.evicted.unwrap_or(0);
    match evicted_before {
        Some(before) if evicted > before => {
            return format!(
                "evicted under memory pressure: the server evicted {} keys while it was held \
                 (maxmemory-policy {policy}; use noeviction)",
                evicted - before
            );
        }
        None if evicting && evicted > 0 => {
            return format!(
                "most likely evicted under memory pressure (maxmemory-policy {policy}, {evicted} \
                 keys evicted since the server started; use noeviction)"
            );
        }
        _ => {}
    }
    // A run's hold cannot have expired: rlock kept its lease. A script's
    // (`acquire`) may have.
    let what = match held_for {
        Some(_) => "released by force or deleted by another client",
        None => "expired, released by force, or deleted by another client",
    };
    if now.promoted {
        // A session that followed the failover names it; one opened after
        // it (a dead rlock's guardian) sees only that there was one, at some
        // time since the server started: the last of the likely causes.
        return format!(
            "{what}, or lost in a failover: the server neither restarted nor evicted keys, \
             and was promoted from a replica since it started"
        );
    }
    format!("{what}: the server neither restarted nor evicted keys")
}

const WITHOUT_AOF: &str = "(without appendonly, a restart keeps only what the server last saved)";

/// "12s", "1m 5s": whole seconds.
fn seconds(d: Duration) -> String {
    humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: &str = "# Server\r\nredis_version:7.0.15\r\nuptime_in_seconds:3\r\n\r\n# Memory\r\nmaxmemory:3145728\r\nmaxmemory_policy:volatile-lru\r\n# Stats\r\nevicted_keys:2175\r\n";

    #[test]
    fn info_is_read_field_by_field() {
        let s = parse(INFO);
        assert_eq!(s.uptime, Some(Duration::from_secs(3)));
        assert_eq!(s.evicted, Some(2175));
        assert_eq!(s.policy.as_deref(), Some("volatile-lru"));
        assert_eq!(s.maxmemory, Some(3_145_728));
    }

    #[test]
    fn a_restart_comes_first_then_an_eviction_then_force() {
        let s = parse(INFO);
        let held = Some(Duration::from_secs(10));
        assert!(cause(&s, None, held, false).starts_with("lost in a server restart"));
        // Up 3 s by whole seconds of the clock: anywhere from 2 to 4 s.
        let young = Some(Duration::from_millis(3500));
        assert!(cause(&s, None, young, true).starts_with(
            "most likely lost in a server restart: the server has been up for about 3s, \
             as long as the hold (it began 3.5s ago)"
        ));
        // On the connection that last saw the hold: no restart came between.
        assert!(!cause(&s, None, young, false).contains("restart"));
        let older = Some(Duration::from_millis(1900));
        assert!(cause(&s, None, older, true).starts_with("most likely evicted"));
        assert!(
            cause(&s, None, Some(Duration::from_secs(4)), false)
                .starts_with("lost in a server restart")
        );
        let s = Snapshot {
            uptime: Some(Duration::from_secs(100)),
            ..parse(INFO)
        };
        assert!(
            cause(&s, Some(2000), held, false)
                .starts_with("evicted under memory pressure: the server evicted 175 keys")
        );
        assert!(cause(&s, None, held, false).starts_with("most likely evicted"));
        assert!(cause(&s, Some(2175), held, false).starts_with("released by force"));
        let calm = Snapshot {
            policy: Some("noeviction".into()),
            ..s
        };
        assert!(cause(&calm, None, held, false).starts_with("released by force"));
        assert!(!parse(&format!("{INFO}# Replication\r\nsecond_repl_offset:-1\r\n")).promoted);
        assert!(
            parse(&format!(
                "{INFO}# Replication\r\nsecond_repl_offset:8812\r\n"
            ))
            .promoted
        );
        let promoted = Snapshot {
            promoted: true,
            ..calm
        };
        assert!(cause(&promoted, None, None, false).starts_with(
            "expired, released by force, or deleted by another client, or lost in a failover"
        ));
    }
}
