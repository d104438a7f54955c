//! The Redis backend: locks on one Redis server (`redis://host:port`), on the
//! master a set of Sentinels names, or on the Cluster node that serves the
//! lock's slot.
//!
//! This file holds the session and its lock operations in rlock's own
//! layout, each a script or a command sent through one bounded call. The
//! backend (`standalone`) is opened for one dialect: its sessions are these,
//! or, for locks in Redisson's layout (`--redisson`), `redisson/`'s, which
//! talk through one of these. Beside it: `scripted` (a lock script called
//! with its keys, and the wake-ups it could not deliver), `topology` (where a
//! connection goes: Sentinel, Cluster), `call` (one call with its retries,
//! redirects and failover window), `reply` (decoding the scripts' replies),
//! `list` (SCAN for lock names), `diagnose` (an error as one line a user can
//! act on) and `checks` (`rlock check`: is this server fit for locks?, with
//! its probes in `check_probes` and `check_rights`, and its clock and
//! failover checks in `check_clock` and `check_failover`).

mod call;
mod check_clock;
mod check_failover;
mod check_persistence;
mod check_probes;
mod check_rights;
mod checks;
mod diagnose;
mod keys;
mod list;
mod loss;
mod redisson;
mod reply;
mod scripted;
mod standalone;
mod topology;

use keys::Keys;
pub use standalone::Standalone;

use std::iter;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::{Connection, RedisError, Value};

use super::{AcquireRequest, Administer, Attempt, Inspect, LockStatus, ServerTime, Session, Wake};
use crate::backend::Extend;
use crate::backend::script;
use crate::backend::url::ServerSpec;
use crate::error::{Cause, Error, Result};
use crate::lock::event::Event;
use crate::lock::name::LockId;
use crate::lock::token::{Digest, Fence, Token};
use call::{FAILOVER_PAUSE, Retry, interrupted};
use diagnose::failing_over;
use reply::decode;
use scripted::{migrating, with_keys};
use topology::Source;

/// One connection to the lock's server (and, for `--redisson` waiting, a
/// second one subscribed to its channels), and the lock operations in
/// rlock's own layout.
struct StandaloneSession {
    source: Arc<Source>,
    spec: ServerSpec,
    /// Dropped after any I/O error (a reply may be pending) and reopened lazily.
    con: Option<Connection>,
    /// `--redisson` waiting: a connection subscribed to one lock's Redisson
    /// unlock channel and to this waiter's interrupt channel (with that lock's
    /// name), opened before an attempt so no unlock message between the
    /// attempt and the wait is missed. Kept with the connections rather than
    /// in the Redisson session: following a new Sentinel master drops both.
    sub: Option<(String, Connection)>,
    /// Cluster: the node this session talks to (`host:port`), learnt from
    /// MOVED; None: the first seed that answers.
    node: Option<String>,
    /// Some reply was read in this session: the server speaks Redis on the
    /// protocol we use, so first-contact hints (wrong port, TLS on one end
    /// only) no longer apply.
    answered: bool,
    /// Sentinel: the master this session's connection goes to (`host:port`),
    /// and when the sentinels last named it.
    master: Option<String>,
    master_checked: Option<Instant>,
    /// Sentinel: the last change of master this session followed (from, to).
    failed_over: Option<(String, String)>,
    /// The server's `evicted_keys` after this session's first confirmed
    /// renewal: a hold found gone later was evicted if the count grew.
    evicted_before: Option<u64>,
    /// The server's clock as the last renewal read it.
    server_time: Option<ServerTime>,
    /// Connections opened so far (each reading of the clock names its own).
    connections: u64,
    /// `connections` when this session last saw a hold of its own (taken or
    /// renewed): a restart since then closed that connection, so a hold
    /// found gone on the same one was not lost in a restart.
    confirmed_on: Option<u64>,
    /// `check`: why the server stopped answering a probe (no reply in time,
    /// connection lost); later probes are not sent, so a stalled server costs
    /// one timeout, not one per probe.
    lost: Option<String>,
    /// Per lock held (its key): the digests of the waiters first in line when
    /// a script last said so. Their wake-up lists go with this session's
    /// scripts on that lock, so a release can hand over in its own call.
    next_up: std::collections::HashMap<String, Vec<Digest>>,
}

impl StandaloneSession {
    /// The bound on each connection attempt and each reply.
    fn timeout(&self) -> Duration {
        self.spec.timeout
    }
}

