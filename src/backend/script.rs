//! The Lua scripts, embedded from `src/backend/lua/*.lua`, rlock's own lock
//! scripts each with the prelude (`src/backend/lua/prelude/*.lua` in name
//! order: the key layout and shared helpers) in front. Each file documents its
//! KEYS, ARGV, return value and invariant.
//!
//! Each [`Script`] lists its ARGV by name, in order, and the shapes of its
//! replies (`protocol.rs`). A caller names every argument it passes
//! ([`Invocation::arg`]), which debug builds check against the list.
//!
//! A script's SHA1 is computed at build time (`build.rs`; a unit test below
//! checks each against its text), not in every process: hashing the ~47 KB
//! of script text cost a run about 0.3 ms. A script is invoked with EVALSHA
//! and loaded with SCRIPT LOAD when the server answers NOSCRIPT, as
//! `redis::Script` does.

use redis::{Cmd, ConnectionLike, ErrorKind, FromRedisValue, RedisResult, ToRedisArgs, Value};

#[cfg(test)]
use super::protocol::{self, Shape};

include!(concat!(env!("OUT_DIR"), "/lua_sha.rs"));

/// A Lua script with its SHA1, both fixed at build time, and its protocol.
#[derive(Debug)]
pub struct Script {
    code: &'static str,
    hash: &'static str,
    /// The length of the script's own file, at the end of `code` (after the
    /// prelude, if any).
    own: usize,
    /// Its ARGV by name, in order; a last name ending in `..` is that of
    /// every argument from there on.
    argv: &'static [&'static str],
    /// The shapes of its replies (and of the arrays inside them), which
    /// `redis/reply.rs` reads through `protocol.rs`'s constants.
    #[cfg(test)]
    replies: &'static [&'static Shape],
}

/// `lua/NAME.lua` after the prelude (`prelude`), or alone (`plain`), with
/// its ARGV names and reply shapes.
macro_rules! script {
    (prelude $file:tt, $argv:expr, $replies:expr) => {
        Script {
            code: concat!(prelude!(), include_str!($file)),
            hash: lua_sha!($file, prelude),
            own: include_str!($file).len(),
            argv: $argv,
            #[cfg(test)]
            replies: $replies,
        }
    };
    (plain $file:tt, $argv:expr, $replies:expr) => {
        Script {
            code: include_str!($file),
            hash: lua_sha!($file, plain),
            own: include_str!($file).len(),
            argv: $argv,
            #[cfg(test)]
            replies: $replies,
        }
    };
}

/// Take or re-enter a hold; register as a waiter when it cannot be had.
pub static ACQUIRE: Script = script!(
    prelude "lua/acquire.lua",
    &[
        "owner",
        "inherited",
        "lease_ms",
        "host",
        "pid",
        "command",
        "register_ms",
        "kind",
        "limit",
        "fair",
        "grant",
        "note",
        "history_cap",
        "event..",
    ],
    &[&protocol::DONE, &protocol::HELD, &protocol::TAKEN, &protocol::HOLDER, &protocol::WEAKER]
);
/// Extend a hold's lease if the token still holds the lock.
pub static RENEW: Script = script!(
    prelude "lua/renew.lua",
    &["owner", "lease_ms", "exact"],
    &[&protocol::DONE, &protocol::RENEWED]
);
/// Drop one hold; when a hold ends, wake the waiters that can now acquire.
pub static RELEASE: Script = script!(
    prelude "lua/release.lua",
    &["owner", "history_cap", "event.."],
    &[&protocol::DONE]
);
/// Deregister a waiter that gives up, waking those it was holding back.
pub static LEAVE: Script = script!(
    prelude "lua/leave.lua",
    &["waiter"],
    &[&protocol::DONE]
);
/// A read-only look at one lock (`status`, `list`).
pub static STATUS: Script = script!(
    prelude "lua/status.lua",
    &[],
    &[&protocol::STATUS, &protocol::HOLDING, &protocol::WAITING]
);
/// End every hold (`release --force`) and wake the waiters.
pub static FORCE: Script = script!(
    prelude "lua/force.lua",
    &[],
    &[&protocol::DONE]
);
/// Deliver the wake-ups and handoffs another script returned in its outbox
/// (they were for lists it was not given).
pub static WAKE: Script = script!(
    prelude "lua/wake.lua",
    &["outbox.."],
    &[]
);
/// Renew a hold from the holds' key alone (a Cluster slot being migrated).
pub static RENEW_ALONE: Script = script!(
    plain "lua/renew_alone.lua",
    &["owner", "lease_ms", "exact"],
    &[&protocol::DONE, &protocol::RENEWED]
);
/// Say who holds a lock from the holds' key alone (a Cluster slot being migrated).
pub static BUSY_ALONE: Script = script!(
    plain "lua/busy_alone.lua",
    &["kind", "owners.."],
    &[&protocol::DONE, &protocol::TAKEN, &protocol::HOLDER]
);
/// Add one event to a lock's history, known only after the script that made it.
pub static RECORD: Script = script!(
    plain "lua/record.lua",
    &["history_cap", "idle_ms", "event.."],
    &[]
);

