//! A lock held through the library: renewed by the client's thread until
//! it is released (explicitly or on drop), detached, or lost.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::notice::{Loss, LossSignal, Notice};
use super::renewer::Entry;
use super::{Error, Inner};
use crate::backend::Session;
use crate::exit::Exit;
use crate::holding::deadline::{Deadline, InProcess};
use crate::holding::held::HeldLock;
use crate::holding::lost::{Lost, why_lapsed};
use crate::holding::watchdog::{Renewal, Watch};
use crate::holding::{AFTER_LOSS_STEP, Ending, Recorder};
use crate::lock::clock::Stamp;
use crate::lock::event::Event;
use crate::lock::lease::Lease;
use crate::lock::name::Dialect;

/// Numbers the holds of the process, for the renewal thread.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// What an acquisition hands to the hold it makes.
pub(super) struct Keeping {
    pub(super) inner: Arc<Inner>,
    pub(super) session: Box<dyn Session>,
    /// The locks, in the order they were acquired (by name).
    pub(super) held: Vec<HeldLock>,
    /// The names as given, comma-separated.
    pub(super) display: String,
    /// The first name given (whose fence is [`Hold::fence`]).
    pub(super) first: String,
    pub(super) lease: Lease,
    pub(super) grace: Duration,
    /// When the request that proved the lease was sent.
    pub(super) since: Stamp,
    pub(super) recorder: Recorder,
}

/// A lock (or several, all or none) held through a [`crate::Client`].
///
/// The client's renewal thread renews the lease at the CLI's cadence while
/// the hold lives. If the lease can no longer be proven (renewals refused
/// or failing, the hold found gone, the server's clock jumping), the hold
/// is reported lost at the point `rlock run` would stop its COMMAND: before
/// the lease can end, with time left to stop the work it protects.
///
/// Released by [`release`](Self::release) or when dropped (within the
/// client's connect timeout per lock, never panicking).
///
/// ```no_run
/// # fn main() -> Result<(), rlock::Error> {
/// let client = rlock::Client::open("redis://127.0.0.1:6379")?;
/// let hold = client.lock("nightly").acquire()?;
/// for batch in 0..100 {
///     if hold.is_lost() {
///         break; // someone else may hold the lock now
///     }
///     println!("batch {batch} under fence {}", hold.fence());
/// }
/// hold.release()?;
/// # Ok(())
/// # }
/// ```
pub struct Hold {
    inner: Arc<Inner>,
    id: u64,
    held: Vec<HeldLock>,
    display: String,
    first: String,
    lease: Lease,
    acquired: Instant,
    recorder: Recorder,
    notice: Arc<Notice>,
    /// A `file:` hold's session: its open files are the lock.
    own: Option<Box<dyn Session>>,
    done: bool,
}

impl Hold {
    /// The hold `keeping` describes, handed to the client's renewal thread
    /// (`file:` holds are kept by the kernel, not renewed).
    pub(super) fn start(keeping: Keeping) -> Result<Hold, Error> {
        let Keeping {
            inner,
            session,
            held,
            display,
            first,
            lease,
            grace,
            since,
            recorder,
        } = keeping;
        let deadlines = Arc::new(InProcess::default());
        let notice = Notice::new(Arc::clone(&deadlines), &display);
        let mut hold = Hold {
            inner: Arc::clone(&inner),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            held,
            display,
            first,
            lease,
            acquired: Instant::now(),
            recorder,
            notice,
            own: None,
            done: false,
        };
        if inner.config.is_local() {
            hold.own = Some(session);
            return Ok(hold);
        }
        let (term, kill) = lease.deadlines(since, grace);
        deadlines.extend(term, kill);
        let renewal = Renewal {
            holds: hold.held.clone(),
            display: hold.display.clone(),
            lease,
            grace,
            period: lease.period(grace),
            confirmed_at: since,
            deadlines: deadlines as Arc<dyn Deadline>,
        };
        let entry = Entry {
            id: hold.id,
            watch: Watch::new(renewal, inner.renewer.guarded()),
            notice: Arc::clone(&hold.notice),
            since,
        };
        match inner.renewer.watch(entry, session) {
            Ok(Some(session)) => inner.put_idle(session),
            Ok(None) => {}
            Err(err) => {
                let _ = hold.finish();
                return Err(err.into());
            }
        }
        Ok(hold)
    }

    /// The fencing token of the hold on the first name given: the
    /// `RLOCK_FENCE` a run of the CLI gets. Every new hold of a lock, taken
    /// by the library or by the CLI, gets a larger one.
    pub fn fence(&self) -> u64 {
        self.held
            .iter()
            .find(|held| held.name() == self.first)
            .map_or(0, |held| held.fence().0)
    }

    /// Each lock's name and fence, in name order (`RLOCK_FENCES`).
    pub fn fences(&self) -> Vec<(String, u64)> {
        self.held
            .iter()
            .map(|held| (held.name().to_owned(), held.fence().0))
            .collect()
    }

    /// The owner token of the hold on the first name given (`RLOCK_TOKEN`):
    /// `rlock renew --token` and `rlock release --token` take it.
    pub fn token(&self) -> &str {
        self.held
            .iter()
            .find(|held| held.name() == self.first)
            .map_or("", |held| held.token().as_str())
    }

