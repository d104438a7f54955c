//! Turning redis-rs errors into one truthful line a user can act on.
//!
//! redis-rs words errors for its own developers ("connection closed", a RESP
//! parse trace over several lines, a script's SHA and Lua line). rlock says
//! what happened from the user's side (nothing listening, no such socket, a
//! password needed, not a Redis server, TLS on one end only) and never shows
//! a password, a URL or script internals (those go to `-v`).

use super::keys::Keys;
use std::path::Path;
use std::time::Duration;

use redis::{ErrorKind, RedisError};

use crate::error::{Cause, Error};
use crate::name::LockId;
use crate::report;

/// What is known about the connection an error came from.
pub struct Contact<'a> {
    /// `host:port`, a socket path, or a Sentinel/Cluster description.
    pub server: &'a str,
    /// A fixed TCP server (not found through sentinels or cluster seeds):
    /// hints may name it.
    pub fixed_tcp: bool,
    /// The socket path of a `unix://` server.
    pub socket: Option<&'a Path>,
    /// Whether rlock spoke TLS.
    pub tls: bool,
    /// No reply had been read on this connection yet: the error is about
    /// reaching the server at all (wrong port, wrong protocol).
    pub first_contact: bool,
    /// The database number asked for in the URL.
    pub db: i64,
}

/// The error for `err` met within `limit`: a usage error (2) when the URL asks
/// for something the server does not have, else the server is unavailable (69).
pub fn unavailable(err: &RedisError, limit: Duration, contact: &Contact<'_>) -> Error {
    if err.detail() == Some("DB index is out of range") {
        return Error::usage(format!(
            "invalid --url: {} has no database {} (see its `databases` setting)",
            contact.server, contact.db
        ));
    }
    let server = contact.server.to_owned();
    let cause = describe(err, limit, contact);
    if is_transient(err, contact) {
        Error::from(Cause::Unreachable { server, cause })
    } else {
        Error::from(Cause::Unavailable { server, cause })
    }
}

/// Errors a restart or a failover causes, which pass on their own: nothing
/// listening yet (or the socket not there yet), a dropped connection, no
/// reply in time, a server still loading its data, a master that lost its
/// link or was demoted, a cluster slot mid-migration. On first contact a
/// dropped connection or a TLS failure means the wrong port or protocol, and
/// an unknown host stays unknown: waiting would not help.
fn is_transient(err: &RedisError, contact: &Contact<'_>) -> bool {
    if err.code().is_some_and(|c| PASSING.contains(&c)) || err.is_connection_refusal() {
        return true;
    }
    if err.is_timeout() {
        return !(contact.first_contact && contact.tls);
    }
    !contact.first_contact
        && err.is_io_error()
        && !err.to_string().contains("lookup address information")
}

/// Error replies of a server that is loading, failing over or migrating.
const PASSING: [&str; 7] = [
    "LOADING",
    "MASTERDOWN",
    "READONLY",
    "UNBLOCKED",
    "TRYAGAIN",
    "CLUSTERDOWN",
    "BUSY",
];

/// Errors a failover or restart causes on a server rlock was talking to.
pub fn failing_over(err: &RedisError) -> bool {
    err.code().is_some_and(|c| PASSING.contains(&c))
        || err.is_connection_refusal()
        || err.is_connection_dropped()
        || err.is_timeout()
        || err.is_io_error()
}

/// One line saying why `err` happened.
pub fn describe(err: &RedisError, limit: Duration, contact: &Contact<'_>) -> String {
    let limit = Duration::from_millis(u64::try_from(limit.as_millis()).unwrap_or(u64::MAX));
    let within = humantime::format_duration(limit);
    let text = err.to_string();
    let detail = err.detail().unwrap_or_default();
    if err.code() == Some("NOAUTH")
        || (err.code() == Some("ERR") && detail.contains("unauthenticated"))
    {
        return "the server needs a password: put it in the URL or in REDISCLI_AUTH".into();
    }
    if matches!(err.kind(), ErrorKind::AuthenticationFailed) || err.code() == Some("WRONGPASS") {
        return "authentication failed: wrong user name or password (check the URL or REDISCLI_AUTH)"
            .into();
    }
    if matches!(err.kind(), ErrorKind::Parse) {
        return "did not answer as a Redis server (wrong port?)".into();
    }
    if err.is_timeout() {
        return if contact.first_contact && contact.tls {
            format!("no TLS handshake within {within} (if this is a plain port, use redis://)")
        } else {
            format!("no reply within {within}")
        };
    }
    if err.is_connection_refusal() {
        if let Some(path) = contact.socket.filter(|p| !p.exists()) {
            return format!(
                "no such socket (is redis-server running with unixsocket {}?)",
                path.display()
            );
        }
        return if contact.fixed_tcp {
            format!(
                "connection refused (is redis-server running on {}?)",
                contact.server
            )
        } else {
            "connection refused".into()
        };
    }
    if text.contains("lookup address information") {
        let reason = text.rsplit(": ").next().unwrap_or_default();
        return one_line(&format!("cannot resolve the host name ({reason})"));
    }
    if err.is_connection_dropped() {
        return if contact.first_contact && !contact.tls {
            "connection closed by the server before any reply (if this is a TLS port, use rediss://)"
                .into()
        } else {
            "connection closed by the server".into()
        };
    }
    if contact.tls && text.contains("certificate") {
        return one_line(&format!(
            "TLS: {text} (check --cacert, or --cert and --key)"
        ));
    }
    if contact.tls && contact.first_contact && is_tls_failure(&text) {
        return one_line(&format!(
            "TLS handshake failed ({text}); if this is a plain port, use redis://"
        ));
    }
    match (err.code(), err.detail()) {
        (Some(code), Some(detail)) => {
            format!("server error: {}", without_script_location(code, detail))
        }
        _ => one_line(&text),
    }
}

