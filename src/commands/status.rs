//! `status` and `list` (README: "Who holds a lock?"): who holds a lock, for how long, who
//! waits. Text other hosts wrote (host names, command lines) is sanitized before
//! it reaches a terminal; owner tokens are never shown.

use std::fmt::Write as _;
use std::time::{Duration, UNIX_EPOCH};

use crate::backend::{LockStatus, Session, WaiterStatus};
use crate::config::Config;
use crate::error::Result;
use crate::exit::Exit;
use crate::lock::clock::now_ms;
use crate::lock::kind::Kind;
use crate::lock::name::{Dialect, LockName};
use crate::report::{self, json_string};

/// `rlock status [NAME...] [--json | --check]`. A lock it cannot see (the
/// server unreachable, a lock directory it may not read) is an error (69),
/// never "free".
pub fn status(
    config: &Config,
    names: &[LockName],
    json: bool,
    check: bool,
    redisson: bool,
) -> Result<Exit> {
    let names: Vec<String> = names.iter().map(|n| n.as_str().to_owned()).collect();
    refuse_redisson(config, redisson)?;
    let backend = config.backend_for_reading(Dialect::redisson_if(redisson))?;
    let mut session = backend
        .connect()
        .map_err(|e| e.in_lock(&names.join(", ")))?;
    let names = match (names.as_slice(), redisson) {
        ([], false) => session.list(&config.prefix, "*")?,
        ([], true) => session.list_redisson("*")?,
        (given, _) => given.to_vec(),
    };
    let states = read_all(session.as_mut(), config, redisson, &names)?;
    if check {
        let held = states.iter().all(|(_, s)| !s.holders.is_empty());
        return Ok(if held { Exit::Success } else { Exit::NotHeld });
    }
    let mut out = String::new();
    if json {
        let server = config.server_json();
        for (name, state) in &states {
            out.push_str(&to_json(name, state, &server));
            out.push('\n');
        }
    } else {
        out = table(&config.server_label(), &states);
    }
    crate::commands::output::report(&out)?;
    Ok(Exit::Success)
}

/// `rlock list [PATTERN] [--json]`.
pub fn list(config: &Config, pattern: &str, json: bool, redisson: bool) -> Result<Exit> {
    refuse_redisson(config, redisson)?;
    let backend = config.backend_for_reading(Dialect::redisson_if(redisson))?;
    let mut session = backend.connect().map_err(|e| e.in_lock(pattern))?;
    let names = match redisson {
        true => session.list_redisson(pattern)?,
        false => session.list(&config.prefix, pattern)?,
    };
    let states = read_all(session.as_mut(), config, redisson, &names)?;
    let out = if json {
        let server = config.server_json();
        let items: Vec<String> = states.iter().map(|(n, s)| to_json(n, s, &server)).collect();
        format!("[{}]\n", items.join(","))
    } else {
        table(&config.server_label(), &states)
    };
    crate::commands::output::report(&out)?;
    Ok(Exit::Success)
}

/// `--redisson` reads one Redis server, as Redisson keeps its locks.
fn refuse_redisson(config: &Config, redisson: bool) -> Result<()> {
    if redisson && (config.is_local() || config.is_quorum()) {
        return Err(crate::error::Error::usage(
            "--redisson locks live on one Redis server: not with file: or several --url",
        ));
    }
    Ok(())
}

fn read_all(
    session: &mut dyn Session,
    config: &Config,
    redisson: bool,
    names: &[String],
) -> Result<Vec<(String, LockStatus)>> {
    let locks: Vec<_> = names
        .iter()
        .map(|name| config.lock_id(redisson, name))
        .collect();
    let states = session.statuses(&locks)?;
    Ok(names.iter().cloned().zip(states).collect())
}

fn kind_word(s: &LockStatus) -> &'static str {
    if s.redisson {
        return "redisson";
    }
    s.kind.unwrap_or(Kind::Exclusive).word()
}

/// A whole number of seconds, as humantime writes it (`2m 5s`).
fn seconds(ms: u64) -> String {
    humantime::format_duration(Duration::from_secs(ms / 1000)).to_string()
}

