//! Descriptor 1 written directly, with every failure seen: Rust's `stdout()`
//! swallows some failures, and its runtime replaces a closed descriptor 1
//! with /dev/null, so `rlock acquire >&-` would otherwise lose the token.

use std::io;

/// Writes all of `text` to descriptor 1.
pub fn write_stdout(text: &str) -> io::Result<()> {
    let mut rest = text.as_bytes();
    while !rest.is_empty() {
        match rustix::io::write(rustix::stdio::stdout(), rest) {
            Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
            Ok(n) => rest = &rest[n..],
            Err(rustix::io::Errno::INTR) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(())
}

/// True when descriptor 1 was closed when rlock started. Rust's runtime then
/// puts /dev/null there, opened read-write; a shell's `>/dev/null` opens it
/// write-only, so that one still counts as a place to write to.
pub fn stdout_was_closed() -> bool {
    use rustix::fs::{FileType, OFlags};
    let stdout = rustix::stdio::stdout();
    let Ok(st) = rustix::fs::fstat(stdout) else {
        return true;
    };
    let null = FileType::from_raw_mode(st.st_mode) == FileType::CharacterDevice
        && st.st_rdev == rustix::fs::makedev(1, 3);
    null && rustix::fs::fcntl_getfl(stdout).is_ok_and(|fl| fl & OFlags::ACCMODE == OFlags::RDWR)
}
