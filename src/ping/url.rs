//! `--ping URL`: checked once, then joined with each endpoint of
//! healthchecks.io's protocol (`/start`, `/<status>`, `/log`) and a run id.
//!
//! The URL's credentials (`https://user:pw@host/...`), if any, go only into
//! the `Authorization` header: [`PingUrl::display`], the form every message
//! shows, leaves them out, and a parse error never quotes the URL.

use std::fmt::Write as _;

use super::run_id::RunId;

/// A monitor's ping URL (`https://hc-ping.com/<uuid>`,
/// `https://hc-ping.com/<ping-key>/<slug>?create=1`).
#[derive(Clone, Debug)]
pub struct PingUrl {
    url: url::Url,
}

/// Where one ping goes: the pieces of an HTTP request to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// `https` or `http`.
    pub tls: bool,
    /// The host as a TLS server name takes it (no brackets around IPv6).
    pub host: String,
    /// The port, the scheme's own when the URL gives none.
    pub port: u16,
    /// The `Host` header: the host (IPv6 in brackets) and a port the URL gave.
    pub host_header: String,
    /// The request target: path and query.
    pub target: String,
    /// `Basic <base64>` from the URL's credentials, if it has some.
    pub authorization: Option<String>,
    /// The URL as messages show it: no credentials, no query.
    pub display: String,
}

impl PingUrl {
    /// Checks `text` as a ping URL. The error completes `--ping: ` and never
    /// quotes the URL, which may carry credentials.
    pub fn parse(text: &str) -> Result<PingUrl, String> {
        let mut url = url::Url::parse(text.trim()).map_err(|e| {
            format!(
                "not a valid URL ({e}): expected https://HOST/PATH (e.g. https://hc-ping.com/UUID)"
            )
        })?;
        match url.scheme() {
            "http" | "https" => {}
            other => {
                return Err(format!("expected an http:// or https:// URL, not {other}:"));
            }
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err("the URL has no host: expected https://HOST/PATH".to_owned());
        }
        url.set_fragment(None);
        Ok(PingUrl { url })
    }

    /// Whether pings go over TLS.
    pub fn is_https(&self) -> bool {
        self.url.scheme() == "https"
    }

    /// The URL as messages show it: scheme, host, port and path, without
    /// credentials or query.
    pub fn display(&self) -> String {
        display(&self.url)
    }

    /// The request for `endpoint` (`start`, `log`, an exit status) of run
    /// `rid`: the segment appended to the URL's path, `rid=` merged into
    /// its query (replacing one the URL had).
    pub fn endpoint(&self, endpoint: &str, rid: &RunId) -> Endpoint {
        let mut url = self.url.clone();
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.pop_if_empty().push(endpoint);
        }
        let mut query: Vec<&str> = self
            .url
            .query()
            .unwrap_or("")
            .split('&')
            .filter(|pair| !pair.is_empty() && !pair.starts_with("rid="))
            .collect();
        let rid = format!("rid={rid}");
        query.push(&rid);
        url.set_query(Some(&query.join("&")));
        let host = match url.host() {
            Some(url::Host::Ipv6(ip)) => ip.to_string(),
            Some(host) => host.to_string(),
            None => String::new(),
        };
        let host_header = match url.port() {
            Some(port) => format!("{}:{port}", url.host_str().unwrap_or("")),
            None => url.host_str().unwrap_or("").to_owned(),
        };
        Endpoint {
            tls: url.scheme() == "https",
            host,
            port: url.port_or_known_default().unwrap_or(80),
            host_header,
            target: format!("{}?{}", url.path(), url.query().unwrap_or("")),
            authorization: authorization(&url),
            display: display(&url),
        }
    }
}

fn display(url: &url::Url) -> String {
    let mut shown = format!("{}://{}", url.scheme(), url.host_str().unwrap_or(""));
    if let Some(port) = url.port() {
        let _ = write!(shown, ":{port}");
    }
    shown.push_str(url.path());
    shown
}