impl Session for StandaloneSession {
    fn acquire(&mut self, req: &AcquireRequest<'_>) -> Result<Attempt> {
        let keys = req.keys;
        let stored = Keys::of(keys);
        // Redis knows holders by their tokens' digests only: the caller's,
        // then its ancestors'.
        let digests: Vec<Digest> = iter::once(req.token)
            .chain(req.inherited)
            .map(Token::digest)
            .collect();
        let listed = digests[1..]
            .iter()
            .map(Digest::as_str)
            .collect::<Vec<_>>()
            .join(",");
        let (kind, limit) = (req.kind.letter(), req.kind.limit());
        let record = req.record.filter(|(cap, _)| *cap > 0);
        // Idempotent: a repeated acquire by the token that already holds the
        // lock changes nothing (acquire.lua).
        let others = self.others(&stored);
        let acquire_script = |con: &mut Connection| -> redis::RedisResult<Value> {
            let mut invocation = with_keys(&script::ACQUIRE, &stored, req.token, &others);
            invocation
                .arg("owner", digests[0].as_str())
                .arg("inherited", &listed)
                .arg("lease_ms", millis(req.ttl))
                .arg("host", &req.holder.host)
                .arg("pid", &req.holder.pid)
                .arg("command", &req.holder.command)
                .arg("register_ms", req.register.map_or(0, millis))
                .arg("kind", kind)
                .arg("limit", limit)
                .arg("fair", if req.fair { "1" } else { "0" })
                .arg("grant", if req.grant { "1" } else { "0" })
                .arg("note", &req.holder.note);
            if let Some((cap, event)) = record {
                invocation.arg("history_cap", cap);
                for (field, value) in event.fields() {
                    invocation.arg("event", field).arg("event", value);
                }
            }
            invocation.invoke(con)
        };
        let reply: Value = self.call(keys, self.timeout(), Retry::Idempotent, |con| {
            let tried = acquire_script(con);
            match tried {
                // The slot is being migrated: a lock another owner holds is
                // said to be taken from the holds' key alone (else TRYAGAIN,
                // and the call tries again).
                Err(err) if migrating(&err) => {
                    let mut busy = script::BUSY_ALONE.key(&stored.holds);
                    busy.arg("kind", kind.to_string());
                    for d in &digests {
                        busy.arg("owners", d.as_str());
                    }
                    busy.invoke_asking(con)
                }
                other => other,
            }
        })?;
        let (reply, next) =
            self.outcome(keys, &stored, req.token, reply, "acquire", self.timeout())?;
        let mut attempt = reply::acquired(reply, &keys.name, req, &digests)?;
        if let Attempt::Acquired(hold) = &mut attempt {
            self.confirmed_on = Some(self.connections);
            self.next_up.insert(stored.holds.clone(), next);
            hold.recorded &= record.is_some();
        }
        Ok(attempt)
    }

    fn block(&mut self, lock: &LockId, token: &Token, timeout: Duration) -> Result<Wake> {
        let limit = self.timeout();
        let list = Keys::of(lock).wake_list(token);
        // BLPOP takes seconds; keep at least 1 ms so 0 never means "forever".
        let secs = format!("{:.3}", timeout.max(Duration::from_millis(1)).as_secs_f64());
        let mut wait = || -> Result<Option<(String, String)>, RedisError> {
            self.con(limit).and_then(|con| {
                // The reply may take the whole timeout: allow for it on this call.
                con.set_read_timeout(Some(timeout + limit))?;
                redis::cmd("BLPOP").arg(&list).arg(&secs).query(con)
            })
        };
        // A caught signal reaches the waiter through the signal thread,
        // which wakes this BLPOP.
        let reply = wait();
        match reply {
            Ok(None) => Ok(Wake::TimedOut),
            Ok(Some((_, value))) if value == "i" => Ok(Wake::Interrupted),
            // "g<fence>,<digest>,...": handed the lock, and who stands first
            // in line now.
            Ok(Some((_, value))) => {
                let mut parts = value.split(',');
                let granted = parts.next().and_then(|g| g.strip_prefix('g'));
                Ok(match granted.map(str::parse) {
                    Some(Ok(fence)) => {
                        let next = parts.map(|d| Digest::named(d.to_owned())).collect();
                        self.next_up.insert(Keys::of(lock).holds, next);
                        Wake::Granted(Fence(fence))
                    }
                    _ => Wake::Released,
                })
            }
            // A caught signal, or stopped and continued: a spurious
            // wake-up; the caller looks again (and sees the signal).
            Err(err) if interrupted(&err) => {
                self.con = None;
                Ok(Wake::TimedOut)
            }
            // Cluster: the slot moved; the next attempt follows it.
            Err(err) if err.redirect_node().is_some() => {
                if let Some((addr, _)) = err.redirect_node() {
                    self.node = Some(addr.to_owned());
                }
                self.con = None;
                Ok(Wake::TimedOut)
            }
            // Behind Sentinel, a failover ends the block (the old master drops
            // its blocked clients): look again, at the new master.
            Err(err) if matches!(*self.source, Source::Sentinel(_)) && failing_over(&err) => {
                self.con = None;
                std::thread::sleep(FAILOVER_PAUSE.min(timeout));
                Ok(Wake::TimedOut)
            }
            Err(err) => Err(self.fail(lock, err, limit)),
        }
    }

