//! The servers' clocks as renewals read them: a step of one, beyond the
//! round trips and the drift margin, is told.

use std::time::Duration;

use crate::backend::ServerTime;
use crate::lock::clock::{self, ClockStep, ServerRead, Stamp};

/// Each server's clock as the last renewal it answered read it, and on
/// which connection.
#[derive(Debug, Default)]
pub(crate) struct ServerClocks {
    last: Vec<(ServerTime, ServerRead)>,
}

impl ServerClocks {
    /// The step of the servers' clocks since their last readings, as
    /// `times`, read by a renewal sent at `sent` and just answered, show
    /// them: a forward step on any server first (it may have ended the
    /// lease there), else the widest backward one.
    pub(crate) fn read(
        &mut self,
        times: &[ServerTime],
        sent: Stamp,
        margin: Duration,
    ) -> Option<ClockStep> {
        let replied = Stamp::now();
        let mut steps: Vec<ClockStep> = Vec::new();
        for time in times {
            let read = ServerRead {
                sent,
                replied,
                server_ms: time.ms,
            };
            let known = self.last.iter_mut().find(|(t, _)| t.server == time.server);
            match known {
                Some((before_time, before)) if before_time.connection == time.connection => {
                    steps.extend(clock::step(*before, read, margin));
                    *before = read;
                }
                // A new connection (after a failover, maybe to another
                // machine) is a new baseline for its server.
                Some(known) => *known = (time.clone(), read),
                None => self.last.push((time.clone(), read)),
            }
        }
        let widest = |forward: bool| {
            steps
                .iter()
                .filter(|step| matches!(step, ClockStep::Forward(_)) == forward)
                .max_by_key(|step| step.by())
                .copied()
        };
        widest(true).or_else(|| widest(false))
    }
}
