//! One ping, retried a bounded number of times within a bounded time.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::http::{self, Failure};
use super::tls::Trust;
use super::url::Endpoint;

/// The most one attempt may take: connecting, the TLS handshake, sending
/// and the status line together.
/// Half the run's end wait ([`FINISH_LIMIT`]): a `start` hanging when the
/// run ends leaves the exit status time of its own.
pub const ATTEMPT_LIMIT: Duration = Duration::from_millis(2500);

/// The most one ping may take, its retries and the pauses between them
/// included (name resolution aside: the system's resolver takes no
/// deadline, which is why [`super::Pinger::finish`] takes its own bound).
pub const PING_LIMIT: Duration = Duration::from_secs(15);

/// The pauses before the second and the third attempt: a monitor that
/// answered 500 or dropped the connection gets a moment, a run is not held.
const PAUSES: [Duration; 2] = [Duration::from_millis(500), Duration::from_secs(1)];

/// The most a run waits at its end for its pings (the exit status, or a
/// slow `start` still ahead of it), the way they are retried included.
pub const FINISH_LIMIT: Duration = Duration::from_secs(5);

/// Sends `body` to `endpoint`: up to three attempts, again only after a
/// connection error, a timeout or a 5xx, all within [`PING_LIMIT`] and
/// before `cutoff` says the run has ended (then a ping with another behind
/// it is not tried again). The error is the last attempt's cause.
pub(super) fn deliver(
    endpoint: &Endpoint,
    body: &[u8],
    trust: &Trust,
    cutoff: &Cutoff,
) -> Result<(), String> {
    let end = Instant::now() + PING_LIMIT;
    let mut attempts = 0;
    loop {
        if attempts > 0 && cutoff.passed_over() {
            return Err("not tried again: the run ended and its last ping waits".into());
        }
        let deadline = cutoff
            .at()
            .map_or(end, |at| end.min(at))
            .min(Instant::now() + ATTEMPT_LIMIT);
        if deadline <= Instant::now() {
            return Err("not sent: the run's end waited no longer".into());
        }
        attempts += 1;
        let cause = match http::post(endpoint, body, trust, deadline) {
            Ok(()) => return Ok(()),
            Err(Failure::Final(cause)) => return Err(cause),
            Err(Failure::Transient(cause)) => cause,
        };
        let tries = if attempts == 1 { "attempt" } else { "attempts" };
        if cutoff.passed_over() {
            return Err(format!(
                "{cause} ({attempts} {tries}; not tried again: the run's last ping waits)"
            ));
        }
        let end = cutoff.at().map_or(end, |at| end.min(at));
        match PAUSES.get(attempts - 1).copied() {
            Some(pause) if Instant::now() + pause < end => std::thread::sleep(pause),
            _ => return Err(format!("{cause} ({attempts} {tries})")),
        }
    }
}

/// What the sending thread knows of the run's end: the instant its pings
/// must be done by, once [`super::Pinger::finish`] set it, and how many
/// pings wait or are under way.
#[derive(Default)]
pub(super) struct Cutoff {
    at: Mutex<Option<Instant>>,
    pending: AtomicUsize,
}

impl Cutoff {
    pub(super) fn set(&self, at: Instant) {
        *self.at.lock().unwrap_or_else(|e| e.into_inner()) = Some(at);
    }

    /// Once set, the run has ended: pings sent after it are dropped.
    pub(super) fn at(&self) -> Option<Instant> {
        *self.at.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The run ended and another ping waits behind this one.
    fn passed_over(&self) -> bool {
        self.at().is_some() && self.pending.load(Ordering::SeqCst) > 1
    }

    pub(super) fn queued(&self) {
        self.pending.fetch_add(1, Ordering::SeqCst);
    }

    pub(super) fn done(&self) {
        self.pending.fetch_sub(1, Ordering::SeqCst);
    }
}
