//! `rlock acquire`: locking for a shell script that cannot wrap a single
//! command (README: "A critical section in the middle of a shell script"). Its
//! steps, like `run`'s: prepare (who holds, for whom, on which server), wait
//! for the lock, hand the hold to the `--while-pid` keeper, print the token.

use std::sync::Arc;

use crate::backend::{HolderInfo, Session};
use crate::cli::AcquireArgs;
use crate::client::{Caller, Client, NotTaken};
use crate::commands::while_pid::{self, Keeper, StartError, Watched};
use crate::config::{Config, LockSpec};
use crate::error::{Cause, Error, Result};
use crate::exit::Exit;
use crate::holding::Ending;
use crate::holding::held::HeldLock;
use crate::holding::holder;
use crate::lock::token::Token;
use crate::report;
use crate::run_state::{self, Phase, Shared};

/// `rlock acquire`: waits as `run` does, then prints the owner token. The lock
/// lasts --ttl unless renewed.
pub fn acquire(config: &Config, spec: &LockSpec, args: &AcquireArgs) -> Result<Exit> {
    let acquisition = Acquisition::prepare(config, spec, args)?;
    let (mut session, held) = acquisition.wait()?;
    let keeper = acquisition.hand_to_keeper(session.as_mut(), &held)?;
    acquisition.print_token(session.as_mut(), &held, keeper)
}

/// One `rlock acquire`: what it asks for and on behalf of whom.
struct Acquisition<'a> {
    config: &'a Config,
    spec: &'a LockSpec,
    args: &'a AcquireArgs,
    /// The process the hold follows (`--while-pid`).
    watched: Option<Watched>,
    /// The server(s), as a library program reaches them.
    client: Client,
    shared: Arc<Shared>,
}

impl<'a> Acquisition<'a> {
    /// Refuses what cannot work, opens PID, and readies the client and the
    /// run state.
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
        let client = Client::from_config(config.clone(), spec.dialect())?;
        run_state::start();
        let shared = Shared::new(&args.name);
        Ok(Acquisition {
            config,
            spec,
            args,
            watched,
            client,
            shared,
        })
    }

    /// Waits for the lock as `run` does, and records in the history how the
    /// wait ended: `acquired`, or `busy`/`interrupted` when nothing was held.
    fn wait(&self) -> Result<(Box<dyn Session>, HeldLock)> {
        if let Some(watched) = &self.watched {
            while_pid::interrupt_on_exit(watched, &self.shared);
        }
        let caller = Caller {
            shared: Arc::clone(&self.shared),
            holder: calling_script(self.config, self.args),
            token: Token::generate()?,
            ttl: self.spec.ttl,
            // The lock must last its ttl from when this command returns.
            handoff: false,
            refresh_after: None,
        };
        let taken = self
            .client
            .lock(&self.args.name)
            .with_spec(self.spec)
            .take(caller);
        match taken {
            Ok(mut taken) => {
                let recorder = &taken.recorder;
                for (lock, event) in recorder.unrecorded(&taken.held, taken.waited) {
                    if let Err(err) = taken.session.record(&lock, recorder.cap(), &event) {
                        report::verbose(|| format!("{}: history not written: {err}", lock.name));
                    }
                }
                Ok((taken.session, taken.held.remove(0)))
            }
            Err(not) => {
                self.record_not_acquired(&not);
                Err(self.caller_gone(not.err))
            }
        }
    }

    /// Records a wait that ended without the lock: `busy` (taken, or --wait
    /// elapsed) or `interrupted`; other failures leave no event.
    fn record_not_acquired(&self, not: &NotTaken) {
        let Some(recorder) = &not.recorder else {
            return;
        };
        let ending = match not.err.cause() {
            Cause::NotAcquired { .. } => Ending::Busy,
            Cause::Interrupted(_) => Ending::Interrupted,
            _ => return,
        };
        let backend = self.client.inner().backend.as_ref();
        for (lock, event) in recorder.at_end(&ending, not.err.exit(), not.waited) {
            crate::commands::history::record_after(backend, &[lock], recorder.cap(), &event);
        }
    }

    /// With `--while-pid`, starts the keeper that holds the lock while PID
    /// lives. A signal, or PID gone, meanwhile gives the hold back: the script
    /// is not there to take it.
    fn hand_to_keeper(&self, session: &mut dyn Session, held: &HeldLock) -> Result<Option<Keeper>> {
        let token = held.token();
        let Some(watched) = &self.watched else {
            return Ok(None);
        };
        let name = &self.args.name;
        let mut keeper = None;
        let fds = session.handover(&held.id);
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
                    return Err(self.give_back(session, held, err));
                }
                Err(StartError::Failed(err)) => {
                    let cause = format!("{name}: cannot start the --while-pid watchdog: {err}");
                    return Err(self.give_back(session, held, Error::internal(cause)));
                }
            }
        }
        if let Some(signal) = self.shared.interrupted() {
            if let Some(keeper) = keeper {
                keeper.stop();
            }
            let err = Error::from(Cause::Interrupted(signal)).in_lock(name);
            return Err(self.give_back(session, held, err));
        }
        Ok(keeper)
    }

    /// Prints the token, then tells the keeper it may keep the hold; if either
    /// fails, the hold is given back rather than stranded.
    fn print_token(
        &self,
        session: &mut dyn Session,
        held: &HeldLock,
        keeper: Option<Keeper>,
    ) -> Result<Exit> {
        let token = held.token();
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
                Err(self.give_back(session, held, Error::internal(cause)))
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
    fn give_back(&self, session: &mut dyn Session, held: &HeldLock, err: Error) -> Error {
        let _ = session.give_back(&held.id, &held.hold);
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
