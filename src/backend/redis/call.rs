//! One call to the server, bounded in time: each try within a limit, tried
//! again after a stop and continue (EINTR), through a Sentinel failover (for
//! up to [`FAILOVER_WINDOW`]), and after Cluster MOVED, ASK and TRYAGAIN
//! replies; and what a call that failed for good becomes (an ACL refusal, a
//! lock key of another type, the server unavailable).

use std::time::{Duration, Instant};

use redis::{Connection, ConnectionAddr, ErrorKind, RedisError};

use super::StandaloneSession;
use super::diagnose::{self, Contact, Endpoint, Stage, Transport, acl_denial, failing_over};
use super::topology::{Source, node_client};
use crate::error::{Cause, Error, Result};
use crate::lock::name::LockId;

/// Most MOVED or ASK redirections one call follows at once; more are
/// followed [`REDIRECT_PAUSE`] apart within the call's limit.
const MAX_REDIRECTS: usize = 5;

/// Pause between redirections past [`MAX_REDIRECTS`]: while a reshard sets
/// a slot's new owner on each node in turn, two nodes may each name the
/// other for a moment.
const REDIRECT_PAUSE: Duration = Duration::from_millis(20);

/// How often a call interrupted by a stop and continue is tried again.
const INTERRUPTED_RETRIES: usize = 2;

/// How long a call behind Sentinel keeps asking for the master during a
/// failover before it gives up (exit 69).
const FAILOVER_WINDOW: Duration = Duration::from_secs(10);
/// Pause between two tries during a failover.
pub(super) const FAILOVER_PAUSE: Duration = Duration::from_millis(100);

/// Whether a request may be sent again when its reply did not come (a stop
/// and continue cut the read short, or a Sentinel failover dropped the
/// connection): the server may have run it already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Retry {
    /// Running it twice does what running it once does (a read, a renewal,
    /// an acquire by the token that already holds): it may be sent again.
    Idempotent,
    /// Running it twice may do it twice (a release decrements a hold
    /// count): sent once. A redirection that did not run it is still followed.
    Never,
}

/// True for a call cut short by EINTR.
pub(super) fn interrupted(err: &RedisError) -> bool {
    std::error::Error::source(err)
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .is_some_and(|io| io.kind() == std::io::ErrorKind::Interrupted)
        || err.to_string().contains("Interrupted system call")
}

impl StandaloneSession {
    /// Runs `op`, each try within `limit`. A socket call with a timeout fails
    /// with EINTR when the process is stopped and continued (signal(7)); a
    /// [`Retry::Idempotent`] call is then tried again on a fresh connection.
    /// Behind Sentinel, such a call also rides out a failover: it asks the
    /// sentinels for the master again for up to [`FAILOVER_WINDOW`].
    pub(super) fn call<T>(
        &mut self,
        lock: &LockId,
        limit: Duration,
        retry: Retry,
        op: impl Fn(&mut Connection) -> redis::RedisResult<T>,
    ) -> Result<T> {
        self.follow_master(limit);
        let window = match *self.source {
            Source::Sentinel(_) => limit.max(FAILOVER_WINDOW),
            Source::Fixed(_) | Source::Rotating(_) | Source::Cluster(_) => limit,
        };
        self.call_within(lock, limit, window, retry, op)
    }

    /// [`call`](Self::call), giving up after `window` in all.
    pub(super) fn call_within<T>(
        &mut self,
        lock: &LockId,
        limit: Duration,
        window: Duration,
        retry: Retry,
        op: impl Fn(&mut Connection) -> redis::RedisResult<T>,
    ) -> Result<T> {
        let deadline = Instant::now() + window;
        let mut retries = 0;
        let mut redirects = 0;
        loop {
            match self.con(limit).and_then(&op) {
                Ok(value) => {
                    self.answered = true;
                    return Ok(value);
                }
                Err(err)
                    if retry == Retry::Idempotent
                        && retries < INTERRUPTED_RETRIES
                        && interrupted(&err) =>
                {
                    self.con = None;
                    retries += 1;
                }
                Err(err)
                    if retry == Retry::Idempotent
                        && matches!(*self.source, Source::Sentinel(_))
                        && failing_over(&err)
                        && Instant::now() + FAILOVER_PAUSE < deadline =>
                {
                    self.con = None;
                    std::thread::sleep(FAILOVER_PAUSE);
                }
                // Cluster: the lock's slot is on another node. MOVED: go there
                // from now on; ASK (the slot is being moved and our keys are
                // already there): this one command there, after ASKING. Neither
                // ran the command, so even a release may be sent again.
                Err(err)
                    if err.redirect_node().is_some()
                        && (redirects < MAX_REDIRECTS
                            || Instant::now() + REDIRECT_PAUSE < deadline) =>
                {
                    if redirects >= MAX_REDIRECTS {
                        std::thread::sleep(REDIRECT_PAUSE);
                    }
                    redirects += 1;
                    let addr = err
                        .redirect_node()
                        .map(|(a, _)| a.to_owned())
                        .unwrap_or_default();
                    if err.kind() == ErrorKind::Server(redis::ServerErrorKind::Ask) {
                        let Some(asked) = self.asking(&addr, limit, &op) else {
                            return Err(self.fail(lock, err, limit));
                        };
                        match asked {
                            Ok(value) => return Ok(value),
                            Err(err) if err.redirect_node().is_some() => continue,
                            Err(err) => return Err(self.fail(lock, err, limit)),
                        }
                    }
                    self.node = Some(addr);
                    self.con = None;
                }
                // Cluster: the keys are split between two nodes mid-migration.
                Err(err)
                    if err.code() == Some("TRYAGAIN")
                        && Instant::now() + FAILOVER_PAUSE < deadline =>
                {
                    std::thread::sleep(FAILOVER_PAUSE);
                }
                Err(err) => return Err(self.fail(lock, err, limit)),
            }
        }
    }

