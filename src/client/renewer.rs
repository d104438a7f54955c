//! A client's one renewal thread: it keeps a [`Watch`] per hold (the
//! watchdog of `rlock run`, with its cadence, retries, deadlines and clock
//! checks) and gives each its turn on the client's one renewal session.
//! Where `rlock run` would send COMMAND SIGTERM, the hold is reported lost.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::notice::{Loss, Notice};
use crate::backend::Session;
use crate::holding::deadline::Guarded;
use crate::holding::lost::Lost;
use crate::holding::watchdog::{Due, Next, Watch};
use crate::lock::clock::Stamp;

/// What the renewal thread is told.
enum Msg {
    /// Renew this hold from now on.
    Watch(Box<Entry>),
    /// Stop renewing hold `id` (released or detached).
    Forget(u64),
}

/// One hold the thread renews.
pub(crate) struct Entry {
    pub(crate) id: u64,
    pub(crate) watch: Watch,
    pub(crate) notice: Arc<Notice>,
    /// When the hold began, for asking the server why it was found gone.
    pub(crate) since: Stamp,
}

/// The handle on a client's renewal thread, started with its first hold.
#[derive(Default)]
pub(crate) struct Renewer {
    tell: Mutex<Option<mpsc::Sender<Msg>>>,
    quiet: Arc<Quiet>,
}

impl Renewer {
    /// Whom every hold's watch tells (the thread's wake-ups).
    pub(crate) fn guarded(&self) -> Arc<dyn Guarded> {
        Arc::clone(&self.quiet) as Arc<dyn Guarded>
    }

    /// Has the thread renew `entry`'s hold; the first hold's `session`
    /// becomes the thread's (and is not given back), later ones' is.
    pub(crate) fn watch(
        &self,
        entry: Entry,
        session: Box<dyn Session>,
    ) -> crate::error::Result<Option<Box<dyn Session>>> {
        let mut tell = self.tell.lock().unwrap_or_else(|p| p.into_inner());
        let mut msg = Msg::Watch(Box::new(entry));
        if let Some(running) = tell.as_ref() {
            match running.send(msg) {
                Ok(()) => return Ok(Some(session)),
                // The thread is gone (it panicked): a new one takes over.
                Err(mpsc::SendError(back)) => msg = back,
            }
        }
        let (sender, told) = mpsc::channel();
        let _ = sender.send(msg);
        let quiet = Arc::clone(&self.quiet);
        std::thread::Builder::new()
            .name("rlock-renewer".into())
            .spawn(move || renew(session, &told, &quiet))
            .map_err(|e| {
                crate::error::Error::internal(format!("cannot start the renewal thread: {e}"))
            })?;
        *tell = Some(sender);
        Ok(None)
    }

    /// Stops renewing hold `id`.
    pub(crate) fn forget(&self, id: u64) {
        let tell = self.tell.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(tell) = tell.as_ref() {
            let _ = tell.send(Msg::Forget(id));
        }
    }
}

/// What the client's holds protect: nothing to signal; what the thread's
/// wake-ups show of a suspension of the process.
#[derive(Default)]
pub(crate) struct Quiet {
    late: AtomicU64,
}

impl Guarded for Quiet {
    fn stop(&self) {}
    fn kill(&self) {}
    fn renewed(&self) {}
    fn renewals_failing(&self, _for: Duration, _cause: &str) {}
    fn lost(&self) {}
    fn note_wake(&self, planned: Stamp) {
        let late = u64::try_from(Stamp::now().since(planned).as_nanos()).unwrap_or(u64::MAX);
        self.late.fetch_max(late, Ordering::SeqCst);
    }
    fn late(&self) -> Duration {
        Duration::from_nanos(self.late.load(Ordering::SeqCst))
    }
}

/// The thread: sleeps until the first hold's renewal (or loss) is due or a
/// message comes, then gives every hold that is due its turn. Ends with the
/// client (its sender dropped).
fn renew(mut session: Box<dyn Session>, told: &mpsc::Receiver<Msg>, quiet: &Quiet) {
    let mut entries: Vec<Entry> = Vec::new();
    loop {
        let mut wake: Option<Stamp> = None;
        entries.retain_mut(|entry| match entry.watch.due() {
            Due::At(at) => {
                wake = Some(wake.map_or(at, |w| w.min(at)));
                true
            }
            Due::Lapsed(lost) => {
                report(entry, &lost, session.as_mut());
                false
            }
            Due::Closed => false,
        });
        let msg = match wake {
            Some(wake) => {
                // A turn already due (the thread was busy with another
                // hold's call) is not overslept: only a sleep that ends
                // late shows the process was stopped.
                let planned = wake.max(Stamp::now());
                let msg = told.recv_timeout(wake.remaining());
                quiet.note_wake(planned);
                msg
            }
            None => told.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match msg {
            Ok(msg) => {
                apply(&mut entries, msg);
                while let Ok(msg) = told.try_recv() {
                    apply(&mut entries, msg);
                }
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => return,
            Err(RecvTimeoutError::Timeout) => {}
        }
        entries.retain_mut(|entry| {
            let due = matches!(entry.watch.due(), Due::At(at) if at.passed());
            if !due {
                return true;
            }
            match entry.watch.act(session.as_mut()) {
                Next::Lost(lost) | Next::Ended(lost) => {
                    report(entry, &lost, session.as_mut());
                    false
                }
                Next::Again => true,
                Next::Stopped => false,
            }
        });
    }
}

fn apply(entries: &mut Vec<Entry>, msg: Msg) {
    match msg {
        Msg::Watch(entry) => entries.push(*entry),
        Msg::Forget(id) => entries.retain(|entry| entry.id != id),
    }
}

/// Reports `lost` on `entry`'s hold, with the cause the server gives of a
/// hold found gone, asked once (as the run's loss line does).
fn report(entry: &Entry, lost: &Lost, session: &mut dyn Session) {
    let renewal = entry.watch.renewal();
    let named = !matches!(lost, Lost::ClockJumped { .. });
    let why = lost.gone().filter(|_| named).and_then(|name| {
        let held = renewal.holds.iter().find(|held| held.name() == name)?;
        session.why_gone(&held.id, Some(Stamp::now().since(entry.since)))
    });
    let which = lost.gone().unwrap_or(&renewal.display);
    entry
        .notice
        .lose(Loss::new(which, lost.notice(why.as_deref())));
}
