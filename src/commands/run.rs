//! `rlock run`: wait for the lock, run COMMAND while the watchdog keeps the
//! lease, release when COMMAND ends, and exit with COMMAND's status.

use crate::config::{Config, RunSpec};
use crate::error::Result;
use crate::exit::Exit;
use crate::lock::event::Event;
use crate::lock::name::LockName;
use crate::supervisor::{Outcome, Prepared};

/// Runs `rlock run`: acquire, spawn COMMAND, wait for it (and what it left
/// in its group), release, in that order (see [`crate::supervisor`]); then
/// writes the `--metrics-file`, whatever the end.
pub fn run(config: &Config, spec: &RunSpec) -> Result<Exit> {
    let outcome = Outcome::default();
    let result = supervise(config, spec, &outcome);
    let usage = matches!(&result, Err(e) if e.exit() == Exit::Usage);
    if let (Some(path), false) = (&spec.metrics_file, usage) {
        let mut names: Vec<String> = Vec::new();
        for name in &spec.names {
            if !names.iter().any(|n| n == name.as_str()) {
                names.push(name.as_str().to_owned());
            }
        }
        crate::commands::metrics::write_run_file(path, &names, &outcome, &result);
    }
    if !usage {
        record_end(config, spec, &outcome, &result);
    }
    result
}

/// The events only the run's end knows: not acquired (`busy`), a wait
/// stopped by a signal (`interrupted`), a hold lost (`lost`, with the cause
/// in the note). Acquisitions and releases are recorded by their scripts.
fn record_end(config: &Config, spec: &RunSpec, outcome: &Outcome, result: &Result<Exit>) {
    let cap = spec.lock.history;
    let kind = match result {
        Ok(Exit::LockLost) => "lost",
        Err(err) => match err.exit() {
            Exit::NotAcquired(_) => "busy",
            Exit::Signal(_) if outcome.acquired.get().is_none() => "interrupted",
            Exit::LockLost => "lost",
            _ => return,
        },
        Ok(_) => return,
    };
    let Some(holder) = outcome.holder.borrow().clone() else {
        return;
    };
    if cap == 0 {
        return;
    }
    let ms = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let mut event = crate::supervisor::holder::event(kind, &holder);
    event.exit = Some(i64::from(match result {
        Ok(exit) => exit.code(),
        Err(err) => err.exit().code(),
    }));
    if kind == "lost" {
        event.held_ms = outcome
            .held
            .get()
            .or_else(|| outcome.acquired.get().map(|at| at.elapsed()))
            .map(ms);
        event.note = match (outcome.lost.borrow().clone(), result) {
            (Some(cause), _) => cause,
            (None, Err(err)) => err.to_string(),
            (None, Ok(_)) => String::new(),
        };
    } else {
        event.waited_ms = outcome.waiting_since.get().map(|since| ms(since.elapsed()));
    }
    // After a loss, within what is left of its short budget.
    let backend = match outcome.wind_up_by.get() {
        Some(by) => {
            let left = by.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                crate::report::verbose(|| {
                    "history not written: no time left after the loss".to_owned()
                });
                return;
            }
            config.backend_within(
                spec.lock.dialect(),
                // Connecting and writing each get half of it at most.
                (left / 2).min(crate::supervisor::AFTER_LOSS_STEP),
            )
        }
        None => config.backend(spec.lock.dialect()),
    };
    let Ok(backend) = backend else {
        return;
    };
    let fences = outcome.fences.borrow().clone();
    let mut names: Vec<&LockName> = spec.names.iter().collect();
    names.sort();
    names.dedup();
    for name in names {
        if outcome
            .wind_up_by
            .get()
            .is_some_and(|by| std::time::Instant::now() >= by)
        {
            break;
        }
        let lock = spec.lock.lock_id(config, name);
        let event = Event {
            fence: fences
                .iter()
                .find(|(n, _)| n == name.as_str())
                .map(|(_, f)| *f),
            ..event.clone()
        };
        crate::commands::history::record_after(backend.as_ref(), &[lock], cap, &event);
    }
}

fn supervise(config: &Config, spec: &RunSpec, outcome: &Outcome) -> Result<Exit> {
    Prepared::new(config, spec, outcome)?
        .acquire()?
        .spawn()?
        .wait()
        .release()
}