/// `--redisson`: take or re-enter a lock in Redisson's own layout.
pub static REDISSON_ACQUIRE: Script = script!(
    plain "lua/redisson_acquire.lua",
    &["lease_ms", "field", "inherited"],
    &[&protocol::HELD, &protocol::TAKEN]
);
/// `--redisson`: Redisson's renewal.
pub static REDISSON_RENEW: Script = script!(
    plain "lua/redisson_renew.lua",
    &["lease_ms", "field", "exact"],
    &[&protocol::RENEWED]
);
/// `--redisson`: Redisson's unlock, publishing its unlock message.
pub static REDISSON_RELEASE: Script = script!(
    plain "lua/redisson_release.lua",
    &["field", "sharded"],
    &[]
);
/// `--redisson`: an event for the history, sent with the script that made it.
pub static REDISSON_RECORD: Script = script!(
    plain "lua/redisson_record.lua",
    &["history_cap", "idle_ms", "field", "when", "event.."],
    &[]
);

/// Redlock: lift one server's fencing counter to the quorum's largest fence.
pub static RAISE_FENCE: Script = script!(
    plain "lua/raise_fence.lua",
    &["fence"],
    &[]
);

/// `rlock check`: a script that reads the server's clock (TIME), as every
/// lock script does; loaded with SCRIPT LOAD and run with EVALSHA, the path
/// the lock scripts take.
pub static CHECK_SCRIPT: Script = script!(
    plain "lua/check_script.lua",
    &[],
    &[]
);
/// `rlock check`: whether another connection can see a script half done.
pub static CHECK_ATOMIC: Script = script!(
    plain "lua/check_atomic.lua",
    &["steps", "life_ms"],
    &[]
);

/// The lock scripts, for naming the line a server refused.
static LOCK_SCRIPTS: [&Script; 15] = [
    &ACQUIRE,
    &RENEW,
    &RENEW_ALONE,
    &BUSY_ALONE,
    &RELEASE,
    &LEAVE,
    &STATUS,
    &FORCE,
    &WAKE,
    &RECORD,
    &REDISSON_ACQUIRE,
    &REDISSON_RENEW,
    &REDISSON_RELEASE,
    &REDISSON_RECORD,
    &RAISE_FENCE,
];

