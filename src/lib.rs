//! rlock: named locks in Redis (or a `file:` directory) for shell jobs
//! and Rust programs alike.
//!
//! The `rlock` command runs a command while holding a lock (`rlock run
//! nightly -- ./compact`); this crate's library takes the same locks from
//! Rust: the same keys and scripts, fencing tokens from one sequence,
//! holders `rlock status` shows, and a background watchdog that renews the
//! lease at the command's cadence and reports a loss before the lease can
//! end. A service and a cron job can share one lock.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! let client = rlock::Client::open("redis://127.0.0.1:6379")?;
//! let hold = client
//!     .lock("nightly")
//!     .ttl(Duration::from_secs(30))
//!     .wait(Duration::from_secs(10))
//!     .acquire()?;
//! println!("working under fence {}", hold.fence());
//! if hold.is_lost() {
//!     // stop: someone else may hold the lock now
//! }
//! hold.release()?;
//! # Ok::<(), rlock::Error>(())
//! ```
//!
//! Start at [`Client`]. Build without the command line with
//! `rlock = { path = "…/rlock", default-features = false }` (or `git = …`:
//! rlock is not on crates.io). The default feature `cli` is the `rlock`
//! binary's: clap and the generated man page and completions. Only the items documented here are the library's
//! stable API; the hidden modules are the binary's and may change in any
//! release.

// Without the command line, what only `rlock run` and the other commands
// use is compiled but not called.
#![cfg_attr(not(feature = "cli"), allow(dead_code, unused_imports))]
#![warn(missing_docs)]

pub(crate) mod announce;
pub(crate) mod backend;
#[cfg(feature = "cli")]
#[doc(hidden)]
pub mod cli;
mod client;
#[cfg(feature = "cli")]
pub(crate) mod commands;
pub(crate) mod config;
#[doc(hidden)]
pub mod error;
#[doc(hidden)]
pub mod exit;
pub(crate) mod holding;
pub(crate) mod lock;
#[doc(hidden)]
pub mod ping;
pub(crate) mod report;
pub(crate) mod run_state;
pub(crate) mod supervisor;
pub(crate) mod sys;
pub(crate) mod wait;

pub use client::{
    Client, ClientBuilder, Error, ErrorKind, Hold, Holder, LockBuilder, LockState, Loss, LossSignal,
};

#[cfg(feature = "cli")]
#[doc(hidden)]
pub use cli::generate;
/// The `rlock` binary's global allocator: a start-up arena, then the
/// system's (see `src/sys/arena.rs`).
#[doc(hidden)]
pub use sys::arena::StartupAllocator;

#[cfg(feature = "cli")]
use cli::{Cli, Command};
#[cfg(feature = "cli")]
use error::Result;
#[cfg(feature = "cli")]
use exit::Exit;

/// First thing in `main`, before the command line is parsed: when it may be
/// `rlock run`, forks the guardian (see `src/sys/guardian.rs`) while the
/// process is small. Another command drops it unused.
#[cfg(feature = "cli")]
#[doc(hidden)]
pub fn start() {
    // The binary speaks on stderr; the library stays quiet.
    report::set_verbosity(0);
    report::timeline_start();
    let mut args = std::env::args_os().skip(1);
    // (Not in the rlock a guardian became: it releases, it runs nothing.)
    if args.any(|arg| arg == "run") && !sys::guardian::is_successor() {
        sys::guardian::start_early();
        report::mark("guardian");
    }
}

/// Runs the parsed command line.
#[cfg(feature = "cli")]
#[doc(hidden)]
pub fn run(cli: Cli) -> Result<Exit> {
    report::mark("parsed");
    let result = run_command(cli);
    report::mark("done");
    report::print_timeline();
    result
}

#[cfg(feature = "cli")]
/// A job that takes a lock on the default server only because nothing
/// said otherwise (a crontab line without RLOCK_URL) could be locking apart
/// from its peers: off a terminal, where nobody sees `status`, say so once.
fn note_default_server(config: &config::Config) {
    if config.url_source == config::UrlSource::Default && !sys::terminal::stderr_is_terminal() {
        report::defer_note(format!(
            "note: no --url, RLOCK_URL or REDIS_URL: locking on the default {}",
            config.server_label()
        ));
    }
}

