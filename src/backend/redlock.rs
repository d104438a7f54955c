//! Redlock: one lock across N independent Redis masters (several `--url`).
//!
//! A hold counts when a quorum (⌊N/2⌋+1) of the servers granted it, each
//! through the same scripts as a single server, and enough of the lease is left
//! after asking them all (ttl − elapsed − drift). Otherwise the holds taken are
//! given back at once, and the caller waits: for a wake-up from a server where
//! the lock was taken, or, when nobody holds a quorum (a split between
//! contenders), a random short delay so that contenders fall out of step.
//! Renewals count when a quorum confirms them; the watchdog stops COMMAND when
//! none did before the lease could end. Each server has its own fencing
//! counter: after taking a quorum, rlock lifts the counters of that quorum to
//! their largest value, and any later quorum shares a server with it, so fences
//! keep increasing. A server that lost its data starts again from its clock in
//! microseconds (see `next_fence` in `src/backend/lua/prelude/5-helpers.lua`), above the earlier
//! fences as long as the servers' clocks are not set back and agree to within
//! the time between the two acquisitions.

mod answers;
mod inspect;

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{
    AcquireRequest, Administer, Attempt, Backend, Hold, Inspect, ServerTime, Session, Standalone,
    Wake,
};
use crate::backend::Extend;
use crate::backend::url::ServerSpec;
use crate::error::{Cause, Error, Result};
use crate::lock::event::Event;
use crate::lock::name::{Dialect, LockId};
use crate::lock::token::{Fence, Token, random_bytes};
use answers::{Answers, token_of_a_quorum};

/// The longest any one server may take to answer: far below any useful ttl,
/// so a stalled server cannot eat the lease of a quorum of live ones.
const PER_SERVER: Duration = Duration::from_millis(500);

/// A lock on a quorum of independent servers.
pub struct Redlock {
    servers: Vec<Arc<Standalone>>,
    display: String,
}

impl Redlock {
    /// A backend over `specs` (two or more); does not connect yet.
    pub fn new(specs: Vec<ServerSpec>) -> Result<Self> {
        let display = specs
            .iter()
            .map(|s| s.display.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        let servers = specs
            .into_iter()
            .map(|mut spec| {
                spec.timeout = spec.timeout.min(PER_SERVER);
                Standalone::new(spec, Dialect::Rlock).map(Arc::new)
            })
            .collect::<Result<_>>()?;
        Ok(Redlock { servers, display })
    }
}

/// A hold on the server of that index.
type ServerHold = (usize, Hold);

fn quorum(n: usize) -> usize {
    n / 2 + 1
}

impl Backend for Redlock {
    fn server(&self) -> &str {
        &self.display
    }

    fn connect(&self) -> Result<Box<dyn Session>> {
        Ok(Box::new(self.open()?))
    }

    fn inspect(&self) -> Result<Box<dyn Inspect>> {
        Ok(Box::new(self.open()?))
    }

    fn administer(&self) -> Result<Box<dyn Administer>> {
        Ok(Box::new(self.open()?))
    }
}

impl Redlock {
    /// A session on every server that answers; an error when too few do.
    fn open(&self) -> Result<RedlockSession> {
        let mut sessions = Vec::with_capacity(self.servers.len());
        let mut failures = Vec::new();
        for server in &self.servers {
            match server.administer() {
                Ok(session) => sessions.push(Some(session)),
                Err(err) => {
                    failures.push(err);
                    sessions.push(None);
                }
            }
        }
        let session = RedlockSession {
            servers: self.servers.clone(),
            display: self.display.clone(),
            sessions,
            waiting_on: None,
        };
        let answered = session.sessions.iter().flatten().count();
        if answered < quorum(self.servers.len()) {
            return Err(session.no_quorum(None, answered, &failures));
        }
        Ok(session)
    }
}

struct RedlockSession {
    servers: Vec<Arc<Standalone>>,
    display: String,
    /// One session per server; None until (re)connected.
    sessions: Vec<Option<Box<dyn Administer>>>,
    /// The server whose wake-up list the next block waits on: one where the
    /// lock was found taken (and where this waiter is registered).
    waiting_on: Option<usize>,
}

impl RedlockSession {
    fn quorum(&self) -> usize {
        quorum(self.servers.len())
    }

    /// Runs `op` on every server, reconnecting to those without a session.
    fn each<T>(&mut self, op: impl FnMut(&mut dyn Administer) -> Result<T>) -> Vec<Result<T>> {
        self.each_until(None, true, op)
    }

