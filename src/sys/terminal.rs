//! The controlling terminal on stdin: who has the foreground, and handing it
//! to COMMAND's process group and back.

use rustix::process::Pid;

/// True when stdin is a terminal and this process's group is its foreground.
pub fn foreground() -> bool {
    let stdin = rustix::stdio::stdin();
    rustix::termios::isatty(stdin)
        && rustix::termios::tcgetpgrp(stdin).is_ok_and(|group| group == rustix::process::getpgrp())
}

/// Makes process group `pgid` the terminal's foreground.
pub fn give_to(pgid: super::process::Pid) {
    if let Some(group) = Pid::from_raw(pgid.raw()) {
        let _ = rustix::termios::tcsetpgrp(rustix::stdio::stdin(), group);
    }
}

/// Takes the terminal back for this process's group (rlock ignores SIGTTOU,
/// so a background rlock may).
pub fn reclaim() {
    let _ = rustix::termios::tcsetpgrp(rustix::stdio::stdin(), rustix::process::getpgrp());
}

/// True when stderr is a terminal.
pub fn stderr_is_terminal() -> bool {
    rustix::termios::isatty(rustix::stdio::stderr())
}

/// The width of the terminal on stderr in columns, when it says.
pub fn stderr_columns() -> Option<usize> {
    rustix::termios::tcgetwinsize(rustix::stdio::stderr())
        .ok()
        .map(|size| usize::from(size.ws_col))
        .filter(|cols| *cols > 0)
}