/// rustls and the kernel word TLS failures in these terms.
fn is_tls_failure(text: &str) -> bool {
    [
        "TLS",
        "tls",
        "handshake",
        "corrupt message",
        "InvalidContentType",
    ]
    .iter()
    .any(|w| text.contains(w))
}

/// `code detail` without the script's SHA and Lua line Redis adds to errors
/// raised inside a script (`user_script:12: ... script: 3f2a..., on
/// @user_script:12.`): they mean nothing to a user and are shown with `-v`.
fn without_script_location(code: &str, detail: &str) -> String {
    let full = one_line(&format!("{code} {detail}"));
    let Some((head, _)) = full.split_once(" script: ") else {
        return full;
    };
    report::verbose(|| format!("server error in a script: {full}"));
    let head = head.trim_end_matches([' ', '.', ',']);
    // The Lua position prefix: `user_script:12: ` (or `@user_script:12: `).
    let cleaned = match head.split_once("user_script:") {
        Some((before, rest)) => {
            let rest = rest.trim_start_matches(|c: char| c.is_ascii_digit());
            let rest = rest.strip_prefix(": ").unwrap_or(rest);
            format!("{}{rest}", before.trim_end_matches('@'))
        }
        None => head.to_owned(),
    };
    cleaned
}

/// Folds a multi-line message into one line.
fn one_line(text: &str) -> String {
    text.split(['\n', '\r'])
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// Commands rlock's scripts run (an ACL user needs each of them).
pub const SCRIPT_COMMANDS: &str = "TIME TYPE GET SET EXISTS DEL LLEN PTTL RPUSH PEXPIRE PUBLISH \
     HGET HSET HDEL HKEYS HEXISTS HINCRBY ZADD ZREM ZSCORE ZRANGE ZRANGEBYSCORE ZCOUNT";

/// What an ACL refusal (NOPERM, or a command refused inside a script) means
/// for this lock, naming what the user lacks; None for other errors.
pub fn acl_denial(err: &RedisError, keys: &LockId) -> Option<String> {
    let detail = err.detail().unwrap_or_default();
    let acl = "(see \"ACL users\" in the README)";
    if err.code() == Some("NOPERM") {
        // Found by the scripts' own check, before they write anything.
        if let Some(what) = detail.strip_prefix("rlock: the user ") {
            return Some(format!("the Redis user {what} {acl}"));
        }
        if let Some(command) = detail
            .split('\'')
            .nth(1)
            .filter(|_| detail.contains("to run"))
        {
            return Some(format!(
                "the Redis user may not run {} {acl}",
                command.to_uppercase()
            ));
        }
        // Redis 7.0 says "... one of the keys used as arguments", Redis 7.2+ and
        // Valkey "No permissions to access a key" (and likewise for channels).
        if detail.contains(" key") {
            let keys = Keys::of(keys);
            let pattern = match &keys.redisson {
                Some(channel) => format!("~{} and ~{channel}", keys.lock),
                None => format!("~{}*", keys.lock.split('{').next().unwrap_or_default()),
            };
            return Some(format!(
                "the Redis user may not use this lock's keys: it needs the key pattern {pattern} {acl}"
            ));
        }
        if detail.contains(" channel") {
            return Some(format!(
                "the Redis user may not use this lock's pub/sub channels: it needs \
                 &redisson_lock__channel:* and &{{*}}:rlock-int:* {acl}"
            ));
        }
    }
    if detail.contains("can't run this command") {
        return Some(format!(
            "the Redis user may not run one of the commands rlock's scripts use \
             ({SCRIPT_COMMANDS}) {acl}"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_locations_are_dropped() {
        assert_eq!(
            without_script_location(
                "ERR",
                "user_script:12: Script attempted to access nonexistent global variable 'x' script: 3f2a9c, on @user_script:12."
            ),
            "ERR Script attempted to access nonexistent global variable 'x'"
        );
        assert_eq!(without_script_location("ERR", "plain"), "ERR plain");
    }

    fn noperm(detail: &str) -> RedisError {
        let kind = ErrorKind::Server(redis::ServerErrorKind::NoPerm);
        RedisError::from((kind, "", detail.to_owned()))
    }

    #[test]
    fn key_and_channel_refusals_are_named_in_every_servers_words() {
        let id = LockId::new("rlock", "x");
        for detail in [
            "this user has no permissions to access one of the keys used as arguments",
            "No permissions to access a key",
        ] {
            let said = acl_denial(&noperm(detail), &id).unwrap();
            assert!(said.contains("key pattern ~rlock:*"), "{detail}: {said}");
        }
        let id = LockId::redisson("jobs:a");
        for detail in [
            "this user has no permissions to access one of the channels used as arguments",
            "No permissions to access a channel",
        ] {
            let said = acl_denial(&noperm(detail), &id).unwrap();
            assert!(
                said.contains("&redisson_lock__channel:*"),
                "{detail}: {said}"
            );
        }
    }

    #[test]
    fn many_lines_become_one() {
        assert_eq!(one_line("a\nb\n\nc\n"), "a; b; c");
    }
}
