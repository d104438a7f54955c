//! The options of `renew` and `release`: a hold a script took with
//! `acquire` and keeps across its steps.

use std::time::Duration;

use clap::Args;

use super::duration::lease_duration;
use super::{DEFAULT_TTL_TEXT, NAME_HINT};
use crate::lock::name::LockName;

/// Options of `rlock renew`.
#[derive(Debug, Args)]
pub struct RenewArgs {
    /// Lock name.
    #[arg(value_name = "NAME", value_hint = NAME_HINT, value_parser = LockName::new)]
    pub name: LockName,

    /// The owner token `rlock acquire` printed [default: $RLOCK_TOKEN].
    ///
    /// Prefer RLOCK_TOKEN: a token on the command line is visible to every
    /// user in `ps`.
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,

    /// New lease length, from now.
    #[arg(long, value_name = "DUR", default_value = DEFAULT_TTL_TEXT, value_parser = lease_duration)]
    pub ttl: Duration,

    /// The lock is a Redisson lock (as taken with --redisson).
    #[arg(long)]
    pub redisson: bool,
}

/// Options of `rlock release`.
#[derive(Debug, Args)]
pub struct ReleaseArgs {
    /// Lock name.
    #[arg(value_name = "NAME", value_hint = NAME_HINT, value_parser = LockName::new)]
    pub name: LockName,

    /// The owner token `rlock acquire` printed: releases only that hold
    /// [default: $RLOCK_TOKEN].
    ///
    /// Prefer RLOCK_TOKEN: a token on the command line is visible to every
    /// user in `ps`.
    #[arg(long, value_name = "TOKEN", conflicts_with = "force")]
    pub token: Option<String>,

    /// Remove every holder's hold, whatever holds the lock (operator
    /// break-glass); says on stderr whom it removed (-q: nothing).
    #[arg(long)]
    pub force: bool,

    /// Keep the lock's last N events for `rlock history` (the release, or
    /// with --force whose hold was removed); 0 records nothing.
    #[arg(long, value_name = "N", default_value_t = crate::lock::event::DEFAULT_CAP,
          env = "RLOCK_HISTORY")]
    pub history: u32,

    /// The lock is a Redisson lock (as taken with --redisson).
    #[arg(long)]
    pub redisson: bool,
}