/// The human report: the server(s) asked, then one row per lock (`free`,
/// or how it is held, with `holders/limit` for a semaphore), its holders and
/// waiters below it; the fence with `-v` only.
fn table(server: &str, states: &[(String, LockStatus)]) -> String {
    let mut out = format!("{server}\n");
    if states.is_empty() {
        out.push_str("no locks held or waited for\n");
        return out;
    }
    let now = now_ms();
    let names: Vec<String> = states.iter().map(|(n, _)| report::sanitize(n)).collect();
    let width = names
        .iter()
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(4, 40);
    let _ = writeln!(
        out,
        "{:<width$} {:<10} {:>7} {:>7}",
        "NAME", "STATE", "HOLDERS", "WAITING"
    );
    let verbose = report::verbose_enabled();
    for ((_, s), name) in states.iter().zip(&names) {
        let (state, holders) = match (s.holders.len(), s.kind) {
            (0, _) => ("free", "0".to_owned()),
            (n, Some(kind @ Kind::Semaphore(_))) => (kind.word(), format!("{n}/{}", s.limit)),
            (n, _) => (kind_word(s), n.to_string()),
        };
        let _ = writeln!(
            out,
            "{name:<width$} {state:<10} {holders:>7} {:>7}",
            s.waiting
        );
        for h in s.holders.iter().filter(|_| s.redisson) {
            let lease = h.lease_ms.map_or_else(
                || "no lease".to_owned(),
                |ms| format!("lease left {}", seconds(ms)),
            );
            let _ = writeln!(
                out,
                "  a Redisson client ({}; Redisson records no host, pid or command), {lease}",
                report::sanitize(&h.command)
            );
        }
        for h in s.holders.iter().filter(|_| !s.redisson) {
            let held = match h.since_ms {
                0 => "an unknown time".to_owned(),
                ms => seconds(now.saturating_sub(ms)),
            };
            let unknown_raw = |text: &str| match text {
                "" => "?".to_owned(),
                text => text.to_owned(),
            };
            let lease = match h.lease_ms {
                None => "kept by the kernel (this host only)".to_owned(),
                Some(ms) => format!("lease left {}", seconds(ms)),
            };
            if h.earlier {
                let _ = writeln!(
                    out,
                    "  held by an earlier rlock version (this version does not read its details), {lease}"
                );
                continue;
            }
            let _ = writeln!(
                out,
                "  {} held for {held}, {lease}",
                report::holder(
                    &unknown_raw(&h.pid),
                    &unknown_raw(&h.host),
                    &h.command,
                    &h.note
                ),
            );
        }
        for w in &s.waiters {
            let _ = writeln!(out, "  waiting: {}", waiter(w));
        }
        let unlisted = s.waiting.saturating_sub(s.waiters.len() as u64);
        if unlisted > 0 {
            let _ = writeln!(out, "  waiting: {unlisted} more");
        }
        if verbose {
            let _ = writeln!(out, "  fence {}", s.fence);
        }
        if let Some(note) = s.servers.as_ref().and_then(|a| a.disagreement.as_ref()) {
            let _ = writeln!(out, "  servers disagree: {note}");
        }
    }
    out
}

/// A waiter as `status` names it: `pid 43 on ci-4 (note '…') for 2s`.
fn waiter(w: &WaiterStatus) -> String {
    let or_unknown = |text: &str| match text {
        "" => "?".to_owned(),
        text => report::sanitize(text),
    };
    let mut text = format!("pid {} on {}", or_unknown(&w.pid), or_unknown(&w.host));
    if !w.note.is_empty() {
        let _ = write!(text, " (note {})", report::quote(&w.note));
    }
    if let Some(ms) = w.waiting_ms {
        let _ = write!(text, " for {}", seconds(ms));
    }
    text
}

