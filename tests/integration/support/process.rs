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
    pub fn output_within(mut self, within: Duration) -> Output {
        let status = self.wait_within(within);
        // Already reaped by wait_within; only the pipes are left to read.
        #[allow(clippy::zombie_processes)]
        let mut child = self.child.take().unwrap();
        let mut stdout = Vec::new();
        let mut stderr = Vec::new();
        use std::io::Read;
        if let Some(mut out) = child.stdout.take() {
            out.read_to_end(&mut stdout).unwrap();
        }
        if let Some(mut err) = child.stderr.take() {
            err.read_to_end(&mut stderr).unwrap();
        }
        Output {
            status,
            stdout,
            stderr,
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
