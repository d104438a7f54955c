//! Owner tokens, their digests, and fencing tokens.
//!
//! An owner token is 128 random bits in hex: it names one holder and is a
//! capability to release that hold, so it is never printed in messages. Its
//! digest is the name Redis knows the holder by, a type of its own so that
//! neither is ever taken for the other.

use std::fmt;

use crate::error::{Error, Result};

/// One holder's identity in the lock hash (32 lowercase hex digits).
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// A fresh token from the kernel's random source.
    pub fn generate() -> Result<Self> {
        let mut bytes = [0u8; 16];
        random_bytes(&mut bytes)?;
        Ok(Token(bytes.iter().map(|b| format!("{b:02x}")).collect()))
    }

    /// Parses a token received from the environment or the command line.
    pub fn parse(text: &str) -> Option<Self> {
        let ok = text.len() == 32 && text.bytes().all(|b| b.is_ascii_hexdigit());
        ok.then(|| Token(text.to_ascii_lowercase()))
    }

    /// The owner field Redisson's lock hash uses for this token: the token as a
    /// UUID and thread id 1 (`--redisson`).
    pub fn redisson_field(&self) -> String {
        let t = &self.0;
        format!(
            "{}-{}-{}-{}-{}:1",
            &t[..8],
            &t[8..12],
            &t[12..16],
            &t[16..20],
            &t[20..]
        )
    }

    /// The token back from a Redisson owner field written by rlock.
    pub fn from_redisson_field(field: &str) -> Option<Self> {
        let uuid = field.strip_suffix(":1")?;
        Token::parse(&uuid.replace('-', ""))
    }

    /// The token's text, for COMMAND's environment and the `file:` records
    /// (in a directory only its owner may read) only.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name Redis knows this holder by: a one-way digest of the token
    /// (the first 128 bits of its SHA-1), so that whoever can read Redis
    /// learns nothing that `release`, `renew` or RLOCK_TOKENS accept. Of a
    /// token's shape: a digest given back as a token is digested again and
    /// names no holder.
    pub fn digest(&self) -> Digest {
        let hex = sha1_smol::Sha1::from(self.0.as_bytes()).hexdigest();
        Digest(hex[..32].to_owned())
    }
}

/// The name Redis knows one holder or waiter by (rlock's own layout): the
/// digest of its [`Token`], 32 lowercase hex digits. Not a capability: it
/// may be shown, sent and stored, and nothing accepts it as a token.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Digest(String);

impl Digest {
    /// A digest a script named (a holder or a waiter of the lock, read from
    /// its keys), taken as the script wrote it: the keys it names are the
    /// scripts' to judge.
    pub fn named(text: String) -> Self {
        Digest(text)
    }

    /// The digest's text, as Redis keeps it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Fills `bytes` from the kernel's random source (getrandom(2)), the one
/// source of randomness in rlock: owner tokens and Redlock's retry delays.
pub fn random_bytes(bytes: &mut [u8]) -> Result<()> {
    crate::sys::random::fill(bytes)
        .map_err(|err| Error::internal(format!("cannot read random bytes: {err}")))
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Tokens are capabilities: keep them out of debug output too.
        f.write_str("Token(..)")
    }
}

/// A fencing token: strictly increases with every new hold of one lock name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Fence(pub u64);

impl Fence {
    /// Fences stay below 2^53, where a double holds every integer exactly:
    /// JSON and JavaScript readers of a fence see the fence itself.
    pub const END: u64 = 1 << 53;

    /// The fence of a new hold after `last` was handed out, at `now_us` (the
    /// clock in microseconds since the epoch): never below the clock, so that
    /// a counter that was lost starts again above the fences it had handed
    /// out, as long as the clock was not set back. None when no fence is left
    /// below [`Fence::END`].
    pub fn next(last: u64, now_us: u64) -> Option<Fence> {
        let next = last.checked_add(1)?.max(now_us);
        (next < Self::END).then_some(Fence(next))
    }
}

impl fmt::Display for Fence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Most ancestor tokens passed down: a nesting deeper than this re-enters only
/// the innermost locks.
const MAX_INHERITED: usize = 32;

/// Tokens of the ancestor `rlock run`s, from the comma-separated `listed`
/// (RLOCK_TOKENS) and `single` (RLOCK_TOKEN, for a parent that set only
/// that). Any of them that holds the lock re-enters it; malformed entries
/// are ignored.
pub fn inherited_tokens(listed: &str, single: &str) -> Vec<Token> {
    let mut tokens: Vec<Token> = Vec::new();
    for token in listed.split(',').chain([single]).filter_map(Token::parse) {
        if !tokens.contains(&token) {
            tokens.push(token);
        }
    }
    let excess = tokens.len().saturating_sub(MAX_INHERITED);
    tokens.drain(..excess);
    tokens
}

/// RLOCK_TOKENS for COMMAND: the ancestors' tokens and this run's, newest last.
pub fn tokens_for_child(inherited: &[Token], own: &[&Token]) -> String {
    let mut tokens: Vec<&str> = Vec::new();
    // Newest last: an inherited token that holds again here moves to the end.
    for token in inherited.iter().chain(own.iter().copied()) {
        tokens.retain(|t| *t != token.as_str());
        tokens.push(token.as_str());
    }
    let excess = tokens.len().saturating_sub(MAX_INHERITED);
    tokens[excess..].join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_digest_is_one_way_and_stable() {
        let token = Token::parse(&"ab".repeat(16)).unwrap();
        let digest = token.digest();
        assert_eq!(digest, token.digest());
        assert_ne!(digest.as_str(), token.as_str());
        assert_eq!(digest.as_str().len(), 32);
        // A digest given back as a token names no holder: its own digest
        // is another.
        let as_token = Token::parse(digest.as_str()).unwrap();
        assert_ne!(as_token.digest(), digest);
    }

    #[test]
    fn generated_tokens_are_distinct_128_bit_hex() {
        let a = Token::generate().unwrap();
        let b = Token::generate().unwrap();
        assert_eq!(a.as_str().len(), 32);
        assert!(Token::parse(a.as_str()).is_some());
        assert_ne!(a, b);
        assert_eq!(format!("{a:?}"), "Token(..)");
    }

    #[test]
    fn a_fence_follows_the_counter_or_the_clock_whichever_is_later() {
        let now = 1_700_000_000_000_000;
        assert_eq!(Fence::next(0, now), Some(Fence(now)), "a lost counter");
        assert_eq!(Fence::next(now + 5, now), Some(Fence(now + 6)));
        assert_eq!(Fence::next(now - 1, now), Some(Fence(now)));
        assert_eq!(
            Fence::next(Fence::END - 2, now),
            Some(Fence(Fence::END - 1))
        );
        assert_eq!(Fence::next(Fence::END - 1, now), None, "no fence left");
        assert_eq!(Fence::next(u64::MAX, now), None);
        assert_eq!(Fence::next(7, Fence::END), None);
    }

    #[test]
    fn parse_rejects_malformed_tokens() {
        for bad in ["", "xyz", &"0".repeat(31), &"g".repeat(32), &"0".repeat(33)] {
            assert!(Token::parse(bad).is_none(), "{bad}");
        }
    }
}
