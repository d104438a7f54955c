//! Where a session's connection goes: a fixed server, the master the
//! Sentinels name (asked again before a call, so a failover is followed), or
//! the Cluster node that serves the lock's slot (first a seed, then wherever
//! MOVED points).
//!
//! Opening connections with the URL's credentials, db and TLS settings lives
//! here; retrying and following redirects within one call is `call.rs`.

use std::time::{Duration, Instant};

use redis::{Client, Connection, ErrorKind, RedisError};

use super::StandaloneSession;
use crate::backend::url::{ServerSpec, host_port};
use crate::error::{Error, Result};

/// Where connections go.
pub(super) enum Source {
    Fixed(Client),
    /// A fixed server whose password is fetched (`--password-file`,
    /// `--password-command`) for each connection.
    Rotating(ServerSpec),
    /// Asked anew at every connection, so a failover is followed.
    Sentinel(ServerSpec),
    /// Cluster seeds; each session follows MOVED to its lock's node.
    Cluster(ServerSpec),
}

/// A client for `info`, over TLS with `tls` when given: an unusable URL or
/// certificate is a usage error.
pub(super) fn client_for(
    info: redis::ConnectionInfo,
    tls: &Option<redis::TlsCertificates>,
) -> Result<Client> {
    match tls {
        Some(certs) => Client::build_with_tls(info, certs.clone()).map_err(|e| {
            Error::usage(format!(
                "cannot use the TLS certificates given: {}",
                e.detail().unwrap_or("not valid PEM")
            ))
        }),
        None => Client::open(info).map_err(|_| {
            Error::usage("invalid --url: expected redis://[user:password@]host[:port][/db]")
        }),
    }
}

impl Source {
    pub(super) fn client(&self, limit: Duration) -> redis::RedisResult<Client> {
        match self {
            Source::Fixed(client) => Ok(client.clone()),
            Source::Rotating(spec) => {
                let info = spec.info.clone().set_redis_settings(credentials(spec)?);
                client_for(info, &spec.tls).map_err(|e| {
                    RedisError::from((ErrorKind::InvalidClientConfig, "TLS", e.to_string()))
                })
            }
            Source::Sentinel(spec) => master_client(spec, limit),
            Source::Cluster(spec) => node_client(spec, &spec.cluster.as_ref().expect("seeds")[0]),
        }
    }
}

/// The first cluster seed that accepts a connection.
fn first_seed(spec: &ServerSpec, limit: Duration) -> redis::RedisResult<(String, Connection)> {
    let mut last = None;
    for seed in spec.cluster.as_ref().expect("seeds") {
        match node_client(spec, seed).and_then(|c| c.get_connection_with_timeout(limit)) {
            Ok(con) => return Ok((seed.clone(), con)),
            Err(err) => last = Some(err),
        }
    }
    Err(last.unwrap_or_else(|| RedisError::from((ErrorKind::Io, "no seed"))))
}

/// A client for the server at `addr` (`host:port`: a cluster node, the
/// master the sentinels name) with the URL's credentials, db and TLS settings.
pub(super) fn node_client(spec: &ServerSpec, addr: &str) -> redis::RedisResult<Client> {
    let scheme = if spec.is_tls() { "rediss" } else { "redis" };
    let info =
        redis::IntoConnectionInfo::into_connection_info(format!("{scheme}://{addr}").as_str())?;
    let info = info.set_redis_settings(credentials(spec)?);
    client_for(info, &spec.tls)
        .map_err(|e| RedisError::from((ErrorKind::InvalidClientConfig, "TLS", e.to_string())))
}

/// The URL's credentials and db, with the password fetched again from
/// `--password-file` or `--password-command` when one is given.
fn credentials(spec: &ServerSpec) -> redis::RedisResult<redis::RedisConnectionInfo> {
    let settings = spec.info.redis_settings().clone();
    match &spec.password_from {
        None => Ok(settings),
        Some(from) => from
            .fetch()
            .map(|password| settings.set_password(password))
            .map_err(|cause| {
                RedisError::from((ErrorKind::InvalidClientConfig, PASSWORD_FILE, cause))
            }),
    }
}

/// The description of an error fetching the password at a connection.
pub(super) const PASSWORD_FILE: &str = "password file";

/// Asks the sentinels, in order, where the master is, and opens a client for it
/// with the URL's credentials, db and TLS settings.
fn master_client(spec: &ServerSpec, limit: Duration) -> redis::RedisResult<Client> {
    node_client(spec, &master_address(spec, limit)?)
}

