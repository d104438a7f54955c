//! `rlock check` (README: "Is a server fit for locks?"): asks the configured
//! server(s) everything rlock's guarantees rest on and prints one line per
//! check, `ok`, `warn`, `fail` or `unknown`, with what was seen and the fix.
//!
//! Exit 0 when every check is `ok`, 1 when one warns or is `unknown` (the
//! server would not say, so fitness is not proven), 69 when rlock cannot
//! work there: on one server, any `fail`; on a Redlock quorum, fewer
//! servers without a `fail` than a quorum (a failing server short of that is
//! a warning: the quorum carries on without it). A non-zero exit also prints
//! one `rlock: check:` line on stderr.

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use crate::backend::fitness::{Finding, Verdict};
use crate::backend::url::ServerSpec;
use crate::backend::{Standalone, check_dir};
use crate::config::{Config, Target};
use crate::error::Result;
use crate::exit::Exit;
use crate::lock::lease::{Lease, fit_grace};
use crate::lock::name::Dialect;
use crate::report;

/// `rlock check [--json] [--ttl DUR] [--kill-after DUR]`: the `failover`
/// line judges the server's failover timing by a lease of `ttl` with
/// `kill_after` (None: the default), as `run` would hold it.
pub fn check(
    config: &Config,
    json: bool,
    ttl: Duration,
    kill_after: Option<Duration>,
) -> Result<Exit> {
    if !matches!(config.target, Target::Local(_)) {
        // As `run` does: a --kill-after beyond a third of the ttl is cut,
        // with a note (the `failover` line then says the grace it judged by).
        fit_grace(kill_after, Lease::Renewed(ttl), "check");
    }
    let (server, findings, exit, summary) = match &config.target {
        Target::Local(dir) => {
            let findings = check_dir(dir);
            let (exit, summary) = verdict_of(&findings);
            (findings[0].server.clone(), findings, exit, summary)
        }
        Target::Single(spec) => {
            let findings = Standalone::new(spec.as_ref().clone(), Dialect::Rlock)?.check(
                &config.prefix,
                ttl,
                kill_after,
            );
            let (exit, summary) = verdict_of(&findings);
            (spec.display.clone(), findings, exit, summary)
        }
        Target::Quorum(specs) => check_quorum(config, specs, ttl, kill_after)?,
    };
    let several = matches!(config.target, Target::Quorum(_));
    let out = if json {
        to_json(&server, &findings)
    } else {
        lines(&findings, several)
    };
    crate::commands::output::report(&out)?;
    if let Some(summary) = summary {
        report::error(&format!("check: {summary}"));
    }
    Ok(exit)
}
/// Every server of a Redlock quorum checked, and whether enough of them are
/// fit for locks: (the servers, the findings, the exit, the summary).
fn check_quorum(
    config: &Config,
    specs: &[ServerSpec],
    ttl: Duration,
    kill_after: Option<Duration>,
) -> Result<(String, Vec<Finding>, Exit, Option<String>)> {
    let mut findings = Vec::new();
    let mut fit = 0;
    for spec in specs {
        let found =
            Standalone::new(spec.clone(), Dialect::Rlock)?.check(&config.prefix, ttl, kill_after);
        if found.iter().all(|f| f.verdict != Verdict::Fail) {
            fit += 1;
        }
        findings.extend(found);
    }
    let servers: Vec<&str> = specs.iter().map(|s| s.display.as_str()).collect();
    let server = servers.join(", ");
    let quorum = specs.len() / 2 + 1;
    let verdict = if fit == specs.len() {
        Verdict::Ok
    } else if fit >= quorum {
        Verdict::Warn
    } else {
        Verdict::Fail
    };
    findings.push(Finding::new(
        "quorum",
        &server,
        verdict,
        format!(
            "Redlock over {} servers, quorum {quorum}: {fit} fit for locks{}",
            specs.len(),
            match verdict {
                Verdict::Ok => String::new(),
                Verdict::Warn => format!(
                    "; {} failed above: every lock now needs {quorum} of the {fit} left",
                    specs.len() - fit
                ),
                _ => format!("; a lock needs {quorum}: fix the failures above"),
            }
        ),
    ));
    let (exit, summary) = quorum_verdict(&findings, verdict);
    Ok((server, findings, exit, summary))
}

/// The exit and stderr line for one server's findings.
fn verdict_of(findings: &[Finding]) -> (Exit, Option<String>) {
    if let Some(fail) = findings.iter().find(|f| f.verdict == Verdict::Fail) {
        return (
            Exit::Unavailable,
            Some(match fail.detail.starts_with(&fail.server) {
                true => format!("{}: {}", fail.name, fail.detail),
                false => format!("{}: {}: {}", fail.server, fail.name, fail.detail),
            }),
        );
    }
    warnings(findings)
}

