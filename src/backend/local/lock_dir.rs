//! The lock directory of a `file:` target: DIR as one absolute path, refused
//! when other users could remove lock files from it, and created mode 0700
//! when missing.

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{Cause, Error, Result};

/// DIR as an absolute path (the same for nested runs and the `--while-pid`
/// keeper, whatever their working directory), created mode 0700 when missing.
pub(super) fn absolute_dir(dir: &Path) -> Result<PathBuf> {
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
                    cause: format!("cannot create the lock directory: {e}"),
                })
            })?;
    }
    Ok(dir)
}
