//! Where the lock lives: parsing `--url` / `RLOCK_URL` / `REDIS_URL` into
//! connection settings, with the password from the URL or `REDISCLI_AUTH`.
//!
//! Nothing here ever formats a URL into a message: servers are shown as
//! `host:port` (or the socket path), so a password cannot leak.

mod password;
mod query;
mod scheme_hint;

use std::path::Path;
use std::time::Duration;

use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo};

use crate::error::{Error, Result};
pub use password::PasswordFrom;
use scheme_hint::wrong_scheme;

/// `host:port`, with an IPv6 address in brackets (`[::1]:6379`), as
/// messages show a server and as redis-rs takes it back in a URL.
pub fn host_port(host: &str, port: impl std::fmt::Display) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// The default server when no URL is given (README: "Using `rlock run`").
pub const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

/// One Redis server to connect to.
#[derive(Clone)]
pub struct ServerSpec {
    /// redis-rs connection settings (password included; never printed).
    pub info: ConnectionInfo,
    /// `host:port` or the socket path, for messages.
    pub display: String,
    /// Bound on each connection attempt and each reply.
    pub timeout: Duration,
    /// Trust and client certificate for `rediss://` (`--cacert`, `--cert`,
    /// `--key`); None: the system's trust store, no client certificate.
    pub tls: Option<redis::TlsCertificates>,
    /// `redis+sentinel://`: the master is found through these sentinels at each
    /// connection (`info` then holds only the master's credentials and db).
    pub sentinel: Option<SentinelSpec>,
    /// `redis+cluster://`: seed nodes, `host:port`; the node of each lock's
    /// slot is found by following MOVED and ASK (`info` then holds only the
    /// credentials).
    pub cluster: Option<Vec<String>>,
    /// `--password-file` or `--password-command`: the password is fetched
    /// again for each new connection (short-lived tokens such as cloud IAM
    /// tokens rotate).
    pub password_from: Option<PasswordFrom>,
}

/// A master known by name to a set of Sentinels.
#[derive(Clone)]
pub struct SentinelSpec {
    /// The master's name (`SENTINEL get-master-addr-by-name`).
    pub master: String,
    /// The sentinels, `host:port`.
    pub sentinels: Vec<String>,
    /// `rediss+sentinel://`: sentinels and master speak TLS.
    pub tls: bool,
}

/// `--cacert`, `--cert`, `--key` as given.
pub struct TlsFiles<'a> {
    pub cacert: Option<&'a Path>,
    pub cert: Option<&'a Path>,
    pub key: Option<&'a Path>,
}

impl ServerSpec {
    /// Takes the password from `from` instead of the URL, fetched again at
    /// each connection: a `--password-file` is checked now; a
    /// `--password-command` first runs for the first connection.
    pub fn with_password(mut self, from: Option<&PasswordFrom>) -> Result<Self> {
        let Some(from) = from else {
            return Ok(self);
        };
        let option = from.option();
        if self.info.redis_settings().password().is_some() {
            return Err(Error::usage(format!(
                "{option} and a password in the URL: give the password once"
            )));
        }
        self.password_from = Some(match from {
            PasswordFrom::File(file) => {
                read_password_file(file).map_err(Error::usage)?;
                PasswordFrom::File(std::path::absolute(file).unwrap_or_else(|_| file.clone()))
            }
            PasswordFrom::Command(_) => from.clone(),
        });
        Ok(self)
    }

    /// Whether this is a TLS connection (`rediss://`).
    pub fn is_tls(&self) -> bool {
        matches!(self.info.addr(), ConnectionAddr::TcpTls { .. })
            || self.sentinel.as_ref().is_some_and(|s| s.tls)
    }

