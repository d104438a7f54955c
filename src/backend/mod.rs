//! The lock operations every backend provides.
//!
//! The commands talk only to these traits, so a Redlock quorum, Sentinel or
//! Cluster connections, or a local `file:` backend can stand behind them. A
//! [`Backend`] is a cheap, shareable description of where locks live; a
//! session is one connection doing the work, owned by one thread at a time,
//! and typed by its audience: a [`Session`] holds locks for a run, an
//! [`Inspect`] reads them, an [`Administer`] breaks them.

pub mod fitness;
mod local;
mod protocol;
#[cfg(test)]
mod protocol_headers;
mod quorum_status;
mod redis;
mod redlock;
mod script;
pub(crate) mod url;

use std::time::Duration;

pub use self::redis::Standalone;
pub use local::{Local, check_dir, keep_while};
pub use redlock::Redlock;

use crate::error::Result;
use crate::lock::event::Event;
use crate::lock::kind::Kind;
use crate::lock::name::LockId;
use crate::lock::token::{Fence, Token};

/// Who is asking for the lock: stored with the hold for `status` and messages.
#[derive(Debug, Clone)]
pub struct HolderInfo {
    /// Host name of the holder.
    pub host: String,
    /// Process id of the holding `rlock`.
    pub pid: String,
    /// The command line run under the lock.
    pub command: String,
    /// What the holder says it is (`--note`, or the CI job's URL); may be empty.
    pub note: String,
    /// How long it has held the lock (server clock).
    pub held_for: Duration,
    /// Held for a script by a `--while-pid` keeper (`rlock acquire`), not by a run.
    pub detached: bool,
    /// Held by an rlock from before the current key layout, whose details
    /// this version does not read (see `src/backend/lua/prelude/4-holds.lua`).
    pub earlier: bool,
}

/// What `status` shows of one lock.
#[derive(Debug, Clone)]
pub struct LockStatus {
    /// How it is held; None when nobody holds it.
    pub kind: Option<Kind>,
    /// The smallest semaphore limit among the holders (1 otherwise).
    pub limit: u64,
    /// The last fencing token handed out.
    pub fence: u64,
    /// Live waiters.
    pub waiting: u64,
    /// Live holders.
    pub holders: Vec<HolderStatus>,
    /// Live waiters, first come first (at most a few dozen: `waiting` counts all).
    pub waiters: Vec<WaiterStatus>,
    /// Redlock: how the servers' views compare (None for one server).
    pub servers: Option<Agreement>,
    /// Read in Redisson's layout (`--redisson`): one exclusive hold whose
    /// holder details Redisson does not record.
    pub redisson: bool,
}

/// Redlock: how many servers answered `status`, and where they disagree.
#[derive(Debug, Clone)]
pub struct Agreement {
    /// Servers in the quorum.
    pub total: usize,
    /// Servers that answered.
    pub answered: usize,
    /// Holds seen on some servers only, servers that did not answer; None
    /// when every server answered and they agree.
    pub disagreement: Option<String>,
}

/// One holder, as `status` shows it (never its token).
#[derive(Debug, Clone)]
pub struct HolderStatus {
    /// Host name the holder reported.
    pub host: String,
    /// Its pid, as it reported it.
    pub pid: String,
    /// Its command line, as it reported it.
    pub command: String,
    /// Its note (`--note`, a CI job's URL), or empty.
    pub note: String,
    /// When it took the lock (server clock, ms since the epoch).
    pub since_ms: u64,
    /// Lease left, in ms; None for a hold with no lease (file: locks, kept
    /// by the kernel while the holder lives).
    pub lease_ms: Option<u64>,
    /// The lease each renewal sets (the holder's ttl), when the hold
    /// records it.
    pub ttl_ms: Option<u64>,
    /// How long ago the holder last renewed (server clock); None when it
    /// has not renewed since it took the lock, or this is not known.
    pub renewed_ms: Option<u64>,
    /// Held by an rlock from before the current key layout (no details).
    pub earlier: bool,
}

