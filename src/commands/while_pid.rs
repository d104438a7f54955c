//! `rlock acquire --while-pid PID`: the detached keeper that holds a lock for
//! a shell script while PID lives (renewing a Redis lease, or keeping the open
//! files of a `file:` lock), how `acquire` starts it, and how both follow PID.

use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::process::Child;
use std::time::{Duration, Instant};

use crate::backend::Extend;
use crate::cli::WhilePidArgs;
use crate::config::{Config, LockSpec};
use crate::error::{Error, Result};
use crate::exit::Exit;
use crate::holding::retries::Retries;
use crate::lock::lease::Lease;
use crate::lock::token::Token;
use crate::sys::signal::Signal;

pub use crate::sys::process::{Ready, Watched};

/// Ends the wait of `acquire` (as a signal would) if `watched` exits first:
/// nobody would be left to hold the lock for.
pub fn interrupt_on_exit(watched: &Watched, shared: &std::sync::Arc<crate::run_state::Shared>) {
    let watched = watched.try_clone();
    let shared = std::sync::Arc::clone(shared);
    std::thread::spawn(move || {
        while !watched.exits_within(Duration::from_secs(3600)) {}
        shared.interrupt(Signal::HUP);
    });
}

/// `acquire`'s end of a keeper that has taken over the hold.
pub struct Keeper {
    child: Child,
    stream: std::os::unix::net::UnixStream,
}

impl Keeper {
    /// The token is with the script: the keeper may keep the hold.
    pub fn confirm(mut self) -> std::io::Result<()> {
        self.stream.write_all(b"2")
    }

    /// Ends the keeper (which shares the hold) and waits for it to be gone.
    pub fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How long `acquire` waits for the keeper to take over.
fn ready_within(config: &Config) -> Duration {
    config.connect_timeout + Duration::from_secs(5)
}

/// Why starting the keeper failed.
pub enum StartError {
    /// It could not start, or did not take over in time.
    Failed(std::io::Error),
    /// A signal came while `acquire` waited for it.
    Interrupted(crate::sys::signal::Signal),
}

/// Starts the detached keeper (a new session, no terminal, no inherited stdio,
/// so `token=$(rlock acquire ...)` does not wait for it) and waits until it
/// has taken over (a Redis keeper has renewed the hold once). It inherits the
/// pidfd of PID, `fds` (a `file:` lock's open files) and its end of the
/// handshake, nothing else; the URL, TLS files and the token travel in its
/// environment, not on its command line. A keeper that fails to take over, or
/// a signal meanwhile (`interrupted`), gets it killed and reaped, so nothing
/// of the hold lives on in it.
pub fn start(
    config: &Config,
    spec: &LockSpec,
    name: &str,
    watched: &Watched,
    token: &Token,
    fds: &[RawFd],
    interrupted: &dyn Fn() -> Option<crate::sys::signal::Signal>,
) -> std::result::Result<Keeper, StartError> {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().map_err(StartError::Failed)?;
    let write = OwnedFd::from(theirs);
    let mut kept: Vec<RawFd> = fds.to_vec();
    kept.push(write.as_raw_fd());
    kept.extend(watched.fd());
    crate::sys::process::only_these_inherited(&kept).map_err(StartError::Failed)?;
    let launch = Launch {
        config,
        spec,
        name,
        watched,
        token,
        fds,
        ready: write.as_raw_fd(),
    };
    let mut cmd = launch.command().map_err(StartError::Failed)?;
    let mut child = cmd.spawn().map_err(StartError::Failed)?;
    drop(write);
    let until = Instant::now() + ready_within(config);
    match taken_over(&ours, until, interrupted) {
        Ok(()) => Ok(Keeper {
            child,
            stream: ours,
        }),
        Err(err) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(err)
        }
    }
}

/// What the keeper is started with: the lock, PID, the hold's files and
/// its end of the handshake.
struct Launch<'a> {
    config: &'a Config,
    spec: &'a LockSpec,
    name: &'a str,
    watched: &'a Watched,
    token: &'a Token,
    /// A `file:` lock's open files.
    fds: &'a [RawFd],
    /// The keeper's end of the handshake.
    ready: RawFd,
}

