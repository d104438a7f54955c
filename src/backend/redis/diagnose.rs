//! Turning redis-rs errors into one truthful line a user can act on.
//!
//! redis-rs words errors for its own developers ("connection closed", a RESP
//! parse trace over several lines, a script's SHA and Lua line). rlock says
//! what happened from the user's side (nothing listening, no such socket, a
//! password needed, not a Redis server, TLS on one end only) and never shows
//! a password, a URL or script internals (those go to `-v`).

mod contact;

use super::keys::Keys;
pub use contact::{Contact, Endpoint, Stage, Transport};
use std::time::Duration;

use redis::{ErrorKind, RedisError};

use crate::backend::url::PasswordFrom;
use crate::error::{Cause, Error};
use crate::lock::name::LockId;
use crate::report;

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
    let error = if is_transient(err, contact) {
        Error::from(Cause::Unreachable { server, cause })
    } else {
        Error::from(Cause::Unavailable { server, cause })
    };
    if no_reply_in_time(err, contact) {
        error.without_reply()
    } else {
        error
    }
}

/// A request was sent and its reply did not come in time, so it may have
/// been carried out; not a TLS handshake that never finished (nothing was
/// asked yet).
fn no_reply_in_time(err: &RedisError, contact: &Contact<'_>) -> bool {
    err.is_timeout() && !(contact.first_contact() && contact.tls())
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
        return no_reply_in_time(err, contact);
    }
    !contact.first_contact()
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

/// A write refused by a replica: the READONLY reply, or (Redis 6) a script's
/// error that carries it.
fn readonly(err: &RedisError) -> bool {
    err.code() == Some("READONLY") || err.detail().is_some_and(|d| d.contains("-READONLY "))
}

/// Errors a failover or restart causes on a server rlock was talking to.
pub fn failing_over(err: &RedisError) -> bool {
    err.code().is_some_and(|c| PASSING.contains(&c))
        || readonly(err)
        || err.is_connection_refusal()
        || err.is_connection_dropped()
        || err.is_timeout()
        || err.is_io_error()
}

/// One line saying why `err` happened.
pub fn describe(err: &RedisError, limit: Duration, contact: &Contact<'_>) -> String {
    let text = err.to_string();
    let detail = err.detail().unwrap_or_default();
    if err.kind() == ErrorKind::InvalidClientConfig
        && text.starts_with(super::topology::PASSWORD_FILE)
    {
        return detail.to_owned();
    }
    if let Some(line) = refused_credentials(err, detail, contact) {
        return line;
    }
    if matches!(err.kind(), ErrorKind::Parse) {
        return "did not answer as a Redis server (wrong port?)".into();
    }
    if let Some(line) = connection_trouble(err, &text, limit, contact) {
        return line;
    }
    if let Some(line) = tls_trouble(&text, contact) {
        return line;
    }
    match (err.code(), err.detail()) {
        (Some(code), Some(detail)) => {
            format!("server error: {}", without_script_location(code, detail))
        }
        _ => one_line(&text),
    }
}

/// The server wanted a password, or refused the one given.
fn refused_credentials(err: &RedisError, detail: &str, contact: &Contact<'_>) -> Option<String> {
    if err.code() == Some("NOAUTH")
        || (err.code() == Some("ERR") && detail.contains("unauthenticated"))
    {
        if contact.user_without_password {
            // (The user name is not repeated: it may be the password.)
            return Some("the server needs a password, and the URL has a user name but no password: a password alone is written redis://:PASSWORD@host (note the colon), or put it in REDISCLI_AUTH or --password-file".into());
        }
        return Some(
            "the server needs a password: put it in the URL, REDISCLI_AUTH or --password-file"
                .into(),
        );
    }
    if contact.user_without_password
        && (matches!(err.kind(), ErrorKind::AuthenticationFailed)
            || err.code() == Some("WRONGPASS"))
    {
        return Some("authentication failed: the URL has a user name but no password; a password alone is written redis://:PASSWORD@host (note the colon), or put it in REDISCLI_AUTH".into());
    }
    if matches!(err.kind(), ErrorKind::AuthenticationFailed) || err.code() == Some("WRONGPASS") {
        let check = match contact.password_from {
            Some(PasswordFrom::Command(_)) => {
                "check the URL's user and what --password-command prints"
            }
            Some(PasswordFrom::File(_)) => "check the URL's user and the --password-file",
            None => "check the URL or REDISCLI_AUTH",
        };
        return Some(format!(
            "authentication failed: wrong user name or password ({check})"
        ));
    }
    None
}

