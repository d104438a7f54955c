//! Owner tokens and fencing tokens.
//!
//! An owner token is 128 random bits in hex: it names one holder and is a
//! capability to release that hold, so it is never printed in messages.

use std::fmt;

use crate::error::{Error, Result};

/// One holder's identity in the lock hash (32 lowercase hex digits).
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// A fresh token from the kernel's random source.
    pub fn generate() -> Result<Self> {
        let mut bytes = [0u8; 16];
        let mut filled = 0;
        while filled < bytes.len() {
            // SAFETY: the pointer and length describe the unfilled tail of `bytes`.
            let n = unsafe {
                libc::getrandom(bytes[filled..].as_mut_ptr().cast(), bytes.len() - filled, 0)
            };
            if n < 0 {
                let err = std::io::Error::last_os_error();
                if err.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(Error::Internal(format!("cannot read random bytes: {err}")));
            }
            filled += n as usize;
        }
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

    /// The token's text, for Redis and for COMMAND's environment only.
    pub fn as_str(&self) -> &str {
        &self.0
    }
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

impl fmt::Display for Fence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn parse_rejects_malformed_tokens() {
        for bad in ["", "xyz", &"0".repeat(31), &"g".repeat(32), &"0".repeat(33)] {
            assert!(Token::parse(bad).is_none(), "{bad}");
        }
    }
}
