//! Why a hold ended before COMMAND did, and the one line the run prints
//! about it.

use std::time::Duration;

use crate::lock::lease::Lease;

/// Why the hold ended before COMMAND did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lost {
    /// A renewal found this lock held by someone else (expired, flushed, forced).
    NotOurs(String),
    /// No renewal was confirmed before the lease could have expired.
    Unconfirmed(String),
    /// rlock was not running (stopped, frozen, starved) for this long, and the
    /// lease ran out meanwhile.
    Suspended(Duration),
    /// The fixed `--lease` ran out.
    LeaseEnded(Duration),
    /// The release found the hold gone: it ended before COMMAND did.
    GoneAtRelease(String),
    /// A renewal found the hold gone after the server's clock jumped
    /// forward (`how`, "jumped forward 60s"): the jump ended the lease.
    ClockJumped { name: String, how: String },
    /// A member of COMMAND's group outlived SIGKILL (stuck in the kernel, or
    /// not rlock's to signal): the lock is left to expire, not released.
    Unkillable,
}

impl Lost {
    /// The run's one line about the loss; `why` names the cause the server
    /// showed (a restart, an eviction) of a hold found gone.
    pub fn line(&self, why: Option<&str>) -> String {
        let why = why.unwrap_or("released by force, expired, or lost in a restart");
        match self {
            Lost::NotOurs(_) => format!(
                "lock lost: the server says it is no longer ours ({why}); COMMAND was stopped"
            ),
            Lost::Unconfirmed(cause) => format!(
                "lock lost: lease could not be renewed before it expired ({cause}); COMMAND was stopped"
            ),
            Lost::Suspended(for_how_long) => format!(
                "lock lost: lease lapsed while rlock was suspended for {}; COMMAND was stopped",
                seconds(*for_how_long)
            ),
            Lost::LeaseEnded(lease) => format!(
                "lease of {} ended; COMMAND was stopped",
                humantime::format_duration(*lease)
            ),
            Lost::ClockJumped { how, .. } => format!(
                "lock lost: the server's clock {how}, which ended the lease under COMMAND; COMMAND was stopped"
            ),
            Lost::Unkillable => "COMMAND's process group could not be emptied (a member outlived SIGKILL); the lock is left to expire instead of being released".into(),
            Lost::GoneAtRelease(_) => format!(
                "lock lost: it was no longer ours at release ({why}), so COMMAND may have run beside another holder"
            ),
        }
    }

    /// The loss as a library hold's notice says it: the run's line without
    /// what became of COMMAND (a library can only tell).
    pub fn notice(&self, why: Option<&str>) -> String {
        let line = self.line(why);
        line.strip_suffix("; COMMAND was stopped")
            .unwrap_or(&line)
            .replace("under COMMAND", "under the holder")
            .replace("so COMMAND may have run", "so the holder may have worked")
    }

    /// The server itself said the hold is gone (at a renewal): it is so
    /// whenever it was seen, and the server that said it answers.
    pub fn refused(&self) -> bool {
        matches!(self, Lost::NotOurs(_) | Lost::ClockJumped { .. })
    }

    /// The lock a hold was found gone on, for asking the server why.
    pub fn gone(&self) -> Option<&str> {
        match self {
            Lost::NotOurs(name) | Lost::GoneAtRelease(name) | Lost::ClockJumped { name, .. } => {
                Some(name)
            }
            _ => None,
        }
    }
}

impl std::fmt::Display for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.line(None))
    }
}

/// "1.3 s", "250 ms".
fn seconds(d: Duration) -> String {
    if d >= Duration::from_secs(1) {
        format!("{:.1} s", d.as_secs_f64())
    } else {
        format!("{} ms", d.as_millis())
    }
}

/// Why a lease ran out without a refusal: a long gap in rlock's own running
/// tells a suspension from renewals that failed.
pub fn why_lapsed(lease: Lease, failing: Option<String>, late: Duration) -> Lost {
    match lease {
        Lease::Fixed(lease) => Lost::LeaseEnded(lease),
        Lease::Renewed(ttl) if late >= suspension(ttl) => Lost::Suspended(late),
        Lease::Renewed(_) => {
            Lost::Unconfirmed(failing.unwrap_or_else(|| "no renewal was confirmed in time".into()))
        }
    }
}

/// A wake-up this late means rlock itself was not running.
fn suspension(ttl: Duration) -> Duration {
    (ttl / 10).max(Duration::from_millis(50))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_late_wake_up_reads_as_a_suspension() {
        let ttl = Duration::from_secs(1);
        assert_eq!(
            why_lapsed(Lease::Renewed(ttl), None, Duration::from_millis(1300)),
            Lost::Suspended(Duration::from_millis(1300))
        );
        assert!(matches!(
            why_lapsed(Lease::Renewed(ttl), Some("x".into()), Duration::from_millis(5)),
            Lost::Unconfirmed(c) if c == "x"
        ));
        assert_eq!(
            why_lapsed(Lease::Fixed(ttl), None, Duration::ZERO),
            Lost::LeaseEnded(ttl)
        );
        assert_eq!(
            Lost::Suspended(Duration::from_millis(1300)).to_string(),
            "lock lost: lease lapsed while rlock was suspended for 1.3 s; COMMAND was stopped"
        );
    }
}