    /// [`each`](Self::each), reconnecting (when `reconnect`) only within what
    /// is left until `deadline`.
    fn each_until<T>(
        &mut self,
        deadline: Option<Instant>,
        reconnect: bool,
        mut op: impl FnMut(&mut dyn Administer) -> Result<T>,
    ) -> Vec<Result<T>> {
        let mut results = Vec::with_capacity(self.servers.len());
        for (server, slot) in self.servers.iter().zip(self.sessions.iter_mut()) {
            if slot.is_none() && reconnect {
                let left = deadline.map_or(PER_SERVER, |d| {
                    d.saturating_duration_since(Instant::now()).min(PER_SERVER)
                });
                if !left.is_zero() {
                    *slot = server.connect_within(left).ok();
                }
            }
            let result = match slot {
                Some(session) => op(session.as_mut()),
                None => Err(Error::from(Cause::Unreachable {
                    server: server.server().to_owned(),
                    cause: "not reachable".into(),
                })),
            };
            if matches!(&result, Err(err) if matches!(err.cause(), Cause::Unavailable { .. } | Cause::Unreachable { .. }))
            {
                *slot = None;
            }
            results.push(result);
        }
        results
    }

    /// Releases holds taken in a round that does not count.
    fn give_back(&mut self, lock: &LockId, holds: &[ServerHold]) {
        for (i, hold) in holds {
            if let Some(session) = self.sessions[*i].as_mut() {
                let _ = session.release(lock, &hold.token);
            }
        }
    }

    /// On servers that did not answer, drops a hold or registration the
    /// attempt may still have made there (the fresh token holds nothing else).
    fn forget(&mut self, req: &AcquireRequest<'_>, servers: &[usize]) {
        for &i in servers {
            if let Some(session) = self.sessions[i].as_mut() {
                let _ = session.leave(req.keys, req.token);
            }
        }
    }

    /// A quorum holds the lock with `token`: the other holds are given back
    /// and the quorum's fence counters raised to its largest fence; a quorum
    /// that cannot be raised gives the lock back and tries again soon.
    fn claim(
        &mut self,
        req: &AcquireRequest<'_>,
        token: &Token,
        answers: Answers,
    ) -> Result<Attempt> {
        let (ours, others): (Vec<ServerHold>, Vec<ServerHold>) = answers
            .holds
            .into_iter()
            .partition(|(_, h)| &h.token == token);
        self.give_back(req.keys, &others);
        let fence = ours.iter().map(|(_, h)| h.fence.0).max().unwrap_or(0);
        let count = ours.iter().map(|(_, h)| h.count).min().unwrap_or(1);
        if self.raise_fences(req.keys, &ours, Fence(fence)) >= self.quorum() {
            for &(i, _, _) in &answers.taken {
                // This attempt queued us where the lock was taken: leave.
                if let Some(session) = self.sessions[i].as_mut() {
                    let _ = session.leave(req.keys, req.token);
                }
            }
            self.waiting_on = None;
            return Ok(Attempt::Acquired(Hold {
                token: token.clone(),
                fence: Fence(fence),
                count,
                recorded: false,
                history_entry: None,
            }));
        }
        self.give_back(req.keys, &ours);
        self.forget(req, &answers.failed);
        self.waiting_on = None;
        Ok(Attempt::Taken {
            pttl: Some(retry_delay()?),
            holder: None,
            place: None,
        })
    }

    /// Lifts the counters of a quorum to the largest fence, so that any later
    /// quorum, which shares a server with this one, goes higher. Returns on
    /// how many servers it did.
    fn raise_fences(&mut self, lock: &LockId, ours: &[ServerHold], fence: Fence) -> usize {
        let mut raised = 0;
        for &(i, _) in ours {
            if let Some(session) = self.sessions[i].as_mut()
                && session.raise_fence(lock, fence).is_ok()
            {
                raised += 1;
            }
        }
        raised
    }

