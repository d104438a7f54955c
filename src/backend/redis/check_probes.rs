//! The probes `rlock check` sends (see `checks`): one command with the raw
//! reply (a refusal is a finding, not an error), settings read from INFO or
//! CONFIG, the topology, whether scripts are atomic, and sub-second BLPOP.
//! Probe keys live under the prefix in a hash tag no lock name can have (it
//! holds a space), expire within seconds, and are deleted at the end.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use redis::{Client, Connection, ErrorKind, RedisError, RedisResult};

use super::StandaloneSession;
use super::diagnose::server_said;
use super::topology::{Source, node_client};
use crate::backend::fitness::Verdict;
use crate::backend::script;
use crate::error::Cause;

/// How the checked server is reached: it decides what replicas mean.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Reach {
    /// A single server (or one of a Redlock quorum): replicas are optional.
    Single,
    /// The master the sentinels name: without a replica there is no failover.
    Sentinel,
    /// A Cluster node.
    Cluster,
}

/// Why a probe was not sent: an earlier one got no answer.
const NOT_ASKED: &str = "not asked: the server stopped answering";

/// The server refused `what`, or did not answer: an `unknown` finding's detail.
pub(super) fn refused(what: &str, err: &RedisError) -> String {
    if err.to_string().contains(NOT_ASKED) {
        NOT_ASKED.to_owned()
    } else if is_refusal(err) {
        format!("{what} refused: {}", server_said(err))
    } else {
        format!("{what}: no answer (see `answering`)")
    }
}

/// How long the BLPOP probe blocks.
pub(super) const BLPOP_PROBE: Duration = Duration::from_millis(100);

/// Most MOVED redirections one probe follows.
const MAX_REDIRECTS: usize = 5;
/// How long a probe key lives if the check dies before deleting it (ms).
pub(super) const PROBE_LIFE_MS: u64 = 10_000;

/// The keys the probes use: one hash tag, so every probe reaches one node.
pub(super) struct ProbeKeys {
    /// The hash tag's common part: `PREFIX:{check RANDOM}`.
    pub base: String,
    /// A counter for the atomicity probe.
    pub hash: String,
    /// A list for the BLPOP probe.
    pub list: String,
}

/// Fresh probe keys under `prefix` (`{check RANDOM}`: a lock NAME has no
/// whitespace, so no lock's keys can be these).
pub(super) fn probe_keys(prefix: &str) -> ProbeKeys {
    let mut bytes = [0u8; 6];
    // Without randomness two checks at once would share keys; the probes
    // still hold (each only adds whole steps), so a fixed tag will do.
    let _ = crate::lock::token::random_bytes(&mut bytes);
    let tag: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let base = if prefix.is_empty() {
        format!("{{check {tag}}}")
    } else {
        format!("{prefix}:{{check {tag}}}")
    };
    ProbeKeys {
        hash: format!("{base}:atomic"),
        list: format!("{base}:blpop"),
        base,
    }
}

/// The value of `name` in an INFO reply (`name:value` lines).
pub(super) fn field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines().find_map(|line| {
        line.strip_prefix(name)
            .and_then(|rest| rest.strip_prefix(':'))
            .map(str::trim)
    })
}

/// A setting readable from an INFO section (which managed services leave
/// open) or, failing that, from CONFIG GET (which they often disable).
pub(super) struct Setting<'a> {
    section: &'a str,
    info_field: &'a str,
    config: &'a str,
}

impl<'a> Setting<'a> {
    pub(super) fn new(section: &'a str, info_field: &'a str, config: &'a str) -> Self {
        Setting {
            section,
            info_field,
            config,
        }
    }
}