    /// For a `rediss://` server, loads the files given (PEM). A plain server
    /// ignores them, so RLOCK_CACERT can be set for all of a host's jobs.
    pub fn with_tls(mut self, files: &TlsFiles<'_>) -> Result<Self> {
        if !self.is_tls() {
            return Ok(self);
        }
        install_tls_provider();
        let client_tls = match (files.cert, files.key) {
            (Some(cert), Some(key)) => Some(redis::ClientTlsConfig {
                client_cert: read_tls_file("--cert", cert)?,
                client_key: read_tls_file("--key", key)?,
            }),
            (None, None) => None,
            _ => return Err(Error::usage("--cert and --key go together")),
        };
        let root_cert = files
            .cacert
            .map(|f| read_tls_file("--cacert", f))
            .transpose()?;
        if client_tls.is_some() || root_cert.is_some() {
            self.tls = Some(redis::TlsCertificates {
                client_tls,
                root_cert,
            });
        }
        Ok(self)
    }
}

/// Chooses rustls's crypto provider (ring), which rustls needs once per
/// process before any TLS configuration is built: `rediss://` and pings.
pub fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The contents of the PEM file given as `option` (`--cacert`, `--cert`,
/// `--key`); a file that cannot be read is a usage error.
pub fn read_tls_file(option: &str, path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path)
        .map_err(|e| Error::usage(format!("cannot read {option} {}: {e}", path.display())))
}

/// Parses one URL. `auth` is `REDISCLI_AUTH`, used when the URL has no password.
pub fn parse_url(url: &str, auth: Option<&str>, timeout: Duration) -> Result<ServerSpec> {
    let scheme = url
        .split_once(':')
        .map_or("", |(s, _)| s)
        .to_ascii_lowercase();
    query::refuse_ignored(url, &scheme)?;
    match scheme.as_str() {
        "redis" | "unix" | "redis+unix" | "rediss" => {}
        "redis+sentinel" | "rediss+sentinel" => return parse_sentinel(url, &scheme, auth, timeout),
        "redis+cluster" | "rediss+cluster" => return parse_cluster(url, &scheme, auth, timeout),
        // Handled before parsing (crate::config); here only beside other URLs.
        "file" => {
            return Err(Error::usage(
                "file: locks this host only; it cannot be combined with other --url",
            ));
        }
        _ => return Err(Error::usage(wrong_scheme(url, &scheme))),
    }
    let mut info = url.into_connection_info().map_err(|_| {
        // redis-rs's message may quote the URL; say what is expected instead.
        Error::usage("invalid --url: expected redis://[user:password@]host[:port][/db]")
    })?;
    if info.redis_settings().db() < 0 {
        return Err(Error::usage(
            "invalid --url: the database number after the last / must be 0 or more",
        ));
    }
    let display = match info.addr() {
        ConnectionAddr::Tcp(host, port) => host_port(host, port),
        ConnectionAddr::TcpTls { host, port, .. } => format!("{host}:{port}"),
        ConnectionAddr::Unix(path) => path.display().to_string(),
        _ => "the server".to_owned(),
    };
    if let ConnectionAddr::Tcp(host, _) = info.addr()
        && host.is_empty()
    {
        return Err(Error::usage("invalid --url: no host"));
    }
    let mut redis = info.redis_settings().clone();
    if redis.password().is_none()
        && let Some(auth) = auth.filter(|a| !a.is_empty())
    {
        redis = redis.set_password(auth);
    }
    // CLIENT SETINFO costs two extra commands per connection; rlock connects once per run.
    info = info.set_redis_settings(redis.set_skip_set_lib_name());
    Ok(ServerSpec {
        info,
        display,
        timeout,
        tls: None,
        sentinel: None,
        cluster: None,
        password_from: None,
    })
}

/// A Sentinel or Cluster URL, `SCHEME://[user:password@]host:port[,host:port...]`
/// and what follows the hosts, taken apart in the steps both share. Any
/// fault is one usage error showing the form expected.
struct HostListUrl<'a> {
    scheme: &'a str,
    /// What the form shows after the host list (`/MASTER[/db]`, or nothing).
    tail: &'static str,
    /// The credentials, if the URL has some.
    userinfo: Option<&'a str>,
    /// The host list and what follows it.
    rest: &'a str,
}

