//! The fencing counter of a `file:` lock (`E.fence`): the next fence for a
//! new hold, never below earlier ones, and the last one handed out.

use std::fs;
use std::io;

use super::LocalSession;
use super::files;
use crate::lock::clock;
use crate::lock::token::Fence;

impl LocalSession {
    /// The next fence. Only a request holding the gate counts, so the
    /// counter needs no lock of its own; it is replaced in one step. Never
    /// below the host's clock in microseconds, so that a counter file that was
    /// removed (or a DIR made anew) does not start again below earlier fences.
    /// The counter is not flushed to the disk (see [`files::replace`]): after
    /// a power cut it may be older, empty or zeroes, all read as no counter.
    pub(super) fn next_fence(&self, name: &str) -> io::Result<u64> {
        let path = self.path(name, "fence");
        let bad =
            |why: &str| io::Error::other(format!("fencing counter {}: {why}", path.display()));
        let last = match fs::read_to_string(&path) {
            Ok(text)
                if text
                    .trim_matches(|c: char| c == '\0' || c.is_whitespace())
                    .is_empty() =>
            {
                0
            }
            Ok(text) => text
                .trim()
                .parse::<u64>()
                .map_err(|_| bad("not a number"))?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
            Err(e) => return Err(bad(&e.to_string())),
        };
        let Fence(next) = Fence::next(last, clock::now_us())
            .ok_or_else(|| bad("at its largest value (fences stay below 2^53)"))?;
        files::replace(&path, &next.to_string()).map_err(|e| bad(&e.to_string()))?;
        Ok(next)
    }

    /// The last fence handed out (0 when none was).
    pub(super) fn fence(&self, name: &str) -> u64 {
        fs::read_to_string(self.path(name, "fence"))
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0)
    }
}
