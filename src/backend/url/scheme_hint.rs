//! The message for a URL whose scheme rlock does not take.

/// The URL schemes rlock takes, for messages.
const SCHEMES: &str = "redis://, rediss://, redis+sentinel://, rediss+sentinel://, redis+cluster://, rediss+cluster://, unix://, file:DIR";

/// What is wrong with a URL whose scheme rlock does not take: none at all
/// (`localhost`, `127.0.0.1:6379`), a misspelt one (`reddis://`), or another
/// protocol's (`http://`). Only the scheme or a `host:port` is quoted, never
/// what could hold a password.
pub(super) fn wrong_scheme(url: &str, scheme: &str) -> String {
    let expected = "expected redis://[user:password@]host[:port][/db]";
    let has_scheme = url.contains("://");
    let no_secret = !url.contains('@');
    if !has_scheme {
        // `host`, `host:port`: the scheme is missing.
        let host_port = url.split_once(':').is_none_or(|(host, port)| {
            !host.is_empty() && !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit())
        });
        if host_port && no_secret && !url.is_empty() && !url.contains('/') {
            let shown = crate::report::quote(url);
            let port = if url.contains(':') { "" } else { ":6379" };
            return format!(
                "invalid --url {shown}: no scheme; write redis://{}{port} (schemes: {SCHEMES})",
                crate::report::sanitize(url)
            );
        }
        return format!("invalid --url: no scheme; {expected} (schemes: {SCHEMES})");
    }
    let known = [
        "redis",
        "rediss",
        "redis+sentinel",
        "rediss+sentinel",
        "redis+cluster",
        "rediss+cluster",
        "unix",
    ];
    let shown = crate::report::quote(&format!("{scheme}://"));
    match known.iter().find(|k| edit_distance(k, scheme) <= 2) {
        Some(close) => format!(
            "invalid --url: unknown scheme {shown}: did you mean {close}://? (schemes: {SCHEMES})"
        ),
        None => format!(
            "invalid --url: scheme {shown} is not one of rlock's; {expected} (schemes: {SCHEMES})"
        ),
    }
}

/// Levenshtein distance, for short words.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}