/// One lock as the JSON object the README describes ("Who holds a lock?",
/// `--json`), with the server(s) asked.
pub fn to_json(name: &str, s: &LockStatus, server: &str) -> String {
    let holders: Vec<String> = s
        .holders
        .iter()
        .map(|h| {
            // Holder data another host wrote badly: null rather than a guess.
            let since = match h.since_ms {
                0 => "null".to_owned(),
                ms => json_string(
                    &humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(ms))
                        .to_string(),
                ),
            };
            let pid = h
                .pid
                .parse::<u64>()
                .map_or_else(|_| "null".to_owned(), |p| p.to_string());
            let note = match h.note.as_str() {
                "" => "null".to_owned(),
                note => json_string(note),
            };
            format!(
                "{{\"host\":{},\"pid\":{},\"command\":{},\"note\":{note},\"since\":{},\"ttl_ms\":{},\"earlier_version\":{}}}",
                match h.host.as_str() {
                    "" => "null".to_owned(),
                    host => json_string(host),
                },
                pid,
                json_string(&h.command),
                since,
                h.lease_ms
                    .map_or_else(|| "null".to_owned(), |ms| ms.to_string()),
                h.earlier
            )
        })
        .collect();
    let kind = if s.holders.is_empty() && !s.redisson {
        Kind::Exclusive.word()
    } else {
        kind_word(s)
    };
    // Redlock only: how the servers' views compare.
    let servers = match &s.servers {
        Some(a) => format!(
            ",\"servers\":{{\"total\":{},\"answered\":{},\"agree\":{},\"disagreement\":{}}}",
            a.total,
            a.answered,
            a.disagreement.is_none(),
            a.disagreement
                .as_deref()
                .map_or_else(|| "null".to_owned(), json_string)
        ),
        None => String::new(),
    };
    let or_null = |text: &str| match text {
        "" => "null".to_owned(),
        text => json_string(text),
    };
    let waiters: Vec<String> = s
        .waiters
        .iter()
        .map(|w| {
            format!(
                "{{\"host\":{},\"pid\":{},\"note\":{},\"waiting_ms\":{}}}",
                or_null(&w.host),
                w.pid
                    .parse::<u64>()
                    .map_or_else(|_| "null".to_owned(), |p| p.to_string()),
                or_null(&w.note),
                w.waiting_ms
                    .map_or_else(|| "null".to_owned(), |ms| ms.to_string())
            )
        })
        .collect();
    format!(
        "{{\"name\":{},\"server\":{},\"held\":{},\"kind\":\"{kind}\",\"limit\":{},\"holders\":[{}],\"waiting\":{},\"waiters\":[{}],\"fence\":{}{servers}}}",
        json_string(name),
        json_string(server),
        !s.holders.is_empty(),
        s.limit,
        holders.join(","),
        s.waiting,
        waiters.join(","),
        s.fence
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::HolderStatus;

    #[test]
    fn json_strings_escape_everything_a_terminal_or_parser_could_trip_on() {
        assert_eq!(json_string("a\"b\\c\n\u{1b}"), "\"a\\\"b\\\\c\\n\\u001b\"");
    }

    #[test]
    fn status_json_has_the_contract_fields() {
        let s = LockStatus {
            kind: Some(Kind::Exclusive),
            limit: 1,
            fence: 7,
            waiting: 2,
            holders: vec![HolderStatus {
                host: "ci-3".into(),
                pid: "4242".into(),
                command: "./deploy.sh".into(),
                note: String::new(),
                since_ms: 1000,
                lease_ms: Some(21000),
                earlier: false,
            }],
            waiters: vec![WaiterStatus {
                host: "ci-4".into(),
                pid: "43".into(),
                note: String::new(),
                waiting_ms: Some(2000),
            }],
            servers: None,
            redisson: false,
        };
        assert_eq!(
            to_json("deploy", &s, "127.0.0.1:6379"),
            "{\"name\":\"deploy\",\"server\":\"127.0.0.1:6379\",\"held\":true,\"kind\":\"exclusive\",\"limit\":1,\"holders\":[{\"host\":\"ci-3\",\"pid\":4242,\"command\":\"./deploy.sh\",\"note\":null,\"since\":\"1970-01-01T00:00:01Z\",\"ttl_ms\":21000,\"earlier_version\":false}],\"waiting\":2,\"waiters\":[{\"host\":\"ci-4\",\"pid\":43,\"note\":null,\"waiting_ms\":2000}],\"fence\":7}"
        );
    }
}
