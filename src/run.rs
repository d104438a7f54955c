//! `rlock run`: wait for the lock, run COMMAND while the watchdog keeps the
//! lease, release when COMMAND ends, and exit with COMMAND's status.

use crate::cli::RunArgs;
use crate::config::Config;
use crate::error::Result;
use crate::exit::Exit;
use crate::supervisor::Prepared;

/// Runs `rlock run`: acquire, spawn COMMAND, wait for it (and what it left
/// in its group), release, in that order (see [`crate::supervisor`]).
pub fn run(config: &Config, args: &RunArgs) -> Result<Exit> {
    Prepared::new(config, args)?
        .acquire()?
        .spawn()?
        .wait()
        .release()
}