impl StandaloneSession {
    /// One probe: the reply, or the server's error as it came (following
    /// Cluster MOVED to the probe key's node).
    pub(super) fn ask<T>(
        &mut self,
        op: impl Fn(&mut Connection) -> RedisResult<T>,
    ) -> RedisResult<T> {
        if self.lost.is_some() {
            return Err(RedisError::from((ErrorKind::Io, NOT_ASKED)));
        }
        let limit = self.timeout();
        let mut redirects = 0;
        loop {
            match self.con(limit).and_then(&op) {
                Ok(value) => {
                    self.answered = true;
                    return Ok(value);
                }
                Err(err)
                    if redirects < MAX_REDIRECTS
                        && matches!(*self.source, Source::Cluster(_))
                        && err.redirect_node().is_some() =>
                {
                    redirects += 1;
                    self.node = err.redirect_node().map(|(addr, _)| addr.to_owned());
                    self.con = None;
                }
                Err(err) => {
                    if !matches!(err.kind(), ErrorKind::Server(_)) {
                        self.con = None;
                        self.lost = Some(self.diagnosis(&err));
                    }
                    return Err(err);
                }
            }
        }
    }

    /// What went wrong on the way to the server, in the words of rlock's
    /// other commands (`no reply within 2s`, `connection refused ...`).
    pub(super) fn diagnosis(&self, err: &RedisError) -> String {
        match self.unavailable(err, self.timeout()).cause() {
            Cause::Unavailable { cause, .. } | Cause::Unreachable { cause, .. } => cause.clone(),
            _ => server_said(err),
        }
    }

    /// The server this session talks to: the master the sentinels named, the
    /// cluster node, or the server of the URL.
    pub(super) fn address(&self) -> String {
        match (&*self.source, &self.master, &self.node) {
            (Source::Sentinel(_), Some(master), _) => master.clone(),
            (Source::Cluster(_), _, Some(node)) => node.clone(),
            _ => self.spec.display.clone(),
        }
    }

    /// A second connection to the same server or node.
    fn second_connection(&self) -> RedisResult<Connection> {
        let limit = self.timeout();
        let client = match (&*self.source, &self.master, &self.node) {
            (Source::Sentinel(spec), Some(addr), _) | (Source::Cluster(spec), _, Some(addr)) => {
                node_client(spec, addr)?
            }
            (source, _, _) => source.client(limit)?,
        };
        let con = client.get_connection_with_timeout(limit)?;
        con.set_read_timeout(Some(limit))?;
        con.set_write_timeout(Some(limit))?;
        Ok(con)
    }

    /// One INFO section.
    pub(super) fn info_section(&mut self, section: &str) -> RedisResult<String> {
        self.ask(|con| redis::cmd("INFO").arg(section).query::<String>(con))
    }

    /// A setting's value, or why it could not be read (for an `unknown`).
    pub(super) fn setting(&mut self, setting: &Setting<'_>) -> Result<String, String> {
        let from_info = match self.info_section(setting.section) {
            Ok(info) => match field(&info, setting.info_field) {
                Some(value) => return Ok(value.to_owned()),
                None => format!("INFO {} has no {}", setting.section, setting.info_field),
            },
            Err(err) => refused(&format!("INFO {}", setting.section), &err),
        };
        if self.lost.is_some() {
            return Err(from_info);
        }
        self.config_get(setting.config)
            .map_err(|why| format!("{from_info}; {why}"))
    }

    /// `CONFIG GET name`: the value, or why it could not be read (for an
    /// `unknown`).
    pub(super) fn config_get(&mut self, name: &str) -> Result<String, String> {
        let reply = self.ask(|con| {
            redis::cmd("CONFIG")
                .arg("GET")
                .arg(name)
                .query::<Vec<String>>(con)
        });
        match reply {
            Ok(pair) if pair.len() == 2 => Ok(pair[1].clone()),
            Ok(_) => Err(format!("CONFIG GET {name} names nothing")),
            Err(err) => Err(refused(&format!("CONFIG GET {name}"), &err)),
        }
    }

