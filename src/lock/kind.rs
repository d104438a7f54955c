//! The kind of a hold, and every way it is written as text: the letter the
//! Lua scripts store (`x`, `s`, `m`, a semaphore's limit stored beside it),
//! the code a `file:` record keeps (`x`, `s`, `m<limit>`), and the words
//! messages, `status` and `--json` use.

/// The kind of hold asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One holder at a time.
    Exclusive,
    /// Any number of shared holders, none beside an exclusive one.
    Shared,
    /// At most N holders (and never more than any holder's own N allows).
    Semaphore(u32),
}

impl Kind {
    /// The letter the scripts and a `file:` waiter record store: `x`, `s`
    /// or `m` (a semaphore's limit goes beside it: [`Kind::limit`]).
    pub fn letter(self) -> &'static str {
        match self {
            Kind::Exclusive => "x",
            Kind::Shared => "s",
            Kind::Semaphore(_) => "m",
        }
    }

    /// The limit stored beside [`Kind::letter`]: N for a semaphore, 1 otherwise.
    pub fn limit(self) -> u32 {
        match self {
            Kind::Semaphore(n) => n,
            _ => 1,
        }
    }

    /// The kind a hold was stored with, from its letter (only the first
    /// character counts) and the limit stored beside it.
    pub fn from_code(code: &str, limit: u32) -> Option<Kind> {
        match code.as_bytes().first()? {
            b'x' => Some(Kind::Exclusive),
            b's' => Some(Kind::Shared),
            b'm' => Some(Kind::Semaphore(limit)),
            _ => None,
        }
    }

    /// How a `file:` holder record spells the kind: `x`, `s`, or `m` and
    /// the limit (`m3`).
    pub fn record(self) -> String {
        match self {
            Kind::Semaphore(n) => format!("m{n}"),
            _ => self.letter().to_owned(),
        }
    }

    /// The kind a `file:` holder record spells ([`Kind::record`]), exactly.
    pub fn from_record(text: &str) -> Option<Kind> {
        match text {
            "x" => Some(Kind::Exclusive),
            "s" => Some(Kind::Shared),
            _ => text.strip_prefix('m')?.parse().ok().map(Kind::Semaphore),
        }
    }

    /// A semaphore's limit; None for the other kinds.
    pub fn semaphore_limit(self) -> Option<u32> {
        match self {
            Kind::Semaphore(n) => Some(n),
            _ => None,
        }
    }

    /// The word `status` shows and `--json` gives: `exclusive`, `shared`,
    /// `semaphore`.
    pub fn word(self) -> &'static str {
        match self {
            Kind::Exclusive => "exclusive",
            Kind::Shared => "shared",
            Kind::Semaphore(_) => "semaphore",
        }
    }

    /// How a hold of this kind is held, in a sentence ("holds it shared").
    pub fn held_as(self) -> &'static str {
        match self {
            Kind::Exclusive => "exclusively",
            Kind::Shared => "shared",
            Kind::Semaphore(_) => "as a semaphore",
        }
    }

    /// The kind in messages: `exclusive`, `shared`, `semaphore (limit N)`.
    pub fn describe(self) -> String {
        match self {
            Kind::Semaphore(n) => format!("semaphore (limit {n})"),
            _ => self.word().to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_spelling_reads_back() {
        for kind in [Kind::Exclusive, Kind::Shared, Kind::Semaphore(3)] {
            assert_eq!(Kind::from_record(&kind.record()), Some(kind));
            assert_eq!(Kind::from_code(kind.letter(), kind.limit()), Some(kind));
        }
        assert_eq!(Kind::Semaphore(3).record(), "m3");
        assert_eq!(Kind::from_code("m", 4), Some(Kind::Semaphore(4)));
        assert_eq!(Kind::from_record("m"), None);
        assert_eq!(Kind::from_record("q"), None);
        assert_eq!(Kind::from_code("", 1), None);
    }

    #[test]
    fn words() {
        assert_eq!(Kind::Exclusive.word(), "exclusive");
        assert_eq!(Kind::Semaphore(2).word(), "semaphore");
        assert_eq!(Kind::Semaphore(2).describe(), "semaphore (limit 2)");
        assert_eq!(Kind::Shared.describe(), "shared");
        assert_eq!(Kind::Shared.held_as(), "shared");
        assert_eq!(Kind::Semaphore(0).held_as(), "as a semaphore");
    }
}
