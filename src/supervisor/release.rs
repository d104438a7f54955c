//! Giving the holds back when COMMAND is done, and telling a hold that was
//! already gone (it ended before COMMAND did) from a release that failed;
//! after a loss, the wind-up that says it and bounds what follows.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::ended::{Ended, Holding};
use super::{CommandEnd, Fate, Finished, Run};
use crate::backend::Extend;
use crate::backend::{Backend, Session};
use crate::error::{Cause, Error, Result};
use crate::exit::Exit;
use crate::holding::ending::Ending;
use crate::holding::held::HeldLock;
use crate::holding::lost::Lost;
use crate::holding::record::Recorder;
use crate::holding::{AFTER_LOSS, AFTER_LOSS_STEP};
use crate::lock::clock::Stamp;
use crate::lock::event::Event;
use crate::report;

/// How a release that fails is said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Quiet {
    /// As an error line: the run ends well otherwise.
    No,
    /// With -v only: the run ends in a line of its own (lost, or failed),
    /// which says why.
    Yes,
}

/// What a release did.
pub(super) struct Released {
    /// The name of a lock whose hold was already gone: it ended before
    /// COMMAND did, and someone else may have held it meanwhile.
    pub(super) gone: Option<String>,
    /// Whether every hold was given back.
    pub(super) all: bool,
}

/// Releases `held`, reusing the watchdog's session when there is one
/// (see [`Released`] for what it returns). A release that
/// fails is reported (as `quiet` says), not fatal (COMMAND ran under a
/// proven lease, and the lease expires by itself), once a fresh connection
/// has shown the hold is still ours.
/// The session used is left in `session` (for asking why a hold was gone).
/// With `record` (the history's cap and the event that ends the holds), each
/// release also writes the lock's event, with its fence. With `by` (after a
/// loss), no request starts after that instant: what is left expires with
/// its lease.
pub(super) fn release(
    backend: &dyn Backend,
    session: &mut Option<Box<dyn Session>>,
    held: &[HeldLock],
    ttl: Duration,
    quiet: Quiet,
    record: Option<&(u32, Event)>,
    by: Option<Instant>,
) -> Released {
    let late = || by.is_some_and(|by| Instant::now() >= by);
    let start = Instant::now();
    let failed = match session.take().map_or_else(|| backend.connect(), Ok) {
        Ok(s) => {
            *session = Some(s);
            None
        }
        Err(err) => Some(err),
    };
    let mut gone = None;
    let mut all = true;
    for lock in held.iter().rev() {
        let name = lock.name();
        if late() {
            report::verbose(|| {
                format!(
                    "{name}: not released: no time left after the loss; it expires within {}",
                    humantime::format_duration(ttl)
                )
            });
            all = false;
            continue;
        }
        let event = record.map(|(cap, event)| {
            let event = Event {
                fence: Some(lock.fence().0),
                ..event.clone()
            };
            (*cap, event)
        });
        let outcome = match (session.as_mut(), &failed) {
            (Some(s), _) => {
                s.release_recorded(&lock.id, lock.token(), event.as_ref().map(|(c, e)| (*c, e)))
            }
            (None, Some(err)) => Err(Error::internal(err.to_string())),
            (None, None) => Err(Error::internal("no session")),
        };
        match outcome {
            Ok(Some(left)) => report::verbose(|| {
                format!(
                    "{name}: released in {:.1} ms (holds left: {left})",
                    start.elapsed().as_secs_f64() * 1000.0
                )
            }),
            Ok(None) => gone = gone.or(Some(name.to_owned())),
            Err(err) => {
                all = false;
                if still_gone(backend, lock, &err, ttl, late()) {
                    gone = gone.or(Some(name.to_owned()));
                    continue;
                }
                let said = format!(
                    "{name}: could not release ({}); it expires within {}",
                    report::without_lock(&err.to_string(), name),
                    humantime::format_duration(ttl)
                );
                match quiet {
                    Quiet::Yes => report::verbose(|| said),
                    Quiet::No => report::error(&said),
                }
            }
        }
    }
    Released { gone, all }
}

