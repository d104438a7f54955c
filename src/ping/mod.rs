//! Pings to a monitor (`--ping URL`), in healthchecks.io's protocol, which
//! Cronitor and others also accept: `URL/start?rid=ID` when the lock is
//! taken, `URL/<exit status>?rid=ID` when the run ends (0 success, anything
//! else failure: the monitor's own reading of the number), `URL/log?rid=ID`
//! for a run skipped because the lock was taken, with rlock's one-line cause
//! as the body.
//!
//! A ping is a courtesy to the operator, never part of the run: the pings of
//! a run go out in order from one thread, so `start` never delays COMMAND;
//! each is bounded ([`PING_LIMIT`]), and [`Pinger::finish`] waits for what is
//! left with a bound of its own, which also ends the retries. A ping that fails is one `-v` line; it never
//! fails a run or changes its exit status.

mod deliver;
mod http;
mod run_id;
mod tls;
mod url;

use std::path::Path;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use self::url::{Endpoint, PingUrl};
pub use deliver::{ATTEMPT_LIMIT, FINISH_LIMIT, PING_LIMIT};
pub use run_id::RunId;

use crate::error::Result;
use deliver::Cutoff;
use tls::Trust;

/// The most of rlock's one-line cause a ping carries, in bytes (cut on a
/// character boundary).
pub const BODY_LIMIT: usize = 10_000;

/// What became of one ping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The monitor answered 2xx.
    Delivered,
    /// Not delivered: the cause, as the `-v` line gives it.
    Failed(String),
}

/// What [`Pinger::finish`] found: the outcomes of the pings that ended, in
/// the order they were sent, and how many were still under way at its bound.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finished {
    pub outcomes: Vec<Outcome>,
    pub unfinished: usize,
}

/// One ping waiting for the sending thread.
struct Job {
    endpoint: Endpoint,
    body: Vec<u8>,
}

/// The sending thread's ends: where jobs go, where outcomes come back.
struct Queue {
    jobs: Sender<Job>,
    outcomes: Receiver<Outcome>,
    sent: usize,
}

/// A run's pings to one monitor URL.
pub struct Pinger {
    url: PingUrl,
    trust: Trust,
    /// Started with the first ping; taken by [`Pinger::finish`].
    queue: Mutex<Option<Queue>>,
    /// Set by [`Pinger::finish`]: by when the sending thread must be done.
    cutoff: Arc<Cutoff>,
}

impl std::fmt::Debug for Pinger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Pinger").field(&self.display()).finish()
    }
}

impl Pinger {
    /// A pinger for `url`; `cacert` (`--cacert`) is the trust of an
    /// `https://` URL instead of the system's CA store, read now (a file
    /// that cannot be read is a usage error) and ignored for `http://`.
    pub fn new(url: PingUrl, cacert: Option<&Path>) -> Result<Pinger> {
        let trust = if url.is_https() {
            Trust::new(cacert)?
        } else {
            Trust::new(None)?
        };
        Ok(Pinger {
            url,
            trust,
            queue: Mutex::new(None),
            cutoff: Arc::default(),
        })
    }

    /// The URL as messages show it (no credentials, no query).
    pub fn display(&self) -> String {
        self.url.display()
    }

    /// `URL/start?rid=ID`: the lock is taken. Sent in the background.
    pub fn start(&self, rid: &RunId) {
        self.send("start", rid, "");
    }

    /// `URL/<status>?rid=ID` with `body`: the run ended with exit status
    /// `status` (0 is success to the monitor, anything else failure). Sent
    /// in the background, after the pings before it.
    pub fn exit(&self, status: u8, rid: &RunId, body: &str) {
        self.send(&status.to_string(), rid, body);
    }

    /// `URL/log?rid=ID` with `body`: an event that is neither success nor
    /// failure (a run skipped because the lock was taken).
    pub fn log(&self, rid: &RunId, body: &str) {
        self.send("log", rid, body);
    }

    /// Waits until every ping sent has ended, or `bound` has passed: the
    /// pings left are tried within it, and one with another behind it is
    /// not tried again. Pings sent after this are dropped.
    pub fn finish(&self, bound: Duration) -> Finished {
        let end = Instant::now() + bound;
        self.cutoff.set(end);
        let queue = self.queue.lock().unwrap_or_else(|e| e.into_inner()).take();
        let Some(Queue {
            jobs,
            outcomes,
            sent,
        }) = queue
        else {
            return Finished {
                outcomes: Vec::new(),
                unfinished: 0,
            };
        };
        // The thread ends once its queue is empty and closed.
        drop(jobs);
        let mut done = Vec::with_capacity(sent);
        while done.len() < sent {
            let left = end.saturating_duration_since(Instant::now());
            match outcomes.recv_timeout(left) {
                Ok(outcome) => done.push(outcome),
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
            }
        }
        Finished {
            unfinished: sent - done.len(),
            outcomes: done,
        }
    }

    fn send(&self, endpoint: &str, rid: &RunId, body: &str) {
        if self.cutoff.at().is_some() {
            return;
        }
        let job = Job {
            endpoint: self.url.endpoint(endpoint, rid),
            body: truncate(body, BODY_LIMIT).as_bytes().to_vec(),
        };
        let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        if queue.is_none() {
            *queue = Some(self.spawn());
        }
        if let Some(queue) = queue.as_mut() {
            queue.sent += 1;
            self.cutoff.queued();
            if let Err(mpsc::SendError(job)) = queue.jobs.send(job) {
                // The thread could not be started: say so as a failed ping.
                report_failure(&job.endpoint, "cannot start a thread to send it");
                queue.sent -= 1;
                self.cutoff.done();
            }
        }
    }

    /// The sending thread: takes the run's pings in order, one at a time.
    fn spawn(&self) -> Queue {
        let (jobs, incoming) = mpsc::channel::<Job>();
        let (done, outcomes) = mpsc::channel();
        let trust = self.trust.clone();
        let cutoff = Arc::clone(&self.cutoff);
        let _ = std::thread::Builder::new()
            .name("ping".into())
            .spawn(move || {
                for job in incoming {
                    let sent = deliver::deliver(&job.endpoint, &job.body, &trust, &cutoff);
                    cutoff.done();
                    let outcome = match sent {
                        Ok(()) => Outcome::Delivered,
                        Err(cause) => {
                            report_failure(&job.endpoint, &cause);
                            Outcome::Failed(cause)
                        }
                    };
                    let _ = done.send(outcome);
                }
            });
        Queue {
            jobs,
            outcomes,
            sent: 0,
        }
    }
}

fn report_failure(endpoint: &Endpoint, cause: &str) {
    crate::report::verbose(|| format!("ping to {}: {cause}", endpoint.display));
}

/// `text` cut to at most `limit` bytes, on a character boundary.
fn truncate(text: &str, limit: usize) -> &str {
    let mut end = limit.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_is_cut_on_a_character_boundary() {
        assert_eq!(truncate("abc", 10), "abc");
        assert_eq!(truncate("aé", 2), "a");
        assert_eq!(truncate("aé", 3), "aé");
    }
}