impl<'a> HostListUrl<'a> {
    fn new(url: &'a str, scheme: &'a str, tail: &'static str) -> Result<Self> {
        let mut parts = HostListUrl {
            scheme,
            tail,
            userinfo: None,
            rest: "",
        };
        parts.rest = url.split_once("://").ok_or_else(|| parts.invalid())?.1;
        if let Some((userinfo, rest)) = parts.rest.rsplit_once('@') {
            parts.userinfo = Some(userinfo);
            parts.rest = rest;
        }
        Ok(parts)
    }

    /// The usage error for this URL.
    fn invalid(&self) -> Error {
        Error::usage(format!(
            "invalid --url: expected {}://[user:password@]host:port[,host:port...]{}",
            self.scheme, self.tail
        ))
    }

    /// The hosts of the comma-separated `list`, each one as `host` makes it
    /// (None: not a host).
    fn hosts(&self, list: &str, host: impl Fn(&str) -> Option<String>) -> Result<Vec<String>> {
        list.split(',')
            .map(|h| host(h).ok_or_else(|| self.invalid()))
            .collect()
    }

    /// The spec of a server found later (by sentinels, or by MOVED): the
    /// URL's credentials and `db`, TLS or not as the scheme says, on a
    /// placeholder address.
    fn found_later(&self, db: &str, auth: Option<&str>, timeout: Duration) -> Result<ServerSpec> {
        let template = format!(
            "{}://{}127.0.0.1:1/{db}",
            if self.tls() { "rediss" } else { "redis" },
            self.userinfo.map(|u| format!("{u}@")).unwrap_or_default(),
        );
        parse_url(&template, auth, timeout).map_err(|_| self.invalid())
    }

    fn tls(&self) -> bool {
        self.scheme.starts_with("rediss")
    }
}

/// `redis+cluster://[user:password@]host:port[,host:port…]`.
fn parse_cluster(
    url: &str,
    scheme: &str,
    auth: Option<&str>,
    timeout: Duration,
) -> Result<ServerSpec> {
    let url = HostListUrl::new(url, scheme, "")?;
    let seeds = url.hosts(url.rest.trim_end_matches('/'), |h| {
        h.rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok())
            .then(|| h.to_owned())
    })?;
    let mut spec = url.found_later("0", auth, timeout)?;
    spec.display = format!("cluster (seeds {})", seeds.join(","));
    spec.cluster = Some(seeds);
    Ok(spec)
}

/// `redis+sentinel://[user:password@]host:port[,host:port…]/<master-name>[/db]`.
fn parse_sentinel(
    url: &str,
    scheme: &str,
    auth: Option<&str>,
    timeout: Duration,
) -> Result<ServerSpec> {
    let url = HostListUrl::new(url, scheme, "/MASTER[/db]")?;
    let (hosts, path) = url.rest.split_once('/').ok_or_else(|| url.invalid())?;
    let (master, db) = match path.split_once('/') {
        Some((m, d)) => (m, Some(d)),
        None => (path, None),
    };
    if master.is_empty() {
        return Err(url.invalid());
    }
    let sentinels = url.hosts(hosts, |h| {
        let h = if h
            .rsplit_once(':')
            .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
        {
            h.to_owned()
        } else {
            format!("{h}:26379")
        };
        (!h.starts_with(':')).then_some(h)
    })?;
    let mut spec = url.found_later(db.unwrap_or("0"), auth, timeout)?;
    spec.display = format!("{master} (via sentinel {})", sentinels.join(","));
    spec.sentinel = Some(SentinelSpec {
        master: master.to_owned(),
        sentinels,
        tls: url.tls(),
    });
    Ok(spec)
}

