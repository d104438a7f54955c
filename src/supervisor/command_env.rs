//! The environment COMMAND gets: which locks it holds, their fences and
//! tokens; and not this run's own announcements.

use crate::holding::held::HeldLock;
use crate::lock::name::LockName;
use crate::lock::token::{Token, tokens_for_child};

/// COMMAND's environment: RLOCK_NAME (the names as given, space-separated),
/// RLOCK_FENCE and RLOCK_TOKEN (of the first name given), RLOCK_FENCES
/// (`name=fence` for each name, space-separated) and RLOCK_TOKENS (every
/// enclosing run's tokens and ours, for re-entry). Left out (None):
/// RLOCK_READY_FILE and RLOCK_PING, this run's: a run nested in COMMAND
/// would remove the ready file while this one holds, and tell the monitor
/// the job ended.
pub(super) fn child_env(
    names: &[LockName],
    held: &[HeldLock],
    inherited: &[Token],
) -> Vec<(&'static str, Option<String>)> {
    let hold_of = |name: &LockName| {
        held.iter()
            .find(|lock| lock.name() == name.as_str())
            .expect("every name was acquired")
    };
    let first = hold_of(&names[0]);
    let fences: Vec<String> = names
        .iter()
        .map(|n| format!("{n}={}", hold_of(n).fence()))
        .collect();
    let own: Vec<&Token> = held.iter().map(HeldLock::token).collect();
    let names: Vec<&str> = names.iter().map(|n| n.as_str()).collect();
    vec![
        ("RLOCK_NAME", Some(names.join(" "))),
        ("RLOCK_TOKEN", Some(first.token().as_str().to_owned())),
        ("RLOCK_FENCE", Some(first.fence().to_string())),
        ("RLOCK_FENCES", Some(fences.join(" "))),
        ("RLOCK_TOKENS", Some(tokens_for_child(inherited, &own))),
        ("RLOCK_READY_FILE", None),
        ("RLOCK_PING", None),
    ]
}
