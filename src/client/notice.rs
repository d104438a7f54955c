//! How a hold's loss reaches the program: a flag read at any time, and a
//! signal to block on, both set by the client's renewal thread at the point
//! `rlock run` would send COMMAND SIGTERM. A wait also wakes at that point
//! by the clock alone: the renewal thread may be held up in another hold's
//! call to a stalled server then, and the loss must not wait for it.

use std::fmt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::holding::deadline::{Deadline, InProcess};

/// A hold's loss: which lock, and why, in the words the `rlock` command
/// uses for the same loss (without "COMMAND was stopped").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loss {
    lock: String,
    cause: String,
}

impl Loss {
    pub(crate) fn new(lock: &str, cause: String) -> Self {
        Loss {
            lock: lock.to_owned(),
            cause,
        }
    }

    /// The lock (or locks, comma-separated) the loss concerns.
    pub fn lock(&self) -> &str {
        &self.lock
    }

    /// Why, e.g. `lock lost: the server says it is no longer ours (released
    /// by force)` or `lock lost: lease could not be renewed before it
    /// expired (server 127.0.0.1:6379 unavailable: …)`.
    pub fn cause(&self) -> &str {
        &self.cause
    }
}

impl fmt::Display for Loss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.lock, self.cause)
    }
}

/// What became of a hold, as far as its loss goes.
#[derive(Default)]
struct Fate {
    lost: Option<Loss>,
    /// Released or detached: no loss will be reported any more.
    ended: bool,
}

/// The state a hold shares with its [`LossSignal`]s and the renewal thread.
pub(crate) struct Notice {
    pub(crate) deadlines: Arc<InProcess>,
    /// The hold's lock(s), for a loss seen by the clock.
    lock: String,
    fate: Mutex<Fate>,
    changed: Condvar,
}

/// The cause of a loss seen by the clock before the renewal thread said why
/// (it was held up in a call to the server).
const UNCONFIRMED: &str =
    "lock lost: lease could not be renewed before it expired (no renewal was confirmed in time)";

impl Notice {
    pub(crate) fn new(deadlines: Arc<InProcess>, lock: &str) -> Arc<Self> {
        Arc::new(Notice {
            deadlines,
            lock: lock.to_owned(),
            fate: Mutex::new(Fate::default()),
            changed: Condvar::new(),
        })
    }

    /// How long a wait may block before the lease could lapse with nobody
    /// told; zero when it has (the loss is then recorded, by the clock).
    fn until_lapse(&self, fate: &mut Fate) -> Option<Duration> {
        if self.deadlines.lapsed() {
            if fate.lost.is_none() && !fate.ended {
                fate.lost = Some(Loss::new(&self.lock, UNCONFIRMED.to_owned()));
                self.changed.notify_all();
            }
            return Some(Duration::ZERO);
        }
        // A little past the deadline: `lapsed` is true by then.
        self.deadlines
            .term_at()
            .map(|term| term.remaining() + Duration::from_millis(1))
    }

    fn fate(&self) -> MutexGuard<'_, Fate> {
        self.fate.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reports `loss`, unless the hold ended (or was reported lost) first.
    pub(crate) fn lose(&self, loss: Loss) {
        let mut fate = self.fate();
        if fate.ended || fate.lost.is_some() {
            return;
        }
        fate.lost = Some(loss);
        self.changed.notify_all();
    }

    /// The hold is released or detached; returns its loss, if it was lost.
    pub(crate) fn end(&self) -> Option<Loss> {
        let mut fate = self.fate();
        fate.ended = true;
        self.changed.notify_all();
        fate.lost.clone()
    }

    /// The loss reported, if any.
    pub(crate) fn loss(&self) -> Option<Loss> {
        self.fate().lost.clone()
    }

    /// True once the lease could end with no notice, or a loss was reported.
    pub(crate) fn is_lost(&self) -> bool {
        self.deadlines.lapsed() || self.fate().lost.is_some()
    }
}

/// Something to block on until a hold is lost: see [`crate::Hold::lost`].
///
/// Cheap to clone and to send to another thread. A hold released or
/// detached ends every wait with `None`.
///
/// ```no_run
/// # fn main() -> Result<(), rlock::Error> {
/// let client = rlock::Client::open("redis://127.0.0.1:6379")?;
/// let hold = client.lock("nightly").acquire()?;
/// let lost = hold.lost();
/// std::thread::spawn(move || {
///     if let Some(loss) = lost.wait() {
///         eprintln!("{loss}; stopping");
///     }
/// });
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct LossSignal {
    notice: Arc<Notice>,
}

impl LossSignal {
    pub(crate) fn new(notice: Arc<Notice>) -> Self {
        LossSignal { notice }
    }

    /// Blocks until the hold is lost (`Some`, with the cause) or released
    /// or detached (`None`).
    pub fn wait(&self) -> Option<Loss> {
        let mut fate = self.notice.fate();
        loop {
            let lapse = self.notice.until_lapse(&mut fate);
            if fate.lost.is_some() || fate.ended {
                return fate.lost.clone();
            }
            fate = match lapse {
                Some(left) => {
                    self.notice
                        .changed
                        .wait_timeout(fate, left)
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
                None => self
                    .notice
                    .changed
                    .wait(fate)
                    .unwrap_or_else(|p| p.into_inner()),
            };
        }
    }

    /// [`wait`](Self::wait), for at most `timeout`: `None` also when the
    /// time ran out with the hold still kept.
    pub fn wait_timeout(&self, timeout: Duration) -> Option<Loss> {
        let until = Instant::now().checked_add(timeout);
        let mut fate = self.notice.fate();
        loop {
            let lapse = self.notice.until_lapse(&mut fate);
            if fate.lost.is_some() || fate.ended {
                return fate.lost.clone();
            }
            let left = match until {
                Some(until) => until.saturating_duration_since(Instant::now()),
                None => Duration::from_secs(3600),
            };
            if left.is_zero() {
                return None;
            }
            let left = lapse.map_or(left, |lapse| lapse.min(left));
            fate = self
                .notice
                .changed
                .wait_timeout(fate, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// True once the hold is lost (as [`crate::Hold::is_lost`]).
    pub fn is_lost(&self) -> bool {
        self.notice.is_lost()
    }
}

impl fmt::Debug for LossSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LossSignal")
            .field("lost", &self.notice.loss())
            .finish()
    }
}
