//! `rlock check`'s failover check: how long the topology takes to fail
//! over, against the outage the lease rides out.

use std::time::Duration;

use super::StandaloneSession;
use super::check_probes::Reach;
use crate::backend::fitness::Verdict;
use crate::lock::lease::{Lease, fit_grace, tenths};

/// What a failover takes beyond detecting the failed master
/// (`down-after-milliseconds`, `cluster-node-timeout`): the election and the
/// promotion. Measured here: 1.7-3.2 s for Sentinel, 3.8-5.1 s in all for a
/// Cluster with a short node timeout; an estimate, not a bound.
const ELECTION_AND_PROMOTION: Duration = Duration::from_secs(3);

/// The longest `--ttl` a suggestion may name (as `--ttl` itself allows).
const LONGEST_TTL_SECS: u64 = 366 * 24 * 3600;

/// The lease the `failover` check judges a failover by: `--ttl`, and the
/// `--kill-after` asked (None: the default), fitted to each ttl as `run`
/// fits it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Terms {
    pub(super) ttl: Duration,
    pub(super) kill_after: Option<Duration>,
}

impl Terms {
    /// The longest server outage this lease rides out wherever it starts.
    fn rides_out(self) -> Duration {
        rides_out(self.ttl, self.kill_after)
    }

    /// `--ttl 30s, --kill-after 10s`, the grace as fitted.
    fn describe(self) -> String {
        let ms = |d: Duration| Duration::from_millis(d.as_millis() as u64);
        format!(
            "--ttl {}, --kill-after {}",
            humantime::format_duration(ms(self.ttl)),
            humantime::format_duration(ms(grace(Lease::Renewed(self.ttl), self.kill_after)))
        )
    }
}

/// `--kill-after` fitted into `lease` as `run` fits it, without its note
/// (`check` says it once, for the ttl asked): capped first, there is nothing
/// to cut.
fn grace(lease: Lease, kill_after: Option<Duration>) -> Duration {
    fit_grace(kill_after.map(|k| k.min(lease.max_grace())), lease, "check")
}

/// The longest outage a lease of `ttl` rides out (see `Lease::rides_out`).
fn rides_out(ttl: Duration, kill_after: Option<Duration>) -> Duration {
    let lease = Lease::Renewed(ttl);
    lease.rides_out(grace(lease, kill_after))
}

/// How a failover expected to take some time meets the lease.
#[derive(Debug, PartialEq, Eq)]
enum FailoverFit {
    /// The lease rides it out: holders' COMMANDs carry on across it.
    RiddenOut,
    /// It may outlast what the lease rides out; `ttl` is the shortest whole
    /// number of seconds whose lease (with the same `--kill-after`) would
    /// ride it out (None: none up to the longest ttl).
    TooLong { ttl: Option<Duration> },
}

/// Whether a failover taking `estimate` is ridden out under `terms`, and if
/// not, the ttl that would ride it out.
fn failover_fit(estimate: Duration, terms: Terms) -> FailoverFit {
    if estimate < terms.rides_out() {
        return FailoverFit::RiddenOut;
    }
    // A lease rides out less than its ttl: no ttl up to the estimate will do.
    let ttl = (estimate.as_secs().max(1)..=LONGEST_TTL_SECS)
        .map(Duration::from_secs)
        .find(|&ttl| estimate < rides_out(ttl, terms.kill_after));
    FailoverFit::TooLong { ttl }
}

/// How a topology fails over: the setting that detects a failed master, its
/// value, and the line that says what was read.
struct Failover {
    setting: &'static str,
    detection: Duration,
    seen: String,
}

/// The topology's failover timing against the outage the lease rides out: a
/// failover that outlasts it stops every holder's COMMAND (exit 70) though
/// the lock itself may have reached the new master.
pub(super) fn failover(
    session: &mut StandaloneSession,
    reach: Reach,
    terms: Terms,
) -> (Verdict, String) {
    let rides = tenths(terms.rides_out());
    let lease = terms.describe();
    let timing = match reach {
        Reach::Single => {
            return (
                Verdict::Ok,
                format!(
                    "no Sentinel or Cluster: no automatic failover; the lease rides out server outages up to {rides} ({lease})"
                ),
            );
        }
        Reach::Sentinel => sentinel_failover(session),
        Reach::Cluster => cluster_failover(session),
    };
    let timing = match timing {
        Ok(timing) => timing,
        Err(why) => {
            return (
                Verdict::Unknown,
                format!("{why}: the failover timing is unknown"),
            );
        }
    };
    let estimate = timing.detection + ELECTION_AND_PROMOTION;
    let seen = format!(
        "{}; a failover takes about {} (an estimate: {} plus ~{}s of election and promotion)",
        timing.seen,
        tenths(estimate),
        timing.setting,
        ELECTION_AND_PROMOTION.as_secs()
    );
    match failover_fit(estimate, terms) {
        FailoverFit::RiddenOut => (
            Verdict::Ok,
            format!("{seen}, within the {rides} outage the lease rides out ({lease})"),
        ),
        FailoverFit::TooLong { ttl } => {
            let longer = match ttl {
                Some(ttl) => format!("use --ttl {}s or more, or ", ttl.as_secs()),
                None => String::new(),
            };
            (
                Verdict::Warn,
                format!(
                    "{seen}, longer than the {rides} outage the lease rides out ({lease}): a holder's COMMAND may be stopped (exit 70) by a failover; {longer}a shorter {}",
                    timing.setting
                ),
            )
        }
    }
}

