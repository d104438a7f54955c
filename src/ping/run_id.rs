//! One run's id: a random UUID (version 4), sent as `rid=` with each of the
//! run's pings so a monitor pairs a run's start with its end even when runs
//! overlap.

use std::fmt;

/// A run id, `xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx` (RFC 9562 version 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunId([u8; 16]);

impl RunId {
    /// A new random id from the kernel's random source. Should getrandom(2)
    /// fail, the time and the process id stand in: a run id pairs pings, it
    /// guards nothing.
    pub fn new() -> RunId {
        let mut bytes = [0u8; 16];
        if crate::sys::random::fill(&mut bytes).is_err() {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            bytes = (nanos ^ (u128::from(std::process::id()) << 96)).to_le_bytes();
        }
        RunId::from_bytes(bytes)
    }

    /// The id made of `bytes`, with the version and variant bits set.
    pub fn from_bytes(mut bytes: [u8; 16]) -> RunId {
        bytes[6] = (bytes[6] & 0x0f) | 0x40;
        bytes[8] = (bytes[8] & 0x3f) | 0x80;
        RunId(bytes)
    }
}

impl Default for RunId {
    fn default() -> Self {
        RunId::new()
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, byte) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_id_is_a_version_4_uuid() {
        let id = RunId::new().to_string();
        assert_eq!(id.len(), 36);
        let dashes: Vec<usize> = id.match_indices('-').map(|(i, _)| i).collect();
        assert_eq!(dashes, [8, 13, 18, 23]);
        assert_eq!(&id[14..15], "4");
        assert!(matches!(&id[19..20], "8" | "9" | "a" | "b"), "{id}");
        assert_ne!(RunId::new(), RunId::new());
    }
}
