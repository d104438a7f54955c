//! `check`'s `persistence` line: what a restart and a crash of the server
//! keep of the holds, from `appendonly`, `appendfsync` and `save`, worded
//! for what AOF and RDB actually keep. A server without AOF warns (a crash
//! loses the holds taken since the last snapshot), whatever its snapshots.

use super::StandaloneSession;
use super::check_probes::Setting;
use crate::backend::fitness::Verdict;

/// The fix when AOF is off.
const ENABLE_AOF: &str =
    "enable appendonly (CONFIG SET appendonly yes, and in the server's configuration)";

/// What the server says of its persistence: AOF from `INFO persistence`
/// (else `CONFIG GET`), the fsync policy and the RDB save points from
/// `CONFIG GET` (a managed service may refuse: the line says what it could
/// not read).
pub(super) fn persistence(session: &mut StandaloneSession) -> (Verdict, String) {
    let aof = match session.setting(&Setting::new("persistence", "aof_enabled", "appendonly")) {
        Ok(on) => on == "1" || on == "yes",
        Err(why) => return (Verdict::Unknown, why),
    };
    if aof {
        (Verdict::Ok, with_aof(session.config_get("appendfsync")))
    } else {
        (Verdict::Warn, without_aof(session.config_get("save")))
    }
}

/// AOF on: a restart, or a crash of the server alone, replays the log; a
/// crash of the host loses what was not yet fsynced.
fn with_aof(fsync: Result<String, String>) -> String {
    let crash = match fsync.as_deref() {
        Ok("always") => {
            "a crash of the host too (every write is on disk before it is answered)".to_owned()
        }
        Ok("everysec") => "a crash of the host loses about the last second of them".to_owned(),
        Ok("no") => {
            "a crash of the host loses what the OS had not yet written to disk (up to about 30 s on Linux): appendfsync everysec or always bounds it"
                .to_owned()
        }
        Ok(other) => format!("what a crash loses depends on appendfsync {other}"),
        Err(why) => format!("what a crash loses depends on appendfsync ({why})"),
    };
    let fsync = fsync
        .map(|f| format!(", appendfsync {f}"))
        .unwrap_or_default();
    format!("appendonly yes{fsync}: a restart keeps the holds; {crash}")
}

/// AOF off: only RDB snapshots, if any, are left. A clean shutdown with
/// save points writes one, so a planned restart keeps the holds; a crash
/// brings back the last snapshot, without the holds taken since.
fn without_aof(save: Result<String, String>) -> String {
    const SECOND_RUN: &str = "a second run can then take a lock whose holder still runs";
    match save.as_deref().map(str::trim) {
        Ok("") => format!(
            "appendonly no and no RDB save points: any restart loses every hold ({SECOND_RUN}): {ENABLE_AOF}"
        ),
        Ok(points) => format!(
            "appendonly no, RDB save points {points}: a clean restart keeps the holds (the server saves as it shuts down), \
             a crash loses those taken since the last save ({SECOND_RUN}): {ENABLE_AOF}"
        ),
        Err(why) => format!(
            "appendonly no: a crash loses the holds taken since the last RDB save, a restart too unless the server saves as it shuts down \
             (its save points unknown: {why}); {SECOND_RUN}: {ENABLE_AOF}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_fsync_policy_says_what_a_crash_loses() {
        assert_eq!(
            with_aof(Ok("everysec".into())),
            "appendonly yes, appendfsync everysec: a restart keeps the holds; a crash of the host loses about the last second of them"
        );
        assert!(with_aof(Ok("always".into())).contains("a crash of the host too"));
        assert!(with_aof(Ok("no".into())).contains("what the OS had not yet written"));
        assert!(with_aof(Err("CONFIG GET appendfsync refused".into())).starts_with(
            "appendonly yes: a restart keeps the holds; what a crash loses depends on appendfsync (CONFIG"
        ));
    }

    #[test]
    fn without_aof_save_points_decide_what_a_restart_keeps() {
        assert!(
            without_aof(Ok(String::new()))
                .starts_with("appendonly no and no RDB save points: any restart loses every hold")
        );
        assert!(without_aof(Ok("3600 1 300 100".into())).starts_with(
            "appendonly no, RDB save points 3600 1 300 100: a clean restart keeps the holds"
        ));
        assert!(without_aof(Err("refused".into())).contains("(its save points unknown: refused)"));
    }
}
