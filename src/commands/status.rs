//! `status` and `list` (README: "Who holds a lock?"): who holds a lock, for how long, who
//! waits. Text other hosts wrote (host names, command lines) is sanitized before
//! it reaches a terminal; owner tokens are never shown.

use std::fmt::Write as _;
use std::time::{Duration, UNIX_EPOCH};

use crate::backend::{HolderStatus, LockStatus, WaiterStatus};
use crate::client::{Client, LockState};
use crate::config::Config;
use crate::error::Result;
use crate::exit::Exit;
use crate::lock::clock::now_ms;
use crate::lock::kind::Kind;
use crate::lock::lease::Lease;
use crate::lock::name::{Dialect, LockName};
use serde::Serialize;

use crate::report::{self, json};

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
    let client = reader(config, redisson)?;
    let given = (!names.is_empty()).then_some(names.as_slice());
    let states = client.read_states(given, "*", &names.join(", "))?;
    if check {
        let held = states.iter().all(LockState::is_held);
        return Ok(if held { Exit::Success } else { Exit::NotHeld });
    }
    let dialect = Dialect::redisson_if(redisson);
    let mut out = String::new();
    if json {
        let server = config.server_json();
        let scope = Scope::of(config, &server, dialect);
        for state in &states {
            out.push_str(&json::to_string(&LockJson::new(state, &scope)));
            out.push('\n');
        }
    } else {
        out = table(&config.scope_label(dialect), &states);
    }
    crate::commands::output::report(&out)?;
    Ok(Exit::Success)
}

/// `rlock list [PATTERN] [--json]`.
pub fn list(config: &Config, pattern: &str, json: bool, redisson: bool) -> Result<Exit> {
    let states = reader(config, redisson)?.read_states(None, pattern, pattern)?;
    let dialect = Dialect::redisson_if(redisson);
    let out = if json {
        let server = config.server_json();
        let scope = Scope::of(config, &server, dialect);
        let locks: Vec<LockJson> = states
            .iter()
            .map(|state| LockJson::new(state, &scope))
            .collect();
        json::to_string(&locks) + "\n"
    } else {
        table(&config.scope_label(dialect), &states)
    };
    crate::commands::output::report(&out)?;
    Ok(Exit::Success)
}