/// Sentinel: `down-after-milliseconds` (how long the master must be silent
/// before the sentinels act) and `failover-timeout`, as a sentinel holds them.
fn sentinel_failover(session: &StandaloneSession) -> Result<Failover, String> {
    let master = session.sentinel_master()?;
    let ms = |name: &str| {
        master
            .get(name)
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or_else(|| format!("SENTINEL MASTER names no {name}"))
    };
    let down_after = ms("down-after-milliseconds")?;
    let timeout = ms("failover-timeout")?;
    Ok(Failover {
        setting: "down-after-milliseconds",
        detection: Duration::from_millis(down_after),
        seen: format!(
            "Sentinel: down-after-milliseconds {down_after}, failover-timeout {timeout} (a failover that fails is tried again after twice that)"
        ),
    })
}

/// Cluster: `cluster-node-timeout` (how long a master must be unreachable
/// before its replicas take over), on the node the session reached.
fn cluster_failover(session: &mut StandaloneSession) -> Result<Failover, String> {
    let node = session.address();
    let value = session.config_get("cluster-node-timeout")?;
    let timeout: u64 = value
        .parse()
        .map_err(|_| format!("cluster-node-timeout {value:?} is no number"))?;
    Ok(Failover {
        setting: "cluster-node-timeout",
        detection: Duration::from_millis(timeout),
        seen: format!("Cluster: cluster-node-timeout {timeout} (on {node})"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_ride_out_a_failover_of_up_to_17_4_seconds() {
        let secs = Duration::from_secs;
        let defaults = Terms {
            ttl: secs(30),
            kill_after: None,
        };
        assert_eq!(tenths(defaults.rides_out()), "17.4s");
        assert_eq!(defaults.describe(), "--ttl 30s, --kill-after 10s");
        // Sentinel's test topology: down-after 1 s.
        assert_eq!(failover_fit(secs(4), defaults), FailoverFit::RiddenOut);
        // Cluster's default node timeout, 15 s: 18 s is more than 17.4 s.
        assert_eq!(
            failover_fit(secs(18), defaults),
            FailoverFit::TooLong {
                ttl: Some(secs(31))
            }
        );
        // Sentinel's default down-after, 30 s.
        assert_eq!(
            failover_fit(secs(33), defaults),
            FailoverFit::TooLong {
                ttl: Some(secs(48))
            }
        );
    }

    #[test]
    fn the_ttl_suggested_is_the_shortest_that_rides_the_failover_out() {
        let secs = Duration::from_secs;
        for (ttl, kill_after, estimate) in [
            (secs(3), None, secs(4)),
            (secs(3), Some(secs(1)), secs(4)),
            (secs(30), Some(Duration::ZERO), secs(40)),
            (secs(30), Some(secs(20)), secs(18)),
            (secs(60), None, secs(3600)),
        ] {
            let terms = Terms { ttl, kill_after };
            let FailoverFit::TooLong {
                ttl: Some(suggested),
            } = failover_fit(estimate, terms)
            else {
                panic!("{terms:?} rides out {estimate:?}");
            };
            assert_eq!(suggested.subsec_nanos(), 0);
            assert!(estimate < rides_out(suggested, kill_after), "{suggested:?}");
            let shorter = suggested - secs(1);
            assert!(estimate >= rides_out(shorter, kill_after), "{shorter:?}");
        }
        // --ttl 3s: --kill-after is cut to 1s, the lease rides out 1.7s.
        let short = Terms {
            ttl: secs(3),
            kill_after: None,
        };
        assert_eq!(short.describe(), "--ttl 3s, --kill-after 1s");
        assert_eq!(tenths(short.rides_out()), "1.7s");
        assert_eq!(
            failover_fit(secs(4), short),
            FailoverFit::TooLong { ttl: Some(secs(7)) }
        );
    }
}
