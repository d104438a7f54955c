//! A password fetched again for each new connection: from `--password-file`,
//! or from what `--password-command` prints. Short-lived tokens used as
//! passwords (ElastiCache IAM, Entra for Azure Cache) rotate under a long
//! hold, so a reconnect must not reuse the one the run started with.

use std::io::Read;
use std::os::fd::AsFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::sys::process::{self, Pid};
use crate::sys::signal::Signal;

/// How long `--password-command` may take: long enough for a cloud CLI
/// that starts an interpreter and asks a token service, short enough that a
/// hung one fails the connection rather than the lease.
pub const COMMAND_BOUND: Duration = Duration::from_secs(10);

/// The most of its output rlock reads (a token is a few kilobytes).
const OUTPUT_CAP: u64 = 1 << 20;

/// Where the password comes from at each new connection.
#[derive(Clone)]
pub enum PasswordFrom {
    /// `--password-file`: the file, read again.
    File(PathBuf),
    /// `--password-command`: the shell command, run again.
    Command(String),
}

impl PasswordFrom {
    /// The option it was given with.
    pub fn option(&self) -> &'static str {
        match self {
            PasswordFrom::File(_) => "--password-file",
            PasswordFrom::Command(_) => "--password-command",
        }
    }

    /// The password now; an error (free of the password and of the
    /// command's output) says why there is none.
    pub fn fetch(&self) -> std::result::Result<String, String> {
        match self {
            PasswordFrom::File(file) => super::read_password_file(file),
            PasswordFrom::Command(command) => {
                run_command(command).map_err(|why| format!("--password-command failed: {why}"))
            }
        }
    }
}

/// Runs `command` with `sh -c`, stdin from /dev/null, in a process group
/// of its own (stopped once it exits, so nothing it left keeps its output
/// open): its first line of output, without the line end, is the password.
fn run_command(command: &str) -> std::result::Result<String, String> {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot run sh: {e}"))?;
    let deadline = Instant::now() + COMMAND_BOUND;
    let group = Pid::from_raw(i32::try_from(child.id()).unwrap_or(0));
    let stdout = read_all(child.stdout.take());
    let stderr = read_all(child.stderr.take());
    let in_time = exits_by(group, deadline);
    // Before it is reaped, its group id cannot have been reused.
    process::signal_group(group, Signal::KILL);
    let status = child
        .wait()
        .map_err(|e| format!("cannot wait for it: {e}"))?;
    let left = deadline.saturating_duration_since(Instant::now()) + Duration::from_millis(100);
    let stderr = first_line(&stderr.recv_timeout(left).unwrap_or_default());
    if !in_time {
        return Err(format!(
            "it did not finish within {}",
            humantime::format_duration(COMMAND_BOUND)
        ));
    }
    let said = |fallback: String| {
        if stderr.is_empty() {
            fallback
        } else {
            crate::report::sanitize(&stderr)
        }
    };
    if !status.success() {
        return Err(said(describe(status)));
    }
    let password = first_line(&stdout.recv_timeout(left).unwrap_or_default());
    if password.is_empty() {
        return Err(said("it printed no password".into()));
    }
    Ok(password)
}

/// Reads `pipe` to its end (at most [`OUTPUT_CAP`]) on a thread of its own.
fn read_all(pipe: Option<impl Read + Send + 'static>) -> mpsc::Receiver<Vec<u8>> {
    let (sent, got) = mpsc::channel();
    if let Some(pipe) = pipe {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.take(OUTPUT_CAP).read_to_end(&mut bytes);
            let _ = sent.send(bytes);
        });
    }
    got
}

/// Whether process `pid` exits by `deadline` (left unreaped).
fn exits_by(pid: Pid, deadline: Instant) -> bool {
    let Ok(pidfd) = process::pidfd_open(pid) else {
        return false;
    };
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match process::poll_ready(&[pidfd.as_fd()], Some(left)) {
            Ok(ready) if ready[0] => return true,
            Ok(_) if left.is_zero() => return false,
            Ok(_) => {}
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

/// The first line of `bytes`, without its line end.
fn first_line(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let line = text.split('\n').next().unwrap_or_default();
    line.strip_suffix('\r').unwrap_or(line).to_owned()
}

/// How a command without anything on stderr ended.
fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("it exited with status {code}"),
        (None, Some(signal)) => format!("it was killed by {}", Signal::from_number(signal)),
        _ => "it failed".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_line_is_the_password_and_stderr_says_why_not() {
        let fetch = |command: &str| PasswordFrom::Command(command.into()).fetch();
        assert_eq!(fetch("printf 'tok-1\\r\\nmore\\n'"), Ok("tok-1".into()));
        assert_eq!(fetch("printf tok-2"), Ok("tok-2".into()));
        assert_eq!(
            fetch("echo secret; echo 'no token: expired' >&2; echo more >&2; exit 3"),
            Err("--password-command failed: no token: expired".into())
        );
        assert_eq!(
            fetch("exit 4"),
            Err("--password-command failed: it exited with status 4".into())
        );
        assert_eq!(
            fetch("echo; echo 'empty' >&2"),
            Err("--password-command failed: empty".into())
        );
        assert_eq!(
            fetch("true"),
            Err("--password-command failed: it printed no password".into())
        );
        assert_eq!(
            fetch("printf 'bad\\033[31m\\n' >&2; exit 1"),
            Err("--password-command failed: bad\\u{1b}[31m".into())
        );
    }

    #[test]
    fn what_it_leaves_running_does_not_hold_the_run() {
        let started = Instant::now();
        let got = PasswordFrom::Command("sleep 30 & echo tok".into()).fetch();
        assert_eq!(got, Ok("tok".into()));
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