impl Script {
    /// The script's SHA1, lower-case hex.
    pub fn get_hash(&self) -> &'static str {
        self.hash
    }

    /// The script's text.
    pub fn code(&self) -> &'static str {
        self.code
    }

    /// An invocation with `key` as its first key.
    pub fn key<T: ToRedisArgs>(&self, key: T) -> Invocation<'_> {
        let mut invocation = self.prepare_invoke();
        invocation.key(key);
        invocation
    }

    /// An invocation with no keys or arguments yet.
    pub fn prepare_invoke(&self) -> Invocation<'_> {
        Invocation {
            script: self,
            keys: Vec::new(),
            args: Vec::new(),
            named: 0,
        }
    }

    /// The script's own file (the prelude, if any, left out).
    pub(super) fn own_text(&self) -> &'static str {
        &self.code[self.code.len() - self.own..]
    }

    /// The prelude in front of the script's own file ("" for a plain one).
    #[cfg(test)]
    pub(super) fn prelude(&self) -> &'static str {
        &self.code[..self.code.len() - self.own]
    }

    /// The script's ARGV names, in order.
    #[cfg(test)]
    pub(super) fn argv(&self) -> &'static [&'static str] {
        self.argv
    }

    /// The shapes of the script's replies.
    #[cfg(test)]
    pub(super) fn replies(&self) -> &'static [&'static Shape] {
        self.replies
    }
}

/// A script with its keys and arguments, ready to be sent.
pub struct Invocation<'a> {
    script: &'a Script,
    keys: Vec<Vec<u8>>,
    args: Vec<Vec<u8>>,
    /// How many of the script's ARGV names the arguments so far took.
    named: usize,
}

impl Invocation<'_> {
    /// Appends a key (`KEYS[i]` in the script).
    pub fn key<T: ToRedisArgs>(&mut self, key: T) -> &mut Self {
        key.write_redis_args(&mut self.keys);
        self
    }

    /// Appends the argument the script calls `name`: the next of its ARGV
    /// names, or one more of a last `name..`. Debug builds check the name
    /// against the script's list, so that no argument lands in another's
    /// place.
    pub fn arg<T: ToRedisArgs>(&mut self, name: &str, arg: T) -> &mut Self {
        if cfg!(debug_assertions) {
            self.expect(name);
        }
        arg.write_redis_args(&mut self.args);
        self
    }

    /// Panics unless `name` is the argument the script takes next.
    fn expect(&mut self, name: &str) {
        match self.script.argv.get(self.named) {
            Some(listed) if listed.strip_suffix("..") == Some(name) => {}
            Some(listed) if *listed == name => self.named += 1,
            listed => panic!(
                "{}: argument {name} given where the script takes {listed:?}",
                self.script.own_text().lines().next().unwrap_or_default()
            ),
        }
    }

    /// The EVALSHA command alone, for a pipeline (where a script is not
    /// loaded on NOSCRIPT: the caller invokes it once first).
    pub fn eval_cmd(&self) -> Cmd {
        let mut eval = redis::cmd("EVALSHA");
        eval.arg(self.script.hash)
            .arg(self.keys.len())
            .arg(&*self.keys)
            .arg(&*self.args);
        eval
    }

    /// EVAL right after ASKING: a node importing the slot serves the command
    /// that follows ASKING, and an EVALSHA answered NOSCRIPT would spend it.
    /// (ASKING is harmless on the node that owns the slot. Not in a
    /// pipeline: an error reply there loses the ASK redirection it carries.)
    pub fn invoke_asking<T: FromRedisValue>(&self, con: &mut dyn ConnectionLike) -> RedisResult<T> {
        redis::cmd("ASKING").query::<()>(con)?;
        let mut eval = redis::cmd("EVAL");
        eval.arg(self.script.code)
            .arg(self.keys.len())
            .arg(&*self.keys)
            .arg(&*self.args);
        eval.query(con)
    }

    /// EVALSHA; on NOSCRIPT (a server that has not seen the script, or
    /// flushed it), SCRIPT LOAD and EVALSHA again.
    pub fn invoke<T: FromRedisValue>(&self, con: &mut dyn ConnectionLike) -> RedisResult<T> {
        let eval = self.eval_cmd();
        match eval.query(con) {
            Err(err) if err.kind() == ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                load_cmd(self.script).query::<()>(con)?;
                eval.query(con)
            }
            result => result,
        }
    }
}