#[cfg(feature = "cli")]
fn run_command(cli: Cli) -> Result<Exit> {
    if !matches!(cli.command, Command::Run(_)) {
        drop(sys::guardian::take_early());
    }
    report::set_verbosity(if cli.global.quiet {
        -1
    } else {
        i8::from(cli.global.verbose)
    });
    let config = |note: Option<&str>| {
        let config = config::Config::resolve(&cli.global, note)?;
        let scope = config.scope_label(dialect_of(&cli.command));
        report::verbose(|| match config.url_source {
            config::UrlSource::Default => {
                format!("{scope} (default: no --url, RLOCK_URL or REDIS_URL)")
            }
            source => format!("{scope} (from {})", source.describe()),
        });
        Ok::<_, error::Error>(config)
    };
    let locking = |note: Option<&str>| {
        let config = config(note)?;
        note_default_server(&config);
        Ok::<_, error::Error>(config)
    };
    match &cli.command {
        Command::Run(args) if sys::guardian::is_successor() => {
            // Silent unless it fails, whatever -v the dead rlock had.
            report::set_verbosity(i8::from(cli.global.quiet).wrapping_neg());
            give_back(&config(args.lock.note.as_deref())?, args)
        }
        Command::Run(args) => {
            let config = locking(args.lock.note.as_deref())?;
            commands::run::run(&config, &config::RunSpec::resolve(&config, args)?)
        }
        Command::Acquire(args) => {
            let config = locking(args.lock.note.as_deref())?;
            let spec = config::LockSpec::resolve(&config, &args.lock)?;
            commands::acquire::acquire(&config, &spec, args)
        }
        Command::Renew(args) => commands::scripting::renew(&config(None)?, args),
        Command::Release(args) => commands::scripting::release(&config(None)?, args),
        Command::WhilePid(args) => commands::while_pid::keep(&config(None)?, args),
        Command::Status {
            names,
            json,
            check,
            redisson,
        } => commands::status::status(&config(None)?, names, *json, *check, *redisson),
        Command::List {
            pattern,
            json,
            redisson,
        } => commands::status::list(&config(None)?, pattern, *json, *redisson),
        Command::History {
            name,
            limit,
            json,
            redisson,
        } => commands::history::history(&config(None)?, name, *limit as usize, *json, *redisson),
        Command::Metrics { patterns } => commands::metrics::metrics(&config(None)?, patterns),
        Command::Check {
            json,
            ttl,
            kill_after,
        } => commands::check::check(&config(None)?, *json, *ttl, *kill_after),
        Command::Completions { shell } => {
            use std::io::Write;
            let _ = std::io::stdout().write_all(generate::completion(*shell).as_bytes());
            Ok(Exit::Success)
        }
    }
}

/// Where the command's locks are kept: under the prefix, or as Redisson
/// keeps them (`--redisson`), for `-v` to say where it looks.
#[cfg(feature = "cli")]
fn dialect_of(command: &Command) -> lock::name::Dialect {
    let redisson = match command {
        Command::Run(args) => args.lock.redisson,
        Command::Acquire(args) => args.lock.redisson,
        Command::Renew(args) => args.redisson,
        Command::Release(args) => args.redisson,
        Command::WhilePid(args) => args.redisson,
        Command::Status { redisson, .. }
        | Command::List { redisson, .. }
        | Command::History { redisson, .. } => *redisson,
        Command::Metrics { .. } | Command::Check { .. } | Command::Completions { .. } => false,
    };
    lock::name::Dialect::redisson_if(redisson)
}

/// In the rlock a guardian became when its rlock died: gives back the holds
/// it handed over (see `src/supervisor/handover.rs`).
#[cfg(feature = "cli")]
fn give_back(config: &config::Config, args: &cli::RunArgs) -> Result<Exit> {
    let spec = config::RunSpec::resolve(config, args)?;
    match sys::guardian::handed_over() {
        Some(Ok(text)) => supervisor::give_back(config, &spec, &text),
        Some(Err(err)) => Err(error::Error::usage(err.to_string())),
        None => Ok(Exit::Success),
    }
}

/// Prints `err` as the single `rlock: …` line the contract promises.
#[cfg(feature = "cli")]
#[doc(hidden)]
pub fn report(err: &error::Error) {
    // `-E 0`: "not acquired" was declared a success. Off a terminal (cron
    // mails any output) it prints nothing but with -v (a cron job skipped
    // for days behind a stuck holder must leave a trace somewhere); on a
    // terminal someone is watching, and a silent skip reads as a run.
    if err.exit().code() == 0 {
        let line = format!("skipped (exit 0 by -E 0): {err}");
        if sys::terminal::stderr_is_terminal() {
            report::error(&line);
        } else {
            report::verbose(|| line);
        }
        return;
    }
    // Usage errors are printed even with -q: the caller made a mistake to fix.
    if matches!(err.cause(), error::Cause::Usage(_)) {
        report::set_verbosity(0);
    }
    report::error(&err.to_string());
}