    /// `op` once on cluster node `addr` after ASKING (its slot is being moved
    /// there, and the lock's keys already are); None off a cluster.
    fn asking<T>(
        &self,
        addr: &str,
        limit: Duration,
        op: &impl Fn(&mut Connection) -> redis::RedisResult<T>,
    ) -> Option<redis::RedisResult<T>> {
        let Source::Cluster(spec) = &*self.source else {
            return None;
        };
        Some(
            node_client(spec, addr)
                .and_then(|c| c.get_connection_with_timeout(limit))
                .and_then(|mut con| {
                    con.set_read_timeout(Some(limit))?;
                    redis::cmd("ASKING").query::<()>(&mut con)?;
                    op(&mut con)
                }),
        )
    }

    /// Maps a failed call to an error, dropping the connection when it may be out of sync.
    pub(super) fn fail(&mut self, lock: &LockId, err: RedisError, limit: Duration) -> Error {
        // A hold an earlier rlock keeps, which force.lua leaves to it.
        if err.code() == Some("EARLIER") {
            return Error::from(Cause::ForeignKey(
                err.detail()
                    .unwrap_or("the lock is held by an earlier rlock version")
                    .to_owned(),
            ))
            .in_lock(&lock.name);
        }
        if err.code() == Some("WRONGTYPE") {
            return Error::from(Cause::ForeignKey(
                err.detail()
                    .unwrap_or("a key of this lock has another type")
                    .to_owned(),
            ))
            .in_lock(&lock.name);
        }
        if !matches!(err.kind(), ErrorKind::Server(_)) || failing_over(&err) {
            self.con = None;
        }
        self.unavailable_for(lock, &err, limit)
    }

    /// The server refused or failed us on `lock`: an ACL refusal names
    /// what the user lacks, anything else says what went wrong.
    pub(super) fn unavailable_for(
        &self,
        lock: &LockId,
        err: &RedisError,
        limit: Duration,
    ) -> Error {
        match acl_denial(err, lock) {
            Some(cause) => Error::from(Cause::Unavailable {
                server: self.spec.display.clone(),
                cause,
            })
            .in_lock(&lock.name),
            None => self.unavailable(err, limit).in_lock(&lock.name),
        }
    }

    /// The error for `err`, met within `limit` on this session's server.
    pub(super) fn unavailable(&self, err: &RedisError, limit: Duration) -> Error {
        let endpoint = match self.spec.info.addr() {
            ConnectionAddr::Unix(path) => Endpoint::Socket(path.as_path()),
            _ if matches!(*self.source, Source::Fixed(_) | Source::Rotating(_)) => {
                Endpoint::FixedTcp
            }
            _ => Endpoint::Found,
        };
        let contact = Contact {
            server: &self.spec.display,
            endpoint,
            transport: if self.spec.is_tls() {
                Transport::Tls
            } else {
                Transport::Plain
            },
            stage: if self.answered {
                Stage::Answered
            } else {
                Stage::FirstContact
            },
            db: self.spec.info.redis_settings().db(),
            user_without_password: {
                let settings = self.spec.info.redis_settings();
                settings.username().is_some()
                    && settings.password().is_none()
                    && self.spec.password_from.is_none()
            },
            password_from: self.spec.password_from.as_ref(),
        };
        diagnose::unavailable(err, limit, &contact)
    }
}
