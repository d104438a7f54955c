//! `rlock check` with `file:DIR`: there is no server to ask, so it checks
//! what `file:` locks rest on: DIR is usable (created mode 0700 when missing,
//! as a run would) and a lock file can be made in it.

use std::path::Path;

use super::lock_dir::absolute_dir;
use crate::backend::fitness::{Finding, Verdict};

/// The findings for `file:DIR`.
pub fn check_dir(dir: &Path) -> Vec<Finding> {
    let shown = format!("this host only ({})", dir.display());
    let mut out = vec![Finding::new(
        "topology",
        &shown,
        Verdict::Ok,
        "file: locks, kept by the kernel on this host only: no server, no eviction, no replicas",
    )];
    let dir = match absolute_dir(dir, true) {
        Ok(dir) => dir,
        Err(err) => {
            out.push(Finding::new(
                "directory",
                &shown,
                Verdict::Fail,
                err.to_string(),
            ));
            return out;
        }
    };
    // A file made and removed, as every lock makes its files.
    let probe = dir.join(format!(".check.{}", std::process::id()));
    let made = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .and_then(|_| std::fs::remove_file(&probe));
    out.push(match made {
        Ok(()) => Finding::new(
            "directory",
            &shown,
            Verdict::Ok,
            format!("{} exists and lock files can be made in it", dir.display()),
        ),
        Err(err) => Finding::new(
            "directory",
            &shown,
            Verdict::Fail,
            format!("cannot make a lock file in {}: {err}", dir.display()),
        ),
    });
    out
}