/// Picks the URL list: `--url` (or `RLOCK_URL`, handled by clap), then
/// `REDIS_URL`, then the default.
pub fn choose_urls(given: &[String], redis_url: Option<String>) -> Vec<String> {
    // The list is split at commas, and so are the host lists of Sentinel and
    // Cluster URLs: a piece without a scheme continues the URL before it.
    let mut joined: Vec<String> = Vec::new();
    for raw in given {
        let piece = raw.trim();
        let scheme = |url: &str| url.contains("://") || url.starts_with("file:");
        match joined.last_mut() {
            // A DIR is a path: its pieces go back as they were, spaces and
            // empty pieces included.
            Some(url) if url.starts_with("file:") && !scheme(piece) => {
                url.push(',');
                url.push_str(raw);
            }
            Some(url)
                if !piece.is_empty()
                    && !scheme(piece)
                    && url
                        .split("://")
                        .next()
                        .is_some_and(|scheme| scheme.contains('+')) =>
            {
                url.push(',');
                url.push_str(piece);
            }
            _ if piece.is_empty() => {}
            _ => joined.push(piece.to_owned()),
        }
    }
    let given = joined;
    if !given.is_empty() {
        return given;
    }
    match redis_url.filter(|u| !u.trim().is_empty()) {
        Some(url) => vec![url.trim().to_owned()],
        None => vec![DEFAULT_URL.to_owned()],
    }
}

