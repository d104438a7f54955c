//! Secrets taken out of a command line before it is stored with a hold.
//!
//! The holder's command line lives in Redis, where anyone who may read the
//! lock's keys sees it, and `status` prints it. A COMMAND that carries a URL
//! with a password (a nested `rlock --url redis://:PW@…`, a `redis-cli -a PW`)
//! or a token must not publish it there.

/// What replaces a secret.
const HIDDEN: &str = "***";

/// Options whose next argument is a secret.
const SECRET_OPTIONS: [&str; 5] = ["--token", "-a", "--pass", "--password", "--auth"];

/// Names whose `NAME=value` is a secret, by how they end (upper-cased).
const SECRET_NAMES: [&str; 5] = ["AUTH", "PASS", "PASSWORD", "TOKEN", "SECRET"];

/// `argv` with passwords in URLs, values of secret options and `NAME=value`
/// secrets replaced by `***`.
pub fn command_line(argv: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(argv.len());
    let mut next_is_secret = false;
    for arg in argv {
        if next_is_secret {
            out.push(HIDDEN.to_owned());
            next_is_secret = false;
            continue;
        }
        next_is_secret = SECRET_OPTIONS.contains(&arg.as_str());
        out.push(argument(arg));
    }
    out
}

/// One argument with its secrets replaced.
fn argument(arg: &str) -> String {
    if let Some((name, _)) = arg.split_once('=') {
        let bare = name.trim_start_matches('-').to_ascii_uppercase();
        if SECRET_NAMES.iter().any(|s| bare.ends_with(s)) || SECRET_OPTIONS.contains(&name) {
            return format!("{name}={HIDDEN}");
        }
    }
    url_passwords(arg)
}

/// `scheme://user:PW@host` and `scheme://:PW@host` → `…:***@host`, for every
/// URL in `text` (lists of URLs included).
pub fn url_passwords(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        // The authority ends at the first '/', ',' or whitespace.
        let end = tail
            .find(|c: char| c == '/' || c == ',' || c.is_whitespace())
            .unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@') {
            Some(at) if authority[..at].contains(':') => {
                let colon = authority[..at].find(':').unwrap_or(0);
                out.push_str(&authority[..=colon]);
                out.push_str(HIDDEN);
                out.push_str(&authority[at..]);
            }
            _ => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redact(args: &[&str]) -> String {
        let argv: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        command_line(&argv).join(" ")
    }

    #[test]
    fn passwords_in_urls_are_hidden() {
        assert_eq!(
            redact(&["rlock", "--url", "redis://:pw@h:6379/0", "run", "x"]),
            "rlock --url redis://:***@h:6379/0 run x"
        );
        assert_eq!(
            redact(&["--url=rediss://user:p:w@h,redis://u2:x@h2"]),
            "--url=rediss://user:***@h,redis://u2:***@h2"
        );
        assert_eq!(
            redact(&["redis://user@h", "http://h/a:b@c"]),
            "redis://user@h http://h/a:b@c"
        );
    }

    #[test]
    fn secret_options_and_variables_are_hidden() {
        assert_eq!(
            redact(&[
                "redis-cli",
                "-a",
                "pw",
                "--token",
                "t",
                "--token=t2",
                "ping"
            ]),
            "redis-cli -a *** --token *** --token=*** ping"
        );
        assert_eq!(
            redact(&[
                "env",
                "REDISCLI_AUTH=pw",
                "RLOCK_TOKEN=t",
                "LANG=C",
                "./job"
            ]),
            "env REDISCLI_AUTH=*** RLOCK_TOKEN=*** LANG=C ./job"
        );
    }
}
