//! The Redis backend: locks on one Redis server (`redis://host:port`), on the
//! master a set of Sentinels names, or on the Cluster node that serves the
//! lock's slot.
//!
//! This file holds the backend and its session's lock operations, each a
//! script or a command sent through one bounded call. Beside it:
//! `topology` (where a connection goes: Sentinel, Cluster), `call` (one call
//! with its retries, redirects and failover window), `reply` (decoding the
//! scripts' replies), `redisson_wait` (waiting on Redisson's unlock channel),
//! `list` (SCAN for lock names) and `diagnose` (an error as one line a user
//! can act on).

mod call;
mod diagnose;
mod keys;
mod list;
mod redisson_wait;
mod reply;
mod topology;

use keys::Keys;

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::{Connection, RedisError, Value};

use super::{AcquireRequest, Attempt, Backend, Kind, LockStatus, Session, Wake};
use crate::error::{Cause, Error, Result};
use crate::event::Event;
use crate::name::LockId;
use crate::script;
use crate::token::{Fence, Token};
use crate::url::ServerSpec;
use call::{interrupted, FAILOVER_PAUSE};
use diagnose::failing_over;
use reply::decode;
use topology::{client_for, Source};

/// Locks on a single Redis server: a fixed one, or the master a set of
/// Sentinels names at each connection.
pub struct Standalone {
    source: Arc<Source>,
    spec: ServerSpec,
}

impl Standalone {
    /// A backend for `spec`; does not connect yet.
    pub fn new(spec: ServerSpec) -> Result<Self> {
        let source = if spec.sentinel.is_some() {
            Source::Sentinel(spec.clone())
        } else if spec.cluster.is_some() {
            Source::Cluster(spec.clone())
        } else {
            Source::Fixed(client_for(spec.info.clone(), &spec.tls)?)
        };
        Ok(Standalone {
            source: Arc::new(source),
            spec,
        })
    }
}

impl Backend for Standalone {
    fn server(&self) -> &str {
        &self.spec.display
    }

    fn connect(&self) -> Result<Box<dyn Session>> {
        self.connect_within(self.spec.timeout)
    }
}

impl Standalone {
    /// Opens a session, connecting within `limit` (Redlock bounds a reconnect
    /// by what is left of a renewal's deadline).
    pub fn connect_within(&self, limit: Duration) -> Result<Box<dyn Session>> {
        let mut session = StandaloneSession {
            source: Arc::clone(&self.source),
            spec: self.spec.clone(),
            con: None,
            sub: None,
            node: None,
            answered: false,
            master: None,
            master_checked: None,
        };
        if let Err(err) = session.con(limit) {
            return Err(session.unavailable(&err, limit));
        }
        Ok(Box::new(session))
    }
}

/// One connection to the lock's server (and, for `--redisson` waiting, a
/// second one subscribed to its channels).
struct StandaloneSession {
    source: Arc<Source>,
    spec: ServerSpec,
    /// Dropped after any I/O error (a reply may be pending) and reopened lazily.
    con: Option<Connection>,
    /// `--redisson` waiting: a connection subscribed to one lock's Redisson
    /// unlock channel and to this waiter's interrupt channel (with that lock's
    /// name), opened before an attempt so no unlock message between the
    /// attempt and the wait is missed.
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
}

impl StandaloneSession {
    /// The bound on each connection attempt and each reply.
    fn timeout(&self) -> Duration {
        self.spec.timeout
    }
}

/// A script invocation with every key of `keys` (see `src/lua/common.lua`).
fn with_keys<'a>(
    script: &'a redis::Script,
    keys: &Keys,
    token: &Token,
) -> redis::ScriptInvocation<'a> {
    let mut invocation = script.prepare_invoke();
    for key in keys.script_keys(token) {
        invocation.key(key);
    }
    invocation
}

