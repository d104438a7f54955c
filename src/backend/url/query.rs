//! A URL's query string: redis-rs reads a few parameters and drops the rest
//! without a word, so a password given as `?password=...` would never be
//! sent and the run would fail later as an authentication error.

use crate::error::{Error, Result};

/// Refuses a query string with a parameter nothing reads (for `scheme`):
/// only `protocol` on a TCP URL, and `db`, `user`, `pass` besides on a Unix
/// socket URL, as redis-rs takes them; Sentinel and Cluster URLs are rlock's
/// own and take none; another scheme is left to its own error. The message quotes nothing of the URL (it may hold a
/// password) and says how a password is given instead.
pub(super) fn refuse_ignored(url: &str, scheme: &str) -> Result<()> {
    let (read, form): (&[&str], _) = match scheme {
        "redis" | "rediss" => (&["protocol"], "[USER]:PASSWORD@host:port"),
        "unix" | "redis+unix" => (&["protocol", "db", "user", "pass"], "/PATH?pass=PASSWORD"),
        "redis+sentinel" | "rediss+sentinel" => (&[], "[USER]:PASSWORD@host:port/MASTER"),
        "redis+cluster" | "rediss+cluster" => (&[], "[USER]:PASSWORD@host:port"),
        // Not a scheme rlock takes: that is the error to report.
        _ => return Ok(()),
    };
    let ignored = query(url).is_some_and(|q| {
        q.split('&')
            .filter(|pair| !pair.is_empty())
            .any(|pair| !read.contains(&pair.split_once('=').map_or(pair, |(k, _)| k)))
    });
    if !ignored {
        return Ok(());
    }
    let takes = match read {
        [] => "takes no query string (?...)".to_owned(),
        _ => format!("query string (?...) takes only {}", read.join(", ")),
    };
    Err(Error::usage(format!(
        "invalid --url: a {scheme}:// URL's {takes}; rlock would ignore the rest, so a password there would never be sent; \
         write {scheme}://{form}, or give it in --password-file FILE or REDISCLI_AUTH"
    )))
}

/// The query string, without its fragment: what follows the first `?`
/// after the credentials (a password may hold a `?`).
fn query(url: &str) -> Option<&str> {
    let rest = url.split_once(':').map_or(url, |(_, rest)| rest);
    let after = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    let (_, query) = after.split_once('?')?;
    Some(query.split_once('#').map_or(query, |(q, _)| q))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_parameter_nothing_reads_is_refused() {
        assert!(refuse_ignored("redis://h:1?password=pw", "redis").is_err());
        assert!(refuse_ignored("redis://h:1/0?db=2", "redis").is_err());
        assert!(refuse_ignored("redis+sentinel://h:1/m?protocol=3", "redis+sentinel").is_err());
        assert!(refuse_ignored("redis://h:1/?protocol=resp3", "redis").is_ok());
        assert!(refuse_ignored("unix:///run/redis.sock?db=1&pass=pw", "unix").is_ok());
        assert!(refuse_ignored("redis://:p?w@h:1", "redis").is_ok());
        assert!(refuse_ignored("redis://h:1?", "redis").is_ok());
        assert!(refuse_ignored("rediss://h:1#insecure", "rediss").is_ok());
        let message = refuse_ignored("redis://h:1?password=s3cret", "redis")
            .unwrap_err()
            .to_string();
        assert!(!message.contains("s3cret"), "{message}");
    }
}