/// The client `status` and `list` read through, as a library program
/// would; `--redisson` reads one Redis server, as Redisson keeps its locks.
fn reader(config: &Config, redisson: bool) -> Result<Client> {
    if redisson && (config.is_local() || config.is_quorum()) {
        return Err(crate::error::Error::usage(
            "--redisson locks live on one Redis server: not with file: or several --url",
        ));
    }
    Client::for_reading(config.clone(), Dialect::redisson_if(redisson))
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
fn table(server: &str, states: &[LockState]) -> String {
    let mut out = format!("{server}\n");
    if states.is_empty() {
        out.push_str("no locks held or waited for\n");
        return out;
    }
    let now = now_ms();
    let names: Vec<String> = states.iter().map(|s| report::sanitize(s.name())).collect();
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
    for (s, name) in states.iter().map(LockState::detail).zip(&names) {
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
        holder_lines(&mut out, s, now);
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

/// One line per holder of a lock: a Redisson client's lease, or who holds
/// it, for how long, and its lease.
fn holder_lines(out: &mut String, s: &LockStatus, now: u64) {
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
            "  {} held for {held}, {lease}{}",
            report::holder(
                &unknown_raw(&h.pid),
                &unknown_raw(&h.host),
                &h.command,
                &h.note
            ),
            renewal(h),
        );
    }
}

/// How long past due a holder's next renewal is, given the longest period
/// any `--kill-after` gives its ttl, and a second for the renewal's round
/// trip; None before its first renewal, or for a hold that does not record
/// its ttl.
fn overdue(h: &HolderStatus) -> Option<u64> {
    let renewed = h.renewed_ms?;
    let ttl = Duration::from_millis(h.ttl_ms?);
    let every = Lease::Renewed(ttl).period(Duration::ZERO);
    let late = renewed.saturating_sub(u64::try_from(every.as_millis()).unwrap_or(u64::MAX));
    Some(if late > 1000 { late } else { 0 })
}

/// `, renewed 2s ago`, or `, renewal overdue by 9s`: what `status` says of
/// a holder's last renewal, when it knows.
fn renewal(h: &HolderStatus) -> String {
    match (h.renewed_ms, overdue(h)) {
        (Some(_), Some(late)) if late > 0 => format!(", renewal overdue by {}", seconds(late)),
        (Some(ms), _) => format!(", renewed {} ago", seconds(ms)),
        _ => String::new(),
    }
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

/// Where the locks were looked for, as `--json` names it on each lock.
struct Scope<'a> {
    server: &'a str,
    /// None for `file:`, or a quorum whose servers' databases differ.
    db: Option<i64>,
    /// None for `file:` and Redisson's keys, which have none.
    prefix: Option<&'a str>,
}

impl<'a> Scope<'a> {
    fn of(config: &'a Config, server: &'a str, dialect: Dialect) -> Self {
        let keyed = !config.is_local() && dialect == Dialect::Rlock;
        Scope {
            server,
            db: config.db(),
            prefix: keyed.then_some(config.prefix.as_str()),
        }
    }
}

/// One lock as the JSON object the README describes ("Who holds a lock?",
/// `--json`), with where it was looked for.
#[derive(Serialize)]
struct LockJson<'a> {
    name: &'a str,
    server: &'a str,
    db: Option<i64>,
    prefix: Option<&'a str>,
    held: bool,
    kind: &'static str,
    limit: u64,
    holders: Vec<HolderJson<'a>>,
    waiting: u64,
    waiters: Vec<WaiterJson<'a>>,
    fence: u64,
    /// `--redisson` only: the lock is in Redisson's layout (its kind is
    /// exclusive: a Redisson lock is re-entrant and exclusive).
    #[serde(skip_serializing_if = "Option::is_none")]
    layout: Option<&'static str>,
    /// Redlock only: how the servers' views compare.
    #[serde(skip_serializing_if = "Option::is_none")]
    servers: Option<ServersJson<'a>>,
}

/// Holder data another host wrote badly is null rather than a guess.
#[derive(Serialize)]
struct HolderJson<'a> {
    host: Option<&'a str>,
    pid: Option<u64>,
    command: &'a str,
    note: Option<&'a str>,
    since: Option<String>,
    ttl_ms: Option<u64>,
    earlier_version: bool,
    /// How long ago the holder last renewed; null before its first renewal.
    renewed_ms_ago: Option<u64>,
    /// How long past due its next renewal is (0: not overdue); null when
    /// not known.
    renewal_overdue_ms: Option<u64>,
}

#[derive(Serialize)]
struct WaiterJson<'a> {
    host: Option<&'a str>,
    pid: Option<u64>,
    note: Option<&'a str>,
    waiting_ms: Option<u64>,
}

#[derive(Serialize)]
struct ServersJson<'a> {
    total: usize,
    answered: usize,
    agree: bool,
    disagreement: Option<&'a str>,
}

/// Empty text (not reported) as null.
fn or_null(text: &str) -> Option<&str> {
    Some(text).filter(|t| !t.is_empty())
}