/// The master's `host:port` as the first sentinel that answers names it.
fn master_address(spec: &ServerSpec, limit: Duration) -> redis::RedisResult<String> {
    let sentinel = spec
        .sentinel
        .as_ref()
        .expect("a Sentinel source has sentinels");
    let scheme = if sentinel.tls { "rediss" } else { "redis" };
    let mut last = None;
    for address in &sentinel.sentinels {
        let url = format!("{scheme}://{address}");
        let asked =
            redis::IntoConnectionInfo::into_connection_info(url.as_str()).and_then(|info| {
                // Sentinels are asked without the master's credentials.
                let client = match &spec.tls {
                    Some(certs) => Client::build_with_tls(info, certs.clone())?,
                    None => Client::open(info)?,
                };
                let mut con = client.get_connection_with_timeout(limit)?;
                con.set_read_timeout(Some(limit))?;
                redis::cmd("SENTINEL")
                    .arg("get-master-addr-by-name")
                    .arg(&sentinel.master)
                    .query::<Option<(String, u16)>>(&mut con)
            });
        match asked {
            Ok(Some((host, port))) => return Ok(host_port(&host, port)),
            Ok(None) => {
                last = Some(RedisError::from((
                    ErrorKind::Server(redis::ServerErrorKind::ResponseError),
                    "no such master",
                    format!("no sentinel knows a master named {}", sentinel.master),
                )))
            }
            Err(err) => last = Some(err),
        }
    }
    Err(last.unwrap_or_else(|| RedisError::from((ErrorKind::Io, "no sentinel"))))
}

/// Sentinel: how long the sentinels' answer is trusted before a call asks
/// again (a connection opened just now needs no second question).
const MASTER_RECHECK: Duration = Duration::from_millis(100);

impl StandaloneSession {
    /// The connection, opened within `limit` if needed, with replies bounded by `limit`.
    pub(super) fn con(&mut self, limit: Duration) -> redis::RedisResult<&mut Connection> {
        let limit = limit.max(Duration::from_millis(1));
        let start = Instant::now();
        if self.con.is_none() {
            let opened = match (&*self.source, &self.node) {
                (Source::Cluster(spec), Some(node)) => {
                    match node_client(spec, node).and_then(|c| c.get_connection_with_timeout(limit))
                    {
                        Ok(con) => con,
                        // The node is gone (a failover): ask the seeds again;
                        // MOVED leads to the slot's new master.
                        Err(_) => {
                            let (seed, con) = first_seed(spec, limit)?;
                            self.node = Some(seed);
                            con
                        }
                    }
                }
                (Source::Cluster(spec), None) => {
                    let (seed, con) = first_seed(spec, limit)?;
                    self.node = Some(seed);
                    con
                }
                (Source::Sentinel(spec), _) => {
                    let address = master_address(spec, limit)?;
                    let con = node_client(spec, &address)?.get_connection_with_timeout(limit)?;
                    if let Some(was) = self.master.as_ref().filter(|was| **was != address) {
                        crate::report::verbose(|| {
                            format!(
                                "the sentinels name a new master, {address} (was {was}): following it"
                            )
                        });
                        self.failed_over = Some((was.clone(), address.clone()));
                    }
                    self.master = Some(address);
                    self.master_checked = Some(Instant::now());
                    con
                }
                (source, _) => source.client(limit)?.get_connection_with_timeout(limit)?,
            };
            self.con = Some(opened);
            self.connections += 1;
        }
        // Connecting and the reply share the limit, but the reply keeps half
        // of it at least (asking the sentinels first, a dead seed tried
        // first): a call takes at most one and a half times the limit.
        let limit = limit.saturating_sub(start.elapsed()).max(limit / 2);
        let con = self.con.as_mut().expect("connection is open");
        let set = con
            .set_read_timeout(Some(limit))
            .and_then(|()| con.set_write_timeout(Some(limit)));
        if let Err(err) = set {
            self.con = None;
            return Err(err);
        }
        Ok(self.con.as_mut().expect("connection is open"))
    }

    /// Sentinel: before a call that reads or writes the lock, asks the
    /// sentinels which server is the master now. After a failover the old
    /// master may still accept writes for seconds (the sentinels demote it
    /// lazily); a holder renewing there, or a waiter acquiring there, would
    /// hold a lock the new master does not know. So the connection follows
    /// the master the sentinels name: a hold that reached the new master
    /// carries on; one that did not is found gone (exit 70).
    pub(super) fn follow_master(&mut self, limit: Duration) {
        let Source::Sentinel(spec) = &*self.source else {
            return;
        };
        if self.con.is_none()
            || self
                .master_checked
                .is_some_and(|t| t.elapsed() < MASTER_RECHECK)
        {
            return;
        }
        match master_address(spec, limit.min(self.spec.timeout)) {
            // The connection is reopened there (`con`, which says so).
            Ok(address) if Some(&address) != self.master.as_ref() => {
                self.con = None;
                self.sub = None;
            }
            Ok(_) => self.master_checked = Some(Instant::now()),
            // No sentinel answers: none can be failing the master over
            // either. Carry on with the master last named.
            Err(_) => {}
        }
    }
}