/// HTTP Basic credentials from the URL's user and password, as curl sends
/// them (percent-decoded).
fn authorization(url: &url::Url) -> Option<String> {
    if url.username().is_empty() && url.password().is_none() {
        return None;
    }
    let decode = |s: &str| percent_encoding::percent_decode_str(s).collect::<Vec<u8>>();
    let mut pair = decode(url.username());
    pair.push(b':');
    pair.extend(decode(url.password().unwrap_or("")));
    Some(format!("Basic {}", base64(&pair)))
}

/// Standard base64 with padding (RFC 4648 §4), for the one header that
/// needs it.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rid() -> RunId {
        RunId::from_bytes([0x11; 16])
    }

    const RID: &str = "11111111-1111-4111-9111-111111111111";

    #[test]
    fn the_endpoint_is_appended_to_the_path_and_the_rid_to_the_query() {
        let url = PingUrl::parse("https://hc-ping.com/abc-uuid").unwrap();
        let start = url.endpoint("start", &rid());
        assert_eq!(start.target, format!("/abc-uuid/start?rid={RID}"));
        assert_eq!(start.host_header, "hc-ping.com");
        assert_eq!((start.tls, start.port), (true, 443));
        assert_eq!(start.display, "https://hc-ping.com/abc-uuid/start");
        let failed = url.endpoint("70", &rid());
        assert_eq!(failed.target, format!("/abc-uuid/70?rid={RID}"));
    }

    #[test]
    fn a_slug_url_keeps_its_query_and_a_trailing_slash_adds_no_empty_segment() {
        let url = PingUrl::parse("https://hc-ping.com/KEY/nightly-backup?create=1").unwrap();
        assert_eq!(
            url.endpoint("start", &rid()).target,
            format!("/KEY/nightly-backup/start?create=1&rid={RID}")
        );
        let url = PingUrl::parse("http://127.0.0.1:8000/ping/uuid/?rid=old&x=a%20b").unwrap();
        let log = url.endpoint("log", &rid());
        assert_eq!(log.target, format!("/ping/uuid/log?x=a%20b&rid={RID}"));
        assert_eq!((log.tls, log.port), (false, 8000));
        assert_eq!(log.host_header, "127.0.0.1:8000");
        assert_eq!(log.display, "http://127.0.0.1:8000/ping/uuid/log");
    }

    #[test]
    fn an_ipv6_host_is_bracketed_in_the_host_header_only() {
        let url = PingUrl::parse("http://[::1]:9/u").unwrap();
        let e = url.endpoint("0", &rid());
        assert_eq!(
            (e.host.as_str(), e.host_header.as_str()),
            ("::1", "[::1]:9")
        );
    }

    #[test]
    fn credentials_become_a_header_and_never_a_message() {
        let url = PingUrl::parse("https://us%40r:p%3Aw@hc.example/u#frag").unwrap();
        let e = url.endpoint("start", &rid());
        // "us@r:p:w"
        assert_eq!(e.authorization.as_deref(), Some("Basic dXNAcjpwOnc="));
        assert_eq!(url.display(), "https://hc.example/u");
        assert!(!e.target.contains("frag"));
        assert_eq!(
            PingUrl::parse("http://h/u")
                .unwrap()
                .endpoint("0", &rid())
                .authorization,
            None
        );
    }

    #[test]
    fn base64_pads_as_rfc_4648_says() {
        let cases = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
        ];
        for (plain, coded) in cases {
            assert_eq!(base64(plain.as_bytes()), coded);
        }
    }

    #[test]
    fn a_bad_url_is_refused_without_quoting_it() {
        let err = PingUrl::parse("ftp://user:secret@h/x").unwrap_err();
        assert_eq!(err, "expected an http:// or https:// URL, not ftp:");
        let err = PingUrl::parse("hc-ping.com/secret").unwrap_err();
        assert!(
            err.starts_with("not a valid URL (relative URL without a base)"),
            "{err}"
        );
        assert!(!err.contains("secret"));
        let err = PingUrl::parse("https://user:secret@:80/x").unwrap_err();
        assert!(!err.contains("secret"), "{err}");
    }
}
