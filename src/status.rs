//! `status` and `list` (README: "Who holds a lock?"): who holds a lock, for how long, who
//! waits. Text other hosts wrote (host names, command lines) is sanitized before
//! it reaches a terminal; owner tokens are never shown.

use std::fmt::Write as _;
use std::time::{Duration, UNIX_EPOCH};

use crate::backend::{Kind, LockStatus, Session};
use crate::clock::now_ms;
use crate::config::Config;
use crate::error::Result;
use crate::exit::Exit;
use crate::name::{self, LockId};
use crate::report;

/// `rlock status [NAME...] [--json | --check]`.
pub fn status(config: &Config, names: &[String], json: bool, check: bool) -> Result<Exit> {
    for name in names {
        name::validate(name)?;
    }
    let backend = config.backend()?;
    let mut session = backend
        .connect()
        .map_err(|e| e.in_lock(&names.join(", ")))?;
    let names = match names {
        [] => session.list(&config.prefix, "*")?,
        given => given.to_vec(),
    };
    let states = read_all(session.as_mut(), &config.prefix, &names)?;
    if check {
        let held = states.iter().all(|(_, s)| !s.holders.is_empty());
        return Ok(if held { Exit::Success } else { Exit::NotHeld });
    }
    let mut out = String::new();
    if json {
        for (name, state) in &states {
            out.push_str(&to_json(name, state));
            out.push('\n');
        }
    } else {
        out = table(&states);
    }
    crate::output::report(&out)?;
    Ok(Exit::Success)
}

/// `rlock list [PATTERN] [--json]`.
pub fn list(config: &Config, pattern: &str, json: bool) -> Result<Exit> {
    let backend = config.backend()?;
    let mut session = backend.connect().map_err(|e| e.in_lock(pattern))?;
    let names = session.list(&config.prefix, pattern)?;
    let states = read_all(session.as_mut(), &config.prefix, &names)?;
    let out = if json {
        let items: Vec<String> = states.iter().map(|(n, s)| to_json(n, s)).collect();
        format!("[{}]\n", items.join(","))
    } else {
        table(&states)
    };
    crate::output::report(&out)?;
    Ok(Exit::Success)
}

fn read_all(
    session: &mut dyn Session,
    prefix: &str,
    names: &[String],
) -> Result<Vec<(String, LockStatus)>> {
    names
        .iter()
        .map(|name| Ok((name.clone(), session.status(&LockId::new(prefix, name))?)))
        .collect()
}

fn kind_word(kind: Option<Kind>) -> &'static str {
    match kind {
        Some(Kind::Shared) => "shared",
        Some(Kind::Semaphore(_)) => "semaphore",
        _ => "exclusive",
    }
}

fn table(states: &[(String, LockStatus)]) -> String {
    if states.is_empty() {
        return "no locks held or waited for\n".into();
    }
    let now = now_ms();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<24} {:<10} {:>7} {:>7} {:>8}",
        "NAME", "KIND", "HOLDERS", "WAITING", "FENCE"
    );
    for (name, s) in states {
        let kind = if s.holders.is_empty() {
            "-"
        } else {
            kind_word(s.kind)
        };
        let _ = writeln!(
            out,
            "{:<24} {:<10} {:>7} {:>7} {:>8}",
            report::sanitize(name),
            kind,
            s.holders.len(),
            s.waiting,
            s.fence
        );
        for h in &s.holders {
            let held = match h.since_ms {
                0 => "an unknown time".to_owned(),
                ms => {
                    humantime::format_duration(Duration::from_secs(now.saturating_sub(ms) / 1000))
                        .to_string()
                }
            };
            let unknown_raw = |text: &str| match text {
                "" => "?".to_owned(),
                text => text.to_owned(),
            };
            let lease = match h.lease_ms {
                None => "kept by the kernel (this host only)".to_owned(),
                Some(ms) => format!(
                    "lease left {}",
                    humantime::format_duration(Duration::from_secs(ms / 1000))
                ),
            };
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
        if let Some(note) = s.servers.as_ref().and_then(|a| a.disagreement.as_ref()) {
            let _ = writeln!(out, "  servers disagree: {note}");
        }
    }
    out
}

/// One lock as the JSON object the README describes ("Who holds a lock?", `--json`).
pub fn to_json(name: &str, s: &LockStatus) -> String {
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
                "{{\"host\":{},\"pid\":{},\"command\":{},\"note\":{note},\"since\":{},\"ttl_ms\":{}}}",
                json_string(&h.host),
                pid,
                json_string(&h.command),
                since,
                h.lease_ms
                    .map_or_else(|| "null".to_owned(), |ms| ms.to_string())
            )
        })
        .collect();
    let kind = if s.holders.is_empty() {
        "exclusive"
    } else {
        kind_word(s.kind)
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
    format!(
        "{{\"name\":{},\"held\":{},\"kind\":\"{kind}\",\"limit\":{},\"holders\":[{}],\"waiting\":{},\"fence\":{}{servers}}}",
        json_string(name),
        !s.holders.is_empty(),
        s.limit,
        holders.join(","),
        s.waiting,
        s.fence
    )
}

/// A JSON string literal: quotes, backslashes and control characters escaped.
pub fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if report::needs_escape(c) || matches!(c, '\u{2028}' | '\u{2029}') => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
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
            }],
            servers: None,
        };
        assert_eq!(
            to_json("deploy", &s),
            "{\"name\":\"deploy\",\"held\":true,\"kind\":\"exclusive\",\"limit\":1,\"holders\":[{\"host\":\"ci-3\",\"pid\":4242,\"command\":\"./deploy.sh\",\"note\":null,\"since\":\"1970-01-01T00:00:01Z\",\"ttl_ms\":21000}],\"waiting\":2,\"fence\":7}"
        );
    }
}
