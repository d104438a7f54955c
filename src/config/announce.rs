//! What `run` tells the world around it, resolved once: the service
//! manager's notification socket (`NOTIFY_SOCKET`, `WATCHDOG_USEC`,
//! `WATCHDOG_PID`, as systemd sets them), `--ready-file` and `--ping`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

#[cfg(feature = "cli")]
use crate::cli::RunArgs;
use crate::error::{Error, Result};
use crate::ping::{PingUrl, Pinger};

/// Where and how a run announces itself; nothing when empty.
#[derive(Debug, Clone, Default)]
pub struct AnnounceSpec {
    /// systemd's notification socket, when rlock runs under one.
    pub notify: Option<NotifySpec>,
    /// `--ready-file`: exists exactly while the lock is held and COMMAND runs.
    pub ready_file: Option<PathBuf>,
    /// `--ping`: the monitor told when the lock is taken and how the run ended.
    pub ping: Option<Arc<Pinger>>,
}

/// The notification socket and what goes to it.
#[derive(Debug, Clone)]
pub struct NotifySpec {
    /// `$NOTIFY_SOCKET`: a path, or `@name` for an abstract socket.
    pub socket: String,
    /// READY=1 goes out at once (`--notify-ready=start`: a waiting standby
    /// counts as started), not once the lock is held and COMMAND started.
    pub ready_at_start: bool,
    /// `$WATCHDOG_USEC`, when the watchdog is for this process.
    pub watchdog: Option<Duration>,
}

impl AnnounceSpec {
    /// From `run`'s options and the environment systemd sets; `cacert` is
    /// the trust of an `https://` ping (`--cacert`).
    #[cfg(feature = "cli")]
    pub fn resolve(args: &RunArgs, cacert: Option<&Path>) -> Result<AnnounceSpec> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let notify = var("NOTIFY_SOCKET").map(|socket| NotifySpec {
            socket,
            ready_at_start: args.notify_ready == crate::cli::NotifyReady::Start,
            watchdog: watchdog(var("WATCHDOG_USEC"), var("WATCHDOG_PID")),
        });
        // (A successor only removes it: a probe file it cannot make, on a
        // full disk, must not stop it giving the holds back.)
        if let Some(path) = &args.ready_file
            && !crate::sys::guardian::is_successor()
        {
            writable(path)?;
        }
        // Checked here, not by clap: its messages quote the value, which
        // may carry a monitor's key.
        let ping = match args.ping.as_deref().filter(|url| !url.is_empty()) {
            Some(url) => {
                let url = PingUrl::parse(url).map_err(|e| Error::usage(format!("--ping: {e}")))?;
                Some(Arc::new(Pinger::new(url, cacert)?))
            }
            None => None,
        };
        Ok(AnnounceSpec {
            notify,
            ready_file: args.ready_file.clone(),
            ping,
        })
    }
}

/// The watchdog interval, unless `pid` names another process (as
/// sd_watchdog_enabled(3) reads them); a value that is not a positive number
/// of microseconds is no watchdog.
fn watchdog(usec: Option<String>, pid: Option<String>) -> Option<Duration> {
    if let Some(pid) = pid
        && pid.parse::<u32>().ok() != Some(crate::sys::notify::own_pid())
    {
        return None;
    }
    let usec: u64 = usec?.parse().ok().filter(|&u| u > 0)?;
    Some(Duration::from_micros(usec))
}

/// Refuses a ready file that could not be written when the lock is held
/// (its directory missing or not writable), before anything is acquired: a
/// run whose readiness no probe can see is no better than one that fails.
fn writable(path: &std::path::Path) -> Result<()> {
    let refuse = |why: String| {
        Err(Error::usage(format!(
            "--ready-file {}: {why}",
            crate::report::sanitize(&path.display().to_string())
        )))
    };
    let Some(name) = path.file_name() else {
        return refuse("not a file name".into());
    };
    if path.as_os_str().as_encoded_bytes().ends_with(b"/") {
        return refuse("ends in /; name a file".into());
    }
    if path.is_dir() {
        return refuse("is a directory; name a file in it".into());
    }
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => std::path::Path::new("."),
    };
    let probe = dir.join(format!(
        ".{}.rlock-probe-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    match std::fs::File::create(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(err) => refuse(format!("cannot be written ({err})")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watchdog_is_ours_unless_its_pid_names_another_process() {
        let own = crate::sys::notify::own_pid().to_string();
        let usec = || Some("4000000".to_owned());
        assert_eq!(watchdog(usec(), None), Some(Duration::from_secs(4)));
        assert_eq!(watchdog(usec(), Some(own)), Some(Duration::from_secs(4)));
        assert_eq!(watchdog(usec(), Some("1".into())), None);
        assert_eq!(watchdog(Some("0".into()), None), None);
        assert_eq!(watchdog(Some("soon".into()), None), None);
        assert_eq!(watchdog(None, None), None);
    }
}
