//! One HTTP/1.1 POST to a monitor, over a std `TcpStream` (and rustls for
//! `https://`), all of it inside a deadline. A ping needs a request line, five
//! headers and a status code, so rlock writes them itself rather than link
//! an HTTP client (CONTRIBUTING.md, "Design notes").

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Instant;

use super::tls::Trust;
use super::url::Endpoint;

/// Why an attempt failed, and whether another could do better.
#[derive(Debug)]
pub(super) enum Failure {
    /// A refused or lost connection, a timeout, a 5xx: worth retrying.
    Transient(String),
    /// A 4xx (or any other answer but 2xx), a certificate not trusted:
    /// another attempt would get the same.
    Final(String),
}

/// Sends `body` to `endpoint` as `text/plain` and reads the status line; a
/// 2xx answer is success. Nothing after the status line is read.
pub(super) fn post(
    endpoint: &Endpoint,
    body: &[u8],
    trust: &Trust,
    deadline: Instant,
) -> Result<(), Failure> {
    let tcp = connect(endpoint, deadline)?;
    // A second handle on the socket, to set its timeouts while rustls owns it.
    let timer = tcp
        .try_clone()
        .map_err(|e| Failure::Transient(e.to_string()))?;
    let request = request(endpoint, body);
    let line = if endpoint.tls {
        let config = trust.config().map_err(Failure::Final)?;
        let name = rustls::pki_types::ServerName::try_from(endpoint.host.clone())
            .map_err(|e| Failure::Final(format!("TLS: {e}")))?;
        let conn = rustls::ClientConnection::new(config, name)
            .map_err(|e| Failure::Final(format!("TLS: {e}")))?;
        exchange(
            rustls::StreamOwned::new(conn, tcp),
            &timer,
            &request,
            deadline,
        )
    } else {
        exchange(tcp, &timer, &request, deadline)
    }?;
    status(&line)
}

fn connect(endpoint: &Endpoint, deadline: Instant) -> Result<TcpStream, Failure> {
    let addrs = (endpoint.host.as_str(), endpoint.port)
        .to_socket_addrs()
        .map_err(|e| Failure::Transient(format!("cannot resolve {}: {e}", endpoint.host)))?;
    let mut last = None;
    for addr in addrs {
        let left = remaining(deadline)?;
        match TcpStream::connect_timeout(&addr, left) {
            Ok(tcp) => return Ok(tcp),
            Err(e) => last = Some(e),
        }
    }
    Err(Failure::Transient(match last {
        Some(e) => format!("cannot connect: {}", io_cause(&e)),
        None => format!("cannot resolve {}: no address", endpoint.host),
    }))
}

fn request(endpoint: &Endpoint, body: &[u8]) -> Vec<u8> {
    let authorization = endpoint
        .authorization
        .as_ref()
        .map(|a| format!("Authorization: {a}\r\n"))
        .unwrap_or_default();
    let mut request = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: rlock/{}\r\n\
         Content-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\
         {authorization}Connection: close\r\n\r\n",
        endpoint.target,
        endpoint.host_header,
        env!("CARGO_PKG_VERSION"),
        body.len(),
    )
    .into_bytes();
    request.extend_from_slice(body);
    request
}

/// Writes `request` and reads up to the end of the status line, each step
/// bounded by what is left before `deadline`.
fn exchange(
    mut stream: impl Read + Write,
    timer: &TcpStream,
    request: &[u8],
    deadline: Instant,
) -> Result<String, Failure> {
    let failed = |e: io::Error| {
        if e.kind() == io::ErrorKind::InvalidData {
            // rustls: the certificate or the handshake; the same next time.
            Failure::Final(format!("TLS: {e}"))
        } else {
            Failure::Transient(io_cause(&e))
        }
    };
    timer
        .set_write_timeout(Some(remaining(deadline)?))
        .map_err(failed)?;
    stream
        .write_all(request)
        .and_then(|()| stream.flush())
        .map_err(failed)?;
    let mut buf = [0u8; 512];
    let mut len = 0;
    while !buf[..len].contains(&b'\n') && len < buf.len() {
        timer
            .set_read_timeout(Some(remaining(deadline)?))
            .map_err(failed)?;
        match stream.read(&mut buf[len..]) {
            Ok(0) => return Err(Failure::Transient("closed before answering".into())),
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(failed(e)),
        }
    }
    let text = String::from_utf8_lossy(&buf[..len]);
    Ok(text.lines().next().unwrap_or("").to_owned())
}

/// `HTTP/1.1 200 OK` → success; 5xx → worth retrying; anything else final.
fn status(line: &str) -> Result<(), Failure> {
    let mut words = line.splitn(3, ' ');
    let version = words.next().unwrap_or("");
    let code = words.next().and_then(|c| c.parse::<u16>().ok());
    let reason = crate::report::sanitize(words.next().unwrap_or("").trim());
    let shown = format!("HTTP {} {reason}", code.unwrap_or(0))
        .trim_end()
        .to_owned();
    match code {
        _ if !version.starts_with("HTTP/") => {
            Err(Failure::Transient("the answer is not HTTP".to_owned()))
        }
        Some(200..=299) => Ok(()),
        Some(500..=599) => Err(Failure::Transient(shown)),
        Some(_) => Err(Failure::Final(shown)),
        None => Err(Failure::Transient("the answer is not HTTP".to_owned())),
    }
}

fn remaining(deadline: Instant) -> Result<std::time::Duration, Failure> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        Err(Failure::Transient("timed out".to_owned()))
    } else {
        Ok(left)
    }
}

/// An I/O error as a cause: a socket timeout is "timed out" whichever of
/// its two kinds the system reports.
fn io_cause(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => "timed out".to_owned(),
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_line_is_read_as_healthchecks_answers_it() {
        assert!(status("HTTP/1.1 200 OK").is_ok());
        assert!(status("HTTP/1.0 201").is_ok());
        assert!(
            matches!(status("HTTP/1.1 503 Service Unavailable"), Err(Failure::Transient(c)) if c == "HTTP 503 Service Unavailable")
        );
        assert!(
            matches!(status("HTTP/1.1 404 not found"), Err(Failure::Final(c)) if c == "HTTP 404 not found")
        );
        assert!(matches!(
            status("SSH-2.0-OpenSSH"),
            Err(Failure::Transient(_))
        ));
    }
}
