//! The Lua scripts, embedded from `src/lua/*.lua`. Each file documents its KEYS,
//! ARGV, return value and invariant. `redis::Script` computes the SHA1 once and
//! invokes with EVALSHA, loading the script on NOSCRIPT.

use std::sync::LazyLock;

use redis::Script;

/// Take or re-enter the lock; register as a waiter when taken.
pub static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/acquire.lua")));
/// Extend a hold's lease if the token still holds the lock.
pub static RENEW: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("lua/renew.lua")));
/// Drop one hold; at zero delete the lock and wake one waiter.
pub static RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/release.lua")));
/// Deregister a waiter that gives up, passing on a consumed wake-up.
pub static LEAVE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("lua/leave.lua")));
