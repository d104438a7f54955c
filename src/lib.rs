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
//! outcome types ([`exit`], [`error`]), and the pings to a monitor
//! ([`ping`]). Every other module is the crate's own.

pub(crate) mod announce;
pub(crate) mod backend;
pub mod cli;
pub(crate) mod commands;
pub(crate) mod config;
pub mod error;
pub mod exit;
pub(crate) mod lock;
pub mod ping;
pub(crate) mod report;
pub(crate) mod run_state;
pub(crate) mod supervisor;
pub(crate) mod sys;
pub(crate) mod wait;

pub use cli::generate;
/// The `rlock` binary's global allocator: a start-up arena, then the
/// system's (see `src/sys/arena.rs`).
pub use sys::arena::StartupAllocator;

use cli::{Cli, Command};
use error::{Error, Result};
use exit::Exit;

/// First thing in `main`, before the command line is parsed: when it may be
/// `rlock run`, forks the guardian (see `src/sys/guardian.rs`) while the
/// process is small. Another command drops it unused.
pub fn start() {
    report::timeline_start();
    let mut args = std::env::args_os().skip(1);
    // (Not in the rlock a guardian became: it releases, it runs nothing.)
    if args.any(|arg| arg == "run") && !sys::guardian::is_successor() {
        sys::guardian::start_early();
        report::mark("guardian");
    }
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> Result<Exit> {
    report::mark("parsed");
    let result = run_command(cli);
    report::mark("done");
    report::print_timeline();
    result
}

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
        Ok::<_, Error>(config)
    };
    // A job that takes a lock on the default server only because nothing
    // said otherwise (a crontab line without RLOCK_URL) could be locking
    // apart from its peers: off a terminal, where nobody sees `status`, say
    // so once.
    let locking = |note: Option<&str>| {
        let config = config(note)?;
        if config.url_source == config::UrlSource::Default && !sys::terminal::stderr_is_terminal() {
            report::defer_note(format!(
                "note: no --url, RLOCK_URL or REDIS_URL: locking on the default {}",
                config.server_label()
            ));
        }
        Ok::<_, Error>(config)
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
        } => commands::history::history(&config(None)?, name, *limit, *json, *redisson),
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
fn give_back(config: &config::Config, args: &cli::RunArgs) -> Result<Exit> {
    let spec = config::RunSpec::resolve(config, args)?;
    match sys::guardian::handed_over() {
        Some(Ok(text)) => supervisor::give_back(config, &spec, &text),
        Some(Err(err)) => Err(Error::usage(err.to_string())),
        None => Ok(Exit::Success),
    }
}

/// Prints `err` as the single `rlock: …` line the contract promises.
pub fn report(err: &Error) {
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