impl Launch<'_> {
    /// `rlock __while-pid` with its options on the command line, and the
    /// URL, TLS files and token in its environment, detached from the
    /// script's session and stdio.
    fn command(&self) -> std::io::Result<std::process::Command> {
        let (config, spec) = (self.config, self.spec);
        let mut cmd = std::process::Command::new(std::env::current_exe()?);
        for var in [
            "RLOCK_CACERT",
            "RLOCK_CERT",
            "RLOCK_KEY",
            "RLOCK_PASSWORD_FILE",
            "RLOCK_PASSWORD_COMMAND",
        ] {
            cmd.env_remove(var);
        }
        cmd.arg(crate::cli::WHILE_PID)
            .arg("--connect-timeout")
            .arg(humantime::format_duration(config.connect_timeout).to_string())
            .arg("--pid")
            .arg(self.watched.pid().to_string())
            .arg("--ttl")
            .arg(humantime::format_duration(spec.ttl).to_string())
            .arg("--history")
            .arg(spec.history.to_string());
        if spec.redisson {
            cmd.arg("--redisson");
        }
        self.pass_files(&mut cmd)?;
        if let Some(command) = &config.password_command {
            cmd.env("RLOCK_PASSWORD_COMMAND", command);
        }
        // After `--`, a NAME such as `-v` is a name, not an option.
        cmd.arg("--")
            .arg(self.name)
            .env("RLOCK_URL", config.urls.join(","))
            .env("RLOCK_PREFIX", &config.prefix)
            .env("RLOCK_KEEP_TOKEN", self.token.as_str())
            .env("RLOCK_KEEP_FDS", fd_list(self.fds))
            .env("RLOCK_KEEP_READY", self.ready.to_string())
            .env(
                "RLOCK_KEEP_PIDFD",
                self.watched
                    .fd()
                    .map(|fd| fd.to_string())
                    .unwrap_or_default(),
            )
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        crate::sys::process::new_session(&mut cmd);
        Ok(cmd)
    }

    /// The TLS and password files, as absolute paths: the keeper's working
    /// directory is not the script's for long.
    fn pass_files(&self, cmd: &mut std::process::Command) -> std::io::Result<()> {
        let config = self.config;
        for (var, file) in [
            ("RLOCK_CACERT", &config.tls.cacert),
            ("RLOCK_CERT", &config.tls.cert),
            ("RLOCK_KEY", &config.tls.key),
            ("RLOCK_PASSWORD_FILE", &config.password_file),
        ] {
            if let Some(file) = file {
                cmd.env(var, std::path::absolute(file)?);
            }
        }
        Ok(())
    }
}

