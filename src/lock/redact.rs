//! Secrets taken out of a command line before it is stored with a hold.
//!
//! The holder's command line lives in Redis, where anyone who may read the
//! lock's keys sees it, and `status` prints it. A COMMAND that carries a URL
//! with a password (a nested `rlock --url redis://:PW@…`, a `redis-cli -a PW`)
//! or a token must not publish it there.

/// What replaces a secret.
const HIDDEN: &str = "***";

/// Options whose next argument is a secret (besides every long option whose
/// name ends as one of [`SECRET_NAMES`]: `--api-key`, `--client-secret`).
const SECRET_OPTIONS: [&str; 2] = ["-a", "--auth"];

/// Names whose `NAME=value` (or `--name value`) is a secret, by how they end
/// (upper-cased, `-` read as `_`): `AWS_SECRET_ACCESS_KEY`, `API_KEY`,
/// `GOOGLE_CREDENTIALS`, `GITHUB_TOKEN`, `PGPASSWORD`, ...
const SECRET_NAMES: [&str; 9] = [
    "AUTH",
    "PASS",
    "PASSWORD",
    "TOKEN",
    "SECRET",
    "KEY",
    "CREDENTIAL",
    "CREDENTIALS",
    "BEARER",
];

/// Whether `name` (an option or a variable) names a secret.
fn secret_name(name: &str) -> bool {
    let bare = name
        .trim_start_matches('-')
        .to_ascii_uppercase()
        .replace('-', "_");
    SECRET_NAMES.iter().any(|s| bare.ends_with(s))
}

/// Whether `arg` is an option whose next argument is a secret.
fn secret_option(arg: &str) -> bool {
    SECRET_OPTIONS.contains(&arg)
        || (arg.starts_with("--") && !arg.starts_with("--no-") && secret_name(arg))
        || arg.eq_ignore_ascii_case("bearer")
        || arg.eq_ignore_ascii_case("basic")
        || arg.to_ascii_lowercase().ends_with("authorization:")
}

/// `argv` with passwords in URLs, values of secret options and `NAME=value`
/// secrets replaced by `***`.
pub fn command_line(argv: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(argv.len());
    let mut next_is_secret = false;
    for arg in argv {
        // `Authorization: Bearer X`: the scheme is kept, its credentials hidden.
        let scheme = arg.eq_ignore_ascii_case("bearer") || arg.eq_ignore_ascii_case("basic");
        if next_is_secret && !scheme {
            out.push(HIDDEN.to_owned());
            next_is_secret = false;
            continue;
        }
        if arg.contains(char::is_whitespace) {
            // A shell string (`sh -c '...'`) or a header: its words, each
            // as an argument (spacing is not kept).
            let words: Vec<String> = arg.split_whitespace().map(str::to_owned).collect();
            out.push(command_line(&words).join(" "));
            continue;
        }
        next_is_secret = secret_option(arg);
        out.push(argument(arg));
    }
    out
}

/// One argument (a word) with its secrets replaced: `NAME=secret`,
/// `--api-key=X`, `-pX` (a password glued to `-p`, as mysql takes it), URL
/// passwords.
fn argument(arg: &str) -> String {
    if let Some((name, _)) = arg.split_once('=')
        && (secret_name(name) || SECRET_OPTIONS.contains(&name))
    {
        return format!("{name}={HIDDEN}");
    }
    if arg.len() > 2 && arg.starts_with("-p") && !arg.starts_with("--") {
        return format!("-p{HIDDEN}");
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

    #[test]
    fn keys_credentials_api_keys_glued_passwords_and_bearer_tokens_are_hidden() {
        assert_eq!(
            redact(&[
                "env",
                "AWS_SECRET_ACCESS_KEY=s1",
                "GOOGLE_APPLICATION_CREDENTIALS=s2",
                "DB_CREDENTIAL=s3",
                "./job",
                "--api-key",
                "s4",
                "--client-secret=s5",
                "--password",
                "s6",
            ]),
            "env AWS_SECRET_ACCESS_KEY=*** GOOGLE_APPLICATION_CREDENTIALS=*** DB_CREDENTIAL=*** ./job --api-key *** --client-secret=*** --password ***"
        );
        assert_eq!(
            redact(&["mysql", "-uroot", "-ps3cret", "db"]),
            "mysql -uroot -p*** db"
        );
        assert_eq!(
            redact(&["curl", "-H", "Authorization: Bearer abc.def", "https://x"]),
            "curl -H Authorization: Bearer *** https://x"
        );
        assert_eq!(
            redact(&["curl", "-H", "X-Auth: bearer abc", "--oauth2-bearer", "tok"]),
            "curl -H X-Auth: bearer *** --oauth2-bearer ***"
        );
        assert_eq!(
            redact(&["sh", "-c", "cd /x && API_KEY=k1 ./run --token  t1 -pP1"]),
            "sh -c cd /x && API_KEY=*** ./run --token *** -p***"
        );
        assert_eq!(redact(&["tool", "Bearer", "tok"]), "tool Bearer ***");
        assert_eq!(
            redact(&["rsync", "--no-password", "a", "b"]),
            "rsync --no-password a b"
        );
    }
}