/// One waiter, as `status` shows it (never its token).
#[derive(Debug, Clone)]
pub struct WaiterStatus {
    /// Host name the waiter reported (empty when unknown).
    pub host: String,
    /// Its pid, as it reported it (empty when unknown).
    pub pid: String,
    /// Its note (`--note`, a CI job's URL), or empty.
    pub note: String,
    /// How long it has waited, in ms (None when unknown).
    pub waiting_ms: Option<u64>,
}

/// The server's clock as a renewal read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerTime {
    /// The server asked (as its URL names it; one of a quorum's).
    pub server: String,
    /// Which of the session's connections to it answered: a new one may
    /// reach another machine (a failover, a name that now points
    /// elsewhere), whose clock is no step of the last one's.
    pub connection: u64,
    /// Its clock, in ms since the epoch.
    pub ms: u64,
}

/// One acquisition attempt.
pub struct AcquireRequest<'a> {
    /// The lock.
    pub keys: &'a LockId,
    /// This caller's fresh owner token.
    pub token: &'a Token,
    /// Ancestors' tokens (RLOCK_TOKENS): re-enter if one of them holds the lock.
    pub inherited: &'a [Token],
    /// Lease length.
    pub ttl: Duration,
    /// Metadata stored with a new hold (`held_for` unused).
    pub holder: &'a HolderInfo,
    /// Register as a waiter for this long if the lock is taken (None: do not wait).
    pub register: Option<Duration>,
    /// Exclusive, shared or semaphore.
    pub kind: Kind,
    /// First come, first served (`--fair`).
    pub fair: bool,
    /// While registered, the lock may be handed to us directly by a release
    /// ([`Wake::Granted`]): only for a run waiting for a single lock.
    pub grant: bool,
    /// The `acquired` event to add to the lock's history, keeping that many
    /// events, when this request makes a new hold (the Redis backend writes it
    /// in the acquiring script: no round trip of its own).
    pub record: Option<(u32, &'a Event)>,
    /// The hold may be given back in the same round (another lock of the
    /// run, or too few replicas): a backend that records the event in the
    /// acquiring script says so in [`Hold::history_entry`], so that the
    /// release retracts it; others record nothing then.
    pub tentative: bool,
}

/// A hold on a lock.
#[derive(Debug, Clone)]
pub struct Hold {
    /// The owner token that holds it (the inherited one on re-entry).
    pub token: Token,
    /// The lock's fencing token for this hold.
    pub fence: Fence,
    /// The owner's hold count after this acquisition (1 = new hold).
    pub count: u64,
    /// The request's `acquired` event was added to the history with the hold.
    pub recorded: bool,
    /// Where that event is, when the backend can retract it
    /// ([`Session::release_retracting`]).
    pub history_entry: Option<AcquiredEvent>,
}

/// How a renewal sets the lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Extend {
    /// To the ttl from now, unless it lasts longer already (a nested holder's).
    AtLeast,
    /// To exactly the ttl from now, even when that shortens it: the server's
    /// clock stepped back, which made every lease on it longer. A backend
    /// whose leases do not run on a server's clock just renews.
    Exactly,
}

/// Where a hold's `acquired` event is in the lock's history, to take it back
/// with a hold no run kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AcquiredEvent {
    /// The entry the acquiring script wrote: its id.
    Entry(String),
    /// Written without telling the holder its id (by the release that
    /// handed the hold over, by a request whose reply was lost, or in a
    /// round trip of its own): found by the hold's fence.
    ByFence,
}

impl AcquiredEvent {
    /// How [`Session::release_retracting`] names the event of a hold with
    /// `fence`: the entry's id, or `fence:N`.
    pub fn retraction(&self, fence: Fence) -> String {
        match self {
            AcquiredEvent::Entry(id) => id.clone(),
            AcquiredEvent::ByFence => format!("fence:{fence}"),
        }
    }
}

