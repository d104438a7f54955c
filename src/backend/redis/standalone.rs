//! The Redis backend itself: where its sessions connect, and opening them.

use std::sync::Arc;
use std::time::Duration;

use super::StandaloneSession;
use super::redisson::RedissonSession;
use super::topology::{Source, client_for};
use crate::backend::url::ServerSpec;
use crate::backend::{Administer, Backend, Inspect, Session};
use crate::error::Result;
use crate::lock::name::Dialect;

/// Locks on a single Redis server: a fixed one, or the master a set of
/// Sentinels names at each connection.
pub struct Standalone {
    source: Arc<Source>,
    pub(super) spec: ServerSpec,
    /// The layout of every lock its sessions are asked about.
    dialect: Dialect,
}

impl Standalone {
    /// A backend for `spec`, its locks stored in `dialect`; does not connect yet.
    pub fn new(spec: ServerSpec, dialect: Dialect) -> Result<Self> {
        let source = if spec.sentinel.is_some() {
            Source::Sentinel(spec.clone())
        } else if spec.cluster.is_some() {
            Source::Cluster(spec.clone())
        } else if spec.password_from.is_some() {
            Source::Rotating(spec.clone())
        } else {
            Source::Fixed(client_for(spec.info.clone(), &spec.tls)?)
        };
        Ok(Standalone {
            source: Arc::new(source),
            spec,
            dialect,
        })
    }
}

impl Backend for Standalone {
    fn server(&self) -> &str {
        &self.spec.display
    }

    fn connect(&self) -> Result<Box<dyn Session>> {
        Ok(self.connect_within(self.spec.timeout)?)
    }

    fn inspect(&self) -> Result<Box<dyn Inspect>> {
        Ok(self.connect_within(self.spec.timeout)?)
    }

    fn administer(&self) -> Result<Box<dyn Administer>> {
        self.connect_within(self.spec.timeout)
    }
}

impl Standalone {
    /// Opens a session, connecting within `limit` (Redlock bounds a reconnect
    /// by what is left of a renewal's deadline).
    pub fn connect_within(&self, limit: Duration) -> Result<Box<dyn Administer>> {
        let session = self.open(limit)?;
        Ok(match self.dialect {
            Dialect::Rlock => Box::new(session),
            Dialect::Redisson => Box::new(RedissonSession { inner: session }),
        })
    }

    /// A session with its connection open (within `limit`).
    pub(super) fn open(&self, limit: Duration) -> Result<StandaloneSession> {
        let mut session = StandaloneSession {
            source: Arc::clone(&self.source),
            spec: self.spec.clone(),
            con: None,
            sub: None,
            node: None,
            answered: false,
            master: None,
            master_checked: None,
            failed_over: None,
            evicted_before: None,
            server_time: None,
            connections: 0,
            confirmed_on: None,
            lost: None,
            next_up: std::collections::HashMap::new(),
        };
        if let Err(err) = session.con(limit) {
            return Err(session.unavailable(&err, limit));
        }
        Ok(session)
    }
}
