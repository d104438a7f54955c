//! The servers' answers to one Redlock attempt, and the token a quorum holds.

use std::time::Duration;

use super::ServerHold;
use crate::backend::{Attempt, HolderInfo};
use crate::error::{Cause, Error, Result};
use crate::lock::kind::Kind;
use crate::lock::token::Token;

/// The servers' answers to one attempt, by what they said.
pub(super) struct Answers {
    /// Servers that gave a hold.
    pub(super) holds: Vec<ServerHold>,
    /// Servers where the lock is taken: how long it has left, and by whom.
    pub(super) taken: Vec<(usize, Option<Duration>, Option<HolderInfo>)>,
    /// How an enclosing run holds the lock (shared, or as a semaphore), as a
    /// server reported it.
    pub(super) incompatible: Option<Kind>,
    /// A key of the lock that rlock did not write.
    pub(super) foreign: Option<Error>,
    /// Servers that did not answer, and why.
    pub(super) failed: Vec<usize>,
    pub(super) failures: Vec<Error>,
}

impl Answers {
    pub(super) fn sort(results: Vec<Result<Attempt>>) -> Self {
        let mut answers = Answers {
            holds: Vec::new(),
            taken: Vec::new(),
            incompatible: None,
            foreign: None,
            failed: Vec::new(),
            failures: Vec::new(),
        };
        for (i, result) in results.into_iter().enumerate() {
            match result {
                Ok(Attempt::Acquired(hold)) => answers.holds.push((i, hold)),
                Ok(Attempt::Taken { pttl, holder, .. }) => answers.taken.push((i, pttl, holder)),
                Ok(Attempt::Incompatible { held }) => answers.incompatible = Some(held),
                Err(err) if matches!(err.cause(), Cause::ForeignKey(_)) => {
                    answers.foreign = Some(err)
                }
                Err(err) => {
                    answers.failed.push(i);
                    answers.failures.push(err);
                }
            }
        }
        answers
    }
}

/// The token that holds the lock on at least `quorum` servers, if any.
pub(super) fn token_of_a_quorum(holds: &[ServerHold], quorum: usize) -> Option<Token> {
    holds
        .iter()
        .map(|(_, h)| &h.token)
        .find(|t| holds.iter().filter(|(_, h)| &h.token == *t).count() >= quorum)
        .cloned()
}