/// The server was demoted, did not answer, refused the connection, could not
/// be found or dropped the connection.
fn connection_trouble(
    err: &RedisError,
    text: &str,
    limit: Duration,
    contact: &Contact<'_>,
) -> Option<String> {
    // A failover demoted it (or the FAILOVER command, or a managed endpoint's
    // name now points at another node): each try connects afresh, resolving
    // the host name again.
    if readonly(err) {
        let what = "the server became a replica (READONLY: a failover, or the FAILOVER command)";
        return Some(if contact.fixed_tcp() {
            format!(
                "{what}; the lock lives on its master: use a redis+sentinel:// URL, or a host \
                 name that follows the master"
            )
        } else {
            what.into()
        });
    }
    if err.is_timeout() {
        let limit = Duration::from_millis(u64::try_from(limit.as_millis()).unwrap_or(u64::MAX));
        let within = humantime::format_duration(limit);
        return Some(if no_reply_in_time(err, contact) {
            format!("no reply within {within}")
        } else {
            format!("no TLS handshake within {within} (if this is a plain port, use redis://)")
        });
    }
    if err.is_connection_refusal() {
        if let Some(path) = contact.socket().filter(|p| !p.exists()) {
            return Some(format!(
                "no such socket (is redis-server running with unixsocket {}?)",
                path.display()
            ));
        }
        return Some(if contact.fixed_tcp() {
            format!(
                "connection refused (is redis-server running on {}?)",
                contact.server
            )
        } else {
            "connection refused".into()
        });
    }
    if text.contains("lookup address information") {
        let reason = text.rsplit(": ").next().unwrap_or_default();
        return Some(one_line(&format!(
            "cannot resolve the host name ({reason})"
        )));
    }
    if err.is_connection_dropped() {
        return Some(if contact.first_contact() && !contact.tls() {
            "connection closed by the server before any reply (if this is a TLS port, use rediss://)"
                .into()
        } else {
            "connection closed by the server".into()
        });
    }
    None
}

/// TLS failed: no trust store, a certificate refused, or no handshake.
fn tls_trouble(text: &str, contact: &Contact<'_>) -> Option<String> {
    // rustls reads the system's trust store at connection time; a minimal
    // image without ca-certificates has none.
    if contact.tls()
        && (text.contains("opening directory")
            || text.contains("native root CA certificates")
            || text.contains("no CA certificates"))
    {
        return Some(one_line(&format!(
            "no system CA certificates ({text}): install ca-certificates, or pass --cacert FILE"
        )));
    }
    if contact.tls() && text.contains("certificate") {
        return Some(one_line(&format!(
            "TLS: {text} (check --cacert, or --cert and --key)"
        )));
    }
    if contact.tls() && contact.first_contact() && is_tls_failure(text) {
        return Some(one_line(&format!(
            "TLS handshake failed ({text}); if this is a plain port, use redis://"
        )));
    }
    None
}

