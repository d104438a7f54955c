//! A real `redis-server` on a free 127.0.0.1 port, killed by PID on drop.
//!
//! `RLOCK_TEST_SERVER` names the server binary (a path, or a name looked up in
//! PATH; default `redis-server`): scripts/test runs the core groups again with
//! each server of the matrix (Redis 6.2, 8.2, Valkey 8.1).

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::process::{self, Proc};
use super::scratch::Scratch;

pub struct RedisServer {
    pub port: u16,
    proc: Proc,
    dir: Scratch,
    password: Option<String>,
    extra: Vec<String>,
    env: Vec<(String, String)>,
}

/// The server binary every test spawns: `$RLOCK_TEST_SERVER`, else `redis-server`.
/// Sentinels are the same binary with `--sentinel`.
pub fn server_bin() -> std::ffi::OsString {
    std::env::var_os("RLOCK_TEST_SERVER")
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "redis-server".into())
}

/// The server's version from `--version` (`Redis server v=6.2.5 ...`,
/// `Valkey server v=8.1.8 ...`), asked once: (major, minor).
pub fn server_version() -> (u32, u32) {
    static VERSION: std::sync::OnceLock<(u32, u32)> = std::sync::OnceLock::new();
    *VERSION.get_or_init(|| {
        let out = Command::new(server_bin())
            .arg("--version")
            .output()
            .unwrap_or_else(|e| panic!("cannot run {:?} --version: {e}", server_bin()));
        let text = String::from_utf8_lossy(&out.stdout);
        let v = text
            .split_whitespace()
            .find_map(|w| w.strip_prefix("v="))
            .unwrap_or_else(|| panic!("no v= in {:?} --version: {text}", server_bin()));
        let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
        (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
    })
}

/// A 127.0.0.1 port nothing listens on (at the moment of asking).
/// In the arguments of [`RedisServer::start_with`], a port of its own (a
/// TLS port, say), chosen again with the server's port when either was
/// taken meanwhile; [`RedisServer::arg_after`] reads it back.
pub const FREE_PORT: &str = "{free-port}";

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A 127.0.0.1 port that refuses connections for as long as the returned
/// socket lives: bound but not listening, so no other test's server can take
/// it meanwhile (a stopped server's port could be reused by one).
pub fn refusing_port() -> (std::os::fd::OwnedFd, u16) {
    use std::os::fd::FromRawFd;
    // SAFETY: plain socket calls on a descriptor this function owns; the
    // address structures are initialised before use.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let owned = std::os::fd::OwnedFd::from_raw_fd(fd);
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let rc = libc::bind(fd, (&addr as *const libc::sockaddr_in).cast(), len);
        assert_eq!(rc, 0, "bind: {}", std::io::Error::last_os_error());
        let mut bound: libc::sockaddr_in = std::mem::zeroed();
        let mut blen = len;
        libc::getsockname(fd, (&mut bound as *mut libc::sockaddr_in).cast(), &mut blen);
        (owned, u16::from_be(bound.sin_port))
    }
}

impl RedisServer {
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts a server with extra `redis-server` arguments (e.g. `--requirepass x`).
    pub fn start_with(extra: &[&str]) -> Self {
        Self::start_with_env(extra, &[])
    }

    /// [`start_with`](Self::start_with), with variables added to the
    /// server's environment (`LD_PRELOAD`, say).
    pub fn start_with_env(extra: &[&str], env: &[(&str, &str)]) -> Self {
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let password = extra
            .iter()
            .position(|a| a == "--requirepass")
            .map(|i| extra[i + 1].clone());
        // The port may be taken between choosing it and binding it: retry,
        // with a fresh port for each FREE_PORT of `extra` too.
        for _ in 0..10 {
            let dir = Scratch::new();
            let port = free_port();
            let extra: Vec<String> = extra
                .iter()
                .map(|a| match a.as_str() {
                    FREE_PORT => free_port().to_string(),
                    _ => a.clone(),
                })
                .collect();
            let proc = spawn(port, &dir, &extra, &env);
            let mut server = RedisServer {
                port,
                proc,
                dir,
                password: password.clone(),
                extra: extra.clone(),
                env: env.clone(),
            };
            if server.wait_ready() {
                return server;
            }
            let log = server.log();
            assert!(
                log.contains("Address already in use"),
                "redis-server failed to start:\n{log}"
            );
        }
        panic!("could not find a free port for redis-server");
    }

    /// The argument the server was started with after `flag` (a port
    /// [`FREE_PORT`] stood for).
    pub fn arg_after(&self, flag: &str) -> Option<&str> {
        let at = self.extra.iter().position(|a| a == flag)?;
        self.extra.get(at + 1).map(String::as_str)
    }

    /// A primary and a replica in sync with it.
    pub fn with_replica() -> (Self, Self) {
        let primary = Self::start();
        let port = primary.port.to_string();
        let replica = Self::start_with(&["--replicaof", "127.0.0.1", &port]);
        super::expect_within(super::rlock::LIMIT, "the replica to sync", || {
            let info: String = primary.cmd(&["INFO", "replication"]);
            info.contains("connected_slaves:1") && info.contains("state=online")
        });
        (primary, replica)
    }

