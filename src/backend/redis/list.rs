//! `list` on Redis: the names of the locks that are held or waited for,
//! found with SCAN (never KEYS) on the server, or on every master of a
//! Cluster in turn; and their states, read [`BATCH`] to a round trip.

use std::collections::HashSet;

use redis::Value;

use super::call::Retry;
use super::keys::Keys;
use super::reply::{as_int, as_string, decode};
use super::topology::Source;
use super::{StandaloneSession, with_keys};
use crate::backend::script;
use crate::backend::url::host_port;
use crate::backend::{Inspect, LockStatus};
use crate::error::Result;
use crate::lock::name::LockId;
use crate::lock::token::Token;

/// Status scripts sent in one pipeline: 10,000 locks in 100 round trips
/// rather than 10,000, each pipeline's replies well under a megabyte.
const BATCH: usize = 100;

/// The masters (`host:port`) serving slots in a `CLUSTER SLOTS` reply, in
/// the order of their slots.
pub(super) fn masters_of(slots: &[Value]) -> Vec<String> {
    let mut masters: Vec<String> = Vec::new();
    for range in slots {
        let Value::Array(fields) = range else {
            continue;
        };
        let Some(Value::Array(master)) = fields.get(2) else {
            continue;
        };
        let (Some(host), Some(port)) = (
            master.first().and_then(as_string),
            master.get(1).and_then(as_int),
        ) else {
            continue;
        };
        let addr = host_port(&host, port);
        if !masters.contains(&addr) {
            masters.push(addr);
        }
    }
    masters
}

impl StandaloneSession {
    /// The state of each lock of `locks`, in order. The first is read alone
    /// (EVALSHA, loading the script on NOSCRIPT), the rest [`BATCH`] to a
    /// pipeline, where a script is not loaded. A pipeline that fails (a key
    /// of another type, the script flushed meanwhile) is read again one lock
    /// at a time, so the error names its lock. A Cluster spreads the locks
    /// over its nodes: one at a time there.
    pub(super) fn status_batches(&mut self, locks: &[LockId]) -> Result<Vec<LockStatus>> {
        let Some((first, rest)) = locks.split_first() else {
            return Ok(Vec::new());
        };
        if self.is_cluster() {
            return locks.iter().map(|keys| self.status(keys)).collect();
        }
        let mut states = Vec::with_capacity(locks.len());
        states.push(self.status(first)?);
        let nobody = Token::parse(&"0".repeat(32)).expect("a valid token");
        for batch in rest.chunks(BATCH) {
            let piped: Result<Vec<Value>> =
                self.call(&batch[0], self.timeout(), Retry::Idempotent, |con| {
                    let mut pipe = redis::pipe();
                    for keys in batch {
                        pipe.add_command(
                            with_keys(&script::STATUS, &Keys::of(keys), &nobody, &[]).eval_cmd(),
                        );
                    }
                    pipe.query(con)
                });
            match piped {
                Ok(replies) if replies.len() == batch.len() => {
                    for (reply, keys) in replies.into_iter().zip(batch) {
                        states.push(decode(reply, &keys.name, "status")?);
                    }
                }
                _ => {
                    for keys in batch {
                        states.push(self.status(keys)?);
                    }
                }
            }
        }
        Ok(states)
    }

    /// Names of the locks under `prefix` matching `pattern`, sorted.
    pub(super) fn list_locks(&mut self, prefix: &str, pattern: &str) -> Result<Vec<String>> {
        let probe = LockId::new(prefix, "*");
        let mut names = HashSet::new();
        if !matches!(*self.source, Source::Cluster(_)) {
            self.scan_names(prefix, pattern, &mut names)?;
            return Ok(sorted(names));
        }
        // Cluster: every master holds some of the slots.
        let slots: Vec<Value> = self.call(&probe, self.timeout(), Retry::Idempotent, |con| {
            redis::cmd("CLUSTER").arg("SLOTS").query(con)
        })?;
        let masters = masters_of(&slots);
        let home = self.node.take();
        for master in masters {
            self.node = Some(master);
            self.con = None;
            let scanned = self.scan_names(prefix, pattern, &mut names);
            self.con = None;
            scanned?;
        }
        self.node = home;
        Ok(sorted(names))
    }

    /// Names of the locks on this session's server whose keys match (SCAN).
    fn scan_names(
        &mut self,
        prefix: &str,
        pattern: &str,
        names: &mut HashSet<String>,
    ) -> Result<()> {
        let head = if prefix.is_empty() {
            String::new()
        } else {
            format!("{prefix}:")
        };
        let glob = format!("{head}{{{pattern}}}*");
        let probe = LockId::new(prefix, "*");
        for key in self.scan(&probe, &glob, None)? {
            // The holds exist while held (an earlier rlock's hold: its hash
            // at `{NAME}` too); the waiters set while waited for.
            let rest = &key[head.len()..];
            let name = rest
                .strip_suffix("}:leases")
                .or_else(|| rest.strip_suffix('}'))
                .or_else(|| rest.strip_suffix("}:waiters"))
                .and_then(|n| n.strip_prefix('{'));
            if let Some(name) = name.filter(|n| !n.contains(['{', '}'])) {
                names.insert(name.to_owned());
            }
        }
        Ok(())
    }

    /// Every key on this session's server that matches the glob `glob` (and
    /// is of `kind`, when given), by SCAN: never KEYS. `probe` names the lock
    /// the calls are made for, in messages.
    pub(super) fn scan(
        &mut self,
        probe: &LockId,
        glob: &str,
        kind: Option<&str>,
    ) -> Result<Vec<String>> {
        let mut keys = Vec::new();
        let mut cursor: u64 = 0;
        loop {
            let (next, batch): (u64, Vec<String>) =
                self.call(probe, self.timeout(), Retry::Idempotent, |con| {
                    let mut scan = redis::cmd("SCAN");
                    scan.arg(cursor)
                        .arg("MATCH")
                        .arg(glob)
                        .arg("COUNT")
                        .arg(500);
                    if let Some(kind) = kind {
                        scan.arg("TYPE").arg(kind);
                    }
                    scan.query(con)
                })?;
            keys.extend(batch);
            cursor = next;
            if cursor == 0 {
                return Ok(keys);
            }
        }
    }
}

fn sorted(names: HashSet<String>) -> Vec<String> {
    let mut names: Vec<String> = names.into_iter().collect();
    names.sort_unstable();
    names
}
