//! The Lua scripts, embedded from `src/lua/*.lua`, each with `common.lua`
//! (the key layout and shared helpers) in front. Each file documents its KEYS,
//! ARGV, return value and invariant. `redis::Script` computes the SHA1 once
//! and invokes with EVALSHA, loading the script on NOSCRIPT.

use std::sync::LazyLock;

use redis::Script;

macro_rules! script {
    ($file:literal) => {
        LazyLock::new(|| Script::new(concat!(include_str!("lua/common.lua"), include_str!($file))))
    };
}

/// Take or re-enter a hold; register as a waiter when it cannot be had.
pub static ACQUIRE: LazyLock<Script> = script!("lua/acquire.lua");
/// Extend a hold's lease if the token still holds the lock.
pub static RENEW: LazyLock<Script> = script!("lua/renew.lua");
/// Drop one hold; when a hold ends, wake the waiters that can now acquire.
pub static RELEASE: LazyLock<Script> = script!("lua/release.lua");
/// Deregister a waiter that gives up, waking those it was holding back.
pub static LEAVE: LazyLock<Script> = script!("lua/leave.lua");
/// A read-only look at one lock (`status`, `list`).
pub static STATUS: LazyLock<Script> = script!("lua/status.lua");
/// End every hold (`release --force`) and wake the waiters.
pub static FORCE: LazyLock<Script> = script!("lua/force.lua");

/// `--redisson`: take or re-enter a lock in Redisson's own layout.
pub static REDISSON_ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/redisson_acquire.lua")));
/// `--redisson`: Redisson's renewal.
pub static REDISSON_RENEW: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/redisson_renew.lua")));
/// `--redisson`: Redisson's unlock, publishing its unlock message.
pub static REDISSON_RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/redisson_release.lua")));

/// Add one event to a lock's history (events known only after their script).
pub static RECORD: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("lua/record.lua")));

/// Redlock: lift one server's fencing counter to the quorum's largest fence.
pub static RAISE_FENCE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/raise_fence.lua")));