/// After a failed release: whether a new connection shows the hold is no
/// longer ours. The connection may have died with the server (a restart
/// that lost the lock). A renewal to 1 ms changes nothing (it only
/// lengthens). Not asked after a timeout (the release may have been carried
/// out without its reply reaching us), nor when no time is left.
fn still_gone(
    backend: &dyn Backend,
    lock: &HeldLock,
    err: &Error,
    ttl: Duration,
    late: bool,
) -> bool {
    if err.reply_timed_out() || late {
        return false;
    }
    let still_ours = backend.connect().and_then(|mut s| {
        s.renew(
            &lock.id,
            lock.token(),
            Duration::from_millis(1),
            ttl / 3,
            Extend::AtLeast,
        )
    });
    matches!(still_ours, Ok(false))
}

/// After a loss known before the release: the loss is said first, then what
/// could not be done after it; the release and the history write that follow
/// share a short budget, which ends at the instant returned. Returns the
/// backend they use, bounded by it, and the line said.
pub(super) fn wind_up(
    run: &Run<'_>,
    lost: &Lost,
    held: &[HeldLock],
    session: &mut Option<Box<dyn Session>>,
    acquired_at: Stamp,
) -> (Arc<dyn Backend>, Instant, String) {
    let by = Instant::now() + AFTER_LOSS;
    let line = say_lost(run, lost, held, session.as_mut(), acquired_at);
    // The renewals' session may be stuck on a stalled server; a refusal came
    // from one that answers (and knows what it evicted). (A file: lock lives
    // in its session's open files: never swapped.)
    if !lost.refused() && !run.config.is_local() {
        *session = None;
    }
    let backend = run
        .config
        .backend_within(run.spec.lock.dialect(), AFTER_LOSS_STEP)
        .unwrap_or_else(|_| Arc::clone(&run.backend));
    (backend, by, line)
}

/// The run's one line about a loss, with the cause the server gives of a
/// hold found gone (a restart, an eviction), asked once on `session`.
/// Returns the line (the history's note).
pub(super) fn say_lost(
    run: &Run<'_>,
    lost: &Lost,
    held: &[HeldLock],
    session: Option<&mut Box<dyn Session>>,
    acquired_at: Stamp,
) -> String {
    let which = lost.gone().unwrap_or(&run.display).to_owned();
    let named = !matches!(lost, Lost::ClockJumped { .. });
    let why = lost.gone().filter(|_| named).and_then(|name| {
        let lock = held.iter().find(|lock| lock.name() == name)?;
        let held_for = Stamp::now().since(acquired_at);
        session?.why_gone(&lock.id, Some(held_for))
    });
    if let Some(why) = &why {
        report::verbose(|| format!("{which}: the hold was found gone: {why}"));
    }
    let line = lost.line(why.as_deref());
    report::error(&format!("{which}: {line}"));
    line
}

impl Finished<'_> {
    /// Releases what is still ours and decides how the run ended, and its
    /// exit status: COMMAND's, or 70 when the lease could have lapsed under it.
    pub fn release(self) -> Ended {
        let Finished {
            run,
            holding,
            mut session,
            held,
            fate,
        } = self;
        let ended = |result: Result<Exit>, ending: Ending, recorder: Recorder, by| Ended {
            result,
            ending,
            waited: Some(holding.waited),
            held: Some(held),
            recorder: Some(recorder),
            wind_up_by: by,
            closing: None,
        };
        let ttl = run.lease.ttl();
        let end = match fate {
            Fate::Unwatched => {
                release(
                    run.backend.as_ref(),
                    &mut None,
                    &holding.locks,
                    ttl,
                    Quiet::Yes,
                    None,
                    None,
                );
                let err = Error::internal("the watchdog could not be started");
                let ending = Ending::of_error(&err, Some(holding.acquired));
                return ended(Err(err), ending, holding.recorder, None);
            }
            Fate::Lost(lost) => {
                let (line, by) = release_lost(&run, &holding, &mut session, &lost);
                let ending = Ending::Lost { line, held };
                return ended(Ok(Exit::LockLost), ending, holding.recorder, Some(by));
            }
            Fate::Kept(end) => end,
        };
        // A normal end is recorded by the releasing script.
        let event = holding
            .recorder
            .at_release(end.as_ref().ok().map(|end| end.ending()), held);
        let released = release(
            run.backend.as_ref(),
            &mut session,
            &holding.locks,
            ttl,
            Quiet::No,
            event.as_ref(),
            None,
        );
        crate::report::mark("released");
        if let Some(gone) = released.gone {
            let lost = Lost::GoneAtRelease(gone);
            let line = say_lost(&run, &lost, &holding.locks, session.as_mut(), holding.since);
            let ending = Ending::Lost { line, held };
            return ended(Ok(Exit::LockLost), ending, holding.recorder, None);
        }
        let closing = run.closing(&end, held, released.all);
        if let Some(line) = &closing {
            report::error(line);
        }
        let (result, ending) = run.exit(end, holding.acquired);
        Ended {
            closing,
            ..ended(result, ending, holding.recorder, None)
        }
    }
}

