//! `rlock check`'s clock check: the server's clock against this host's.

use super::StandaloneSession;
use super::check_probes::refused;
use crate::backend::fitness::Verdict;
use crate::lock::clock::now_us;

/// How far the server's clock may be from this host's before `clock` warns:
/// NTP keeps hosts within milliseconds, so a second apart is a host without it.
const CLOCK_TOLERANCE_US: u64 = 1_000_000;

/// One reading of the server's clock between two of this host's, all in
/// microseconds since the epoch.
#[derive(Clone, Copy, Debug)]
struct ClockRead {
    /// This host's clock just before TIME was sent.
    before: u64,
    /// The server's TIME.
    server: u64,
    /// This host's clock just after the reply came.
    after: u64,
}

impl ClockRead {
    /// How far the server's clock is ahead of this host's (negative:
    /// behind): the server read its clock somewhere in the round trip, taken
    /// to be its middle.
    fn offset_us(self) -> i64 {
        let middle = self.before + self.after.saturating_sub(self.before) / 2;
        self.server as i64 - middle as i64
    }

    /// How far off [`offset_us`](Self::offset_us) may be: half the round trip.
    fn uncertainty_us(self) -> u64 {
        self.after.saturating_sub(self.before) / 2
    }
}

/// The server's clock (`TIME`) against this host's (CLOCK_REALTIME). Leases
/// are judged by the server's clock alone, so only what is shown mixes them.
pub(super) fn clock(session: &mut StandaloneSession) -> (Verdict, String) {
    let read = session.ask(|con| {
        let before = now_us();
        let (secs, micros): (u64, u64) = redis::cmd("TIME").query(con)?;
        let after = now_us();
        Ok(ClockRead {
            before,
            server: secs * 1_000_000 + micros,
            after,
        })
    });
    let read = match read {
        Ok(read) => read,
        Err(err) => return (Verdict::Unknown, refused("TIME", &err)),
    };
    let offset = read.offset_us();
    let seen = format!(
        "server clock {:.3}s {} this host (±{:.3}s)",
        offset.unsigned_abs() as f64 / 1e6,
        if offset < 0 { "behind" } else { "ahead of" },
        read.uncertainty_us() as f64 / 1e6
    );
    if offset.unsigned_abs() <= CLOCK_TOLERANCE_US {
        return (Verdict::Ok, seen);
    }
    (
        Verdict::Warn,
        format!(
            "{seen}: run NTP (chrony, ntpd or systemd-timesyncd) on both hosts; rlock judges leases by the server's clock alone, but the times `status` shows and `history`'s timestamps mix both clocks"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_offset_is_taken_from_the_middle_of_the_round_trip() {
        let read = ClockRead {
            before: 10_000_000,
            server: 10_003_000,
            after: 10_000_400,
        };
        assert_eq!(read.offset_us(), 2_800);
        assert_eq!(read.uncertainty_us(), 200);
        let behind = ClockRead {
            before: 10_000_000,
            server: 4_000_000,
            after: 10_000_001,
        };
        assert_eq!(behind.offset_us(), -6_000_000);
        assert_eq!(behind.uncertainty_us(), 0);
    }
}