/// What an attempt found.
#[derive(Debug)]
pub enum Attempt {
    /// We hold the lock.
    Acquired(Hold),
    /// An enclosing run holds the lock as a weaker kind (`held`): re-entering
    /// it as a stronger one would deadlock.
    Incompatible {
        /// How the enclosing run holds it (shared, or as a semaphore).
        held: Kind,
    },
    /// Someone else does, or waiters go first.
    Taken {
        /// Until the first holder's lease could run out (None: only the queue is in the way).
        pttl: Option<Duration>,
        /// The current holder, when known.
        holder: Option<HolderInfo>,
        /// Our place among the waiters (1: next in line), when known.
        place: Option<u32>,
    },
}

/// Why a blocked waiter woke up.
#[derive(Debug, PartialEq, Eq)]
pub enum Wake {
    /// A release pushed a wake-up token to us.
    Released,
    /// A release handed the lock to us: we hold it, with this fence.
    Granted(Fence),
    /// A caught signal interrupted the wait (the signal thread woke it).
    Interrupted,
    /// The timeout passed (the holder's lease may have expired).
    TimedOut,
}

/// Where locks live; cheap to share between threads. Each audience opens
/// its own kind of session (one connection): a run, a reader, an
/// administrator.
pub trait Backend: Send + Sync {
    /// The server(s), for messages: `host:port`, never a URL.
    fn server(&self) -> &str;
    /// Opens a session for holding locks, within the connect timeout.
    fn connect(&self) -> Result<Box<dyn Session>>;
    /// Opens a session for reading locks, within the connect timeout.
    fn inspect(&self) -> Result<Box<dyn Inspect>>;
    /// Opens a session for administering locks, within the connect timeout.
    fn administer(&self) -> Result<Box<dyn Administer>>;
}