/// After a known loss: says it, and releases within the short budget what
/// is still ours (a refused renewal leaves that lock nothing to release,
/// and a group that survived SIGKILL keeps the lock until it expires).
/// After an unconfirmed renewal the server may answer again (and the keys
/// outlive our count by the drift margin): try, within the connect timeout.
/// Returns the line said and when the budget ends.
fn release_lost(
    run: &Run<'_>,
    holding: &Holding,
    session: &mut Option<Box<dyn Session>>,
    lost: &Lost,
) -> (String, Instant) {
    let to_release: Vec<HeldLock> = match lost {
        Lost::Unkillable => Vec::new(),
        _ => holding
            .locks
            .iter()
            .filter(|lock| lost.gone() != Some(lock.name()))
            .cloned()
            .collect(),
    };
    let (backend, by, line) = wind_up(run, lost, &holding.locks, session, holding.since);
    release(
        backend.as_ref(),
        session,
        &to_release,
        run.lease.ttl(),
        Quiet::Yes,
        None,
        Some(by),
    );
    crate::report::mark("released");
    (line, by)
}

impl Run<'_> {
    /// The run's closing line, after its release: `--max-hold`'s, or, once
    /// every hold is released, one when the run did not simply succeed
    /// (COMMAND failed, or a signal was forwarded to it), so a log read off
    /// a terminal ends with what became of the lock. A success stays silent;
    /// errors have lines of their own.
    fn closing(&self, end: &Result<CommandEnd>, held: Duration, released: bool) -> Option<String> {
        let code = match end {
            Ok(CommandEnd::MaxHold) => {
                let limit = self.spec.max_hold?;
                return Some(format!(
                    "{}: COMMAND ran past --max-hold {} and was stopped (SIGTERM, then SIGKILL \
                     after {} if still running); the lock was released",
                    self.display,
                    humantime::format_duration(limit),
                    humantime::format_duration(self.grace)
                ));
            }
            Ok(CommandEnd::Exited(code)) if released => code,
            _ => return None,
        };
        let on = match self.shared.stop_signal() {
            Some((signal, _)) => format!(" on {signal}"),
            None if *code == 0 => return None,
            None => String::new(),
        };
        Some(format!(
            "{}: released after {} (COMMAND exited {code}{on})",
            self.display,
            held_for(held)
        ))
    }

    /// The exit status of a run whose lease held and whose locks were
    /// released: COMMAND's, 124 past `--max-hold`, or the error met waiting
    /// for COMMAND.
    fn exit(&self, end: Result<CommandEnd>, acquired: Instant) -> (Result<Exit>, Ending) {
        match end {
            Ok(CommandEnd::MaxHold) => (Ok(Exit::TimedOut), Ending::MaxHold),
            Ok(CommandEnd::Exited(code)) => (Ok(Exit::Child(code)), Ending::Exited(code)),
            Err(err) => {
                let err = if matches!(err.cause(), Cause::Interrupted(_)) {
                    err.for_locks(&self.display)
                } else {
                    err
                };
                let ending = Ending::of_error(&err, Some(acquired));
                (Err(err), ending)
            }
        }
    }
}

/// "3.2s" under ten seconds, else whole seconds as humantime writes them
/// ("16s", "2m 5s").
fn held_for(held: Duration) -> String {
    if held < Duration::from_secs(10) {
        return crate::lock::lease::tenths(held);
    }
    humantime::format_duration(Duration::from_secs(held.as_secs())).to_string()
}
