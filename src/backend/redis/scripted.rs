//! Calling rlock's lock scripts from a session: each with every key of its
//! lock and the wake-up lists of the waiters first in line, the messages a
//! script could not deliver handed on to wake.lua, and renew.lua and
//! release.lua, which several operations share.

use std::time::{Duration, Instant};

use redis::{RedisError, Value};

use super::call::Retry;
use super::keys::Keys;
use super::reply::{self, decode};
use super::topology::Source;
use super::{StandaloneSession, loss, millis};
use crate::backend::Extend;
use crate::backend::{ServerTime, script};
use crate::error::Result;
use crate::lock::name::LockId;
use crate::lock::token::{Digest, Token};

/// The lock's slot is being migrated, and a script that declares all its
/// keys cannot run here: TRYAGAIN (some of them are here, some not; Redis 7),
/// or ASK (not all of them are here; Redis 6). The holds' key alone is asked
/// for here first (after ASKING, harmless on the owner); where it has gone,
/// that answers ASK, which the call follows.
pub(super) fn migrating(err: &RedisError) -> bool {
    matches!(err.code(), Some("TRYAGAIN" | "ASK"))
}

/// A script invocation with every key of `keys` (see `src/backend/lua/prelude/1-layout.lua`),
/// and the wake-up lists of the waiters whose digests are `others`.
pub(super) fn with_keys<'a>(
    script: &'a script::Script,
    keys: &Keys,
    token: &Token,
    others: &[Digest],
) -> script::Invocation<'a> {
    let mut invocation = script.prepare_invoke();
    for key in keys.script_keys(token, others) {
        invocation.key(key);
    }
    invocation
}

impl StandaloneSession {
    /// release.lua for `token`'s hold, with `tail` after the digest in ARGV
    /// (a history cap and the event's fields, or a retraction: see the
    /// script). Not idempotent (it decrements a hold count): never repeated
    /// blindly.
    pub(super) fn release_script<S: AsRef<str>>(
        &mut self,
        lock: &LockId,
        token: &Token,
        tail: &[S],
    ) -> Result<Option<u64>> {
        let stored = Keys::of(lock);
        let others = self.others(&stored);
        // Behind Sentinel the release is the run's last word: sent to a master
        // demoted in the last moments (the sentinels' answer is otherwise
        // trusted for a while), it would succeed there while the new master
        // lacks the hold and another run has it. Ask the sentinels first.
        if matches!(*self.source, Source::Sentinel(_)) {
            self.master_checked = None;
        }
        let reply: Value = self.call(lock, self.timeout(), Retry::Never, |con| {
            let mut invocation = with_keys(&script::RELEASE, &stored, token, &others);
            invocation.arg("owner", token.digest().as_str());
            for (i, arg) in tail.iter().enumerate() {
                let name = if i == 0 { "history_cap" } else { "event" };
                invocation.arg(name, arg.as_ref());
            }
            invocation.invoke(con)
        })?;
        let (reply, _) = self.outcome(lock, &stored, token, reply, "release", self.timeout())?;
        let left: i64 = decode(reply, &lock.name, "release")?;
        if left == 0 {
            self.next_up.remove(&stored.holds);
        }
        Ok(u64::try_from(left).ok())
    }
    /// renew.lua for `token`'s hold, within `limit`.
    pub(super) fn renew_script(
        &mut self,
        lock: &LockId,
        token: &Token,
        ttl: Duration,
        limit: Duration,
        extend: Extend,
    ) -> Result<bool> {
        let limit = limit.min(self.timeout());
        let start = Instant::now();
        // A reading of this renewal's, or none: an older one would look like
        // a clock that stood still.
        self.server_time = None;
        self.follow_master(limit);
        let deadline = limit;
        let limit = limit.saturating_sub(start.elapsed());
        let stored = Keys::of(lock);
        let others = self.others(&stored);
        let reply: Value = self.call_within(lock, limit, limit, Retry::Idempotent, |con| {
            let mut invocation = with_keys(&script::RENEW, &stored, token, &others);
            invocation
                .arg("owner", token.digest().as_str())
                .arg("lease_ms", millis(ttl));
            if let Extend::Exactly = extend {
                invocation.arg("exact", "exact");
            }
            match invocation.invoke(con) {
                // The slot is being migrated: renew from the holds' key alone.
                Err(err) if migrating(&err) => {
                    let mut alone = script::RENEW_ALONE.key(&stored.holds);
                    alone
                        .arg("owner", token.digest().as_str())
                        .arg("lease_ms", millis(ttl));
                    if let Extend::Exactly = extend {
                        alone.arg("exact", "exact");
                    }
                    alone.invoke_asking(con)
                }
                other => other,
            }
        })?;
        // Any delivery within what is left of the renewal's bound.
        let left = deadline.saturating_sub(start.elapsed());
        let (reply, next) = self.outcome(lock, &stored, token, reply, "renew", left)?;
        let (held, now) = reply::renewed(reply, &lock.name, "renew")?;
        self.server_time = Some(ServerTime {
            server: self.spec.display.clone(),
            connection: self.connections,
            ms: now,
        });
        if held == 1 {
            // The hold is on the master followed: a later loss is not the
            // failover's.
            self.failed_over = None;
            self.confirmed_on = Some(self.connections);
            self.next_up.insert(stored.holds.clone(), next);
        } else {
            self.next_up.remove(&stored.holds);
        }
        if held == 1 && self.evicted_before.is_none() {
            self.evicted_before = match self.info(lock, "stats", self.timeout()) {
                Ok(info) => loss::parse(&info).evicted,
                Err(err) => {
                    crate::report::verbose(|| format!("{}: INFO stats: {err}", lock.name));
                    None
                }
            };
        }
        Ok(held == 1)
    }
}

impl StandaloneSession {
    /// The digests of the waiters this session last heard stand first in
    /// line for lock `stored`: their lists go with its next script there.
    pub(super) fn others(&self, stored: &Keys) -> Vec<Digest> {
        self.next_up.get(&stored.holds).cloned().unwrap_or_default()
    }

    /// A lock script's own reply and the waiters first in line, once the
    /// messages it could not deliver (for lists it was not given) are
    /// delivered by wake.lua, which is given them. That second call is best
    /// effort: a message it fails to deliver (the connection lost, this
    /// process killed) costs its waiter only latency, as the waiter looks
    /// again when its block times out (half its ttl at most). `limit` bounds
    /// that call (none is made when it is zero).
    pub(super) fn outcome(
        &mut self,
        lock: &LockId,
        stored: &Keys,
        token: &Token,
        reply: Value,
        what: &str,
        limit: Duration,
    ) -> Result<(Value, Vec<Digest>)> {
        let Some((reply, outbox, next)) = reply::split(reply) else {
            return Err(crate::error::Error::internal(format!(
                "{}: unexpected reply to {what}",
                lock.name
            )));
        };
        if outbox.len() >= 2 && !limit.is_zero() {
            let lists: Vec<Digest> = outbox
                .iter()
                .step_by(2)
                .cloned()
                .map(Digest::named)
                .collect();
            let delivered = self.call_within(lock, limit, limit, Retry::Never, |con| {
                with_keys(&script::WAKE, stored, token, &lists)
                    .arg("outbox", &outbox)
                    .invoke::<i64>(con)
            });
            if let Err(err) = delivered {
                crate::report::verbose(|| {
                    format!("{}: waking the waiters after {what}: {err}", lock.name)
                });
            }
        }
        Ok((reply, next.into_iter().map(Digest::named).collect()))
    }
}