/// One connection's worth of the lock operations a run needs: taking,
/// waiting for, keeping and giving back its own holds. Every call is bounded
/// in time: nothing here can hang on a stalled server.
pub trait Session: Send {
    /// Takes or re-enters the lock, or reports who holds it.
    fn acquire(&mut self, req: &AcquireRequest<'_>) -> Result<Attempt>;
    /// Blocks until a release wakes us, an interrupt arrives, or `timeout` passes.
    fn block(&mut self, lock: &LockId, token: &Token, timeout: Duration) -> Result<Wake>;
    /// Interrupts the `block` of the waiter `token` (from another thread's session).
    fn interrupt(&mut self, lock: &LockId, token: &Token) -> Result<()>;
    /// Deregisters the waiter `token`, waking the waiters it held back.
    fn leave(&mut self, lock: &LockId, token: &Token) -> Result<()>;
    /// Extends the lease of `token` to `ttl` as `extend` says; false when it
    /// no longer holds the lock. The call gives up (with an error) after `limit`.
    fn renew(
        &mut self,
        lock: &LockId,
        token: &Token,
        ttl: Duration,
        limit: Duration,
        extend: Extend,
    ) -> Result<bool>;
    /// The servers' clocks as the last renewal read them (one per server of
    /// a quorum that answered it), for telling a step of one; empty where no
    /// renewal reads one.
    fn server_times(&self) -> Vec<ServerTime> {
        Vec::new()
    }
    /// Drops one hold of `token`. Returns the hold count left, or None when
    /// `token` did not hold the lock.
    fn release(&mut self, lock: &LockId, token: &Token) -> Result<Option<u64>>;
    /// [`release`](Self::release) of a hold given back in the round that took
    /// it, also removing its `acquired` event (`entry`, an
    /// [`AcquiredEvent::retraction`]) from the history: no run held it.
    fn release_retracting(
        &mut self,
        lock: &LockId,
        token: &Token,
        entry: &str,
    ) -> Result<Option<u64>> {
        let _ = entry;
        self.release(lock, token)
    }
    /// Gives back `hold`, which no run kept (COMMAND never ran under it,
    /// nobody got its token): released, and a new hold's `acquired` event
    /// taken back with it where the backend can find it. A hold re-entered
    /// (count above 1) keeps the enclosing one's event.
    fn give_back(&mut self, lock: &LockId, hold: &Hold) -> Result<Option<u64>> {
        if hold.count != 1 {
            return self.release(lock, &hold.token);
        }
        let event = hold
            .history_entry
            .as_ref()
            .unwrap_or(&AcquiredEvent::ByFence);
        self.release_retracting(lock, &hold.token, &event.retraction(hold.fence))
    }
    /// [`release`](Self::release), adding `event` to the lock's history
    /// (keeping `cap` events) when the hold ended. The Redis backend writes it
    /// in the releasing script; others after it.
    fn release_recorded(
        &mut self,
        lock: &LockId,
        token: &Token,
        record: Option<(u32, &Event)>,
    ) -> Result<Option<u64>> {
        let left = self.release(lock, token)?;
        if let (Some(0), Some((cap, event))) = (left, record)
            && let Err(err) = self.record(lock, cap, event)
        {
            crate::report::verbose(|| format!("{}: history not written: {err}", lock.name));
        }
        Ok(left)
    }
    /// Adds `event` to the lock's history, which keeps the last `cap` events
    /// (0: nothing is written) and ends [`IDLE`](crate::lock::event::IDLE) after the
    /// last one.
    fn record(&mut self, lock: &LockId, cap: u32, event: &Event) -> Result<()>;
    /// Waits (WAIT) until `replicas` replicas have every write this session
    /// made, at most `limit`; returns how many confirmed.
    fn confirm_replicas(&mut self, lock: &LockId, replicas: u32, limit: Duration) -> Result<u32>;
    /// Lifts the lock's fencing counter to at least `fence` (Redlock keeps the
    /// servers' counters in step this way).
    fn raise_fence(&mut self, lock: &LockId, fence: Fence) -> Result<()>;
    /// Why the hold on `keys` was found gone (a server restart, an eviction),
    /// as far as the server can tell: asked once, when a renewal or a release
    /// finds it missing. `held_for` is how long ago the hold began, when
    /// known. None when there is nothing to ask or no answer.
    fn why_gone(&mut self, _lock: &LockId, _held_for: Option<Duration>) -> Option<String> {
        None
    }
    /// Descriptors another process must keep open for this session's hold on
    /// the lock to last (`file:` locks live in open files; none for Redis).
    fn handover(&self, _lock: &LockId) -> Vec<std::os::fd::RawFd> {
        Vec::new()
    }
}

/// Reading locks without changing them (`status`, `list`, `history`,
/// `metrics`). Every call is bounded in time.
pub trait Inspect: Send {
    /// Reads the lock's state without changing it.
    fn status(&mut self, lock: &LockId) -> Result<LockStatus>;
    /// Reads the state of each lock of `locks`, in order (`list`, `status`
    /// of many names); a backend with round trips to save batches them.
    fn statuses(&mut self, locks: &[LockId]) -> Result<Vec<LockStatus>> {
        locks.iter().map(|keys| self.status(keys)).collect()
    }
    /// Names of the locks under `prefix` whose name matches the glob `pattern`
    /// and that are held or waited for (SCAN, never KEYS); in Redisson's
    /// layout (`--redisson`), whose key matches `pattern`.
    fn list(&mut self, prefix: &str, pattern: &str) -> Result<Vec<String>>;
    /// The lock's last `limit` events, newest first.
    fn history(&mut self, lock: &LockId, limit: usize) -> Result<Vec<Event>>;
    /// How long the longest-waiting live waiter has waited (`rlock
    /// metrics`); None when nobody waits, or when the backend cannot tell.
    fn longest_wait(&mut self, _lock: &LockId) -> Result<Option<Duration>> {
        Ok(None)
    }
}

/// Changing locks that are not one's own (`release --force`), with the lock
/// operations and the reading that go with it. Every call is bounded in time.
pub trait Administer: Session + Inspect {
    /// Ends every hold of the lock, whoever owns it; returns how many there were.
    fn force_release(&mut self, lock: &LockId) -> Result<u64>;
}