/// A Redlock quorum: 69 only when the quorum itself fails.
fn quorum_verdict(findings: &[Finding], quorum: Verdict) -> (Exit, Option<String>) {
    if quorum == Verdict::Fail {
        let detail = &findings.last().expect("the quorum finding").detail;
        return (Exit::Unavailable, Some(detail.clone()));
    }
    warnings(findings)
}

fn warnings(findings: &[Finding]) -> (Exit, Option<String>) {
    let named = |pick: fn(Verdict) -> bool| -> Vec<&str> {
        findings
            .iter()
            .filter(|f| pick(f.verdict))
            .map(|f| f.name)
            .collect()
    };
    let warned = named(|v| matches!(v, Verdict::Warn | Verdict::Fail));
    // Unanswered is not fit: exit 0 says every check passed.
    let unknown = named(|v| v == Verdict::Unknown);
    let mut parts = Vec::new();
    if !warned.is_empty() {
        parts.push(format!(
            "{} warning(s): {}",
            warned.len(),
            warned.join(", ")
        ));
    }
    if !unknown.is_empty() {
        parts.push(format!(
            "{} unknown (the server would not say): {}",
            unknown.len(),
            unknown.join(", ")
        ));
    }
    if parts.is_empty() {
        return (Exit::Success, None);
    }
    (
        Exit::Warnings,
        Some(format!("{} (see the lines above)", parts.join("; "))),
    )
}

/// One line per check: result, name, what was seen and the fix (with several
/// servers, the detail starts with the server).
fn lines(findings: &[Finding], several: bool) -> String {
    let mut out = String::new();
    for f in findings {
        let server = if several && f.name != "quorum" && !f.detail.starts_with(&f.server) {
            format!("{}: ", f.server)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "{:<7} {:<14} {server}{}",
            f.verdict.word(),
            f.name,
            report::sanitize(&f.detail)
        );
    }
    out
}

/// `check --json`: the server(s) asked and one entry per finding.
#[derive(Serialize)]
struct CheckJson<'a> {
    server: &'a str,
    checks: Vec<FindingJson<'a>>,
}

#[derive(Serialize)]
struct FindingJson<'a> {
    name: &'a str,
    server: &'a str,
    result: &'static str,
    detail: &'a str,
}

/// The report as one line of JSON.
fn to_json(server: &str, findings: &[Finding]) -> String {
    let checks = findings
        .iter()
        .map(|f| FindingJson {
            name: f.name,
            server: &f.server,
            result: f.verdict.word(),
            detail: &f.detail,
        })
        .collect();
    report::json::to_string(&CheckJson { server, checks }) + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(name: &'static str, verdict: Verdict) -> Finding {
        Finding::new(name, "h:1", verdict, "seen")
    }

    #[test]
    fn exit_is_0_when_all_ok_1_on_a_warning_or_unknown_69_on_a_failure() {
        let ok = [finding("a", Verdict::Ok), finding("b", Verdict::Ok)];
        assert_eq!(verdict_of(&ok).0, Exit::Success);
        assert!(verdict_of(&ok).1.is_none());
        let unknown = [
            finding("a", Verdict::Ok),
            finding("eviction", Verdict::Unknown),
        ];
        assert_eq!(verdict_of(&unknown).0.code(), 1);
        assert!(verdict_of(&unknown).1.unwrap().contains("1 unknown"));
        let warn = [
            finding("a", Verdict::Ok),
            finding("persistence", Verdict::Warn),
        ];
        assert_eq!(verdict_of(&warn).0.code(), 1);
        assert!(verdict_of(&warn).1.unwrap().contains("persistence"));
        let fail = [
            finding("a", Verdict::Warn),
            finding("reachable", Verdict::Fail),
        ];
        assert_eq!(verdict_of(&fail).0.code(), 69);
    }

    #[test]
    fn json_has_server_and_checks() {
        let json = to_json("h:1", &[finding("eviction", Verdict::Warn)]);
        assert_eq!(
            json,
            "{\"server\":\"h:1\",\"checks\":[{\"name\":\"eviction\",\"server\":\"h:1\",\"result\":\"warn\",\"detail\":\"seen\"}]}\n"
        );
    }

    #[test]
    fn json_escapes_what_the_server_said() {
        let seen = Finding::new(
            "acl",
            "[::1]:1",
            Verdict::Fail,
            "user \"ci\\x\"\n\u{1b}]0;é",
        );
        assert_eq!(
            to_json("[::1]:1", &[seen]),
            r#"{"server":"[::1]:1","checks":[{"name":"acl","server":"[::1]:1","result":"fail","detail":"user \"ci\\x\"\n\u001b]0;é"}]}"#.to_owned() + "\n"
        );
        assert_eq!(to_json("h:1", &[]), "{\"server\":\"h:1\",\"checks\":[]}\n");
    }
}