impl<'a> LockJson<'a> {
    fn new(state: &'a LockState, scope: &Scope<'a>) -> Self {
        let (name, s) = (state.name(), state.detail());
        let holders = s
            .holders
            .iter()
            .map(|h| HolderJson {
                host: or_null(&h.host),
                pid: h.pid.parse().ok(),
                command: &h.command,
                note: or_null(&h.note),
                since: (h.since_ms != 0).then(|| {
                    humantime::format_rfc3339_seconds(
                        UNIX_EPOCH + Duration::from_millis(h.since_ms),
                    )
                    .to_string()
                }),
                ttl_ms: h.lease_ms,
                earlier_version: h.earlier,
                renewed_ms_ago: h.renewed_ms,
                renewal_overdue_ms: overdue(h),
            })
            .collect();
        let waiters = s
            .waiters
            .iter()
            .map(|w| WaiterJson {
                host: or_null(&w.host),
                pid: w.pid.parse().ok(),
                note: or_null(&w.note),
                waiting_ms: w.waiting_ms,
            })
            .collect();
        LockJson {
            name,
            server: scope.server,
            db: scope.db,
            prefix: scope.prefix,
            held: !s.holders.is_empty(),
            // The contract's kinds: a Redisson lock is exclusive.
            kind: match s.kind {
                Some(kind) if !s.holders.is_empty() && !s.redisson => kind.word(),
                _ => Kind::Exclusive.word(),
            },
            limit: s.limit,
            holders,
            waiting: s.waiting,
            waiters,
            fence: s.fence,
            layout: s.redisson.then_some("redisson"),
            servers: s.servers.as_ref().map(|a| ServersJson {
                total: a.total,
                answered: a.answered,
                agree: a.disagreement.is_none(),
                disagreement: a.disagreement.as_deref(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
                ttl_ms: Some(30000),
                renewed_ms: Some(2000),
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
        let state = LockState::new("deploy".into(), s);
        assert_eq!(
            json::to_string(&LockJson::new(
                &state,
                &Scope {
                    server: "127.0.0.1:6379",
                    db: Some(1),
                    prefix: Some("team-a")
                }
            )),
            "{\"name\":\"deploy\",\"server\":\"127.0.0.1:6379\",\"db\":1,\"prefix\":\"team-a\",\"held\":true,\"kind\":\"exclusive\",\"limit\":1,\"holders\":[{\"host\":\"ci-3\",\"pid\":4242,\"command\":\"./deploy.sh\",\"note\":null,\"since\":\"1970-01-01T00:00:01Z\",\"ttl_ms\":21000,\"earlier_version\":false,\"renewed_ms_ago\":2000,\"renewal_overdue_ms\":0}],\"waiting\":2,\"waiters\":[{\"host\":\"ci-4\",\"pid\":43,\"note\":null,\"waiting_ms\":2000}],\"fence\":7}"
        );
    }

    /// Text other hosts wrote, and what they left out, as `--json` prints
    /// them: escaped where JSON or a terminal needs it, otherwise as written;
    /// missing fields null; a quorum's `servers` last.
    #[test]
    fn status_json_escapes_what_other_hosts_wrote() {
        let s = LockStatus {
            kind: Some(Kind::Semaphore(3)),
            limit: 3,
            fence: 18_446_744_073_709_551_615,
            waiting: 1,
            holders: vec![HolderStatus {
                host: String::new(),
                pid: "x".into(),
                command: "echo \"ü\\n\"\t\u{1b}[2J\u{7f}\u{202e} 日本".into(),
                note: "a\u{2028}b\u{8}".into(),
                since_ms: 0,
                lease_ms: None,
                ttl_ms: None,
                renewed_ms: None,
                earlier: true,
            }],
            waiters: vec![WaiterStatus {
                host: "h\\".into(),
                pid: String::new(),
                note: "\u{9b}".into(),
                waiting_ms: None,
            }],
            servers: Some(crate::backend::Agreement {
                total: 3,
                answered: 2,
                disagreement: Some("\"c:3\" did not answer".into()),
            }),
            redisson: false,
        };
        let state = LockState::new("d\u{e9}ploy".into(), s);
        assert_eq!(
            json::to_string(&LockJson::new(
                &state,
                &Scope {
                    server: "quorum of 3: a, b, c",
                    db: None,
                    prefix: Some("rlock")
                }
            )),
            r#"{"name":"déploy","server":"quorum of 3: a, b, c","db":null,"prefix":"rlock","held":true,"kind":"semaphore","limit":3,"holders":[{"host":null,"pid":null,"command":"echo \"ü\\n\"\t\u001b[2J\u007f\u202e 日本","note":"a\u2028b\u0008","since":null,"ttl_ms":null,"earlier_version":true,"renewed_ms_ago":null,"renewal_overdue_ms":null}],"waiting":1,"waiters":[{"host":"h\\","pid":null,"note":"\u009b","waiting_ms":null}],"fence":18446744073709551615,"servers":{"total":3,"answered":2,"agree":false,"disagreement":"\"c:3\" did not answer"}}"#
        );
    }
}