/// Every script, rlock's lock scripts and `check`'s.
#[cfg(test)]
pub(super) fn every_script() -> impl Iterator<Item = &'static Script> {
    LOCK_SCRIPTS
        .iter()
        .copied()
        .chain([&CHECK_SCRIPT, &CHECK_ATOMIC])
}

/// `first`, then `then`, in one round trip: `then` is a script that checks
/// what `first` did (so it may run before `first` is retried). Each script
/// the server does not know yet is loaded and invoked on its own, in order.
/// Returns `first`'s reply and `then`'s result.
pub fn invoke_then<T: FromRedisValue>(
    first: &Invocation<'_>,
    then: &Invocation<'_>,
    con: &mut dyn ConnectionLike,
) -> RedisResult<(T, RedisResult<Value>)> {
    let no_script =
        |err: &redis::RedisError| err.kind() == ErrorKind::Server(redis::ServerErrorKind::NoScript);
    let mut pipe = redis::pipe();
    pipe.ignore_errors()
        .add_command(first.eval_cmd())
        .add_command(then.eval_cmd());
    let mut replies: Vec<RedisResult<Value>> = pipe.query(con)?;
    let second = replies.pop();
    let reply = match replies.pop() {
        Some(Err(err)) if no_script(&err) => {
            let reply = first.invoke(con)?;
            return Ok((reply, then.invoke(con)));
        }
        Some(reply) => redis::from_redis_value(reply?)?,
        None => first.invoke(con)?,
    };
    let second = match second {
        Some(Err(err)) if no_script(&err) => then.invoke(con),
        Some(result) => result,
        None => then.invoke(con),
    };
    Ok((reply, second))
}

/// SCRIPT LOAD of `script`.
fn load_cmd(script: &Script) -> Cmd {
    let mut cmd = redis::cmd("SCRIPT");
    cmd.arg("LOAD").arg(script.code);
    cmd
}

/// Line `line` (from 1) of the script whose SHA1 is `sha`: Redis 6.2 and 7
/// name only the script and the line when they refuse a command inside it.
pub fn line(sha: &str, line: usize) -> Option<&'static str> {
    let script = LOCK_SCRIPTS
        .iter()
        .find(|script| script.hash.eq_ignore_ascii_case(sha))?;
    script.code.lines().nth(line.checked_sub(1)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_scripts_sha1_from_the_build_is_that_of_its_text() {
        let checks: [&Script; 2] = [&CHECK_SCRIPT, &CHECK_ATOMIC];
        for script in LOCK_SCRIPTS.iter().chain(&checks) {
            let sha = sha1_smol::Sha1::from(script.code).digest().to_string();
            assert_eq!(
                script.hash,
                sha,
                "{}",
                script.code.lines().next().unwrap_or("")
            );
        }
    }

    #[test]
    fn an_argument_is_named_as_the_script_takes_it() {
        let mut release = RELEASE.prepare_invoke();
        release
            .arg("owner", "d")
            .arg("history_cap", 0)
            .arg("event", "retract")
            .arg("event", "1-0");
        assert_eq!(release.args.len(), 4);
        let misplaced = std::panic::catch_unwind(|| {
            RENEW
                .prepare_invoke()
                .arg("owner", "d")
                .arg("exact", "exact");
        });
        assert!(misplaced.is_err(), "exact given in lease_ms's place");
    }

    #[test]
    fn a_line_is_found_by_the_scripts_sha() {
        let sha = RAISE_FENCE.get_hash().to_owned();
        let first = RAISE_FENCE.code.lines().next();
        assert_eq!(line(&sha, 1), first);
        assert_eq!(line(&sha.to_uppercase(), 1), first);
        assert_eq!(line(&sha, 0), None);
        assert_eq!(line(&"0".repeat(40), 1), None);
    }
}
