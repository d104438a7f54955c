//! `list` on Redis: the names of the locks that are held or waited for,
//! found with SCAN (never KEYS) on the server, or on every master of a
//! Cluster in turn.

use redis::Value;

use super::reply::{as_int, as_string};
use super::topology::Source;
use super::StandaloneSession;
use crate::error::Result;
use crate::name::LockId;
use crate::url::host_port;

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
    /// Names of the locks under `prefix` matching `pattern`, sorted.
    pub(super) fn list_locks(&mut self, prefix: &str, pattern: &str) -> Result<Vec<String>> {
        let probe = LockId::new(prefix, "*");
        let mut names = Vec::new();
        if !matches!(*self.source, Source::Cluster(_)) {
            self.scan_names(prefix, pattern, &mut names)?;
            names.sort();
            return Ok(names);
        }
        // Cluster: every master holds some of the slots.
        let slots: Vec<Value> = self.call(&probe, self.timeout(), true, |con| {
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
        names.sort();
        Ok(names)
    }

    /// Names of the locks on this session's server whose keys match (SCAN).
    fn scan_names(&mut self, prefix: &str, pattern: &str, names: &mut Vec<String>) -> Result<()> {
        let head = if prefix.is_empty() {
            String::new()
        } else {
            format!("{prefix}:")
        };
        let glob = format!("{head}{{{pattern}}}*");
        let probe = LockId::new(prefix, "*");
        let mut cursor: u64 = 0;
        loop {
            let (next, batch): (u64, Vec<String>) =
                self.call(&probe, self.timeout(), true, |con| {
                    redis::cmd("SCAN")
                        .arg(cursor)
                        .arg("MATCH")
                        .arg(&glob)
                        .arg("COUNT")
                        .arg(500)
                        .query(con)
                })?;
            for key in batch {
                // The lock hash exists while held; the waiters set while waited for.
                let rest = &key[head.len()..];
                let name = rest
                    .strip_suffix('}')
                    .or_else(|| rest.strip_suffix("}:waiters"))
                    .and_then(|n| n.strip_prefix('{'));
                if let Some(name) = name.filter(|n| !n.contains(['{', '}'])) {
                    if !names.iter().any(|n: &String| n == name) {
                        names.push(name.to_owned());
                    }
                }
            }
            cursor = next;
            if cursor == 0 {
                return Ok(());
            }
        }
    }
}
