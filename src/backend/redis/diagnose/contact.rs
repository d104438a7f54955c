//! What is known about the connection an error came from.

use std::path::Path;

use crate::backend::url::PasswordFrom;

/// What is known about the connection an error came from.
pub struct Contact<'a> {
    /// `host:port`, a socket path, or a Sentinel/Cluster description.
    pub server: &'a str,
    /// Where the server was looked for.
    pub endpoint: Endpoint<'a>,
    /// Whether rlock spoke TLS.
    pub transport: Transport,
    /// Whether a reply had been read on this connection yet.
    pub stage: Stage,
    /// The database number asked for in the URL.
    pub db: i64,
    /// The URL has a user name and no password (nor REDISCLI_AUTH): often a
    /// password written where the user goes (`redis://PASSWORD@host`).
    pub user_without_password: bool,
    /// Where the password came from, when not the URL or REDISCLI_AUTH.
    pub password_from: Option<&'a PasswordFrom>,
}

/// Where the server an error came from was looked for.
#[derive(Clone, Copy)]
pub enum Endpoint<'a> {
    /// A fixed TCP server: hints may name it.
    FixedTcp,
    /// The socket path of a `unix://` server.
    Socket(&'a Path),
    /// A server found through sentinels or cluster seeds.
    Found,
}

/// Whether rlock spoke TLS.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Plain,
    Tls,
}

/// How far the connection had come when the error happened.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// No reply had been read yet: the error is about reaching the server
    /// at all (wrong port, wrong protocol).
    FirstContact,
    /// The server had answered before.
    Answered,
}

impl Contact<'_> {
    pub(super) fn fixed_tcp(&self) -> bool {
        matches!(self.endpoint, Endpoint::FixedTcp)
    }

    pub(super) fn socket(&self) -> Option<&Path> {
        match self.endpoint {
            Endpoint::Socket(path) => Some(path),
            _ => None,
        }
    }

    pub(super) fn tls(&self) -> bool {
        self.transport == Transport::Tls
    }

    pub(super) fn first_contact(&self) -> bool {
        self.stage == Stage::FirstContact
    }
}
