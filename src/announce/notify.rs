//! systemd's view of a run (sd_notify(3)): STATUS= says what it waits for
//! or holds; READY=1 goes out once the lock is held (or at once, with
//! `--notify-ready=start`), with EXTEND_TIMEOUT_USEC= until then so a long
//! wait does not fail the unit's start; with a watchdog, WATCHDOG=1 follows
//! each sign of progress (an answer while waiting, a confirmed renewal
//! while holding) and nothing else, so a wedged rlock is restarted.

use std::sync::Mutex;
use std::time::Duration;

use super::{Event, Sink, holding};
use crate::config::NotifySpec;
use crate::report;
use crate::sys::notify::NotifySocket;

/// How often a waiting run refreshes STATUS= at least (its "for 3m").
const STATUS_EVERY: Duration = Duration::from_secs(30);

/// Slack on top of the start timeout's extension, for a try that takes its
/// whole reply bound after the longest block.
const EXTEND_SLACK: Duration = Duration::from_secs(30);

/// The systemd sink.
pub(super) struct Notifier {
    socket: NotifySocket,
    watchdog: Option<Duration>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// READY=1 went out.
    ready: bool,
    /// The STATUS= of the hold, once held.
    holding: Option<String>,
    /// The whole seconds renewals have failed for, as STATUS= last said
    /// (None while they get through).
    failing_for: Option<u64>,
    /// A send failed (said once, with -v).
    failed: bool,
}

impl Notifier {
    /// Opens the socket `spec` names (a failure is a -v line: rlock runs on
    /// unannounced) and sends READY=1 now if asked for at start.
    pub(super) fn open(spec: &NotifySpec) -> Option<Notifier> {
        let socket = match NotifySocket::open(&spec.socket) {
            Ok(socket) => socket,
            Err(err) => {
                report::verbose(|| format!("NOTIFY_SOCKET cannot be used ({err})"));
                return None;
            }
        };
        let notifier = Notifier {
            socket,
            watchdog: spec.watchdog,
            state: Mutex::new(State::default()),
        };
        if spec.ready_at_start {
            let mut state = notifier.state();
            state.ready = true;
            notifier.send(&mut state, "READY=1\nSTATUS=started");
        }
        Some(notifier)
    }

    /// The longest a waiting run goes without an answer from the server:
    /// half the watchdog's interval (sd_watchdog_enabled(3) advises pinging
    /// that often), and STATUS= is refreshed at least every 30 s.
    pub(super) fn answer_every(&self) -> Duration {
        self.watchdog
            .map_or(STATUS_EVERY, |w| (w / 2).min(STATUS_EVERY))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn send(&self, state: &mut State, message: &str) {
        if let Err(err) = self.socket.send(message)
            && !state.failed
        {
            state.failed = true;
            report::verbose(|| format!("cannot notify systemd ({err})"));
        }
    }

    /// After a confirmed renewal: WATCHDOG=1, and the hold's STATUS= again
    /// after failed ones.
    fn renewed(&self) {
        let mut state = self.state();
        let mut message = Vec::new();
        if state.failing_for.take().is_some()
            && let Some(holding) = &state.holding
        {
            message.push(format!("STATUS={holding}"));
        }
        if self.watchdog.is_some() {
            message.push("WATCHDOG=1".to_owned());
        }
        if !message.is_empty() {
            self.send(&mut state, &message.join("\n"));
        }
    }

    /// While renewals fail: the hold's STATUS= with how long and why, once
    /// a second (no WATCHDOG=1: no progress).
    fn failing(&self, for_: Duration, cause: &str) {
        let mut state = self.state();
        let seconds = for_.as_secs();
        if state.failing_for == Some(seconds) {
            return;
        }
        state.failing_for = Some(seconds);
        let holding = state.holding.clone().unwrap_or_default();
        let status = format!(
            "{holding}; renewals failing for {} ({cause})",
            humantime::format_duration(Duration::from_secs(seconds))
        );
        self.send(&mut state, &format!("STATUS={}", one_line(&status)));
    }

    /// A message while waiting: `status`, a start timeout pushed past the
    /// next refresh (until READY=1), and WATCHDOG=1 after an `answer`.
    fn waiting(&self, status: &str, answer: bool) {
        let mut state = self.state();
        let mut message = format!("STATUS={}", one_line(status));
        if !state.ready {
            let extend = self.answer_every() * 3 + EXTEND_SLACK;
            message.push_str(&format!("\nEXTEND_TIMEOUT_USEC={}", extend.as_micros()));
        }
        if answer && self.watchdog.is_some() {
            message.push_str("\nWATCHDOG=1");
        }
        self.send(&mut state, &message);
    }
}

impl Sink for Notifier {
    fn tell(&self, event: &Event<'_>) {
        match event {
            Event::Waiting { status } => self.waiting(status, true),
            Event::Unreachable { lock, for_ } => {
                let status = format!(
                    "waiting for {}: server unreachable for {}",
                    report::sanitize(lock),
                    humantime::format_duration(Duration::from_secs(for_.as_secs()))
                );
                self.waiting(&status, false);
            }
            Event::Held(held) => {
                let mut state = self.state();
                let status = one_line(&holding(held));
                let mut message = format!("STATUS={status}");
                state.holding = Some(status);
                if !state.ready {
                    state.ready = true;
                    message.push_str("\nREADY=1");
                }
                if self.watchdog.is_some() {
                    message.push_str("\nWATCHDOG=1");
                }
                self.send(&mut state, &message);
            }
            Event::Renewed => self.renewed(),
            Event::RenewalsFailing { for_, cause } => self.failing(*for_, cause),
            Event::Lost => {
                self.send(
                    &mut self.state(),
                    "STATUS=the hold is lost; stopping COMMAND",
                );
            }
            Event::Stopping => {
                self.send(&mut self.state(), "STOPPING=1\nSTATUS=releasing");
            }
            Event::Ended(ended) => {
                let status = match (ended.skipped, ended.cause) {
                    (true, Some(cause)) => format!("not run: {cause}"),
                    (false, Some(cause)) => cause.to_owned(),
                    (_, None) => format!("exited with status {}", ended.exit.code()),
                };
                self.send(&mut self.state(), &format!("STATUS={}", one_line(&status)));
            }
        }
    }
}

/// `text` on one line: a newline would start another assignment.
fn one_line(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}