    /// Sentinel: the master's settings as the first sentinel that answers
    /// holds them (`SENTINEL MASTER`, field by field), or why none said (for
    /// an `unknown`). The sentinels are asked as rlock asks them where the
    /// master is: without the master's credentials.
    pub(super) fn sentinel_master(&self) -> Result<HashMap<String, String>, String> {
        let Source::Sentinel(spec) = &*self.source else {
            return Err("not reached through sentinels".into());
        };
        let sentinel = spec
            .sentinel
            .as_ref()
            .expect("a Sentinel source has sentinels");
        let scheme = if sentinel.tls { "rediss" } else { "redis" };
        let limit = self.timeout();
        let mut why = "no sentinel listed".to_owned();
        for address in &sentinel.sentinels {
            let asked = redis::IntoConnectionInfo::into_connection_info(
                format!("{scheme}://{address}").as_str(),
            )
            .and_then(|info| match &spec.tls {
                Some(certs) => Client::build_with_tls(info, certs.clone()),
                None => Client::open(info),
            })
            .and_then(|client| client.get_connection_with_timeout(limit))
            .and_then(|mut con| {
                con.set_read_timeout(Some(limit))?;
                redis::cmd("SENTINEL")
                    .arg("MASTER")
                    .arg(&sentinel.master)
                    .query::<HashMap<String, String>>(&mut con)
            });
            // Another sentinel may answer where this one did not.
            why = match asked {
                Ok(fields) => return Ok(fields),
                Err(err) if is_refusal(&err) => {
                    format!("sentinel {address}: {}", refused("SENTINEL MASTER", &err))
                }
                Err(err) => format!(
                    "sentinel {address}: SENTINEL MASTER: no answer ({})",
                    server_said(&err)
                ),
            };
        }
        Err(why)
    }

    /// Where locks live: one server, the sentinels' master, or a cluster.
    pub(super) fn topology(&mut self, reach: Reach) -> (Verdict, String) {
        let address = self.address();
        match (reach, &*self.source) {
            (Reach::Sentinel, Source::Sentinel(spec)) => {
                let sentinel = spec
                    .sentinel
                    .as_ref()
                    .expect("a Sentinel source has sentinels");
                (
                    Verdict::Ok,
                    format!(
                        "Sentinel: master {} at {address}, as the sentinels name it ({} listed)",
                        sentinel.master,
                        sentinel.sentinels.len()
                    ),
                )
            }
            (Reach::Cluster, _) => {
                let info =
                    match self.ask(|con| redis::cmd("CLUSTER").arg("INFO").query::<String>(con)) {
                        Ok(info) => info,
                        Err(err) => return (Verdict::Unknown, refused("CLUSTER INFO", &err)),
                    };
                let state = field(&info, "cluster_state").unwrap_or("?").to_owned();
                let nodes = field(&info, "cluster_known_nodes").unwrap_or("?");
                let masters = field(&info, "cluster_size").unwrap_or("?");
                let verdict = if state == "ok" {
                    Verdict::Ok
                } else {
                    Verdict::Fail
                };
                (
                    verdict,
                    format!(
                        "Cluster: state {state}, {nodes} node(s), {masters} master(s) serving slots; scripts, BLPOP and rights are checked on one master, the settings on each"
                    ),
                )
            }
            _ => (Verdict::Ok, format!("one server, {address}")),
        }
    }

