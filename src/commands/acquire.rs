//! `rlock acquire`: locking for a shell script that cannot wrap a single
//! command (README: "A critical section in the middle of a shell script"). Its
//! steps, like `run`'s: prepare (who holds, for whom, on which server), wait
//! for the lock, hand the hold to the `--while-pid` keeper, print the token.

use std::sync::Arc;
use std::time::Instant;

use crate::backend::{Backend, Hold, HolderInfo, Session};
use crate::cli::AcquireArgs;
use crate::commands::while_pid::{self, Keeper, StartError, Watched};
use crate::config::{Config, LockSpec};
use crate::error::{Cause, Error, Result};
use crate::exit::Exit;
use crate::lock::event::{Event, EventKind};
use crate::lock::name::LockId;
use crate::lock::token::Token;
use crate::report;
use crate::run_state::{self, Phase, Shared};
use crate::supervisor::holder;
use crate::wait::{self, Wanted};

/// `rlock acquire`: waits as `run` does, then prints the owner token. The lock
/// lasts --ttl unless renewed.
pub fn acquire(config: &Config, spec: &LockSpec, args: &AcquireArgs) -> Result<Exit> {
    let acquisition = Acquisition::prepare(config, spec, args)?;
    let (mut session, holds) = acquisition.wait()?;
    let hold = &holds[0];
    let keeper = acquisition.hand_to_keeper(session.as_mut(), hold)?;
    acquisition.print_token(session.as_mut(), hold, keeper)
}

/// One `rlock acquire`: what it asks for and on behalf of whom.
struct Acquisition<'a> {
    config: &'a Config,
    spec: &'a LockSpec,
    args: &'a AcquireArgs,
    /// The process the hold follows (`--while-pid`).
    watched: Option<Watched>,
    backend: Arc<dyn Backend>,
    lock: [LockId; 1],
    shared: Arc<Shared>,
    token: Token,
    /// The calling script, shown as the holder.
    holder: HolderInfo,
}

impl<'a> Acquisition<'a> {
    /// Refuses what cannot work, opens PID, and readies the run state, the
    /// token and the holder record.
    fn prepare(config: &'a Config, spec: &'a LockSpec, args: &'a AcquireArgs) -> Result<Self> {
        if config.is_local() && args.while_pid.is_none() {
            return Err(Error::usage(
                "rlock acquire needs --while-pid with file: locks: the kernel keeps a file lock only while a process holds it open (or use rlock run)",
            ));
        }
        // Opened before waiting, so the keeper follows this very process even if
        // its pid is reused meanwhile.
        let watched = args
            .while_pid
            .map(|pid| {
                Watched::open(pid).ok_or_else(|| {
                    Error::usage(format!("{}: --while-pid {pid}: no such process", args.name))
                })
            })
            .transpose()?;
        let backend = config.backend(spec.dialect())?;
        let lock = [spec.lock_id(config, &args.name)];
        run_state::start();
        let shared = Shared::new(&args.name);
        let token = Token::generate()?;
        Ok(Acquisition {
            config,
            spec,
            args,
            watched,
            backend,
            lock,
            shared,
            token,
            holder: calling_script(config, args),
        })
    }

    /// Waits for the lock as `run` does, and records in the history how the
    /// wait ended: `acquired`, or `busy`/`interrupted` when nothing was held.
    fn wait(&self) -> Result<(Box<dyn Session>, Vec<Hold>)> {
        let mut wanted = Wanted::new(
            &self.lock,
            &self.token,
            &self.config.inherited,
            &self.holder,
            self.spec,
            self.spec.ttl,
            // The lock must last its ttl from when this command returns.
            false,
        );
        wanted.replica_timeout = self.config.connect_timeout;
        let acquired = holder::event(EventKind::Acquired, &self.holder);
        if self.spec.history > 0 {
            wanted.record = Some((self.spec.history, acquired.clone()));
        }
        let waiting_since = Instant::now();
        if let Some(watched) = &self.watched {
            while_pid::interrupt_on_exit(watched, &self.shared);
        }
        let waited = || u64::try_from(waiting_since.elapsed().as_millis()).unwrap_or(u64::MAX);
        match wait::acquire(&self.backend, &wanted, &self.args.name, &self.shared) {
            Ok((mut session, holds, _)) => {
                self.record_acquired(session.as_mut(), &holds[0], acquired, waited());
                Ok((session, holds))
            }
            Err(err) => {
                self.record_not_acquired(&err, waited());
                Err(self.caller_gone(err))
            }
        }
    }

    /// Adds the `acquired` event to the history, unless the hold was recorded
    /// with the acquisition or is a re-entry.
    fn record_acquired(
        &self,
        session: &mut dyn Session,
        hold: &Hold,
        acquired: Event,
        waited: u64,
    ) {
        let cap = self.spec.history;
        if cap == 0 || hold.recorded || hold.count != 1 {
            return;
        }
        let event = Event {
            waited_ms: Some(waited),
            fence: Some(hold.fence.0),
            ..acquired
        };
        if let Err(err) = session.record(&self.lock[0], cap, &event) {
            report::verbose(|| format!("{}: history not written: {err}", self.args.name));
        }
    }

