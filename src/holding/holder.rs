//! This process as a holder: what is stored with a hold and shown by
//! `status` (host, pid, the command line without secrets, the note).

use std::ffi::OsString;
use std::time::Duration;

use crate::backend::HolderInfo;
use crate::lock::event::{Event, EventKind};

/// Longest holder command line stored in Redis.
const MAX_COMMAND_BYTES: usize = 1024;

/// This process, running `command` under the lock, with its note.
pub(crate) fn holder_info(command: &[OsString], note: &str) -> HolderInfo {
    let argv: Vec<String> = command
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    HolderInfo {
        pid: std::process::id().to_string(),
        ..described(&argv, note)
    }
}

/// A holder on this host running `argv`, with its note: the command line
/// without secrets and cut to [`MAX_COMMAND_BYTES`].
pub(crate) fn described(argv: &[String], note: &str) -> HolderInfo {
    // Stored in Redis and shown by `status`: no password or token in it.
    let mut line = crate::lock::redact::command_line(argv).join(" ");
    if line.len() > MAX_COMMAND_BYTES {
        let mut cut = MAX_COMMAND_BYTES;
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        line.truncate(cut);
    }
    HolderInfo {
        host: hostname(),
        pid: String::new(),
        command: line,
        note: note.to_owned(),
        held_for: Duration::ZERO,
        detached: false,
        earlier: false,
    }
}

pub(crate) fn hostname() -> String {
    crate::sys::process::host_name()
}

/// An event of `kind` for the lock's history about the holder `holder`
/// describes.
pub(crate) fn event(kind: EventKind, holder: &HolderInfo) -> Event {
    Event {
        event: kind,
        host: holder.host.clone(),
        pid: holder.pid.parse().ok(),
        note: holder.note.clone(),
        command: holder.command.clone(),
        ..Event::default()
    }
}