    fn interrupt(&mut self, lock: &LockId, token: &Token) -> Result<()> {
        let list = Keys::of(lock).wake_list(token);
        self.call(lock, self.timeout(), Retry::Idempotent, |con| {
            redis::pipe()
                .atomic()
                .cmd("RPUSH")
                .arg(&list)
                .arg("i")
                .ignore()
                .cmd("PEXPIRE")
                .arg(&list)
                .arg(60_000)
                .ignore()
                .query(con)
        })
    }

    fn leave(&mut self, lock: &LockId, token: &Token) -> Result<()> {
        let stored = Keys::of(lock);
        let others = self.others(&stored);
        let reply: Value = self.call(lock, self.timeout(), Retry::Idempotent, |con| {
            with_keys(&script::LEAVE, &stored, token, &others)
                .arg("waiter", token.digest().as_str())
                .invoke(con)
        })?;
        self.next_up.remove(&stored.holds);
        self.outcome(lock, &stored, token, reply, "leave", self.timeout())
            .map(drop)
    }

    fn renew(
        &mut self,
        lock: &LockId,
        token: &Token,
        ttl: Duration,
        limit: Duration,
        extend: Extend,
    ) -> Result<bool> {
        self.renew_script(lock, token, ttl, limit, extend)
    }

    fn server_times(&self) -> Vec<ServerTime> {
        self.server_time.iter().cloned().collect()
    }

    fn release(&mut self, lock: &LockId, token: &Token) -> Result<Option<u64>> {
        self.release_recorded(lock, token, None)
    }

    fn release_retracting(
        &mut self,
        lock: &LockId,
        token: &Token,
        entry: &str,
    ) -> Result<Option<u64>> {
        self.release_script(lock, token, &["0", "retract", entry])
    }

    fn release_recorded(
        &mut self,
        lock: &LockId,
        token: &Token,
        record: Option<(u32, &Event)>,
    ) -> Result<Option<u64>> {
        let mut tail: Vec<String> = Vec::new();
        if let Some((cap, event)) = record.filter(|(cap, _)| *cap > 0) {
            tail.push(cap.to_string());
            for (field, value) in event.fields() {
                tail.push(field.to_owned());
                tail.push(value);
            }
        }
        self.release_script(lock, token, &tail)
    }

    fn record(&mut self, lock: &LockId, cap: u32, event: &Event) -> Result<()> {
        if cap == 0 {
            return Ok(());
        }
        let stream = Keys::of(lock).history;
        let idle = millis(crate::lock::event::IDLE);
        let written: i64 = self.call(lock, self.timeout(), Retry::Never, |con| {
            let mut invocation = script::RECORD.prepare_invoke();
            invocation
                .key(&stream)
                .arg("history_cap", cap)
                .arg("idle_ms", idle);
            for (field, value) in event.fields() {
                invocation.arg("event", field).arg("event", value);
            }
            invocation.invoke(con)
        })?;
        if written == 0 {
            return Err(Error::from(Cause::ForeignKey(format!(
                "key {stream} is not a stream (another program's?); rlock never reads or overwrites it"
            ))));
        }
        Ok(())
    }

    fn confirm_replicas(&mut self, lock: &LockId, replicas: u32, limit: Duration) -> Result<u32> {
        // WAIT counts the replicas that have this connection's writes: on a
        // connection opened since the acquire it would prove nothing.
        if self.con.is_none() {
            return Ok(0);
        }
        let ms = millis(limit);
        // WAIT itself may take `limit`: allow for its reply on top.
        let window = limit + self.timeout();
        let confirmed: i64 = self.call_within(lock, window, window, Retry::Never, |con| {
            redis::cmd("WAIT").arg(replicas).arg(ms).query(con)
        })?;
        Ok(u32::try_from(confirmed).unwrap_or(0))
    }

    fn raise_fence(&mut self, lock: &LockId, fence: Fence) -> Result<()> {
        let fence_key = Keys::of(lock).fence;
        self.call(lock, self.timeout(), Retry::Idempotent, |con| {
            script::RAISE_FENCE
                .key(&fence_key)
                .arg("fence", fence.0)
                .invoke::<i64>(con)
                .map(drop)
        })
    }