impl Session for StandaloneSession {
    fn acquire(&mut self, req: &AcquireRequest<'_>) -> Result<Attempt> {
        let keys = req.keys;
        let stored = Keys::of(keys);
        if let Some(channel) = &stored.redisson {
            if req.register.is_some() && self.sub.is_none() {
                self.subscribe(keys, channel, req.token)?;
            }
            let inherited: Vec<String> = req.inherited.iter().map(Token::redisson_field).collect();
            let inherited = inherited.join(",");
            let field = req.token.redisson_field();
            let reply: Value = self.call(keys, self.timeout(), true, |con| {
                script::REDISSON_ACQUIRE
                    .key(&stored.lock)
                    .key(&stored.fence)
                    .arg(millis(req.ttl))
                    .arg(&field)
                    .arg(&inherited)
                    .invoke(con)
            })?;
            let mut attempt: Attempt = decode(reply, &keys.name, "acquire")?;
            if let Attempt::Acquired(hold) = &mut attempt {
                hold.recorded = false;
            }
            return Ok(attempt);
        }
        let inherited = req
            .inherited
            .iter()
            .map(Token::as_str)
            .collect::<Vec<_>>()
            .join(",");
        let (kind, limit) = match req.kind {
            Kind::Exclusive => ("x", 1),
            Kind::Shared => ("s", 1),
            Kind::Semaphore(n) => ("m", n),
        };
        let record = req.record.filter(|(cap, _)| *cap > 0);
        // Idempotent: a repeated acquire by the token that already holds the
        // lock changes nothing (acquire.lua).
        let reply: Value = self.call(keys, self.timeout(), true, |con| {
            let mut invocation = with_keys(&script::ACQUIRE, &stored, req.token);
            if record.is_some() {
                invocation.key(&stored.history);
            }
            invocation
                .arg(req.token.as_str())
                .arg(&inherited)
                .arg(millis(req.ttl))
                .arg(&req.holder.host)
                .arg(&req.holder.pid)
                .arg(&req.holder.command)
                .arg(req.register.map_or(0, millis))
                .arg(kind)
                .arg(limit)
                .arg(if req.fair { "1" } else { "0" })
                .arg(if req.grant { "1" } else { "0" })
                .arg(&req.holder.note);
            if let Some((cap, event)) = record {
                invocation.arg(cap);
                for (field, value) in event.fields() {
                    invocation.arg(field).arg(value);
                }
            }
            invocation.invoke(con)
        })?;
        let mut attempt: Attempt = decode(reply, &keys.name, "acquire")?;
        if let Attempt::Acquired(hold) = &mut attempt {
            hold.recorded &= record.is_some();
        }
        Ok(attempt)
    }

    fn block(&mut self, keys: &LockId, token: &Token, timeout: Duration) -> Result<Wake> {
        if keys.redisson {
            return self.block_redisson(keys, token, timeout);
        }
        let limit = self.timeout();
        let list = Keys::of(keys).wake_list(token);
        // BLPOP takes seconds; keep at least 1 ms so 0 never means "forever".
        let secs = format!("{:.3}", timeout.max(Duration::from_millis(1)).as_secs_f64());
        let reply: Result<Option<(String, String)>, RedisError> = self.con(limit).and_then(|con| {
            // The reply may take the whole timeout: allow for it on this call.
            con.set_read_timeout(Some(timeout + limit))?;
            redis::cmd("BLPOP").arg(&list).arg(&secs).query(con)
        });
        match reply {
            Ok(None) => Ok(Wake::TimedOut),
            Ok(Some((_, value))) if value == "i" => Ok(Wake::Interrupted),
            Ok(Some((_, value))) => Ok(match value.strip_prefix('g').map(str::parse) {
                Some(Ok(fence)) => Wake::Granted(Fence(fence)),
                _ => Wake::Released,
            }),
            // Stopped and continued: a spurious wake-up; the caller looks again.
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
            Err(err) => Err(self.fail(keys, err, limit)),
        }
    }

