//! `status --redisson` and `list --redisson`: locks stored in Redisson's
//! layout (a hash at key NAME, `"<uuid>:<thread-id>"` → hold count, with a
//! PEXPIRE lease), whether rlock (`--redisson`) or a Redisson client holds
//! them. Redisson records no host, pid, command or waiters: what is shown is
//! what the hash tells (the holder's thread id, its hold count, the lease
//! left), never the owner field itself, which is a capability to unlock.

use std::collections::BTreeMap;

use super::super::call::Retry;
use super::super::keys::Keys;
use super::super::topology::Source;
use super::RedissonSession;
use crate::backend::{HolderStatus, LockStatus};
use crate::error::{Cause, Error, Result};
use crate::lock::kind::Kind;
use crate::lock::name::LockId;

/// Whether `field` looks like a Redisson owner field: a UUID (Redisson's
/// client id) and a thread id.
fn owner_field(field: &str) -> Option<&str> {
    let (id, thread) = field.rsplit_once(':')?;
    let uuid = id.len() >= 32 && id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-');
    let digits = !thread.is_empty() && thread.bytes().all(|b| b.is_ascii_digit());
    (uuid && digits).then_some(thread)
}

impl RedissonSession {
    /// `lock` (a `--redisson` lock) as Redisson's hash shows it.
    pub(super) fn hash_status(&mut self, lock: &LockId) -> Result<LockStatus> {
        let stored = Keys::of(lock);
        let kind: String =
            self.inner
                .call(lock, self.inner.timeout(), Retry::Idempotent, |con| {
                    redis::cmd("TYPE").arg(&stored.holds).query(con)
                })?;
        let free = |fence| LockStatus {
            kind: None,
            limit: 1,
            fence,
            waiting: 0,
            holders: Vec::new(),
            waiters: Vec::new(),
            servers: None,
            redisson: true,
        };
        let (fields, pttl, fence): (BTreeMap<String, String>, i64, Option<String>) =
            match kind.as_str() {
                "none" | "hash" => {
                    self.inner
                        .call(lock, self.inner.timeout(), Retry::Idempotent, |con| {
                            redis::pipe()
                                .atomic()
                                .cmd("HGETALL")
                                .arg(&stored.holds)
                                .cmd("PTTL")
                                .arg(&stored.holds)
                                .cmd("GET")
                                .arg(&stored.fence)
                                .query(con)
                        })?
                }
                other => {
                    return Err(Error::from(Cause::ForeignKey(format!(
                        "key {} holds a {other}, not a Redisson lock hash",
                        lock.name
                    )))
                    .in_lock(&lock.name));
                }
            };
        let fence = fence.and_then(|f| f.parse().ok()).unwrap_or(0);
        if fields.is_empty() {
            return Ok(free(fence));
        }
        let mut holders = Vec::new();
        for (field, count) in &fields {
            let Some(thread) = owner_field(field) else {
                return Err(Error::from(Cause::ForeignKey(format!(
                    "key {} is a hash that is not a Redisson lock (a field is not \"<uuid>:<thread-id>\")",
                    lock.name
                )))
                .in_lock(&lock.name));
            };
            holders.push(HolderStatus {
                host: String::new(),
                pid: String::new(),
                command: format!("Redisson thread {thread}, {count} hold(s)"),
                note: String::new(),
                since_ms: 0,
                lease_ms: u64::try_from(pttl).ok(),
                ttl_ms: None,
                renewed_ms: None,
                earlier: false,
            });
        }
        Ok(LockStatus {
            kind: Some(Kind::Exclusive),
            holders,
            ..free(fence)
        })
    }

    /// Keys matching `pattern` that hold a Redisson lock (SCAN ... TYPE
    /// hash, then each hash's fields looked at), sorted.
    pub(super) fn list_hashes(&mut self, pattern: &str) -> Result<Vec<String>> {
        let probe = LockId::redisson(pattern);
        if matches!(*self.inner.source, Source::Cluster(_)) {
            return Err(Error::usage(
                "list --redisson is not supported on a Cluster; use status --redisson NAME",
            ));
        }
        let mut names = Vec::new();
        for key in self.inner.scan(&probe, pattern, Some("hash"))? {
            if key.contains(['{', '}']) || crate::lock::name::LockName::new(&key).is_err() {
                continue;
            }
            let fields: Vec<String> =
                self.inner
                    .call(&probe, self.inner.timeout(), Retry::Idempotent, |con| {
                        redis::cmd("HKEYS").arg(&key).query(con)
                    })?;
            if !fields.is_empty() && fields.iter().all(|f| owner_field(f).is_some()) {
                names.push(key);
            }
        }
        names.sort();
        names.dedup();
        Ok(names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_fields_are_a_uuid_and_a_thread_id() {
        assert_eq!(
            owner_field("0d1c9a4e-7f0b-4a55-9d36-6b0f1f3a2c11:57"),
            Some("57")
        );
        assert_eq!(owner_field("name"), None);
        assert_eq!(owner_field("0d1c9a4e-7f0b-4a55-9d36-6b0f1f3a2c11:x"), None);
    }
}
