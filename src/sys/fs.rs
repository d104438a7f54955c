//! Locks on open files (flock(2), as flock(1) takes them) and descriptors
//! that a child inherits.

use std::fs::File;
use std::io;

/// `flock` without waiting; false when someone else holds it.
pub fn try_flock(file: &File, exclusive: bool) -> io::Result<bool> {
    use rustix::fs::FlockOperation;
    let op = if exclusive {
        FlockOperation::NonBlockingLockExclusive
    } else {
        FlockOperation::NonBlockingLockShared
    };
    loop {
        match rustix::fs::flock(file, op) {
            Ok(()) => return Ok(true),
            Err(rustix::io::Errno::WOULDBLOCK) => return Ok(false),
            Err(rustix::io::Errno::INTR) => {}
            Err(err) => return Err(err.into()),
        }
    }
}

/// Lets a child inherit `file` (clears close-on-exec).
pub fn inheritable(file: &File) {
    let _ = rustix::io::fcntl_setfd(file, rustix::io::FdFlags::empty());
}