    fn why_gone(&mut self, lock: &LockId, held_for: Option<Duration>) -> Option<String> {
        if let Some((from, to)) = &self.failed_over {
            return Some(format!(
                "the master changed from {from} to {to}; the new master does not have the hold"
            ));
        }
        // A cause is worth a moment, not the run's prompt ending after a
        // loss; unanswered, the loss line (said next, and first) goes
        // without it.
        let info = self
            .info(lock, "default", self.timeout().min(loss::ASKING_WHY))
            .ok()?;
        // (After INFO: a connection dropped on an error is reopened for it.)
        let reconnected = self.confirmed_on.is_some_and(|on| self.connections > on);
        Some(loss::cause(
            &loss::parse(&info),
            self.evicted_before,
            held_for,
            reconnected,
        ))
    }
}

impl Inspect for StandaloneSession {
    fn status(&mut self, lock: &LockId) -> Result<LockStatus> {
        let nobody = Token::parse(&"0".repeat(32)).expect("a valid token");
        let reply: Value = self.call(lock, self.timeout(), Retry::Idempotent, |con| {
            with_keys(&script::STATUS, &Keys::of(lock), &nobody, &[]).invoke(con)
        })?;
        decode(reply, &lock.name, "status")
    }

    fn statuses(&mut self, locks: &[LockId]) -> Result<Vec<LockStatus>> {
        self.status_batches(locks)
    }

    fn list(&mut self, prefix: &str, pattern: &str) -> Result<Vec<String>> {
        self.list_locks(prefix, pattern)
    }

    fn history(&mut self, lock: &LockId, limit: usize) -> Result<Vec<Event>> {
        let stream = Keys::of(lock).history;
        let entries = self.call(lock, self.timeout(), Retry::Idempotent, |con| {
            redis::cmd("XREVRANGE")
                .arg(&stream)
                .arg("+")
                .arg("-")
                .arg("COUNT")
                .arg(limit)
                .query::<Value>(con)
        });
        match entries {
            Ok(entries) => Ok(reply::events(entries)),
            // The server's own words say nothing of which key: say it.
            Err(err) if matches!(err.cause(), Cause::ForeignKey(_)) => {
                Err(Error::from(Cause::ForeignKey(format!(
                    "key {stream} is not a stream (another program's?); rlock never reads or overwrites it"
                )))
                .in_lock(&lock.name))
            }
            Err(err) => Err(err),
        }
    }

    fn longest_wait(&mut self, lock: &LockId) -> Result<Option<Duration>> {
        let stored = Keys::of(lock);
        type Scores = Vec<(String, f64)>;
        let ((secs, micros), arrivals, expiries): ((u64, u64), Scores, Scores) =
            self.call(lock, self.timeout(), Retry::Idempotent, |con| {
                redis::pipe()
                    .atomic()
                    .cmd("TIME")
                    .cmd("ZRANGE")
                    .arg(&stored.waiters)
                    .arg(0)
                    .arg(-1)
                    .arg("WITHSCORES")
                    .cmd("ZRANGE")
                    .arg(&stored.wexp)
                    .arg(0)
                    .arg(-1)
                    .arg("WITHSCORES")
                    .query(con)
            })?;
        let now_us = secs * 1_000_000 + micros;
        let now_ms = (now_us / 1000) as f64;
        // A waiter counts while its registration has not lapsed (as status
        // counts them); arrivals are server µs.
        let oldest = arrivals
            .iter()
            .filter(|(token, _)| {
                expiries
                    .iter()
                    .any(|(t, until)| t == token && *until > now_ms)
            })
            .map(|(_, arrived)| *arrived as u64)
            .min();
        Ok(oldest.map(|at| Duration::from_micros(now_us.saturating_sub(at))))
    }
}

impl Administer for StandaloneSession {
    fn force_release(&mut self, lock: &LockId) -> Result<u64> {
        // Any token names the (unused) own-list key; the script ignores it.
        let nobody = Token::parse(&"0".repeat(32)).expect("a valid token");
        let stored = Keys::of(lock);
        let reply: Value = self.call(lock, self.timeout(), Retry::Never, |con| {
            with_keys(&script::FORCE, &stored, &nobody, &[]).invoke(con)
        })?;
        let (reply, _) = self.outcome(
            lock,
            &stored,
            &nobody,
            reply,
            "release --force",
            self.timeout(),
        )?;
        let removed: i64 = decode(reply, &lock.name, "release --force")?;
        Ok(u64::try_from(removed).unwrap_or(0))
    }
}

impl StandaloneSession {
    /// Whether locks live on a Redis Cluster.
    fn is_cluster(&self) -> bool {
        matches!(*self.source, Source::Cluster(_))
    }

    /// INFO `section` from the server of `lock`, asked once within `limit`.
    fn info(&mut self, lock: &LockId, section: &str, limit: Duration) -> Result<String> {
        self.call_within(lock, limit, limit, Retry::Never, |con| {
            redis::cmd("INFO").arg(section).query::<String>(con)
        })
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}