    /// No quorum holds the lock: everything taken is given back, and the
    /// attempt ends in what the servers said (a foreign key, an incompatible
    /// hold, too few answers), or in waiting for the holder.
    fn not_acquired(&mut self, req: &AcquireRequest<'_>, answers: Answers) -> Result<Attempt> {
        self.give_back(req.keys, &answers.holds);
        // A server that did not answer may still run the attempt: take back
        // what it may have given (best effort; it expires within the ttl).
        self.forget(req, &answers.failed);
        if let Some(err) = answers.foreign {
            return Err(err);
        }
        if let Some(held) = answers.incompatible {
            return Ok(Attempt::Incompatible { held });
        }
        let quorum = self.quorum();
        let answered = self.servers.len() - answers.failed.len();
        if answered < quorum {
            return Err(self.no_quorum(Some(&req.keys.name), answered, &answers.failures));
        }
        let taken = &answers.taken;
        self.waiting_on = taken.first().map(|(i, _, _)| *i);
        let holder = taken.iter().find_map(|(_, _, h)| h.clone());
        // Held on a quorum: wait for its release (or lease). Split between
        // contenders, or too slow to be valid: try again soon, out of step.
        let pttl = if taken.len() >= quorum {
            taken.iter().filter_map(|(_, p, _)| *p).min()
        } else {
            Some(retry_delay()?)
        };
        // Each server keeps its own queue: no one place to show.
        Ok(Attempt::Taken {
            pttl,
            holder,
            place: None,
        })
    }

    fn no_quorum(&self, lock: Option<&str>, answered: usize, failures: &[Error]) -> Error {
        let first = failures
            .first()
            .map(|e| format!(" ({e})"))
            .unwrap_or_default();
        let server = self.display.clone();
        let cause = format!(
            "no quorum: {answered} of {} servers answered, {} needed{first}",
            self.servers.len(),
            self.quorum()
        );
        // Servers that are restarting or failing over may answer again soon.
        let err = if failures.iter().all(Error::is_transient) {
            Error::from(Cause::Unreachable { server, cause })
        } else {
            Error::from(Cause::Unavailable { server, cause })
        };
        // Timed out as the failure the message names did.
        let err = match failures.first() {
            Some(first) if first.reply_timed_out() => err.without_reply(),
            _ => err,
        };
        err.in_lock(lock.unwrap_or_default())
    }
}

/// A short random pause, so contenders that split the servers between them
/// do not retry in step.
fn retry_delay() -> Result<Duration> {
    let mut bytes = [0u8; 2];
    random_bytes(&mut bytes)?;
    Ok(Duration::from_millis(
        10 + u64::from(u16::from_ne_bytes(bytes)) % 90,
    ))
}

/// `req` as each server is asked it. A handoff on one server is no hold on
/// a quorum: every server is asked; the history is written once the quorum
/// holds it (see `record`), with its fence.
fn on_each_server<'a>(req: &AcquireRequest<'a>) -> AcquireRequest<'a> {
    AcquireRequest {
        keys: req.keys,
        token: req.token,
        inherited: req.inherited,
        ttl: req.ttl,
        holder: req.holder,
        register: req.register,
        kind: req.kind,
        fair: req.fair,
        grant: false,
        record: None,
        tentative: false,
    }
}

impl Session for RedlockSession {
    fn acquire(&mut self, req: &AcquireRequest<'_>) -> Result<Attempt> {
        let start = Instant::now();
        let single = on_each_server(req);
        let answers = Answers::sort(self.each(|s| s.acquire(&single)));
        // A nested run re-enters with an enclosing run's token where that run
        // holds, and would take fresh holds elsewhere: only the token a quorum
        // knows counts; the other holds are given back.
        let winner = token_of_a_quorum(&answers.holds, self.quorum());
        // Half the lease at least must be left for COMMAND and the first renewal.
        let margin = crate::lock::clock::drift(req.ttl);
        let valid = start.elapsed() + margin < req.ttl / 2;
        match (winner, valid, &answers.incompatible, &answers.foreign) {
            (Some(token), true, None, None) => self.claim(req, &token, answers),
            _ => self.not_acquired(req, answers),
        }
    }

    fn block(&mut self, lock: &LockId, token: &Token, timeout: Duration) -> Result<Wake> {
        let session = self
            .waiting_on
            .and_then(|i| self.sessions.get_mut(i))
            .and_then(|s| s.as_mut());
        match session {
            Some(session) => match session.block(lock, token, timeout) {
                Ok(wake) => Ok(wake),
                // That server failed: the next attempt asks them all again.
                Err(_) => {
                    std::thread::sleep(timeout.min(retry_delay()?));
                    Ok(Wake::TimedOut)
                }
            },
            None => {
                std::thread::sleep(timeout);
                Ok(Wake::TimedOut)
            }
        }
    }