/// `fds` as the keeper reads them back: `3,4,5`.
fn fd_list(fds: &[RawFd]) -> String {
    fds.iter()
        .map(|fd| fd.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// Waits until the keeper says on `stream` that it has taken over, a signal
/// comes (`interrupted`), or `until` passes.
fn taken_over(
    mut stream: &std::os::unix::net::UnixStream,
    until: Instant,
    interrupted: &dyn Fn() -> Option<crate::sys::signal::Signal>,
) -> std::result::Result<(), StartError> {
    loop {
        if let Some(signal) = interrupted() {
            return Err(StartError::Interrupted(signal));
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(StartError::Failed(std::io::Error::other(
                "it did not take over in time",
            )));
        }
        // Short steps, so a signal is seen soon.
        let step = left
            .min(Duration::from_millis(50))
            .max(Duration::from_millis(1));
        if crate::sys::process::poll_readable(&[stream.as_fd()], Some(step)).is_ok_and(|n| n > 0) {
            let mut byte = [0u8; 1];
            return match stream.read(&mut byte) {
                Ok(1) => Ok(()),
                _ => Err(StartError::Failed(std::io::Error::other(
                    "it ended before taking over",
                ))),
            };
        }
    }
}

/// `__while-pid`: keeps the hold while PID lives and lets it go when PID
/// exits. A Redis hold is renewed at the run's cadence, and the keeper ends when the
/// hold is gone (released, forced, expired) or cannot be renewed before its
/// lease could run out; a `file:` hold lives in the inherited open files.
pub fn keep(config: &Config, args: &WhilePidArgs) -> Result<Exit> {
    let token = std::env::var("RLOCK_KEEP_TOKEN")
        .ok()
        .and_then(|t| Token::parse(&t))
        .ok_or_else(|| Error::usage("__while-pid is internal to rlock acquire --while-pid"))?;
    let inherited = |var: &str| {
        std::env::var(var)
            .ok()
            .and_then(|fd| fd.parse::<RawFd>().ok())
    };
    let watched = Watched::inherited(args.pid, inherited("RLOCK_KEEP_PIDFD"));
    let mut ready = Ready::inherited(inherited("RLOCK_KEEP_READY"));
    // The process the hold followed, for the `released` event.
    let argv = crate::sys::process::cmdline(args.pid);
    let mut released = crate::holding::holder::event(
        crate::lock::event::EventKind::Released,
        &crate::holding::holder::described(&argv, &config.note),
    );
    released.pid = Some(u64::from(args.pid));
    if let crate::config::Target::Local(dir) = &config.target {
        let fds: Vec<RawFd> = std::env::var("RLOCK_KEEP_FDS")
            .unwrap_or_default()
            .split(',')
            .filter_map(|fd| fd.parse().ok())
            .collect();
        crate::backend::keep_while(
            dir,
            &args.name,
            &token,
            &watched,
            &fds,
            &mut ready,
            Some((args.history, released)),
        )?;
        return Ok(Exit::Success);
    }
    renew_while(config, args, &token, &watched, &mut ready, released)
}

/// A server's hold: renewed at the run's cadence while PID lives, released
/// (with its `released` event) when PID exits.
fn renew_while(
    config: &Config,
    args: &WhilePidArgs,
    token: &Token,
    watched: &Watched,
    ready: &mut Ready,
    mut released: crate::lock::event::Event,
) -> Result<Exit> {
    let keys = config.lock_id(args.redisson, &args.name);
    let backend = config.backend(keys.dialect())?;
    let mut session = backend.connect()?;
    // One renewal proves the connection (TLS included) before acquire is told.
    if !session.renew(
        &keys,
        token,
        args.ttl,
        config.connect_timeout,
        Extend::AtLeast,
    )? {
        return Ok(Exit::NotHeld);
    }
    if !ready.handshake() {
        let _ = session.release(&keys, token);
        return Ok(Exit::Success);
    }
    // The run's cadence: an outage at the worst moment is ridden out 90%
    // as long as at the best. With no COMMAND to stop, the whole lease is
    // the stretch.
    let period = Lease::Renewed(args.ttl).period(Duration::ZERO);
    let margin = crate::lock::clock::drift(args.ttl);
    let started = Instant::now();
    // When the last confirmed renewal was sent: the lease is proven from there.
    let mut confirmed = started;
    let mut wait = period;
    let mut retries = Retries::default();
    loop {
        if watched.exits_within(wait) {
            released.held_ms = Some(u64::try_from(started.elapsed().as_millis()).unwrap_or(0));
            let record = (args.history > 0).then_some((args.history, &released));
            let _ = session.release_recorded(&keys, token, record);
            return Ok(Exit::Success);
        }
        let sent = Instant::now();
        match session.renew(
            &keys,
            token,
            args.ttl,
            config.connect_timeout,
            Extend::AtLeast,
        ) {
            Ok(true) => {
                confirmed = sent;
                wait = period.saturating_sub(sent.elapsed());
                retries = Retries::default();
            }
            Ok(false) => return Ok(Exit::NotHeld),
            Err(_) if confirmed.elapsed() + margin < args.ttl => {
                wait = retries.next(args.ttl.saturating_sub(confirmed.elapsed() + margin));
            }
            Err(err) => return Err(err),
        }
    }
}
