//! A pseudo-terminal for rlock: its controlling terminal, of a chosen width,
//! and what it showed.

use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use super::process::Proc;

/// A pseudo-terminal pair of `columns` columns (24 rows); rlock gets the
/// slave as its controlling terminal.
fn openpty(columns: u16) -> (OwnedFd, OwnedFd) {
    let (mut master, mut slave) = (0, 0);
    let size = libc::winsize {
        ws_row: 24,
        ws_col: columns,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty writes two fds; a null name and termios are allowed, the
    // window size is read from a live value.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    assert_eq!(rc, 0, "openpty failed");
    // SAFETY: both fds were just opened and are owned by nobody else.
    unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) }
}

/// What a terminal showed.
pub type Screen = Arc<Mutex<Vec<u8>>>;

/// Starts `cmd` with a new pseudo-terminal (80 columns) as its controlling
/// terminal (as a shell's foreground job has it); returns the process, the
/// terminal's master side to type into, and what it shows.
pub fn spawn_on_terminal(cmd: &mut std::process::Command) -> (Proc, std::fs::File, Screen) {
    spawn_on_terminal_of(cmd, 80)
}

/// [`spawn_on_terminal`] on a terminal `columns` wide.
pub fn spawn_on_terminal_of(
    cmd: &mut std::process::Command,
    columns: u16,
) -> (Proc, std::fs::File, Screen) {
    let (master, slave) = openpty(columns);
    assert!(slave.as_raw_fd() >= 0);
    cmd.stdin(Stdio::from(slave.try_clone().unwrap()))
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave.try_clone().unwrap()));
    // SAFETY: setsid and ioctl are async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            libc::ioctl(0, libc::TIOCSCTTY, 0);
            Ok(())
        });
    }
    let run = Proc::new(cmd.spawn().unwrap());
    drop(slave);
    // Drain the terminal (so nothing blocks on a full buffer), keeping what it showed.
    let screen = Arc::new(Mutex::new(Vec::new()));
    let mut reader = std::fs::File::from(master.try_clone().unwrap());
    let shown = Arc::clone(&screen);
    std::thread::spawn(move || {
        let mut buf = [0u8; 1024];
        while let Ok(n @ 1..) = reader.read(&mut buf) {
            shown.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    (run, std::fs::File::from(master), screen)
}