    /// Scripts atomic: a script adds whole steps to a counter while a second
    /// connection reads it; any read that is not a whole number of scripts
    /// saw a script half done.
    pub(super) fn atomic(&mut self, key: &str) -> (Verdict, String) {
        const STEPS: u64 = 1000;
        const ROUNDS: u64 = 10;
        let run = |session: &mut StandaloneSession| {
            session.ask(|con| {
                script::CHECK_ATOMIC
                    .key(key)
                    .arg("steps", STEPS)
                    .arg("life_ms", PROBE_LIFE_MS)
                    .invoke::<u64>(con)
            })
        };
        // The first run finds the key's node (Cluster) for the reader.
        if let Err(err) = run(self) {
            return (Verdict::Unknown, refused("the atomicity probe", &err));
        }
        let mut reader = match self.second_connection() {
            Ok(con) => con,
            Err(err) => return (Verdict::Unknown, refused("a second connection", &err)),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let watch = {
            let stop = Arc::clone(&stop);
            let key = key.to_owned();
            std::thread::spawn(move || -> RedisResult<(u64, Option<u64>)> {
                let mut reads = 0;
                while !stop.load(Ordering::Relaxed) {
                    let seen: Option<u64> =
                        redis::cmd("HGET").arg(&key).arg("n").query(&mut reader)?;
                    reads += 1;
                    if let Some(n) = seen.filter(|n| n % STEPS != 0) {
                        return Ok((reads, Some(n)));
                    }
                }
                Ok((reads, None))
            })
        };
        let mut failed = None;
        let mut total = 0;
        for _ in 1..ROUNDS {
            match run(self) {
                Ok(n) => total = n,
                Err(err) => {
                    failed = Some(err);
                    break;
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        let watched = watch.join();
        let _ = self.ask(|con| redis::cmd("DEL").arg(key).query::<i64>(con));
        if let Some(err) = failed {
            return (Verdict::Unknown, refused("the atomicity probe", &err));
        }
        match watched {
            Ok(Ok((reads, Some(seen)))) => (
                Verdict::Fail,
                format!(
                    "another connection read the counter at {seen} while each script adds {STEPS} (read {reads}): it saw a script half done, so the server does not run scripts atomically and no lock excludes anything there; use Redis or Valkey (or the server's transaction mode)"
                ),
            ),
            Ok(Ok((reads, None))) if total == ROUNDS * STEPS => (
                Verdict::Ok,
                format!(
                    "{reads} read(s) from another connection during {ROUNDS} scripts of {STEPS} writes never saw one half done"
                ),
            ),
            Ok(Ok(_)) => (
                Verdict::Fail,
                format!(
                    "{ROUNDS} scripts of {STEPS} increments left the counter at {total}, not {}: the server does not run scripts as written",
                    ROUNDS * STEPS
                ),
            ),
            Ok(Err(err)) => (
                Verdict::Unknown,
                refused("HGET from a second connection", &err),
            ),
            Err(_) => (Verdict::Unknown, "the reading thread failed".into()),
        }
    }

    /// BLPOP with a sub-second timeout returns nil after about that long
    /// (waiting runs block this way; Redis before 6.0 refuses the decimal).
    pub(super) fn blpop(&mut self, list: &str) -> (Verdict, String) {
        let limit = self.timeout();
        let secs = format!("{:.1}", BLPOP_PROBE.as_secs_f64());
        let started = Instant::now();
        let reply: RedisResult<Option<(String, String)>> = self.ask(|con| {
            con.set_read_timeout(Some(limit + BLPOP_PROBE))?;
            redis::cmd("BLPOP").arg(list).arg(&secs).query(con)
        });
        let took = started.elapsed();
        match reply {
            Ok(None) if took >= BLPOP_PROBE / 2 => (
                Verdict::Ok,
                format!(
                    "BLPOP with a {secs} s timeout returned nil after {} ms",
                    took.as_millis()
                ),
            ),
            Ok(None) => (
                Verdict::Warn,
                format!(
                    "BLPOP with a {secs} s timeout returned after {} ms: waiting runs would poll the server instead of blocking",
                    took.as_millis()
                ),
            ),
            // A server that reads the timeout as 0 blocks for ever.
            Err(err) if err.is_timeout() && self.lost.is_some() => {
                self.lost = None;
                (
                    Verdict::Fail,
                    format!(
                        "BLPOP with a {secs} s timeout did not return within {} ms: the server may read it as 0 (block for ever); waiting runs block this way",
                        (limit + BLPOP_PROBE).as_millis()
                    ),
                )
            }
            Ok(Some(_)) => (
                Verdict::Unknown,
                "BLPOP found the probe list filled by someone else".into(),
            ),
            Err(err) if is_refusal(&err) => (
                Verdict::Fail,
                format!(
                    "BLPOP {secs} refused: {}; waiting runs block with sub-second BLPOP timeouts (Redis 6.0 or newer, +blpop for this user)",
                    server_said(&err)
                ),
            ),
            Err(err) => (Verdict::Unknown, refused("BLPOP", &err)),
        }
    }
}

/// An error reply (a refusal, an unknown command), not a lost connection.
pub(super) fn is_refusal(err: &RedisError) -> bool {
    matches!(err.kind(), ErrorKind::Server(_)) && err.redirect_node().is_none()
}
