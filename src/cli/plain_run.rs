//! The command line most runs have, read without clap:
//! `rlock [--url URL] run NAME... -- COMMAND [ARGS...]`, no other option, and
//! none of the options' environment variables set but `RLOCK_URL`.
//!
//! Building and running clap's definition is about a sixth of a short run
//! (measured: 0.17 ms of its 1.3 ms over `true`). Anything else — another
//! option, a NAME that begins with `-`, a second `--`, an empty `--url`, a
//! variable such as `RLOCK_TTL` — returns None and clap parses the line, so
//! every message, default and check stays clap's. A unit test checks that
//! both give the same answer on every line this one accepts.

use std::ffi::OsString;

use super::duration::{duration, lease_duration, positive_duration};
use super::{
    Cli, Command, DEFAULT_CONNECT_TIMEOUT, DEFAULT_PREFIX, DEFAULT_PROGRESS_INTERVAL,
    DEFAULT_TTL_TEXT, DEFAULT_UNREACHABLE_WAIT, Global, LockOptions, RunArgs,
};
use crate::exit::NOT_ACQUIRED_DEFAULT;
use crate::lock::event::DEFAULT_CAP;
use crate::lock::name::LockName;

/// The environment variables of `run`'s options and the global ones but
/// `RLOCK_URL` (a unit test checks this list against clap's definition).
pub(super) const OPTION_VARIABLES: [&str; 23] = [
    "RLOCK_PREFIX",
    "RLOCK_CACERT",
    "RLOCK_CERT",
    "RLOCK_KEY",
    "RLOCK_PASSWORD_FILE",
    "RLOCK_CONNECT_TIMEOUT",
    "RLOCK_WAIT",
    "RLOCK_NO_WAIT",
    "RLOCK_NOTE",
    "RLOCK_PROGRESS_INTERVAL",
    "RLOCK_UNREACHABLE_WAIT",
    "RLOCK_CONFLICT_EXIT_CODE",
    "RLOCK_TTL",
    "RLOCK_SHARED",
    "RLOCK_LIMIT",
    "RLOCK_FAIR",
    "RLOCK_MIN_REPLICAS",
    "RLOCK_HISTORY",
    "RLOCK_REDISSON",
    "RLOCK_LEASE",
    "RLOCK_MAX_HOLD",
    "RLOCK_METRICS_FILE",
    "RLOCK_KILL_AFTER",
];

/// `args` (the program's name first) as clap would read it, when it is the
/// plain form; `env` looks up an environment variable.
pub(super) fn parse(args: &[OsString], env: &dyn Fn(&str) -> Option<OsString>) -> Option<Cli> {
    if OPTION_VARIABLES.iter().any(|v| env(v).is_some()) {
        return None;
    }
    let words: Vec<&str> = args
        .iter()
        .skip(1)
        .map(|a| a.to_str())
        .collect::<Option<_>>()?;
    let (url, rest) = match words.as_slice() {
        ["run", rest @ ..] => (None, rest),
        ["--url" | "-u", url, "run", rest @ ..] => (Some(*url), rest),
        [flag, "run", rest @ ..] => (Some(flag.strip_prefix("--url=")?), rest),
        _ => return None,
    };
    let dashes = rest.iter().position(|w| *w == "--")?;
    let (names, command) = (&rest[..dashes], &rest[dashes + 1..]);
    if names.is_empty()
        || command.is_empty()
        || command.contains(&"--")
        || names.iter().any(|n| n.starts_with('-'))
    {
        return None;
    }
    let names = names
        .iter()
        .map(|n| LockName::new(n).ok())
        .collect::<Option<Vec<_>>>()?;
    let (urls, urls_from_option) = match url {
        Some(url) if url.trim().is_empty() => return None,
        Some(url) => (split(url), true),
        None => match env("RLOCK_URL") {
            Some(value) if !value.is_empty() => (split(value.to_str()?), false),
            _ => (Vec::new(), false),
        },
    };
    Some(Cli {
        global: Global {
            urls,
            prefix: DEFAULT_PREFIX.to_owned(),
            cacert: None,
            cert: None,
            key: None,
            password_file: None,
            connect_timeout: positive_duration(DEFAULT_CONNECT_TIMEOUT).ok()?,
            verbose: false,
            quiet: false,
            urls_from_option,
        },
        command: Command::Run(RunArgs {
            lock: LockOptions {
                wait: None,
                no_wait: false,
                note: None,
                progress_interval: duration(DEFAULT_PROGRESS_INTERVAL).ok()?,
                unreachable_wait: duration(DEFAULT_UNREACHABLE_WAIT).ok()?,
                conflict_exit_code: NOT_ACQUIRED_DEFAULT,
                ttl: lease_duration(DEFAULT_TTL_TEXT).ok()?,
                exclusive: false,
                shared: false,
                limit: None,
                fair: false,
                min_replicas: 0,
                history: DEFAULT_CAP,
                redisson: false,
            },
            lease: None,
            max_hold: None,
            metrics_file: None,
            kill_after: None,
            names,
            command: command.iter().map(OsString::from).collect(),
            shell: None,
        }),
    })
}

/// `--url a,b` (and `RLOCK_URL=a,b`) as clap's `value_delimiter = ','` splits it.
fn split(urls: &str) -> Vec<String> {
    urls.split(',').map(str::to_owned).collect()
}
