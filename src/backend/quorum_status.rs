//! What a Redlock quorum says about one lock, from each server's own view.
//!
//! A hold counts only where a majority has it, so `status` shows the holders
//! a quorum of servers agree on, and says when servers disagree (a hold on
//! some servers only, a server that did not answer) instead of showing one
//! server's view as the truth.

use super::{Agreement, HolderStatus, LockStatus};

/// The quorum's view of a lock from the `views` of the servers that answered,
/// out of `total`, a hold counting on `quorum` servers.
pub fn merge(views: &[LockStatus], total: usize, quorum: usize) -> LockStatus {
    // Holders are told apart by what they wrote; each server has its own
    // clock, so `since` and the lease left differ between servers.
    let mut seen: Vec<(&HolderStatus, Vec<&HolderStatus>)> = Vec::new();
    for view in views {
        for h in &view.holders {
            match seen.iter_mut().find(|(first, _)| same_holder(first, h)) {
                Some((_, copies)) => copies.push(h),
                None => seen.push((h, vec![h])),
            }
        }
    }
    let mut holders = Vec::new();
    let mut notes = Vec::new();
    for (first, copies) in &seen {
        if copies.len() >= quorum {
            let mut leases: Vec<Option<u64>> = copies.iter().map(|h| h.lease_ms).collect();
            leases.sort_unstable_by(|a, b| b.cmp(a));
            holders.push(HolderStatus {
                since_ms: copies.iter().map(|h| h.since_ms).max().unwrap_or(0),
                // What a quorum still holds: the quorum-th longest lease.
                lease_ms: leases[quorum - 1],
                earlier: false,
                ..(*first).clone()
            });
        }
        if copies.len() < views.len() {
            notes.push(format!(
                "{} holds it on {} of {} servers{}",
                crate::report::holder(&first.pid, &first.host, &first.command, &first.note),
                copies.len(),
                total,
                if copies.len() < quorum {
                    " (not a quorum: not a holder)"
                } else {
                    ""
                }
            ));
        }
    }
    if views.len() < total {
        notes.push(format!(
            "{} of {total} servers did not answer",
            total - views.len()
        ));
    }
    // Kind and limit as the servers that see the quorum's holders say.
    let agreeing = views.iter().find(|v| {
        holders
            .iter()
            .all(|h| v.holders.iter().any(|c| same_holder(c, h)))
    });
    let (kind, limit) = match agreeing {
        Some(v) if !holders.is_empty() => (v.kind, v.limit),
        _ => (None, 1),
    };
    LockStatus {
        kind,
        limit,
        fence: views.iter().map(|v| v.fence).max().unwrap_or(0),
        waiting: views.iter().map(|v| v.waiting).max().unwrap_or(0),
        // Each server registers the waiters it saw: the fullest view.
        waiters: views
            .iter()
            .max_by_key(|v| v.waiters.len())
            .map(|v| v.waiters.clone())
            .unwrap_or_default(),
        holders,
        servers: Some(Agreement {
            total,
            answered: views.len(),
            disagreement: (!notes.is_empty()).then(|| notes.join("; ")),
        }),
        redisson: false,
    }
}

fn same_holder(a: &HolderStatus, b: &HolderStatus) -> bool {
    a.host == b.host && a.pid == b.pid && a.command == b.command
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lock::kind::Kind;

    fn holder(pid: &str, ttl_ms: u64) -> HolderStatus {
        HolderStatus {
            host: "h".into(),
            pid: pid.into(),
            command: "job".into(),
            note: String::new(),
            since_ms: 1000,
            lease_ms: Some(ttl_ms),
            ttl_ms: None,
            renewed_ms: None,
            earlier: false,
        }
    }

    fn view(holders: Vec<HolderStatus>, fence: u64) -> LockStatus {
        LockStatus {
            kind: (!holders.is_empty()).then_some(Kind::Exclusive),
            limit: 1,
            fence,
            waiting: 0,
            holders,
            waiters: Vec::new(),
            servers: None,
            redisson: false,
        }
    }

    #[test]
    fn all_agree() {
        let v = merge(
            &[
                view(vec![holder("1", 900)], 5),
                view(vec![holder("1", 1000)], 7),
                view(vec![holder("1", 800)], 6),
            ],
            3,
            2,
        );
        assert_eq!(v.holders.len(), 1);
        assert_eq!(
            v.holders[0].lease_ms,
            Some(900),
            "what a quorum still holds"
        );
        assert_eq!(v.fence, 7);
        assert_eq!(v.kind, Some(Kind::Exclusive));
        assert!(v.servers.unwrap().disagreement.is_none());
    }

    #[test]
    fn a_hold_on_a_minority_is_no_hold_and_is_named() {
        let v = merge(
            &[
                view(vec![holder("1", 900)], 5),
                view(vec![], 5),
                view(vec![], 5),
            ],
            3,
            2,
        );
        assert!(v.holders.is_empty());
        assert_eq!(v.kind, None);
        let note = v.servers.unwrap().disagreement.unwrap();
        assert_eq!(
            note,
            "pid 1 on h ('job') holds it on 1 of 3 servers (not a quorum: not a holder)"
        );
    }

    #[test]
    fn a_majority_hold_with_a_silent_server_is_a_hold_and_says_so() {
        let v = merge(
            &[
                view(vec![holder("1", 900)], 5),
                view(vec![holder("1", 700)], 5),
            ],
            3,
            2,
        );
        assert_eq!(v.holders.len(), 1);
        assert_eq!(v.holders[0].lease_ms, Some(700));
        let a = v.servers.unwrap();
        assert_eq!((a.total, a.answered), (3, 2));
        assert_eq!(a.disagreement.unwrap(), "1 of 3 servers did not answer");
    }
}
