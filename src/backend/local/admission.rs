//! Who may take a lock now, decided as the Redis scripts decide it: whether
//! a kind may join the live holders, writer preference among the waiters,
//! re-entry into an enclosing run's hold, and the kernel locks a kind takes.

use std::fs::File;
use std::io;

use super::LocalSession;
use super::files::{field, held_by_someone, open, try_flock};
use super::records::{Details, OpenHold};
use crate::backend::{AcquireRequest, Attempt, Hold};
use crate::lock::kind::Kind;
use crate::lock::token::{Fence, Token};

/// Whether a request of `kind` may join the live holders (the rule the Redis
/// scripts apply): one exclusive holder; or shared holders only; or semaphore
/// holders fewer than the smallest limit among them and the newcomer.
pub(super) fn compatible(holders: &[Details], kind: Kind) -> bool {
    if holders.is_empty() {
        return true;
    }
    match kind {
        Kind::Exclusive => false,
        Kind::Shared => holders
            .iter()
            .all(|d| Kind::from_record(&d.kind) == Some(Kind::Shared)),
        Kind::Semaphore(n) => {
            let limits: Option<Vec<u32>> = holders
                .iter()
                .map(|d| Kind::from_record(&d.kind)?.semaphore_limit())
                .collect();
            limits.is_some_and(|limits| {
                let cap = limits.into_iter().min().unwrap_or(n).min(n);
                holders.len() < cap as usize
            })
        }
    }
}

impl LocalSession {
    /// Writer preference, as the Redis scripts have it: a shared request
    /// never goes before an exclusive or semaphore request already waiting.
    pub(super) fn queue_allows(&self, name: &str, kind: Kind, token: &Token) -> bool {
        if kind != Kind::Shared {
            return true;
        }
        let mine = self.waiting.get(name).map_or(u128::MAX, |w| w.since);
        self.live(name, "w").iter().all(|(other, text)| {
            other == token.as_str()
                || field(text, "kind", "kind").as_deref() == Some(Kind::Shared.letter())
                || self.stale_waiter(name, other)
                || field(text, "since", "kind")
                    .and_then(|s| s.parse::<u128>().ok())
                    .is_none_or(|since| since >= mine)
        })
    }

    /// Re-entry: an enclosing run (our ancestor) holds the lock.
    pub(super) fn reenter(&mut self, req: &AcquireRequest<'_>) -> Option<Attempt> {
        let name = &req.keys.name;
        for inherited in req.inherited {
            let path = self.record_path(name, "h", inherited);
            if !held_by_someone(&path) {
                continue;
            }
            let Some(details) = Details::read(&path) else {
                continue;
            };
            let stored = Kind::from_record(&details.kind);
            if stored != Some(Kind::Exclusive) && stored != Some(req.kind) {
                let held = if stored == Some(Kind::Shared) {
                    Kind::Shared
                } else {
                    Kind::Semaphore(0)
                };
                return Some(Attempt::Incompatible { held });
            }
            self.held.insert(
                name.clone(),
                OpenHold {
                    token: inherited.clone(),
                    files: Vec::new(),
                    fence: details.fence,
                },
            );
            return Some(Attempt::Acquired(Hold {
                token: inherited.clone(),
                fence: Fence(details.fence),
                count: 2,
                recorded: false,
                history_entry: None,
            }));
        }
        None
    }

    /// Takes the kernel locks `kind` needs, without waiting.
    pub(super) fn take(&self, name: &str, kind: Kind) -> io::Result<Option<Vec<File>>> {
        let main = open(&self.path(name, "lock"))?;
        match kind {
            Kind::Exclusive => Ok(try_flock(&main, true)?.then(|| vec![main])),
            Kind::Shared => Ok(try_flock(&main, false)?.then(|| vec![main])),
            Kind::Semaphore(n) => {
                if !try_flock(&main, false)? {
                    return Ok(None);
                }
                for slot in 0..n {
                    let file = open(&self.path(name, &format!("slot{slot}")))?;
                    if try_flock(&file, true)? {
                        return Ok(Some(vec![main, file]));
                    }
                }
                Ok(None)
            }
        }
    }
}
