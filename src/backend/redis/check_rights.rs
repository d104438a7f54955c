//! `rlock check`'s rights probe: every command rlock and its scripts send,
//! run for real by the configured user on probe keys under the prefix (a
//! script's commands are checked against the same user's rules). Running
//! them answers on every version alike (Redis 6.2 has neither `ACL DRYRUN`
//! nor `redis.acl_check_cmd`) and needs no admin rights. No probe key is
//! ever left without an expiry: when PEXPIRE or DEL is refused, the commands
//! that would create one are not tried.

use redis::{Connection, RedisResult, Value};

use super::StandaloneSession;
use super::check_probes::{ProbeKeys, is_refusal};
use super::diagnose::server_said;
use crate::backend::fitness::Verdict;
use crate::backend::script;

/// What a refused command costs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Need {
    /// Every lock needs it.
    Always,
    /// Only this feature does.
    For(&'static str),
}

/// One probe: the command as the ACL rule names it, what needs it, the
/// command line (KEY stands for the probe key of its type) and whether it
/// may create a key.
struct Probe {
    rule: &'static str,
    need: Need,
    args: &'static [&'static str],
    creates: bool,
}

const fn probe(rule: &'static str, args: &'static [&'static str]) -> Probe {
    Probe {
        rule,
        need: Need::Always,
        args,
        creates: false,
    }
}

const fn creating(rule: &'static str, args: &'static [&'static str]) -> Probe {
    Probe {
        rule,
        need: Need::Always,
        args,
        creates: true,
    }
}

const fn optional(rule: &'static str, need: &'static str, args: &'static [&'static str]) -> Probe {
    Probe {
        rule,
        need: Need::For(need),
        args,
        creates: false,
    }
}

/// A probe of a command only one feature needs, which may create a key.
const fn optional_creating(
    rule: &'static str,
    need: &'static str,
    args: &'static [&'static str],
) -> Probe {
    Probe {
        rule,
        need: Need::For(need),
        args,
        creates: true,
    }
}

/// The probes, in an order that leaves nothing behind: expiry and deletion
/// first (on missing keys), then each type's writes, reads and removal.
/// `S`, `L`, `H`, `Z`, `X`: the probe's string, list, hash, sorted-set and
/// stream keys;
/// `M`: a MATCH pattern for the probe keys.
const PROBES: &[Probe] = &[
    probe("ping", &["PING"]),
    probe("pexpire", &["PEXPIRE", "S", "10000"]),
    probe("del", &["DEL", "S"]),
    probe("time", &["TIME"]),
    creating("set", &["SET", "S", "1", "PX", "10000"]),
    probe("get", &["GET", "S"]),
    probe("type", &["TYPE", "S"]),
    probe("exists", &["EXISTS", "S"]),
    probe("pttl", &["PTTL", "S"]),
    creating("rpush", &["RPUSH", "L", "x"]),
    probe("pexpire", &["PEXPIRE", "L", "10000"]),
    probe("llen", &["LLEN", "L"]),
    probe("blpop", &["BLPOP", "L", "0.01"]),
    creating("hset", &["HSET", "H", "f", "1"]),
    probe("pexpire", &["PEXPIRE", "H", "10000"]),
    probe("hget", &["HGET", "H", "f"]),
    probe("hgetall", &["HGETALL", "H"]),
    probe("hexists", &["HEXISTS", "H", "f"]),
    probe("hincrby", &["HINCRBY", "H", "f", "1"]),
    probe("hlen", &["HLEN", "H"]),
    probe("hdel", &["HDEL", "H", "f"]),
    creating("zadd", &["ZADD", "Z", "1", "m"]),
    probe("pexpire", &["PEXPIRE", "Z", "10000"]),
    probe("zscore", &["ZSCORE", "Z", "m"]),
    probe("zrange", &["ZRANGE", "Z", "0", "-1"]),
    probe("zrangebyscore", &["ZRANGEBYSCORE", "Z", "-inf", "+inf"]),
    probe("zcount", &["ZCOUNT", "Z", "-inf", "+inf"]),
    probe("zrem", &["ZREM", "Z", "m"]),
    optional_creating(
        "xadd",
        "the lock's history: nothing is recorded",
        &["XADD", "X", "MAXLEN", "1", "*", "f", "1"],
    ),
    probe("pexpire", &["PEXPIRE", "X", "10000"]),
    optional(
        "xdel",
        "a run of several names that gives a hold back leaves its acquired event",
        &["XDEL", "X", "0-1"],
    ),
    optional(
        "xrevrange",
        "rlock history, and rlock metrics' history counts",
        &["XREVRANGE", "X", "+", "-", "COUNT", "1"],
    ),
    probe("del", &["DEL", "S", "L", "H", "Z", "X"]),
    probe("multi", &["MULTI"]),
    probe("exec", &["EXEC"]),
    optional("wait", "--min-replicas", &["WAIT", "0", "0"]),
    optional(
        "scan",
        "list, and status without NAME",
        &["SCAN", "0", "MATCH", "M", "COUNT", "10"],
    ),
];