/// What the server said (or what went wrong on the way), on one line, without
/// a script's SHA and Lua line: for `check`, which shows a refusal as is.
pub fn server_said(err: &RedisError) -> String {
    match (err.code(), err.detail()) {
        (Some(code), Some(detail)) => without_script_location(code, detail),
        _ => one_line(&err.to_string()),
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

    match head.split_once("user_script:") {
        Some((before, rest)) => {
            let rest = rest.trim_start_matches(|c: char| c.is_ascii_digit());
            let rest = rest.strip_prefix(": ").unwrap_or(rest);
            format!("{}{rest}", before.trim_end_matches('@'))
        }
        None => head.to_owned(),
    }
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
     HGET HGETALL HLEN HSET HDEL HEXISTS HINCRBY XADD ZADD ZREM ZSCORE ZRANGE ZRANGEBYSCORE ZCOUNT";

/// What an ACL refusal (NOPERM, or a command refused inside a script) means
/// for this lock, naming what the user lacks; None for other errors.
pub fn acl_denial(err: &RedisError, lock: &LockId) -> Option<String> {
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
            let keys = Keys::of(lock);
            let pattern = match &keys.redisson {
                Some(channel) => format!("~{} and ~{channel}", keys.holds),
                None => format!("~{}*", keys.holds.split('{').next().unwrap_or_default()),
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
    if detail.contains("can't access at least one of the keys")
        || detail.contains("no permissions to access")
    {
        let keys = Keys::of(lock);
        let pattern = format!("~{}*", keys.holds.split('{').next().unwrap_or_default());
        return Some(format!(
            "the Redis user may not use this lock's keys inside rlock's scripts: it needs the key pattern {pattern} {acl}"
        ));
    }
    script_refusal(err)
}

/// A command the server refused inside one of rlock's scripts (an ACL rule, a
/// renamed or disabled command, one not allowed in scripts), or a server that
/// runs no scripts at all: the command refused and the server's cause, in one
/// line; None for other errors.
pub fn script_refusal(err: &RedisError) -> Option<String> {
    let detail = err.detail().unwrap_or_default();
    let lower = detail.to_ascii_lowercase();
    if lower.starts_with("unknown command") && lower.contains("eval") {
        return Some(
            "the server runs no Lua scripts (EVALSHA is an unknown command: renamed, disabled, \
             or a server built without Lua); rlock's locks are scripts"
                .into(),
        );
    }
    let hint = if lower.contains("can't run this command")
        || lower.contains("no permissions to run")
    {
        " (see \"ACL users\" in the README)"
    } else if lower.contains("command called from") || lower.contains("not allowed from script") {
        " (rlock's scripts need every command the README's ACL rules list)"
    } else {
        return None;
    };
    let command = refused_command(detail).unwrap_or_else(|| format!("one of {SCRIPT_COMMANDS}"));
    let code = err.code().unwrap_or("ERR");
    Some(one_line(&format!(
        "the server refused {command} inside rlock's script: {code} {}{hint}",
        server_cause(detail)
    )))
}

/// The command a script was refused: as the server names it (Redis 8, Valkey:
/// "no permissions to run the 'time' command"), else as the script's line
/// shows it (Redis 6.2 and 7 name only the script's SHA1 and the line).
fn refused_command(detail: &str) -> Option<String> {
    if let Some(named) = detail
        .split("run the '")
        .nth(1)
        .and_then(|rest| rest.split('\'').next())
    {
        return Some(named.to_uppercase());
    }
    let sha = detail
        .split("call to f_")
        .nth(1)
        .or_else(|| detail.rsplit(" script: ").next())?
        .get(..40)?;
    let line: usize = detail
        .split("@user_script:")
        .nth(1)?
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()?;
    let text = crate::backend::script::line(sha, line)?;
    let mut commands: Vec<String> = Vec::new();
    for call in text.split("call('").skip(1) {
        let command = call.split('\'').next().unwrap_or_default().to_uppercase();
        if !command.is_empty() && !commands.contains(&command) {
            commands.push(command);
        }
    }
    (!commands.is_empty()).then(|| commands.join(" or "))
}

/// The server's words for a refusal inside a script, without the SHA1 and the
/// Lua positions it wraps them in (Redis 6.2: `Error running script (call to
/// f_SHA): @user_script:2: @user_script: 2: CAUSE`; 7 and later: `CAUSE
/// script: SHA, on @user_script:2.`).
fn server_cause(detail: &str) -> String {
    let cause = match detail.rsplit_once(" script: ") {
        Some((head, sha)) if sha.starts_with(|c: char| c.is_ascii_hexdigit()) => head,
        _ => detail,
    };
    let cause = cause.rsplit("@user_script: ").next().unwrap_or(cause);
    let cause = cause.trim_start_matches(|c: char| c.is_ascii_digit() || c == ':' || c == ' ');
    cause.trim_end_matches([' ', '.', ',']).to_owned()
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
    fn a_command_refused_in_a_script_is_named_as_each_server_words_it() {
        let sha = crate::backend::script::RAISE_FENCE.get_hash().to_owned();
        let line = (1..200)
            .find(|&n| {
                crate::backend::script::line(&sha, n).is_some_and(|l| l.contains("call('GET'"))
            })
            .unwrap();
        let named = Some("GET".to_owned());
        let v62 = format!(
            "Error running script (call to f_{sha}): @user_script:{line}: @user_script: {line}: The user executing the script can't run this command or subcommand"
        );
        let v70 = format!(
            "The user executing the script can't run this command or subcommand script: {sha}, on @user_script:{line}."
        );
        assert_eq!(refused_command(&v62), named);
        assert_eq!(refused_command(&v70), named);
        assert_eq!(
            server_cause(&v62),
            "The user executing the script can't run this command or subcommand"
        );
        assert_eq!(server_cause(&v70), server_cause(&v62));
        let v80 = "ACL failure in script: User u has no permissions to run the 'time' command script: 6c48, on @user_script:2.";
        assert_eq!(refused_command(v80).as_deref(), Some("TIME"));
        assert_eq!(
            server_cause(v80),
            "ACL failure in script: User u has no permissions to run the 'time' command"
        );
    }

    #[test]
    fn many_lines_become_one() {
        assert_eq!(one_line("a\nb\n\nc\n"), "a; b; c");
    }
}