    /// True once the lease could end under the holder with no notice left:
    /// from the point the CLI would stop its COMMAND (a loss reported, or
    /// its deadline passed while a renewal was still out). Read at any
    /// time without a round trip; a `file:` hold is never lost.
    pub fn is_lost(&self) -> bool {
        self.notice.is_lost()
    }

    /// Something to block on until the hold is lost (see [`LossSignal`]):
    /// its [`wait`](LossSignal::wait) returns the [`Loss`] and its cause,
    /// or `None` once the hold is released or detached.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), rlock::Error> {
    /// # let client = rlock::Client::open("redis://127.0.0.1:6379")?;
    /// let hold = client.lock("nightly").acquire()?;
    /// if let Some(loss) = hold.lost().wait_timeout(std::time::Duration::from_secs(60)) {
    ///     eprintln!("{loss}");
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn lost(&self) -> LossSignal {
        LossSignal::new(Arc::clone(&self.notice))
    }

    /// Releases the lock(s), recording the release in the history.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Lost`](crate::ErrorKind::Lost) when the hold was lost,
    /// or found gone at the release (someone else may have held the lock
    /// meanwhile); [`ErrorKind::Unavailable`](crate::ErrorKind::Unavailable)
    /// when the server did not answer (the lock then expires with its lease).
    pub fn release(mut self) -> Result<(), Error> {
        self.finish()
    }

    /// Stops renewing and keeps the lock until its lease ends (as `rlock
    /// acquire` leaves it): returns the owner tokens, in name order, for
    /// `rlock renew --token` or `rlock release --token`. A `file:` lock is
    /// released: the kernel keeps it only while its files are open.
    pub fn detach(mut self) -> Vec<String> {
        self.done = true;
        self.notice.end();
        self.inner.renewer.forget(self.id);
        self.held
            .iter()
            .map(|held| held.token().as_str().to_owned())
            .collect()
    }

    /// The release, once: what `release` and `drop` do.
    fn finish(&mut self) -> Result<(), Error> {
        if std::mem::replace(&mut self.done, true) {
            return Ok(());
        }
        let loss = self.notice.end();
        self.inner.renewer.forget(self.id);
        let loss = loss.or_else(|| {
            // Lapsed, with the renewal thread yet to say why.
            self.notice.deadlines.lapsed().then(|| {
                let lost = why_lapsed(self.lease, None, Duration::ZERO);
                Loss::new(&self.display, lost.notice(None))
            })
        });
        match loss {
            Some(loss) => {
                self.wind_up(&loss);
                Err(Error::lost(loss))
            }
            None => self.release_kept(),
        }
    }

    /// Releases holds kept throughout, each with its `released` event.
    fn release_kept(&mut self) -> Result<(), Error> {
        let held_for = self.acquired.elapsed();
        let record = self.recorder.at_release(None, held_for);
        let mut session = match self.own.take() {
            Some(session) => session,
            None => self.inner.session()?,
        };
        let (mut gone, mut failed) = (None, None);
        for lock in self.held.iter().rev() {
            let event = record.as_ref().map(|(cap, event)| {
                let event = Event {
                    fence: Some(lock.fence().0),
                    ..event.clone()
                };
                (*cap, event)
            });
            let event = event.as_ref().map(|(cap, event)| (*cap, event));
            match session.release_recorded(&lock.id, lock.token(), event) {
                Ok(Some(_)) => {}
                Ok(None) => gone = gone.or(Some(lock)),
                Err(err) => failed = failed.or(Some(err)),
            }
        }
        let gone = gone.map(|lock| {
            let why = session.why_gone(&lock.id, Some(held_for));
            let lost = Lost::GoneAtRelease(lock.name().to_owned());
            Loss::new(lock.name(), lost.notice(why.as_deref()))
        });
        if let Some(loss) = &gone {
            self.record_lost(session.as_mut(), loss);
        }
        self.inner.put_idle(session);
        match (gone, failed) {
            (Some(loss), _) => Err(Error::lost(loss)),
            (None, Some(err)) => Err(err.into()),
            (None, None) => Ok(()),
        }
    }

    /// After a loss: releases what is still ours and records the `lost`
    /// event, each request within a short bound (the server may be the
    /// reason for the loss).
    fn wind_up(&mut self, loss: &Loss) {
        let backend = self
            .inner
            .config
            .backend_within(Dialect::Rlock, AFTER_LOSS_STEP);
        let session = match self.own.take() {
            Some(session) => Ok(session),
            None => backend.and_then(|backend| backend.connect()),
        };
        let Ok(mut session) = session else {
            return;
        };
        for lock in self.held.iter().rev() {
            if lock.name() != loss.lock() {
                let _ = session.release(&lock.id, lock.token());
            }
        }
        self.record_lost(session.as_mut(), loss);
    }

    /// Records the hold's `lost` event (its cause as the note), as a run
    /// that lost its lock does.
    fn record_lost(&self, session: &mut dyn Session, loss: &Loss) {
        let ending = Ending::Lost {
            line: loss.cause().to_owned(),
            held: self.acquired.elapsed(),
        };
        for (lock, event) in self.recorder.at_end(&ending, Exit::LockLost, None) {
            let _ = session.record(&lock, self.recorder.cap(), &event);
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

impl std::fmt::Debug for Hold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token.
        f.debug_struct("Hold")
            .field("locks", &self.display)
            .field("fence", &self.fence())
            .field("lost", &self.is_lost())
            .finish_non_exhaustive()
    }
}
