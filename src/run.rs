//! `rlock run`: wait for the lock, run COMMAND while the watchdog keeps the
//! lease, release when COMMAND ends, and exit with COMMAND's status.

use crate::cli::RunArgs;
use crate::config::Config;
use crate::error::Result;
use crate::exit::Exit;
use crate::supervisor::{Outcome, Prepared};

/// Runs `rlock run`: acquire, spawn COMMAND, wait for it (and what it left
/// in its group), release, in that order (see [`crate::supervisor`]); then
/// writes the `--metrics-file`, whatever the end.
pub fn run(config: &Config, args: &RunArgs) -> Result<Exit> {
    let outcome = Outcome::default();
    let result = supervise(config, args, &outcome);
    let usage = matches!(&result, Err(e) if e.exit() == Exit::Usage);
    if let (Some(path), false) = (&args.metrics_file, usage) {
        let mut names: Vec<String> = Vec::new();
        for name in &args.names {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
        crate::metrics::write_run_file(path, &names, &outcome, &result);
    }
    result
}

fn supervise(config: &Config, args: &RunArgs, outcome: &Outcome) -> Result<Exit> {
    Prepared::new(config, args, outcome)?
        .acquire()?
        .spawn()?
        .wait()
        .release()
}