    /// SIGKILLs the server and starts it again on the same port and directory
    /// (with `--appendonly yes` among the extra arguments, data survives).
    pub fn restart(&mut self) {
        self.proc.kill();
        for _ in 0..50 {
            self.proc = spawn(self.port, &self.dir, &self.extra, &self.env);
            if self.wait_ready() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("redis-server did not come back:\n{}", self.log());
    }

    /// SIGKILLs the server (connections to its port are refused until
    /// [`respawn`](Self::respawn)).
    pub fn stop(&mut self) {
        self.proc.kill();
    }

    /// Starts a stopped server again on the same port and directory, without
    /// waiting for it to listen or finish loading its data.
    pub fn respawn(&mut self) {
        self.proc = spawn(self.port, &self.dir, &self.extra, &self.env);
    }

    /// Waits until this server answers, or exits. An answer counts only
    /// from this process: another test's server on the same port (chosen
    /// by both, or left by a restart) would answer while this one fails to
    /// bind, and vanish with that test.
    fn wait_ready(&mut self) -> bool {
        super::wait_until(Duration::from_secs(10), || {
            self.proc.try_status().is_some() || self.answers_as_itself()
        }) && self.proc.try_status().is_none()
    }

    fn answers_as_itself(&self) -> bool {
        let Some(mut con) = self.try_connection() else {
            return false;
        };
        let info: String = match redis::cmd("INFO").arg("server").query(&mut con) {
            Ok(info) => info,
            Err(_) => return false,
        };
        // A server that does not say its pid is taken at its word.
        info.lines()
            .find_map(|l| l.strip_prefix("process_id:"))
            .and_then(|pid| pid.trim().parse::<u32>().ok())
            .is_none_or(|pid| pid == self.proc.pid)
    }

    /// The server's log, after what it printed before opening it (a refused
    /// option, e.g. one this server version does not know).
    fn log(&self) -> String {
        self.dir.read("redis.stderr") + &self.dir.read("redis.log")
    }

    pub fn pid(&self) -> u32 {
        self.proc.pid
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn try_connection(&self) -> Option<redis::Connection> {
        let mut info = redis::IntoConnectionInfo::into_connection_info(self.url().as_str()).ok()?;
        if let Some(pw) = &self.password {
            info = info
                .clone()
                .set_redis_settings(info.redis_settings().clone().set_password(pw));
        }
        let client = redis::Client::open(info).ok()?;
        let mut con = client
            .get_connection_with_timeout(Duration::from_secs(1))
            .ok()?;
        con.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        redis::cmd("PING").query::<String>(&mut con).ok()?;
        Some(con)
    }

    /// A connection for inspecting and changing the server from the test.
    pub fn con(&self) -> redis::Connection {
        self.try_connection().unwrap_or_else(|| {
            panic!(
                "redis-server on port {} is not answering:\n{}",
                self.port,
                self.log()
            )
        })
    }

    /// Runs one command and returns its reply.
    pub fn cmd<T: redis::FromRedisValue>(&self, args: &[&str]) -> T {
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query(&mut self.con()).unwrap()
    }

    /// The server's clock (TIME) in microseconds since the epoch.
    pub fn time_us(&self) -> u64 {
        let (secs, micros): (u64, u64) = self.cmd(&["TIME"]);
        secs * 1_000_000 + micros
    }

    /// All keys, sorted (SCAN is not needed for a test's handful of keys).
    pub fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self.cmd(&["KEYS", "*"]);
        keys.sort();
        keys
    }

    /// Keys of lock `name` other than its fence counter, which persists by
    /// design, and its history, which outlives holds by design.
    pub fn lock_keys(&self, name: &str) -> Vec<String> {
        let fence = format!("rlock:{{{name}}}:fence");
        let history = format!("rlock:{{{name}}}:history");
        self.keys()
            .into_iter()
            .filter(|k| k.contains(&format!("{{{name}}}")) && *k != fence && *k != history)
            .collect()
    }

    pub fn freeze(&self) {
        process::signal(self.pid(), libc::SIGSTOP);
    }

    pub fn thaw(&self) {
        process::signal(self.pid(), libc::SIGCONT);
    }
}

/// Drops the options a server older than 7 does not know and whose effect it has
/// by default (`--enable-debug-command`: DEBUG is always enabled before 7), so
/// one test runs on every server of the matrix.
fn for_this_server(extra: &[String]) -> Vec<String> {
    if server_version() >= (7, 0) {
        return extra.to_vec();
    }
    let mut kept = Vec::new();
    let mut args = extra.iter();
    while let Some(a) = args.next() {
        if a == "--enable-debug-command" {
            args.next();
        } else {
            kept.push(a.clone());
        }
    }
    kept
}

fn spawn(port: u16, dir: &Scratch, extra: &[String], env: &[(String, String)]) -> Proc {
    let child = Command::new(server_bin())
        .envs(env.iter().map(|(k, v)| (k, v)))
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .arg("--dir")
        .arg(dir.path())
        .arg("--logfile")
        .arg(dir.path().join("redis.log"))
        .args(for_this_server(extra))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("redis.stderr")).unwrap())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot start {:?} ({e}): scripts/test installs it",
                server_bin()
            )
        });
    Proc::new(child)
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        // A stopped server still dies of SIGKILL; Proc's drop sends it and reaps.
        self.proc.kill();
    }
}
