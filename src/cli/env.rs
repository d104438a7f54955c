//! Options from the environment (`RLOCK_WAIT`, `RLOCK_SHARED`, ...) give way
//! to the command line.
//!
//! A CI system may set `RLOCK_WAIT=10m` for every job and one job pass
//! `--no-wait`: the option given on the command line wins, the environment's
//! opposite is ignored. Two opposites on the command line are a usage error,
//! and so are two in the environment (there is no telling which was meant).

use clap::ArgMatches;
use clap::parser::ValueSource;

use super::Command;

/// An option: clap id, flag and environment variable (for messages).
type Opt = (&'static str, &'static str, &'static str);

/// Options that exclude each other.
const OPPOSITES: [(Opt, Opt); 4] = [
    (
        ("wait", "--wait", "RLOCK_WAIT"),
        ("no_wait", "--no-wait", "RLOCK_NO_WAIT"),
    ),
    (
        ("shared", "--shared", "RLOCK_SHARED"),
        ("limit", "--limit", "RLOCK_LIMIT"),
    ),
    // (--exclusive has no variable: two environment settings never meet.)
    (
        ("exclusive", "--exclusive", "-"),
        ("shared", "--shared", "RLOCK_SHARED"),
    ),
    (
        ("lease", "--lease", "RLOCK_LEASE"),
        ("ttl", "--ttl", "RLOCK_TTL"),
    ),
];

/// The ids of options set in the environment that an opposite on the command
/// line overrides, or the usage error for opposites given together.
pub fn overridden(matches: &ArgMatches) -> Result<Vec<&'static str>, String> {
    let Some((_, sub)) = matches.subcommand() else {
        return Ok(Vec::new());
    };
    let source = |id: &str| {
        // A flag the environment sets false (RLOCK_NO_WAIT=0) is not given.
        if let Ok(Some(false)) = sub.try_get_one::<bool>(id) {
            return None;
        }
        sub.try_get_raw(id)
            .ok()
            .flatten()
            .and_then(|_| sub.value_source(id))
            .filter(|s| *s != ValueSource::DefaultValue)
    };
    let mut dropped = Vec::new();
    for ((a, a_flag, a_env), (b, b_flag, b_env)) in OPPOSITES {
        let together = |what: String| Err(format!("{what} cannot be used together"));
        match (source(a), source(b)) {
            (Some(ValueSource::CommandLine), Some(ValueSource::CommandLine)) => {
                return together(format!("'{a_flag}' and '{b_flag}'"));
            }
            (Some(ValueSource::EnvVariable), Some(ValueSource::EnvVariable)) => {
                return together(format!("{a_env} and {b_env}"));
            }
            (Some(ValueSource::CommandLine), Some(ValueSource::EnvVariable)) => dropped.push(b),
            (Some(ValueSource::EnvVariable), Some(ValueSource::CommandLine)) => dropped.push(a),
            _ => {}
        }
    }
    Ok(dropped)
}

/// Resets the options [`overridden`] found, as if the environment had not set them.
pub fn drop_overridden(command: &mut Command, ids: &[&str]) {
    let (lock, mut lease) = match command {
        Command::Run(run) => (&mut run.lock, Some(&mut run.lease)),
        Command::Acquire(acquire) => (&mut acquire.lock, None),
        _ => return,
    };
    for id in ids {
        match *id {
            "wait" => lock.wait = None,
            "no_wait" => lock.no_wait = false,
            "shared" => lock.shared = false,
            "limit" => lock.limit = None,
            "ttl" => lock.ttl = default_ttl(),
            "lease" => {
                if let Some(lease) = lease.as_deref_mut() {
                    *lease = None;
                }
            }
            _ => {}
        }
    }
}

/// `--ttl`'s default, read from the definition's text as clap reads it.
fn default_ttl() -> std::time::Duration {
    super::duration::lease_duration(super::DEFAULT_TTL_TEXT)
        .expect("the definition's default --ttl is a lease")
}