/// The password in `file` (`--password-file`), without the line end; an
/// error (free of the password) when the file cannot be read, is empty, or
/// may be read by users other than its owner.
pub fn read_password_file(file: &Path) -> std::result::Result<String, String> {
    use std::os::unix::fs::PermissionsExt;
    let shown = file.display();
    let meta =
        std::fs::metadata(file).map_err(|e| format!("cannot read --password-file {shown}: {e}"))?;
    if meta.permissions().mode() & 0o044 != 0 {
        return Err(format!(
            "--password-file {shown} may be read by group or others: chmod 600 it"
        ));
    }
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read --password-file {shown}: {e}"))?;
    let password = text.strip_suffix('\n').unwrap_or(&text);
    let password = password.strip_suffix('\r').unwrap_or(password);
    if password.is_empty() {
        return Err(format!("--password-file {shown} is empty"));
    }
    Ok(password.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_typos_name_the_wrong_part() {
        let err = |url: &str| {
            parse_url(url, None, Duration::from_secs(1))
                .err()
                .unwrap()
                .to_string()
        };
        assert!(
            err("reddis://h").contains("did you mean redis://?"),
            "{}",
            err("reddis://h")
        );
        assert!(err("http://h:1").contains("scheme 'http://' is not one of rlock's"));
        assert!(err("localhost").contains("no scheme; write redis://localhost:6379"));
        assert!(err("127.0.0.1:6379").contains("no scheme; write redis://127.0.0.1:6379"));
        assert!(!err("pw@127.0.0.1:6379").contains("pw"));
        assert!(err("http://h:1").contains("schemes: redis://, rediss://"));
    }

    #[test]
    fn sentinel_host_lists_survive_the_comma_split() {
        let given: Vec<String> = [
            "redis+sentinel://a:1",
            "b:2",
            "c:3/m",
            "redis://x",
            "redis://y",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            choose_urls(&given, None),
            ["redis+sentinel://a:1,b:2,c:3/m", "redis://x", "redis://y"]
        );
        let given: Vec<String> = ["file:/tmp/a", " b", "", "c", "redis://x"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            choose_urls(&given, None),
            ["file:/tmp/a, b,,c", "redis://x"]
        );
    }

    const T: Duration = Duration::from_secs(2);

    #[test]
    fn sentinel_and_cluster_urls_parse_or_show_the_form_expected() {
        let ok = |url: &str| parse_url(url, Some("envpw"), T).unwrap();
        let spec = ok("redis+cluster://u:p@a:1,[::1]:2/");
        assert_eq!(spec.display, "cluster (seeds a:1,[::1]:2)");
        assert_eq!(spec.cluster.unwrap(), ["a:1", "[::1]:2"]);
        assert_eq!(spec.info.redis_settings().username(), Some("u"));
        assert_eq!(spec.info.redis_settings().password(), Some("p"));
        let spec = ok("rediss+sentinel://a:1,b,[::1]/m/2");
        assert_eq!(spec.display, "m (via sentinel a:1,b:26379,[::1]:26379)");
        let sentinel = spec.sentinel.as_ref().unwrap();
        assert_eq!(sentinel.master, "m");
        assert!(sentinel.tls && spec.is_tls());
        assert_eq!(spec.info.redis_settings().db(), 2);
        assert_eq!(spec.info.redis_settings().password(), Some("envpw"));
        for (url, form) in [
            ("redis+cluster://a", ""),
            ("redis+cluster://:1", ""),
            ("redis+cluster://a:1,", ""),
            ("redis+cluster://a:1/0", ""),
            ("redis+cluster://a:99999", ""),
            ("redis+cluster:a:1", ""),
            ("redis+sentinel://a", "/MASTER[/db]"),
            ("redis+sentinel://a/", "/MASTER[/db]"),
            ("redis+sentinel:///m", "/MASTER[/db]"),
            ("redis+sentinel://a,/m", "/MASTER[/db]"),
            ("redis+sentinel://a/m/-1", "/MASTER[/db]"),
            ("redis+sentinel:a/m", "/MASTER[/db]"),
        ] {
            let err = parse_url(url, None, T).err().expect(url);
            let scheme = url.split_once(':').unwrap().0;
            assert_eq!(
                err.to_string(),
                format!(
                    "invalid --url: expected {scheme}://[user:password@]host:port[,host:port...]{form}"
                )
            );
            assert_eq!(err.exit().code(), 2, "{url}");
        }
    }

    #[test]
    fn parses_host_port_and_password_without_showing_it() {
        let spec = parse_url("redis://:s3cret@127.0.0.1:7000/2", None, T).unwrap();
        assert_eq!(spec.display, "127.0.0.1:7000");
        assert_eq!(spec.info.redis_settings().password(), Some("s3cret"));
        assert_eq!(spec.info.redis_settings().db(), 2);
    }

    #[test]
    fn ipv6_servers_are_shown_in_brackets() {
        assert_eq!(host_port("::1", 6379), "[::1]:6379");
        assert_eq!(host_port("127.0.0.1", 6379), "127.0.0.1:6379");
        assert_eq!(host_port("redis.example", 7000), "redis.example:7000");
        let spec = parse_url("redis://[::1]:7000", None, T).unwrap();
        assert_eq!(spec.display, "[::1]:7000");
    }

    #[test]
    fn rediscli_auth_fills_a_missing_password_only() {
        let spec = parse_url("redis://127.0.0.1", Some("envpw"), T).unwrap();
        assert_eq!(spec.info.redis_settings().password(), Some("envpw"));
        let spec = parse_url("redis://u:urlpw@127.0.0.1", Some("envpw"), T).unwrap();
        assert_eq!(spec.info.redis_settings().password(), Some("urlpw"));
        assert_eq!(spec.info.redis_settings().username(), Some("u"));
    }

    #[test]
    fn bad_urls_are_usage_errors_that_do_not_echo_the_url() {
        for url in [
            "http://x",
            "nonsense",
            "redis://:pw@",
            "redis://host:notaport",
            "",
        ] {
            let err = parse_url(url, None, T).err().expect(url);
            assert_eq!(err.exit().code(), 2, "{url}");
            assert!(!err.to_string().contains("pw@"), "{err}");
        }
    }

    #[test]
    fn url_precedence_is_flag_then_redis_url_then_default() {
        assert_eq!(
            choose_urls(&["redis://a".into()], Some("redis://b".into())),
            ["redis://a"]
        );
        assert_eq!(choose_urls(&[], Some("redis://b".into())), ["redis://b"]);
        assert_eq!(choose_urls(&[], None), [DEFAULT_URL]);
    }
}
