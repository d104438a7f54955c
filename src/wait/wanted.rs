//! What a caller asks `acquire` for: the locks, the kind, how long to wait
//! for them and for an unreachable server.

use std::time::{Duration, Instant};

use crate::backend::HolderInfo;
use crate::config::LockSpec;
use crate::lock::event::Event;
use crate::lock::kind::Kind;
use crate::lock::name::LockId;
use crate::lock::token::Token;
use crate::wait::outage::Patience;

/// What to acquire and how long to wait.
pub struct Wanted<'a> {
    /// The locks, in the order they are tried (sorted by the caller, so that
    /// every run tries shared names in the same order).
    pub locks: &'a [LockId],
    /// Fresh token for this caller.
    pub token: &'a Token,
    /// Ancestors' tokens (re-entry).
    pub inherited: &'a [Token],
    /// Lease to ask for.
    pub ttl: Duration,
    /// Metadata stored with the hold.
    pub holder: &'a HolderInfo,
    /// How long to wait: `None` forever, zero for `--no-wait`.
    pub wait: Option<Duration>,
    /// Status for "not acquired" (`-E`).
    pub conflict_code: u8,
    /// Exclusive, shared or semaphore.
    pub kind: Kind,
    /// First come, first served among waiters.
    pub fair: bool,
    /// A release may hand the lock over while we wait (one lock, and a lease
    /// the caller renews: a handed-over lease is counted from the request that
    /// registered us, so it can be shorter than `ttl`).
    pub handoff: bool,
    /// Replicas that must confirm the holds (`--min-replicas`) before they count.
    pub min_replicas: u32,
    /// How long they may take (the caller sets the connect timeout).
    pub replica_timeout: Duration,
    /// How long an unreachable server is waited for.
    pub patience: Patience,
    /// Off a terminal: how often a waiting run says so (zero: never).
    pub progress_interval: Duration,
    /// An acquisition that took longer than this is renewed before it
    /// counts: how often the caller renews (a third of the lease unless it
    /// says otherwise), so the lease it starts on is never older.
    pub refresh_after: Duration,
    /// The history's cap and the `acquired` event to record (the time waited
    /// is filled in at each attempt); None: not recorded here.
    pub record: Option<(u32, Event)>,
}

impl<'a> Wanted<'a> {
    /// What `spec` asks for, with a lease of `ttl`.
    pub fn new(
        locks: &'a [LockId],
        token: &'a Token,
        inherited: &'a [Token],
        holder: &'a HolderInfo,
        spec: &LockSpec,
        ttl: Duration,
        handoff: bool,
    ) -> Self {
        Wanted {
            locks,
            token,
            inherited,
            ttl,
            holder,
            wait: spec.wait,
            conflict_code: spec.conflict_code,
            kind: spec.kind,
            fair: spec.fair,
            // A handoff is written by the releasing client's connection, which
            // this one's WAIT cannot vouch for.
            handoff: handoff && locks.len() == 1 && spec.min_replicas == 0,
            min_replicas: spec.min_replicas,
            replica_timeout: Duration::from_secs(2),
            patience: Patience {
                wait_ends: spec.wait.and_then(|w| Instant::now().checked_add(w)),
                no_wait: spec.no_wait(),
                bound: spec.unreachable_wait,
            },
            progress_interval: spec.progress_interval,
            refresh_after: ttl / 3,
            record: None,
        }
    }
}
