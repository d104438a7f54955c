//! One ping, retried a bounded number of times within a bounded time.

use std::time::{Duration, Instant};

use super::http::{self, Failure};
use super::tls::Trust;
use super::url::Endpoint;

/// The most one attempt may take: connecting, the TLS handshake, sending
/// and the status line together.
pub const ATTEMPT_LIMIT: Duration = Duration::from_secs(5);

/// The most one ping may take, its retries and the pauses between them
/// included (name resolution aside: the system's resolver takes no
/// deadline, which is why [`super::Pinger::finish`] takes its own bound).
pub const PING_LIMIT: Duration = Duration::from_secs(15);

/// The pauses before the second and the third attempt: a monitor that
/// answered 500 or dropped the connection gets a moment, a run is not held.
const PAUSES: [Duration; 2] = [Duration::from_millis(500), Duration::from_secs(1)];

/// Sends `body` to `endpoint`: up to three attempts, again only after a
/// connection error, a timeout or a 5xx, all within [`PING_LIMIT`]. The
/// error is the last attempt's cause.
pub(super) fn deliver(endpoint: &Endpoint, body: &[u8], trust: &Trust) -> Result<(), String> {
    let end = Instant::now() + PING_LIMIT;
    let mut attempts = 0;
    loop {
        let deadline = end.min(Instant::now() + ATTEMPT_LIMIT);
        attempts += 1;
        let cause = match http::post(endpoint, body, trust, deadline) {
            Ok(()) => return Ok(()),
            Err(Failure::Final(cause)) => return Err(cause),
            Err(Failure::Transient(cause)) => cause,
        };
        let pause = PAUSES.get(attempts - 1).copied();
        match pause {
            Some(pause) if Instant::now() + pause < end => std::thread::sleep(pause),
            _ => {
                let tries = if attempts == 1 { "attempt" } else { "attempts" };
                return Err(format!("{cause} ({attempts} {tries})"));
            }
        }
    }
}