    fn interrupt(&mut self, lock: &LockId, token: &Token) -> Result<()> {
        let results = self.each(|s| s.interrupt(lock, token));
        let mut first_err = None;
        for result in results {
            match result {
                Ok(()) => return Ok(()),
                Err(err) => first_err = first_err.or(Some(err)),
            }
        }
        Err(first_err.unwrap_or_else(|| self.no_quorum(Some(&lock.name), 0, &[])))
    }

    fn leave(&mut self, lock: &LockId, token: &Token) -> Result<()> {
        let _ = self.each(|s| s.leave(lock, token));
        self.waiting_on = None;
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
        // On every server: true once a quorum confirmed, false once no
        // quorum can.
        let deadline = Instant::now() + limit;
        let results = self.each_until(Some(deadline), true, |s| {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::internal("no time left to renew"));
            }
            s.renew(lock, token, ttl, left, extend)
        });
        let confirmed = results.iter().filter(|r| matches!(r, Ok(true))).count();
        let refused = results.iter().filter(|r| matches!(r, Ok(false))).count();
        if confirmed >= self.quorum() {
            return Ok(true);
        }
        // No quorum can confirm any more: the lock is no longer ours.
        if refused > self.servers.len() - self.quorum() {
            return Ok(false);
        }
        let failures: Vec<Error> = results.into_iter().filter_map(|r| r.err()).collect();
        Err(self.no_quorum(Some(&lock.name), confirmed, &failures))
    }

    fn server_times(&self) -> Vec<ServerTime> {
        self.sessions
            .iter()
            .flatten()
            .flat_map(|session| session.server_times())
            .collect()
    }

    fn release(&mut self, lock: &LockId, token: &Token) -> Result<Option<u64>> {
        let results = self.each(|s| s.release(lock, token));
        let mut left: Option<u64> = None;
        let mut refused = 0;
        let mut failures = Vec::new();
        for result in results {
            match result {
                Ok(Some(n)) => left = Some(left.map_or(n, |l| l.min(n))),
                Ok(None) => refused += 1,
                Err(err) => failures.push(err),
            }
        }
        // Not ours only when no quorum can have held it: a minority that
        // never had the hold (or lost it) says nothing about the quorum.
        if refused > self.servers.len() - self.quorum() {
            return Ok(None);
        }
        match left {
            Some(n) => Ok(Some(n)),
            None => Err(self.no_quorum(Some(&lock.name), 0, &failures)),
        }
    }

    /// Written on every server that answers (each keeps its own capped
    /// history), so that the history outlives the loss of a minority; a
    /// failure is one only when no server took it.
    fn record(&mut self, lock: &LockId, cap: u32, event: &Event) -> Result<()> {
        let results = self.each(|s| s.record(lock, cap, event));
        if results.iter().any(|r| r.is_ok()) {
            return Ok(());
        }
        let failures: Vec<Error> = results.into_iter().filter_map(|r| r.err()).collect();
        Err(self.no_quorum(Some(&lock.name), 0, &failures))
    }

    fn confirm_replicas(&mut self, lock: &LockId, replicas: u32, limit: Duration) -> Result<u32> {
        // Only the connections that wrote the holds can vouch for them.
        let results = self.each_until(None, false, |s| s.confirm_replicas(lock, replicas, limit));
        let confirmed: Vec<u32> = results.into_iter().filter_map(|r| r.ok()).collect();
        let enough = confirmed.iter().filter(|&&n| n >= replicas).count();
        if enough >= self.quorum() {
            return Ok(replicas);
        }
        Ok(confirmed
            .into_iter()
            .filter(|&n| n < replicas)
            .max()
            .unwrap_or(0))
    }

    fn raise_fence(&mut self, lock: &LockId, fence: Fence) -> Result<()> {
        let _ = self.each(|s| s.raise_fence(lock, fence));
        Ok(())
    }
}

impl Administer for RedlockSession {
    fn force_release(&mut self, lock: &LockId) -> Result<u64> {
        let results = self.each(|s| s.force_release(lock));
        let mut removed = None;
        let mut failures = Vec::new();
        for result in results {
            match result {
                Ok(n) => removed = Some(removed.unwrap_or(0).max(n)),
                Err(err) => failures.push(err),
            }
        }
        removed.ok_or_else(|| self.no_quorum(Some(&lock.name), 0, &failures))
    }
}
