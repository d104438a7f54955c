//! The environment COMMAND gets: which locks it holds, their fences and
//! tokens.

use crate::holding::held::HeldLock;
use crate::lock::name::LockName;
use crate::lock::token::{Token, tokens_for_child};

/// COMMAND's environment: RLOCK_NAME (the names as given, space-separated),
/// RLOCK_FENCE and RLOCK_TOKEN (of the first name given), RLOCK_FENCES
/// (`name=fence` for each name, space-separated) and RLOCK_TOKENS (every
/// enclosing run's tokens and ours, for re-entry).
pub(super) fn child_env(
    names: &[LockName],
    held: &[HeldLock],
    inherited: &[Token],
) -> Vec<(&'static str, String)> {
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
    vec![
        (
            "RLOCK_NAME",
            names
                .iter()
                .map(|n| n.as_str())
                .collect::<Vec<_>>()
                .join(" "),
        ),
        ("RLOCK_TOKEN", first.token().as_str().to_owned()),
        ("RLOCK_FENCE", first.fence().to_string()),
        ("RLOCK_FENCES", fences.join(" ")),
        ("RLOCK_TOKENS", tokens_for_child(inherited, &own)),
    ]
}
