//! rlock: run a command while holding a named lock in Redis.
//!
//! The lock follows Redisson's design (a re-entrant hash lock driven by Lua
//! scripts, a watchdog renewing the lease every ttl/3, push wake-ups for
//! waiters) and adds what scripts need: COMMAND is stopped before its lease can
//! lapse, it dies with rlock, it gets a fencing token, and every outcome has an
//! exit status (see [`exit::Exit`]). The user-facing contract is the README;
//! docs/design.md describes the layers below.
//!
//! The library exports what the binary and the tests use: the command line
//! ([`cli`]), its generated completions and man page ([`generate`]), and the
//! outcome types ([`exit`], [`error`]). Every other module is the crate's own.

pub(crate) mod backend;
pub(crate) mod child;
pub mod cli;
pub(crate) mod clock;
pub(crate) mod commands;
pub(crate) mod config;
pub mod error;
pub(crate) mod event;
pub mod exit;
pub mod generate;
pub(crate) mod history;
pub(crate) mod holder;
pub(crate) mod metrics;
pub(crate) mod name;
pub(crate) mod note;
pub(crate) mod outage;
pub(crate) mod output;
pub(crate) mod prometheus;
pub(crate) mod redact;
pub(crate) mod report;
pub(crate) mod run;
pub(crate) mod run_state;
pub(crate) mod script;
pub(crate) mod signal;
pub(crate) mod status;
pub(crate) mod supervisor;
pub(crate) mod sys;
pub(crate) mod token;
pub(crate) mod url;
pub(crate) mod wait;
pub(crate) mod waiting_line;
pub(crate) mod watchdog;
pub(crate) mod while_pid;

use cli::{Cli, Command};
use error::{Error, Result};
use exit::Exit;

/// Runs the parsed command line.
pub fn run(cli: Cli) -> Result<Exit> {
    report::set_verbosity(if cli.global.quiet {
        -1
    } else {
        i8::from(cli.global.verbose)
    });
    let config = |note: Option<&str>| config::Config::resolve(&cli.global, note);
    match &cli.command {
        Command::Run(args) => run::run(&config(args.lock.note.as_deref())?, args),
        Command::Acquire(args) => commands::acquire(&config(args.lock.note.as_deref())?, args),
        Command::Renew(args) => commands::renew(&config(None)?, args),
        Command::Release(args) => commands::release(&config(None)?, args),
        Command::WhilePid(args) => while_pid::keep(&config(None)?, args),
        Command::Status { names, json, check } => {
            status::status(&config(None)?, names, *json, *check)
        }
        Command::List { pattern, json } => status::list(&config(None)?, pattern, *json),
        Command::History {
            name,
            limit,
            json,
            redisson,
        } => history::history(&config(None)?, name, *limit, *json, *redisson),
        Command::Metrics { patterns } => metrics::metrics(&config(None)?, patterns),
        Command::Completions { shell } => {
            use std::io::Write;
            let _ = std::io::stdout().write_all(generate::completion(*shell).as_bytes());
            Ok(Exit::Success)
        }
    }
}

/// Prints `err` as the single `rlock: …` line the contract promises.
pub fn report(err: &Error) {
    // `-E 0`: "not acquired" was declared a success; success prints nothing,
    // but -v says the run was skipped and why (a cron job skipped for days
    // behind a stuck holder must leave a trace somewhere).
    if err.exit().code() == 0 {
        report::verbose(|| format!("skipped (exit 0 by -E 0): {err}"));
        return;
    }
    // Usage errors are printed even with -q: the caller made a mistake to fix.
    if matches!(err.cause(), error::Cause::Usage(_)) {
        report::set_verbosity(0);
    }
    report::error(&err.to_string());
}