/// The commands the user was refused, each with the server's words.
struct Refusals {
    refused: Vec<(&'static Probe, String)>,
    /// PEXPIRE or DEL was refused, so commands that would create a key were
    /// not tried.
    no_cleanup: bool,
}

impl StandaloneSession {
    /// The user's rights on the prefix, command by command.
    pub(super) fn rights(&mut self, prefix: &str, keys: &ProbeKeys) -> (Verdict, String) {
        let mut found = match self.probe_commands(keys) {
            Ok(found) => found,
            Err(not_tried) => return not_tried,
        };
        self.probe_scripts(&mut found.refused);
        verdict(prefix, &found)
    }

    /// Runs [`PROBES`] on the probe keys; an answer other than a refusal
    /// (a read-only server, a lost connection) ends the probe unknown.
    fn probe_commands(&mut self, keys: &ProbeKeys) -> Result<Refusals, (Verdict, String)> {
        let key = |tag: &str| format!("{}:{tag}", keys.base);
        let (s, l, h, z, x, m) = (
            key("s"),
            key("l"),
            key("h"),
            key("z"),
            key("x"),
            format!("{}*", keys.base),
        );
        let mut refused: Vec<(&Probe, String)> = Vec::new();
        let mut no_cleanup = false;
        let mut after_multi_refused = false;
        for p in PROBES {
            if (p.creates && no_cleanup) || (p.rule == "exec" && after_multi_refused) {
                continue;
            }
            let args: Vec<&str> = p
                .args
                .iter()
                .map(|a| match *a {
                    "S" => s.as_str(),
                    "L" => l.as_str(),
                    "H" => h.as_str(),
                    "Z" => z.as_str(),
                    "X" => x.as_str(),
                    "M" => m.as_str(),
                    other => other,
                })
                .collect();
            match self.ask(|con| run(con, &args)) {
                Ok(()) => {}
                // A replica refuses every write, whoever asks.
                Err(err) if err.code() == Some("READONLY") => {
                    return Err((
                        Verdict::Unknown,
                        format!("not tried: the server is read-only ({})", server_said(&err)),
                    ));
                }
                Err(err) if is_refusal(&err) => {
                    if matches!(p.rule, "pexpire" | "del") {
                        no_cleanup = true;
                    }
                    if p.rule == "multi" {
                        after_multi_refused = true;
                    }
                    // Still inside MULTI: every later command would be queued.
                    if p.rule == "exec" {
                        self.con = None;
                    }
                    if !refused.iter().any(|(r, _)| r.rule == p.rule) {
                        refused.push((p, server_said(&err)));
                    }
                }
                Err(err) => {
                    return Err((
                        Verdict::Unknown,
                        super::check_probes::refused(args[0], &err),
                    ));
                }
            }
        }
        Ok(Refusals {
            refused,
            no_cleanup,
        })
    }

