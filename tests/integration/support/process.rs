//! Child processes a test starts: waited for with a deadline, killed by PID on drop.

use std::process::{Child, ExitStatus, Output};
use std::time::{Duration, Instant};

/// Sends `signal` to `pid`.
pub fn signal(pid: u32, signal: i32) {
    // SAFETY: kill has no memory-safety preconditions.
    unsafe { libc::kill(pid as i32, signal) };
}

/// True while `pid` exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rsplit(')')
                .next()
                .and_then(|s| s.split_whitespace().next());
            !matches!(state, Some("Z" | "X"))
        }
        Err(_) => false,
    }
}

/// A running child, killed (SIGKILL) and reaped when dropped unless waited for.
pub struct Proc {
    child: Option<Child>,
    pub pid: u32,
}

impl Proc {
    pub fn new(child: Child) -> Self {
        let pid = child.id();
        Proc {
            child: Some(child),
            pid,
        }
    }

    pub fn signal(&self, sig: i32) {
        signal(self.pid, sig);
    }

    /// Exit status if it has exited.
    pub fn try_status(&mut self) -> Option<ExitStatus> {
        self.child.as_mut()?.try_wait().unwrap()
    }

    /// Waits at most `within`; panics (after killing it) when it does not exit.
    pub fn wait_within(&mut self, within: Duration) -> ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.try_status() {
                return status;
            }
            if Instant::now() >= deadline {
                self.kill();
                panic!("process {} did not exit within {within:?}", self.pid);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits at most `within` and collects stdout/stderr (they must be piped).
    /// The pipes are read while the process runs: one that writes more than a
    /// pipe holds (64 KiB) would otherwise block before it could exit.
    pub fn output_within(mut self, within: Duration) -> Output {
        use std::io::Read;
        fn drain(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                if let Some(mut pipe) = pipe {
                    pipe.read_to_end(&mut bytes).unwrap();
                }
                bytes
            })
        }
        let child = self.child.as_mut().unwrap();
        let stdout = drain(child.stdout.take());
        let stderr = drain(child.stderr.take());
        let status = self.wait_within(within);
        Output {
            status,
            stdout: stdout.join().unwrap(),
            stderr: stderr.join().unwrap(),
        }
    }

    pub fn kill(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `cmd` run as another user (`nobody`, through setpriv), for a test that
/// needs a directory this user may not read or write while it runs as root.
pub fn as_other_user(cmd: &std::process::Command) -> std::process::Command {
    let mut outer = std::process::Command::new("setpriv");
    outer
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (key, value) in cmd.get_envs() {
        match value {
            Some(value) => outer.env(key, value),
            None => outer.env_remove(key),
        };
    }
    outer.stdin(std::process::Stdio::null());
    outer
}

/// Whether the tests run as root (who may read and write any directory).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}
