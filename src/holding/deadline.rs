//! What a lease's watch keeps and whom it tells: the deadlines of the
//! lease a renewal proved (the guardian's for `rlock run`, in-process ones
//! for a library hold), and what the lease protects (a run's COMMAND, which
//! gets signals; a library hold, which is marked lost).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::announce::Event;
use crate::lock::clock::Stamp;
use crate::run_state::Shared;
use crate::sys::guardian::Deadlines;
use crate::sys::signal::Signal;

/// The deadlines of a lease: when what it protects must be told to stop
/// ("term": SIGTERM for COMMAND, the loss notice for a library hold) and
/// when it must be gone ("kill"). Each method is the guardian's
/// [`Deadlines`] method of the same name.
pub trait Deadline: Send + Sync {
    /// Moves the deadlines to (`term`, `kill`), unless the stop was already
    /// claimed; false then (the hold is lost).
    fn extend(&self, term: Stamp, kill: Stamp) -> bool;
    /// When the stop is due (None: no deadline, or it was claimed).
    fn term_at(&self) -> Option<Stamp>;
    /// True once the stop was claimed.
    fn fired(&self) -> bool;
    /// When the kill is due, once the stop was claimed.
    fn kill_at(&self) -> Option<Stamp>;
    /// Claims the stop if it is due; true when this caller must act on it.
    fn fire_if_due(&self) -> bool;
    /// The hold is gone: claims the stop now (true when this caller must act
    /// on it), and brings the kill to `grace` from now.
    fn stop_now(&self, grace: Duration) -> bool;
    /// Lets whoever else enforces the deadlines look at them again; false
    /// when it is gone.
    fn wake(&self) -> bool;
}

impl Deadline for Deadlines {
    fn extend(&self, term: Stamp, kill: Stamp) -> bool {
        Deadlines::extend(self, term, kill)
    }
    fn term_at(&self) -> Option<Stamp> {
        Deadlines::term_at(self)
    }
    fn fired(&self) -> bool {
        Deadlines::fired(self)
    }
    fn kill_at(&self) -> Option<Stamp> {
        Deadlines::kill_at(self)
    }
    fn fire_if_due(&self) -> bool {
        Deadlines::fire_if_due(self)
    }
    fn stop_now(&self, grace: Duration) -> bool {
        Deadlines::stop_now(self, grace)
    }
    fn wake(&self) -> bool {
        Deadlines::wake(self)
    }
}

/// No deadline (yet).
const NONE: u64 = 0;
/// The stop was claimed.
const FIRED: u64 = u64::MAX;

/// Deadlines kept in this process only, read by whoever asks (a library
/// hold's `is_lost`): no guardian, no signal.
#[derive(Debug, Default)]
pub struct InProcess {
    term_at: AtomicU64,
    kill_at: AtomicU64,
}

impl InProcess {
    /// True once the stop was claimed or is due: the lease may end before
    /// anything could be told.
    pub fn lapsed(&self) -> bool {
        match self.term_at.load(Ordering::SeqCst) {
            FIRED => true,
            NONE => false,
            term => Stamp(term).passed(),
        }
    }
}

impl Deadline for InProcess {
    fn extend(&self, term: Stamp, kill: Stamp) -> bool {
        let mut current = self.term_at.load(Ordering::SeqCst);
        loop {
            if current == FIRED {
                return false;
            }
            match self.term_at.compare_exchange(
                current,
                term.0.clamp(1, FIRED - 1),
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => break,
                Err(now) => current = now,
            }
        }
        self.kill_at.store(kill.0, Ordering::SeqCst);
        true
    }

    fn term_at(&self) -> Option<Stamp> {
        match self.term_at.load(Ordering::SeqCst) {
            NONE | FIRED => None,
            t => Some(Stamp(t)),
        }
    }

    fn fired(&self) -> bool {
        self.term_at.load(Ordering::SeqCst) == FIRED
    }

    fn kill_at(&self) -> Option<Stamp> {
        match self.kill_at.load(Ordering::SeqCst) {
            _ if !self.fired() => None,
            NONE => None,
            t => Some(Stamp(t)),
        }
    }

    fn fire_if_due(&self) -> bool {
        let current = self.term_at.load(Ordering::SeqCst);
        current != NONE
            && current != FIRED
            && Stamp(current).passed()
            && self
                .term_at
                .compare_exchange(current, FIRED, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
    }

    fn stop_now(&self, grace: Duration) -> bool {
        let mine = self.term_at.swap(FIRED, Ordering::SeqCst) != FIRED;
        self.kill_at
            .fetch_min((Stamp::now() + grace).0, Ordering::SeqCst);
        mine
    }

    fn wake(&self) -> bool {
        true
    }
}

/// What a lease protects, as its watch tells it what became of the lease.
pub trait Guarded: Send + Sync {
    /// The lease is no longer proven: stop (COMMAND gets SIGTERM).
    fn stop(&self);
    /// The kill deadline passed, or nothing else enforces it any more.
    fn kill(&self);
    /// A renewal was confirmed.
    fn renewed(&self);
    /// Renewals have failed for `for_`, the last for `cause`; the watch
    /// retries.
    fn renewals_failing(&self, for_: Duration, cause: &str);
    /// The hold is known lost.
    fn lost(&self);
    /// Notes that a wait meant to end at `planned` ended now.
    fn note_wake(&self, planned: Stamp);
    /// The longest any timed wait overran: how a suspension shows.
    fn late(&self) -> Duration;
}

/// `rlock run`: COMMAND's process group gets the signals, and the run's
/// announcer hears of the renewals and the loss.
impl Guarded for Shared {
    fn stop(&self) {
        self.announce().tell(&Event::Lost);
        self.signal_group(Signal::TERM);
        self.signal_group(Signal::CONT);
    }
    fn kill(&self) {
        self.signal_group(Signal::KILL);
    }
    fn renewed(&self) {
        self.announce().tell(&Event::Renewed);
    }
    fn renewals_failing(&self, for_: Duration, cause: &str) {
        self.announce()
            .tell(&Event::RenewalsFailing { for_, cause });
    }
    fn lost(&self) {
        self.announce().tell(&Event::Lost);
    }
    fn note_wake(&self, planned: Stamp) {
        Shared::note_wake(self, planned);
    }
    fn late(&self) -> Duration {
        Shared::late(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_process_deadlines_fire_once_and_refuse_extension_after() {
        let d = InProcess::default();
        assert!(!d.lapsed() && !d.fire_if_due());
        let now = Stamp::now();
        assert!(d.extend(now + Duration::from_secs(60), now + Duration::from_secs(70)));
        assert!(!d.lapsed() && !d.fire_if_due() && d.kill_at().is_none());
        assert!(d.extend(now, now + Duration::from_secs(1)));
        assert!(d.lapsed());
        assert!(d.fire_if_due());
        assert!(!d.fire_if_due() && d.fired() && d.term_at().is_none());
        assert!(d.kill_at().is_some());
        assert!(!d.extend(now + Duration::from_secs(60), now + Duration::from_secs(70)));
        assert!(!d.stop_now(Duration::ZERO));
    }
}