    /// Records a wait that ended without the lock: `busy` (taken, or --wait
    /// elapsed) or `interrupted`; other failures leave no event.
    fn record_not_acquired(&self, err: &Error, waited: u64) {
        let kind = match err.cause() {
            Cause::NotAcquired { .. } => EventKind::Busy,
            Cause::Interrupted(_) => EventKind::Interrupted,
            _ => return,
        };
        let event = Event {
            waited_ms: Some(waited),
            exit: Some(i64::from(err.exit().code())),
            ..holder::event(kind, &self.holder)
        };
        crate::commands::history::record_after(
            self.backend.as_ref(),
            &self.lock,
            self.spec.history,
            &event,
        );
    }

    /// With `--while-pid`, starts the keeper that holds the lock while PID
    /// lives. A signal, or PID gone, meanwhile gives the hold back: the script
    /// is not there to take it.
    fn hand_to_keeper(&self, session: &mut dyn Session, hold: &Hold) -> Result<Option<Keeper>> {
        let token = &hold.token;
        let Some(watched) = &self.watched else {
            return Ok(None);
        };
        let name = &self.args.name;
        let mut keeper = None;
        let fds = session.handover(&self.lock[0]);
        // A file: re-entry holds nothing of its own: the enclosing run keeps it.
        if !self.config.is_local() || !fds.is_empty() {
            // Signals are noted, not acted on, until the keeper has answered.
            let interrupted = || self.shared.interrupted();
            match while_pid::start(
                self.config,
                self.spec,
                name,
                watched,
                token,
                &fds,
                &interrupted,
            ) {
                Ok(started) => keeper = Some(started),
                Err(StartError::Interrupted(signal)) => {
                    let err = Error::from(Cause::Interrupted(signal)).in_lock(name);
                    return Err(self.give_back(session, hold, err));
                }
                Err(StartError::Failed(err)) => {
                    let cause = format!("{name}: cannot start the --while-pid watchdog: {err}");
                    return Err(self.give_back(session, hold, Error::internal(cause)));
                }
            }
        }
        if let Some(signal) = self.shared.interrupted() {
            if let Some(keeper) = keeper {
                keeper.stop();
            }
            let err = Error::from(Cause::Interrupted(signal)).in_lock(name);
            return Err(self.give_back(session, hold, err));
        }
        Ok(keeper)
    }

    /// Prints the token, then tells the keeper it may keep the hold; if either
    /// fails, the hold is given back rather than stranded.
    fn print_token(
        &self,
        session: &mut dyn Session,
        hold: &Hold,
        keeper: Option<Keeper>,
    ) -> Result<Exit> {
        let token = &hold.token;
        self.shared.set(Phase::Finished);
        let printed = if crate::commands::output::stdout_was_closed() {
            Err(std::io::Error::other("standard output is closed"))
        } else {
            crate::commands::output::write_stdout(&format!("{}\n", token.as_str()))
        };
        let handed = match (printed, keeper) {
            (Ok(()), Some(keeper)) => keeper.confirm(),
            (Ok(()), None) => Ok(()),
            (Err(err), keeper) => {
                // Nobody got the token: end the keeper (which shares the hold).
                if let Some(keeper) = keeper {
                    keeper.stop();
                }
                Err(err)
            }
        };
        match handed {
            Ok(()) => Ok(Exit::Success),
            Err(err) => {
                let cause = format!("{}: cannot hand the token over: {err}", self.args.name);
                Err(self.give_back(session, hold, Error::internal(cause)))
            }
        }
    }

    /// A wait interrupted because PID exited, said as such: there is no one
    /// left to hold the lock for.
    fn caller_gone(&self, err: Error) -> Error {
        match &self.watched {
            Some(w) if matches!(err.cause(), Cause::Interrupted(_)) && w.gone() => {
                Error::internal(format!(
                    "{}: --while-pid {} exited while waiting; nothing acquired",
                    self.args.name,
                    w.pid()
                ))
            }
            _ => err,
        }
    }

    /// Releases the hold `err` leaves nobody to use, and says so when `err`
    /// is rlock's own failure.
    fn give_back(&self, session: &mut dyn Session, hold: &Hold, err: Error) -> Error {
        let _ = session.give_back(&self.lock[0], hold);
        match self.caller_gone(err) {
            err if matches!(err.cause(), Cause::Internal(_)) => {
                Error::internal(format!("{err}; the lock was given back"))
            }
            err => err,
        }
    }
}

/// The holder is the calling script, which outlives this process: the
/// process it follows, or else its parent, with its command line as the
/// kernel records it.
fn calling_script(config: &Config, args: &AcquireArgs) -> HolderInfo {
    let caller = args
        .while_pid
        .unwrap_or_else(crate::sys::process::parent_pid);
    let argv = crate::sys::process::cmdline(caller);
    let mut holder = holder::described(&argv, &config.note);
    if holder.command.is_empty() {
        holder.command = "(rlock acquire)".into();
    }
    holder.pid = caller.to_string();
    holder.detached = true;
    holder
}