    /// The script commands, with a script as their argument.
    fn probe_scripts(&mut self, refused: &mut Vec<(&'static Probe, String)>) {
        let code = script::CHECK_SCRIPT.code();
        let sha = script::CHECK_SCRIPT.get_hash();
        for (p, args) in [
            (&SCRIPT_LOAD, ["SCRIPT", "LOAD", code]),
            (&EVALSHA, ["EVALSHA", sha, "0"]),
            (&EVAL, ["EVAL", code, "0"]),
        ] {
            match self.ask(|con| run(con, &args)) {
                Err(err) if is_refusal(&err) => refused.push((p, server_said(&err))),
                _ => {}
            }
        }
    }
}

/// The verdict on the refusals: failing when a command every lock needs was
/// refused, warning when only a feature's was.
fn verdict(prefix: &str, found: &Refusals) -> (Verdict, String) {
    let refused = &found.refused;
    let under = if prefix.is_empty() {
        "{...} keys".to_owned()
    } else {
        format!("keys under {prefix}:")
    };
    let mut rules: Vec<&str> = PROBES.iter().map(|p| p.rule).collect();
    rules.sort_unstable();
    rules.dedup();
    let count = rules.len() + 3;
    let always: Vec<&(&Probe, String)> = refused
        .iter()
        .filter(|(p, _)| p.need == Need::Always)
        .collect();
    if let Some((_, first)) = always.first() {
        let rules: Vec<String> = always.iter().map(|(p, _)| format!("+{}", p.rule)).collect();
        let names: Vec<String> = always.iter().map(|(p, _)| p.rule.to_uppercase()).collect();
        let skipped = if found.no_cleanup {
            " (commands that would create a key were not tried)"
        } else {
            ""
        };
        return (
            Verdict::Fail,
            format!(
                "this user may not run {} on {under} ({first}){skipped}: rlock cannot work; allow {} (see \"ACL users\" in the README)",
                names.join(" "),
                rules.join(" ")
            ),
        );
    }
    if !refused.is_empty() {
        let lost: Vec<String> = refused
            .iter()
            .map(|(p, _)| match p.need {
                Need::For(what) => format!("{} ({what})", p.rule.to_uppercase()),
                Need::Always => p.rule.to_uppercase(),
            })
            .collect();
        let rules: Vec<String> = refused
            .iter()
            .map(|(p, _)| format!("+{}", p.rule))
            .collect();
        return (
            Verdict::Warn,
            format!(
                "this user may not run {}: allow {} (see \"ACL users\" in the README)",
                lost.join(", "),
                rules.join(" ")
            ),
        );
    }
    (
        Verdict::Ok,
        format!(
            "this user ran each of the {count} commands rlock sends on {under} (the scripts' commands included)"
        ),
    )
}

/// The script commands, tried apart from [`PROBES`] (their argument is a script).
const SCRIPT_LOAD: Probe = probe("script|load", &[]);
const EVALSHA: Probe = probe("evalsha", &[]);
const EVAL: Probe = probe("eval", &[]);

/// Runs one probe command; its reply does not matter, only a refusal.
fn run(con: &mut Connection, args: &[&str]) -> RedisResult<()> {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query::<Value>(con).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_the_scripts_use_is_probed() {
        let probed: Vec<&str> = PROBES.iter().map(|p| p.rule).collect();
        for command in super::super::diagnose::SCRIPT_COMMANDS.split_whitespace() {
            let rule = command.to_lowercase();
            assert!(
                probed.contains(&rule.as_str()) || rule == "publish",
                "{command} is not probed"
            );
        }
    }

    #[test]
    fn no_key_is_created_before_its_expiry_and_deletion_are_probed() {
        let first_create = PROBES.iter().position(|p| p.creates).unwrap();
        let pexpire = PROBES.iter().position(|p| p.rule == "pexpire").unwrap();
        let del = PROBES.iter().position(|p| p.rule == "del").unwrap();
        assert!(pexpire < first_create && del < first_create);
    }
}
