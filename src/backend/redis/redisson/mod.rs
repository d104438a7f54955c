//! `--redisson`: locks stored as Redisson's `getLock(NAME)` stores them, a
//! session of the Redis backend opened for that dialect. It talks through a
//! [`StandaloneSession`] (connections, calls, routing) with Redisson's own
//! scripts, plus rlock's fence and history. Beside it: `wait` (waiting on
//! Redisson's unlock channel) and `status` (status and list of locks in
//! Redisson's layout).

mod status;
mod wait;

use std::time::{Duration, Instant};

use redis::{RedisResult, Value};

use super::call::Retry;
use super::keys::Keys;
use super::reply::attempt;
use super::{StandaloneSession, millis};
use crate::backend::Extend;
use crate::backend::script;
use crate::backend::{
    AcquireRequest, Administer, Attempt, Inspect, LockStatus, ServerTime, Session, Wake,
};
use crate::error::Result;
use crate::lock::event::Event;
use crate::lock::name::LockId;
use crate::lock::token::{Fence, Token};

/// A session whose locks are Redisson's: the hash at key NAME, its unlock
/// channel, no waiter state in Redis.
pub(super) struct RedissonSession {
    pub(super) inner: StandaloneSession,
}

/// redisson_record.lua for `event`, added to the history when the owner
/// `field` holds the lock once (`when` "held") or no more ("gone").
fn redisson_record<'a>(
    stored: &Keys,
    field: &str,
    cap: u32,
    when: &str,
    event: &Event,
) -> script::Invocation<'a> {
    let mut invocation = script::REDISSON_RECORD.key(&stored.history);
    invocation
        .key(&stored.holds)
        .key(&stored.fence)
        .arg("history_cap", cap)
        .arg("idle_ms", millis(crate::lock::event::IDLE))
        .arg("field", field)
        .arg("when", when);
    for (name, value) in event.fields() {
        invocation.arg("event", name).arg("event", value);
    }
    invocation
}

/// Whether redisson_record.lua wrote its event; a failure is a `-v` note.
fn recorded(lock: &LockId, result: RedisResult<Value>) -> bool {
    match result {
        Ok(Value::Int(1)) => true,
        Ok(Value::Int(-1)) => {
            crate::report::verbose(|| {
                format!(
                    "{}: history not written: key {} is not a stream (another program's?)",
                    lock.name,
                    Keys::of(lock).history
                )
            });
            false
        }
        Ok(_) => false,
        Err(err) => {
            crate::report::verbose(|| format!("{}: history not written: {err}", lock.name));
            false
        }
    }
}

impl Session for RedissonSession {
    fn acquire(&mut self, req: &AcquireRequest<'_>) -> Result<Attempt> {
        let lock = req.keys;
        let stored = Keys::of(lock);
        if req.register.is_some() && self.inner.sub.is_none() {
            self.subscribe(lock, &stored.unlock_channel(), req.token)?;
        }
        let s = &mut self.inner;
        let inherited: Vec<String> = req.inherited.iter().map(Token::redisson_field).collect();
        let inherited = inherited.join(",");
        let field = req.token.redisson_field();
        // The `acquired` event goes in the same round trip (not for a
        // hold the round may give back: that is recorded once kept).
        let record = req
            .record
            .filter(|(cap, _)| *cap > 0 && !req.tentative)
            .map(|(cap, event)| redisson_record(&stored, &field, cap, "held", event));
        let (reply, written): (Value, Option<RedisResult<Value>>) =
            s.call(lock, s.timeout(), Retry::Idempotent, |con| {
                let mut acquire = script::REDISSON_ACQUIRE.key(&stored.holds);
                acquire
                    .key(&stored.fence)
                    .arg("lease_ms", millis(req.ttl))
                    .arg("field", &field)
                    .arg("inherited", &inherited);
                match &record {
                    Some(record) => script::invoke_then(&acquire, record, con)
                        .map(|(reply, recorded)| (reply, Some(recorded))),
                    None => acquire.invoke(con).map(|reply| (reply, None)),
                }
            })?;
        let written = written.is_some_and(|r| recorded(lock, r));
        let mut attempt = attempt(reply, &lock.name, Token::from_redisson_field)?;
        if let Attempt::Acquired(hold) = &mut attempt {
            hold.recorded = written;
            // A holder listens for no unlock: its subscription (opened
            // before the attempt, in case it had to wait) goes.
            if s.sub.as_ref().is_some_and(|(name, _)| *name == lock.name) {
                s.sub = None;
            }
        }
        Ok(attempt)
    }

    fn block(&mut self, lock: &LockId, token: &Token, timeout: Duration) -> Result<Wake> {
        self.wait_on_channels(lock, token, timeout)
    }

    fn interrupt(&mut self, lock: &LockId, token: &Token) -> Result<()> {
        let channel = Keys::of(lock).interrupt_channel(token);
        let s = &mut self.inner;
        s.call(lock, s.timeout(), Retry::Idempotent, |con| {
            redis::cmd("PUBLISH")
                .arg(&channel)
                .arg("i")
                .query::<i64>(con)
                .map(drop)
        })
    }