    fn interrupt(&mut self, keys: &LockId, token: &Token) -> Result<()> {
        let list = Keys::of(keys).wake_list(token);
        if keys.redisson {
            return self.call(keys, self.timeout(), true, |con| {
                redis::cmd("PUBLISH")
                    .arg(&list)
                    .arg("i")
                    .query::<i64>(con)
                    .map(drop)
            });
        }
        self.call(keys, self.timeout(), true, |con| {
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

    fn leave(&mut self, keys: &LockId, token: &Token) -> Result<()> {
        if keys.redisson {
            // Redisson keeps no waiter state in Redis: unsubscribing is all.
            self.sub = None;
            return Ok(());
        }
        self.call(keys, self.timeout(), true, |con| {
            with_keys(&script::LEAVE, &Keys::of(keys), token)
                .arg(token.as_str())
                .invoke::<i64>(con)
                .map(drop)
        })
    }

    fn renew(
        &mut self,
        keys: &LockId,
        token: &Token,
        ttl: Duration,
        limit: Duration,
    ) -> Result<bool> {
        let limit = limit.min(self.timeout());
        let start = Instant::now();
        self.follow_master(limit);
        let limit = limit.saturating_sub(start.elapsed());
        if keys.redisson {
            let field = token.redisson_field();
            let lock = Keys::of(keys).lock;
            let held: i64 = self.call_within(keys, limit, limit, true, |con| {
                script::REDISSON_RENEW
                    .key(&lock)
                    .arg(millis(ttl))
                    .arg(&field)
                    .invoke(con)
            })?;
            return Ok(held == 1);
        }
        let held: i64 = self.call_within(keys, limit, limit, true, |con| {
            with_keys(&script::RENEW, &Keys::of(keys), token)
                .arg(token.as_str())
                .arg(millis(ttl))
                .invoke(con)
        })?;
        Ok(held == 1)
    }

    fn release(&mut self, keys: &LockId, token: &Token) -> Result<Option<u64>> {
        self.release_recorded(keys, token, None)
    }

    fn release_recorded(
        &mut self,
        keys: &LockId,
        token: &Token,
        record: Option<(u32, &Event)>,
    ) -> Result<Option<u64>> {
        // Not idempotent (it decrements a hold count): never repeated blindly.
        let stored = Keys::of(keys);
        let record = record.filter(|(cap, _)| *cap > 0);
        if let Some(channel) = &stored.redisson {
            let field = token.redisson_field();
            let left: i64 = self.call(keys, self.timeout(), false, |con| {
                script::REDISSON_RELEASE
                    .key(&stored.lock)
                    .key(channel)
                    .arg(&field)
                    .invoke(con)
            })?;
            let left = u64::try_from(left).ok();
            if let (Some(0), Some((cap, event))) = (left, record) {
                if let Err(err) = self.record(keys, cap, event) {
                    crate::report::verbose(|| format!("{}: history not written: {err}", keys.name));
                }
            }
            return Ok(left);
        }
        let left: i64 = self.call(keys, self.timeout(), false, |con| {
            let mut invocation = with_keys(&script::RELEASE, &stored, token);
            invocation.arg(token.as_str());
            if let Some((cap, event)) = record {
                invocation.key(&stored.history).arg(cap);
                for (field, value) in event.fields() {
                    invocation.arg(field).arg(value);
                }
            }
            invocation.invoke(con)
        })?;
        Ok(u64::try_from(left).ok())
    }

    fn record(&mut self, keys: &LockId, cap: u32, event: &Event) -> Result<()> {
        if cap == 0 {
            return Ok(());
        }
        let stream = Keys::of(keys).history;
        let idle = millis(crate::event::IDLE);
        let written: i64 = self.call(keys, self.timeout(), false, |con| {
            let mut invocation = script::RECORD.prepare_invoke();
            invocation.key(&stream).arg(cap).arg(idle);
            for (field, value) in event.fields() {
                invocation.arg(field).arg(value);
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

    fn longest_wait(&mut self, keys: &LockId) -> Result<Option<Duration>> {
        if keys.redisson {
            // Redisson's waiters are subscribers: Redis keeps no queue.
            return Ok(None);
        }
        let stored = Keys::of(keys);
        type Scores = Vec<(String, f64)>;
        let ((secs, micros), arrivals, expiries): ((u64, u64), Scores, Scores) =
            self.call(keys, self.timeout(), true, |con| {
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

    fn history(&mut self, keys: &LockId, limit: usize) -> Result<Vec<Event>> {
        let stream = Keys::of(keys).history;
        let entries = self.call(keys, self.timeout(), true, |con| {
            redis::cmd("XREVRANGE")
                .arg(&stream)
                .arg("+")
                .arg("-")
                .arg("COUNT")
                .arg(limit.max(1))
                .query::<Value>(con)
        });
        match entries {
            Ok(entries) => Ok(reply::events(entries)),
            // The server's own words say nothing of which key: say it.
            Err(err) if matches!(err.cause(), Cause::ForeignKey(_)) => {
                Err(Error::from(Cause::ForeignKey(format!(
                    "key {stream} is not a stream (another program's?); rlock never reads or overwrites it"
                )))
                .in_lock(&keys.name))
            }
            Err(err) => Err(err),
        }
    }

    fn confirm_replicas(&mut self, keys: &LockId, replicas: u32, limit: Duration) -> Result<u32> {
        // WAIT counts the replicas that have this connection's writes: on a
        // connection opened since the acquire it would prove nothing.
        if self.con.is_none() {
            return Ok(0);
        }
        let ms = millis(limit);
        // WAIT itself may take `limit`: allow for its reply on top.
        let window = limit + self.timeout();
        let confirmed: i64 = self.call_within(keys, window, window, false, |con| {
            redis::cmd("WAIT").arg(replicas).arg(ms).query(con)
        })?;
        Ok(u32::try_from(confirmed).unwrap_or(0))
    }

    fn raise_fence(&mut self, keys: &LockId, fence: Fence) -> Result<()> {
        let fence_key = Keys::of(keys).fence;
        self.call(keys, self.timeout(), true, |con| {
            script::RAISE_FENCE
                .key(&fence_key)
                .arg(fence.0)
                .invoke::<i64>(con)
                .map(drop)
        })
    }

    fn force_release(&mut self, keys: &LockId) -> Result<u64> {
        // Any token names the (unused) own-list key; the script ignores it.
        let nobody = Token::parse(&"0".repeat(32)).expect("a valid token");
        let stored = Keys::of(keys);
        let removed: i64 = match &stored.redisson {
            Some(channel) => self.call(keys, self.timeout(), false, |con| {
                let (count, _, _): (i64, i64, i64) = redis::pipe()
                    .atomic()
                    .cmd("HLEN")
                    .arg(&stored.lock)
                    .cmd("DEL")
                    .arg(&stored.lock)
                    .cmd("PUBLISH")
                    .arg(channel)
                    .arg(0)
                    .query(con)?;
                Ok(count)
            })?,
            None => self.call(keys, self.timeout(), false, |con| {
                with_keys(&script::FORCE, &stored, &nobody).invoke(con)
            })?,
        };
        Ok(u64::try_from(removed).unwrap_or(0))
    }

    fn status(&mut self, keys: &LockId) -> Result<LockStatus> {
        let nobody = Token::parse(&"0".repeat(32)).expect("a valid token");
        let reply: Value = self.call(keys, self.timeout(), true, |con| {
            with_keys(&script::STATUS, &Keys::of(keys), &nobody).invoke(con)
        })?;
        decode(reply, &keys.name, "status")
    }

    fn list(&mut self, prefix: &str, pattern: &str) -> Result<Vec<String>> {
        self.list_locks(prefix, pattern)
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}
