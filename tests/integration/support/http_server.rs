//! A real HTTP (or HTTPS) server on a free 127.0.0.1 port that records each
//! request it reads (method, path, query, headers, body), as a monitor such
//! as healthchecks.io would receive rlock's pings. It can answer the first
//! requests with chosen statuses (500 to test retries, 404 to test that a
//! 4xx is not retried) and stall (read a request, never answer), to test the
//! time bound. Stopped on drop.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::tls::Tls;

/// One request as the server read it.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    pub path: String,
    /// What follows `?` in the target, "" when nothing does.
    pub query: String,
    /// Names lower-cased, in the order sent.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    /// The first header named `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The value of query parameter `name`.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query
            .split('&')
            .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
    }

    pub fn body_text(&self) -> String {
        String::from_utf8(self.body.clone()).expect("a UTF-8 body")
    }
}

#[derive(Default)]
struct State {
    requests: Vec<Request>,
    /// Statuses for the first requests, in order; 200 after them.
    answers: Vec<u16>,
    stall: bool,
    stopping: bool,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

/// The server; see the module comment.
pub struct HttpServer {
    port: u16,
    tls: bool,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl HttpServer {
    /// A plain HTTP server.
    pub fn http() -> Self {
        Self::start(None)
    }

    /// An HTTPS server with `tls`'s `server.crt` (for 127.0.0.1 and
    /// localhost, signed by its `ca.crt`).
    pub fn https(tls: &Tls) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let certs = CertificateDer::pem_file_iter(tls.file("server.crt"))
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_file(tls.file("server.key")).unwrap();
        let config = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap();
        Self::start(Some(Arc::new(config)))
    }

    fn start(tls: Option<Arc<rustls::ServerConfig>>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let is_tls = tls.is_some();
        let acceptor = {
            let (shared, stop) = (shared.clone(), stop.clone());
            std::thread::spawn(move || accept(listener, tls, shared, stop))
        };
        HttpServer {
            port,
            tls: is_tls,
            shared,
            stop,
            acceptor: Some(acceptor),
        }
    }

    /// `http(s)://127.0.0.1:PORT` + `path`.
    pub fn url(&self, path: &str) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}{path}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Answers the next requests with `statuses`, in order, then 200.
    pub fn answer(&self, statuses: &[u16]) {
        self.shared.state.lock().unwrap().answers = statuses.to_vec();
    }

    /// From now on, reads and records each request and never answers it.
    pub fn stall(&self) {
        self.shared.state.lock().unwrap().stall = true;
    }

    /// The requests read so far.
    pub fn requests(&self) -> Vec<Request> {
        self.shared.state.lock().unwrap().requests.clone()
    }

    /// Waits until `count` requests have been read (panics after `within`).
    pub fn wait_for(&self, count: usize, within: Duration) -> Vec<Request> {
        let state = self.shared.state.lock().unwrap();
        let (state, timeout) = self
            .shared
            .changed
            .wait_timeout_while(state, within, |s| s.requests.len() < count)
            .unwrap();
        assert!(
            !timeout.timed_out(),
            "timed out after {within:?} waiting for {count} requests; got {:?}",
            state.requests
        );
        state.requests.clone()
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.shared.state.lock().unwrap().stopping = true;
        self.shared.changed.notify_all();
        // Wakes the acceptor, which then sees `stop`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

fn accept(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
) {
    for conn in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(tcp) = conn else { continue };
        let _ = tcp.set_read_timeout(Some(Duration::from_secs(10)));
        let (tls, shared) = (tls.clone(), shared.clone());
        std::thread::spawn(move || match tls {
            Some(config) => {
                let Ok(conn) = rustls::ServerConnection::new(config) else {
                    return;
                };
                let mut stream = rustls::StreamOwned::new(conn, tcp);
                serve(&mut stream, &shared);
                stream.conn.send_close_notify();
                let _ = stream.flush();
            }
            None => serve(&mut { tcp }, &shared),
        });
    }
}

/// Reads one request, records it, then answers it or stalls.
fn serve(stream: &mut (impl Read + Write), shared: &Shared) {
    let Some(request) = read_request(stream) else {
        return;
    };
    let status = {
        let mut state = shared.state.lock().unwrap();
        state.requests.push(request);
        shared.changed.notify_all();
        if state.stall {
            let _unused = shared.changed.wait_while(state, |s| !s.stopping).unwrap();
            return;
        }
        if state.answers.is_empty() {
            200
        } else {
            state.answers.remove(0)
        }
    };
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        500 => "Internal Server Error",
        _ => "Whatever",
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status} {reason}\r\nContent-Length: 2\r\nConnection: close\r\n\r\nOK"
    );
    let _ = stream.flush();
}

fn read_request(stream: &mut impl Read) -> Option<Request> {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        let n = stream.read(&mut buf).ok().filter(|&n| n > 0)?;
        data.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8(data[..head_end].to_vec()).ok()?;
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_owned();
    let target = first.next()?;
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .map_or(0, |(_, v)| v.parse().unwrap_or(0));
    let mut body = data[head_end + 4..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut buf).ok().filter(|&n| n > 0)?;
        body.extend_from_slice(&buf[..n]);
    }
    Some(Request {
        method,
        path: path.to_owned(),
        query: query.to_owned(),
        headers,
        body,
    })
}