    fn leave(&mut self, _lock: &LockId, _token: &Token) -> Result<()> {
        // Redisson keeps no waiter state in Redis: unsubscribing is all.
        self.inner.sub = None;
        Ok(())
    }

    fn renew(
        &mut self,
        lock: &LockId,
        token: &Token,
        ttl: Duration,
        limit: Duration,
        extend: Extend,
    ) -> Result<bool> {
        // Redisson's renewal script, noting the server's clock it read.
        let s = &mut self.inner;
        s.server_time = None;
        let limit = limit.min(s.timeout());
        let start = Instant::now();
        s.follow_master(limit);
        let limit = limit.saturating_sub(start.elapsed());
        let field = token.redisson_field();
        let hash = Keys::of(lock).holds;
        let reply: Value = s.call_within(lock, limit, limit, Retry::Idempotent, |con| {
            let mut renew = script::REDISSON_RENEW.key(&hash);
            renew.arg("lease_ms", millis(ttl)).arg("field", &field);
            if extend == Extend::Exactly {
                renew.arg("exact", "exact");
            }
            renew.invoke(con)
        })?;
        let (held, now) = super::reply::renewed(reply, &lock.name, "renew")?;
        s.server_time = Some(ServerTime {
            server: s.spec.display.clone(),
            connection: s.connections,
            ms: now,
        });
        Ok(held == 1)
    }

    fn server_times(&self) -> Vec<ServerTime> {
        self.inner.server_times()
    }

    fn release(&mut self, lock: &LockId, token: &Token) -> Result<Option<u64>> {
        self.release_recorded(lock, token, None)
    }

    fn release_recorded(
        &mut self,
        lock: &LockId,
        token: &Token,
        record: Option<(u32, &Event)>,
    ) -> Result<Option<u64>> {
        // Not idempotent (it decrements a hold count): never repeated blindly.
        let stored = Keys::of(lock);
        let channel = stored.unlock_channel();
        let s = &mut self.inner;
        let field = token.redisson_field();
        let sharded = if s.is_cluster() { "1" } else { "0" };
        // The `released` event goes in the same round trip.
        let record = record
            .filter(|(cap, _)| *cap > 0)
            .map(|(cap, event)| redisson_record(&stored, &field, cap, "gone", event));
        let (left, written): (i64, Option<RedisResult<Value>>) =
            s.call(lock, s.timeout(), Retry::Never, |con| {
                let mut release = script::REDISSON_RELEASE.key(&stored.holds);
                release
                    .key(&channel)
                    .arg("field", &field)
                    .arg("sharded", sharded);
                match &record {
                    Some(record) => script::invoke_then(&release, record, con)
                        .map(|(left, recorded)| (left, Some(recorded))),
                    None => release.invoke(con).map(|left| (left, None)),
                }
            })?;
        if let Some(written) = written {
            recorded(lock, written);
        }
        Ok(u64::try_from(left).ok())
    }

    fn record(&mut self, lock: &LockId, cap: u32, event: &Event) -> Result<()> {
        self.inner.record(lock, cap, event)
    }

    fn confirm_replicas(&mut self, lock: &LockId, replicas: u32, limit: Duration) -> Result<u32> {
        self.inner.confirm_replicas(lock, replicas, limit)
    }

    fn raise_fence(&mut self, lock: &LockId, fence: Fence) -> Result<()> {
        self.inner.raise_fence(lock, fence)
    }

    fn why_gone(&mut self, lock: &LockId, held_for: Option<Duration>) -> Option<String> {
        self.inner.why_gone(lock, held_for)
    }
}

impl Inspect for RedissonSession {
    fn status(&mut self, lock: &LockId) -> Result<LockStatus> {
        self.hash_status(lock)
    }

    fn list(&mut self, _prefix: &str, pattern: &str) -> Result<Vec<String>> {
        self.list_hashes(pattern)
    }

    fn history(&mut self, lock: &LockId, limit: usize) -> Result<Vec<Event>> {
        self.inner.history(lock, limit)
    }
}

impl Administer for RedissonSession {
    fn force_release(&mut self, lock: &LockId) -> Result<u64> {
        let stored = Keys::of(lock);
        let channel = stored.unlock_channel();
        let s = &mut self.inner;
        let cluster = s.is_cluster();
        let removed: i64 = s.call(lock, s.timeout(), Retry::Never, |con| {
            let (count, _, _): (i64, i64, i64) = redis::pipe()
                .atomic()
                .cmd("HLEN")
                .arg(&stored.holds)
                .cmd("DEL")
                .arg(&stored.holds)
                .cmd("PUBLISH")
                .arg(&channel)
                .arg(0)
                .query(con)?;
            // Redisson's waiters on a Redis 7 Cluster listen with
            // SSUBSCRIBE; before 7 there is no SPUBLISH (and no need).
            if cluster {
                let _ = redis::cmd("SPUBLISH")
                    .arg(&channel)
                    .arg(0)
                    .query::<redis::Value>(con);
            }
            Ok(count)
        })?;
        Ok(u64::try_from(removed).unwrap_or(0))
    }
}
