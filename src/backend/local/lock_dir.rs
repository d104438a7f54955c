//! The lock directory of a `file:` target: DIR as one absolute path, refused
//! when other users could remove lock files from it, and created mode 0700
//! when missing.

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{Cause, Error, Result};

/// DIR as an absolute path (the same for nested runs and the `--while-pid`
/// keeper, whatever their working directory), created mode 0700 when missing
/// and `create` (a read, `status` or `list`, never creates it: it reports
/// that it cannot see a lock there).
pub(super) fn absolute_dir(dir: &Path, create: bool) -> Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = std::path::absolute(dir)
        .map_err(|e| Error::usage(format!("invalid --url file:{}: {e}", dir.display())))?;
    if let Ok(meta) = fs::metadata(&dir) {
        use std::os::unix::fs::MetadataExt;
        // Whoever may remove or rename files in DIR could swap a lock file
        // from under its holder; the sticky bit (as on /tmp) forbids that.
        let mode = meta.mode();
        if meta.is_dir() && mode & 0o022 != 0 && mode & 0o1000 == 0 {
            return Err(Error::usage(format!(
                "the lock directory {} is writable by other users (mode {:o}) without the sticky bit: they could remove lock files from under their holders; use a private directory",
                dir.display(),
                mode & 0o7777
            )));
        }
    }
    if dir.exists() && !dir.is_dir() {
        return Err(Error::usage(format!(
            "invalid --url file:{}: not a directory",
            dir.display()
        )));
    }
    if !create {
        // Listing DIR is what every read does: a DIR this user cannot list
        // would read as "free" for every lock in it.
        return match fs::read_dir(&dir) {
            Ok(_) => Ok(dir),
            Err(e) => Err(unreadable(&dir, &e)),
        };
    }
    if !dir.is_dir() {
        // The filesystem refusing (read-only, full, no permission) is the
        // lock's place being unavailable, as when it refuses a lock file.
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| {
                Error::from(Cause::Unavailable {
                    server: format!("this host only ({})", dir.display()),
                    cause: refused(&dir, "creating it", &e),
                })
            })?;
    }
    Ok(dir)
}

/// The lock directory cannot be read: whatever it holds is unknown, never
/// "free" (exit 69, with what to do about it).
pub(super) fn unreadable(dir: &Path, err: &std::io::Error) -> Error {
    let shown = dir.display();
    let cause = match err.kind() {
        std::io::ErrorKind::NotFound => format!(
            "the lock directory {shown} does not exist, so no lock there can be seen (no rlock has locked in it yet, or the --url names another DIR)"
        ),
        std::io::ErrorKind::PermissionDenied => format!(
            "cannot read the lock directory {shown}: permission denied; run as the user whose jobs lock there (or root)"
        ),
        _ => format!("cannot read the lock directory {shown}: {err}"),
    };
    Error::from(Cause::Unavailable {
        server: format!("file:{shown}"),
        cause,
    })
}

/// What the filesystem refusing `op` in lock directory `dir` means, with the
/// fix: `lock directory /x is on a read-only filesystem (recording the
/// holder: Read-only file system (os error 30)): choose a writable DIR`.
pub(super) fn refused(dir: &Path, op: &str, err: &std::io::Error) -> String {
    let (what, fix) = match err.raw_os_error() {
        Some(libc::EROFS) => ("is on a read-only filesystem", "choose a writable DIR"),
        Some(libc::EACCES | libc::EPERM) => (
            "is not writable by this user",
            "run as the user the directory belongs to, or choose another DIR",
        ),
        Some(libc::ENOSPC | libc::EDQUOT) => (
            "is on a full filesystem (or over quota)",
            "free some space, or choose another DIR",
        ),
        Some(libc::ENOENT) => (
            "lost a file, or was removed, while in use",
            "leave a lock directory in use alone",
        ),
        _ => ("failed", "check the directory and its filesystem"),
    };
    format!(
        "lock directory {} {what} ({op}: {err}): {fix}",
        dir.display()
    )
}
