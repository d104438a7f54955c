//! The command line most runs have, read without clap:
//! `rlock [--url URL] run NAME... -- COMMAND [ARGS...]`, no other option, with
//! the options' environment variables (`RLOCK_WAIT=10m`, `RLOCK_TTL`, ...) read
//! with clap's own value parsers.
//!
//! Building and running clap's definition is about a sixth of a short run
//! (measured: 0.17 ms of its 1.3 ms over `true`). Anything else — another
//! option, a NAME that begins with `-`, a second `--`, an empty `--url`, a
//! value clap would refuse, a flag variable (`RLOCK_NO_WAIT`, `RLOCK_SHARED`,
//! `RLOCK_FAIR`, `RLOCK_REDISSON`), `RLOCK_LEASE` beside `RLOCK_TTL` —
//! returns None and clap parses the line, so every message and check stays
//! clap's. Unit tests check that both give the same answer on every line and
//! variable this one accepts.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use super::duration::{duration, grace_duration, lease_duration, positive_duration, wait_duration};
use super::{
    Cli, Command, DEFAULT_CONNECT_TIMEOUT, DEFAULT_PREFIX, DEFAULT_PROGRESS_INTERVAL,
    DEFAULT_TTL_TEXT, DEFAULT_UNREACHABLE_WAIT, Global, LockOptions, RunArgs,
};
use crate::exit::NOT_ACQUIRED_DEFAULT;
use crate::lock::event::DEFAULT_CAP;
use crate::lock::name::LockName;

/// The environment variables of `run`'s options and the global ones but
/// `RLOCK_URL`, each read by [`parse`] (a unit test checks this list against
/// clap's definition, and [`parse`] against clap on each variable).
#[cfg(test)]
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
    // Flags read from the environment have clap's own truth table; the two
    // settings of the lease together are clap's error to give.
    let flags = [
        "RLOCK_NO_WAIT",
        "RLOCK_SHARED",
        "RLOCK_FAIR",
        "RLOCK_REDISSON",
    ];
    if flags.iter().any(|v| env(v).is_some())
        || (env("RLOCK_LEASE").is_some() && env("RLOCK_TTL").is_some())
    {
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
        // clap refuses an empty URL given as an option (and an empty piece
        // of one), and a value that looks like an option.
        Some(url) if url.starts_with('-') || split(url).iter().any(|u| u.trim().is_empty()) => {
            return None;
        }
        Some(url) => (split(url), true),
        None => match env("RLOCK_URL") {
            Some(value) if !value.is_empty() => (split(value.to_str()?), false),
            _ => (Vec::new(), false),
        },
    };
    // A variable's value, read with `parse` as clap reads it (None when it
    // is unset); Err when clap would refuse it.
    let var = |name: &str| -> Result<Option<String>, ()> {
        env(name)
            .map(|v| v.into_string().map_err(|_| ()))
            .transpose()
    };
    // A duration variable: None when clap would refuse it, Some(None) unset.
    let opt_dur = |name: &str, parse: fn(&str) -> Result<Duration, String>| {
        var(name)
            .ok()?
            .map(|text| parse(&text).ok())
            .map_or(Some(None), |d| d.map(Some))
    };
    let dur = |name: &str, default: &str, parse: fn(&str) -> Result<Duration, String>| {
        opt_dur(name, parse)?.map_or_else(|| parse(default).ok(), Some)
    };
    let number = |name: &str, least: i64, most: i64, default: i64| -> Option<i64> {
        match var(name).ok()? {
            Some(text) => integer(&text).filter(|n| (least..=most).contains(n)),
            None => Some(default),
        }
    };
    let path = |name: &str| -> Option<Option<PathBuf>> {
        match var(name).ok()? {
            Some(text) if text.is_empty() => None,
            Some(text) => Some(Some(PathBuf::from(text))),
            None => Some(None),
        }
    };
    let limit = match var("RLOCK_LIMIT").ok()? {
        Some(text) => Some(u32::try_from(integer(&text).filter(|n| *n >= 1)?).ok()?),
        None => None,
    };
    Some(Cli {
        global: Global {
            urls,
            prefix: var("RLOCK_PREFIX")
                .ok()?
                .unwrap_or_else(|| DEFAULT_PREFIX.to_owned()),
            cacert: path("RLOCK_CACERT")?,
            cert: path("RLOCK_CERT")?,
            key: path("RLOCK_KEY")?,
            password_file: path("RLOCK_PASSWORD_FILE")?,
            connect_timeout: dur(
                "RLOCK_CONNECT_TIMEOUT",
                DEFAULT_CONNECT_TIMEOUT,
                positive_duration,
            )?,
            verbose: false,
            quiet: false,
            urls_from_option,
        },
        command: Command::Run(RunArgs {
            lock: LockOptions {
                wait: opt_dur("RLOCK_WAIT", wait_duration)?,
                no_wait: false,
                note: var("RLOCK_NOTE").ok()?,
                progress_interval: dur(
                    "RLOCK_PROGRESS_INTERVAL",
                    DEFAULT_PROGRESS_INTERVAL,
                    duration,
                )?,
                unreachable_wait: dur(
                    "RLOCK_UNREACHABLE_WAIT",
                    DEFAULT_UNREACHABLE_WAIT,
                    wait_duration,
                )?,
                conflict_exit_code: u8::try_from(number(
                    "RLOCK_CONFLICT_EXIT_CODE",
                    0,
                    255,
                    i64::from(NOT_ACQUIRED_DEFAULT),
                )?)
                .ok()?,
                ttl: dur("RLOCK_TTL", DEFAULT_TTL_TEXT, lease_duration)?,
                exclusive: false,
                shared: false,
                limit,
                fair: false,
                min_replicas: u32::try_from(number(
                    "RLOCK_MIN_REPLICAS",
                    0,
                    i64::from(u32::MAX),
                    0,
                )?)
                .ok()?,
                history: u32::try_from(number(
                    "RLOCK_HISTORY",
                    0,
                    i64::from(u32::MAX),
                    i64::from(DEFAULT_CAP),
                )?)
                .ok()?,
                redisson: false,
            },
            lease: opt_dur("RLOCK_LEASE", lease_duration)?,
            max_hold: opt_dur("RLOCK_MAX_HOLD", positive_duration)?,
            metrics_file: path("RLOCK_METRICS_FILE")?,
            kill_after: opt_dur("RLOCK_KILL_AFTER", grace_duration)?,
            names,
            command: command.iter().map(OsString::from).collect(),
            shell: None,
        }),
    })
}

/// An integer as clap's integer parsers read one (`i64`'s syntax).
fn integer(text: &str) -> Option<i64> {
    text.parse().ok()
}

/// `--url a,b` (and `RLOCK_URL=a,b`) as clap's `value_delimiter = ','` splits it.
fn split(urls: &str) -> Vec<String> {
    urls.split(',').map(str::to_owned).collect()
}
