//! The Lua scripts, embedded from `src/lua/*.lua`, each with `common.lua`
//! (the key layout and shared helpers) in front. Each file documents its KEYS,
//! ARGV, return value and invariant. `redis::Script` computes the SHA1 once
//! and invokes with EVALSHA, loading the script on NOSCRIPT.

use std::sync::LazyLock;

use redis::Script;

macro_rules! with_common {
    ($file:literal) => {
        concat!(include_str!("lua/common.lua"), include_str!($file))
    };
}

const ACQUIRE_LUA: &str = with_common!("lua/acquire.lua");
const RENEW_LUA: &str = with_common!("lua/renew.lua");
const RELEASE_LUA: &str = with_common!("lua/release.lua");
const LEAVE_LUA: &str = with_common!("lua/leave.lua");
const STATUS_LUA: &str = with_common!("lua/status.lua");
const FORCE_LUA: &str = with_common!("lua/force.lua");
const WAKE_LUA: &str = with_common!("lua/wake.lua");
const REDISSON_ACQUIRE_LUA: &str = include_str!("lua/redisson_acquire.lua");
const REDISSON_RENEW_LUA: &str = include_str!("lua/redisson_renew.lua");
const REDISSON_RELEASE_LUA: &str = include_str!("lua/redisson_release.lua");
const RAISE_FENCE_LUA: &str = include_str!("lua/raise_fence.lua");

/// Take or re-enter a hold; register as a waiter when it cannot be had.
pub static ACQUIRE: LazyLock<Script> = LazyLock::new(|| Script::new(ACQUIRE_LUA));
/// Extend a hold's lease if the token still holds the lock.
pub static RENEW: LazyLock<Script> = LazyLock::new(|| Script::new(RENEW_LUA));
/// Drop one hold; when a hold ends, wake the waiters that can now acquire.
pub static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(RELEASE_LUA));
/// Deregister a waiter that gives up, waking those it was holding back.
pub static LEAVE: LazyLock<Script> = LazyLock::new(|| Script::new(LEAVE_LUA));
/// A read-only look at one lock (`status`, `list`).
pub static STATUS: LazyLock<Script> = LazyLock::new(|| Script::new(STATUS_LUA));
/// End every hold (`release --force`) and wake the waiters.
pub static FORCE: LazyLock<Script> = LazyLock::new(|| Script::new(FORCE_LUA));
/// Deliver the wake-ups and handoffs another script returned in its outbox
/// (they were for lists it was not given).
pub static WAKE: LazyLock<Script> = LazyLock::new(|| Script::new(WAKE_LUA));

/// `--redisson`: take or re-enter a lock in Redisson's own layout.
pub static REDISSON_ACQUIRE: LazyLock<Script> = LazyLock::new(|| Script::new(REDISSON_ACQUIRE_LUA));
/// `--redisson`: Redisson's renewal.
pub static REDISSON_RENEW: LazyLock<Script> = LazyLock::new(|| Script::new(REDISSON_RENEW_LUA));
/// `--redisson`: Redisson's unlock, publishing its unlock message.
pub static REDISSON_RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(REDISSON_RELEASE_LUA));

/// Add one event to a lock's history (events known only after their script).
pub static RECORD: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("lua/record.lua")));

/// Redlock: lift one server's fencing counter to the quorum's largest fence.
pub static RAISE_FENCE: LazyLock<Script> = LazyLock::new(|| Script::new(RAISE_FENCE_LUA));

/// `rlock check`: a script that reads the server's clock (TIME), as every
/// lock script does; loaded with SCRIPT LOAD and run with EVALSHA, the path
/// the lock scripts take.
pub const CHECK_SCRIPT: &str = include_str!("lua/check_script.lua");
/// `rlock check`: whether another connection can see a script half done.
pub static CHECK_ATOMIC: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/check_atomic.lua")));

/// Line `line` (from 1) of the script whose SHA1 is `sha`: Redis 6.2 and 7
/// name only the script and the line when they refuse a command inside it.
pub fn line(sha: &str, line: usize) -> Option<&'static str> {
    let scripts: [(&LazyLock<Script>, &'static str); 11] = [
        (&ACQUIRE, ACQUIRE_LUA),
        (&RENEW, RENEW_LUA),
        (&RELEASE, RELEASE_LUA),
        (&LEAVE, LEAVE_LUA),
        (&STATUS, STATUS_LUA),
        (&FORCE, FORCE_LUA),
        (&WAKE, WAKE_LUA),
        (&REDISSON_ACQUIRE, REDISSON_ACQUIRE_LUA),
        (&REDISSON_RENEW, REDISSON_RENEW_LUA),
        (&REDISSON_RELEASE, REDISSON_RELEASE_LUA),
        (&RAISE_FENCE, RAISE_FENCE_LUA),
    ];
    let (_, source) = scripts
        .into_iter()
        .find(|(script, _)| script.get_hash().eq_ignore_ascii_case(sha))?;
    source.lines().nth(line.checked_sub(1)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_found_by_the_scripts_sha() {
        let sha = RAISE_FENCE.get_hash().to_owned();
        let first = RAISE_FENCE_LUA.lines().next();
        assert_eq!(line(&sha, 1), first);
        assert_eq!(line(&sha, 0), None);
        assert_eq!(line(&"0".repeat(40), 1), None);
    }
}
