//! The holds of an rlock that died while COMMAND ran, given back by its
//! guardian: rlock writes them for the guardian once COMMAND runs
//! ([`text`]); should rlock die, the guardian kills COMMAND's group and
//! becomes an rlock run with the same command line, which reads them back
//! and releases them once that group is gone ([`give_back`]), so the next
//! holder starts at once instead of after the lease. Silent unless it
//! fails or finds a hold already gone (then it says the lock was lost); a
//! group that outlives SIGKILL keeps the lock until it expires.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::backend::Session;
use crate::config::{Config, RunSpec};
use crate::error::Result;
use crate::exit::Exit;
use crate::holding::held::HeldLock;
use crate::holding::lost::Lost;
use crate::lock::clock::now_ms;
use crate::lock::event::{Event, EventKind};
use crate::lock::name::LockName;
use crate::lock::token::Token;
use crate::report;
use crate::sys::guardian::lease_still_proven;
use crate::sys::process::{Pid, group_running};

/// The file's first line.
const MAGIC: &str = "rlock-handover 1";

/// How long the successor waits for COMMAND's group to be gone after
/// SIGKILL (a member stuck in the kernel keeps it).
const GROUP_GONE_WITHIN: Duration = Duration::from_secs(3);

/// The bound on each connection attempt and reply of the release.
const STEP: Duration = Duration::from_secs(2);

/// What the successor reads: this rlock's pid, COMMAND's group, when the
/// holds were taken (ms since the epoch), and each hold in the order the
/// locks were acquired (token, fence, hold count).
pub(super) fn text(group: Pid, locks: &[HeldLock]) -> String {
    let mut text = format!(
        "{MAGIC}\npid {}\ngroup {}\nsince {}\n",
        std::process::id(),
        group.raw(),
        now_ms()
    );
    for lock in locks {
        let _ = writeln!(
            text,
            "hold {} {} {}",
            lock.token().as_str(),
            lock.fence().0,
            lock.hold.count
        );
    }
    text.push_str("end\n");
    text
}

/// A handover read back.
struct Handover {
    pid: u64,
    group: Pid,
    since_ms: u64,
    holds: Vec<(Token, u64, u64)>,
}

/// None unless `text` is a whole handover (rlock may have died writing it).
fn parse(text: &str) -> Option<Handover> {
    let mut lines = text.lines();
    if lines.next()? != MAGIC {
        return None;
    }
    let mut value = |key: &str| lines.next()?.strip_prefix(key)?.trim().parse::<u64>().ok();
    let (pid, group, since_ms) = (value("pid ")?, value("group ")?, value("since ")?);
    let mut holds = Vec::new();
    for line in lines {
        if line == "end" {
            let group = Pid::from_raw(i32::try_from(group).ok()?);
            return Some(Handover {
                pid,
                group,
                since_ms,
                holds,
            });
        }
        let mut words = line.strip_prefix("hold ")?.split(' ');
        let token = Token::parse(words.next()?)?;
        let fence = words.next()?.parse().ok()?;
        let count = words.next()?.parse().ok()?;
        holds.push((token, fence, count));
    }
    None
}

/// In the rlock a guardian became: releases the holds its dead rlock
/// handed over, once COMMAND's group is gone. Exits 0 whatever happens
/// (nobody waits for its status); says only what it could not do.
pub fn give_back(config: &Config, spec: &RunSpec, text: &str) -> Result<Exit> {
    // The hold is as good as gone (a file: lock went with rlock's files): a
    // readiness probe must not see it held while COMMAND's group dies and
    // the release goes out.
    if let Some(path) = &spec.announce.ready_file {
        crate::announce::remove_stale_ready_file(path, crate::sys::guardian::dead_rlock());
    }
    let Some(handover) = parse(text) else {
        return Ok(Exit::Success);
    };
    let mut order: Vec<&LockName> = spec.names.iter().collect();
    order.sort();
    if order.len() != handover.holds.len() {
        return Ok(Exit::Success);
    }
    let display = spec
        .names
        .iter()
        .map(|n| n.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let expires = humantime::format_duration(spec.lease.unwrap_or(spec.lock.ttl));
    let until = Instant::now() + GROUP_GONE_WITHIN;
    while group_running(handover.group) {
        if Instant::now() >= until {
            report::error(&format!(
                "{display}: rlock died and COMMAND's process group outlived SIGKILL; \
                 the lock expires within {expires}"
            ));
            return Ok(Exit::Success);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let session = config
        .backend_within(spec.lock.dialect(), STEP)
        .and_then(|backend| backend.connect());
    let mut session = match session {
        Ok(session) => session,
        Err(err) => {
            report::error(&format!(
                "{display}: rlock died; its guardian could not release the lock ({err}); \
                 it expires within {expires}"
            ));
            return Ok(Exit::Success);
        }
    };
    let event = ended(spec, config, &handover);
    for (name, (token, fence, _)) in order.iter().zip(&handover.holds).rev() {
        let id = spec.lock.lock_id(config, name.as_str());
        let event = Event {
            fence: Some(*fence),
            ..event.clone()
        };
        let record = (spec.lock.history > 0).then_some((spec.lock.history, &event));
        let released = session.release_recorded(&id, token, record);
        // Judged once the answer is in: the server looked before it.
        let proven = lease_still_proven();
        match released {
            Ok(Some(_)) => {}
            Ok(None) => say_gone(
                session.as_mut(),
                spec,
                &id,
                proven.then_some(&handover),
                event,
            ),
            Err(err) => report::error(&format!(
                "{}: rlock died; its guardian could not release the lock ({}); \
                 it expires within {expires}",
                name.as_str(),
                report::without_lock(&err.to_string(), name.as_str())
            )),
        }
    }
    Ok(Exit::Success)
}

/// A hold found gone at the guardian's release: the dead rlock never
/// learned it, and nobody else can tell, so the guardian does, on the
/// stderr rlock had and in the history, as rlock's own release would. With
/// the lease still proven at the answer (`proven`: the holds handed over),
/// the hold was lost under COMMAND (a failover, a restart, a forced
/// release); else COMMAND was killed before the lease could end, which then
/// lapsed (rlock was stopped past it, or the release was answered late).
fn say_gone(
    session: &mut dyn Session,
    spec: &RunSpec,
    id: &crate::lock::name::LockId,
    proven: Option<&Handover>,
    event: Event,
) {
    let name = id.name.as_str();
    let line = match proven {
        Some(handover) => {
            let held_for = Duration::from_millis(now_ms().saturating_sub(handover.since_ms));
            let why = session.why_gone(id, Some(held_for));
            let line = Lost::GoneAtRelease(name.to_owned()).line(why.as_deref());
            format!("{line} (rlock had died; its guardian stopped COMMAND)")
        }
        None => "the lease had run out by the guardian's release (rlock had died); \
                 COMMAND was stopped before it could end"
            .to_owned(),
    };
    report::error(&format!("{name}: {line}"));
    if spec.lock.history > 0 {
        let event = Event {
            event: EventKind::Lost,
            note: line,
            ..event
        };
        let _ = session.record(id, spec.lock.history, &event);
    }
}

/// The event that ends the dead rlock's holds: `released`, with no exit
/// status (rlock's own was SIGKILL's, or a crash's) and a note saying who
/// released them.
fn ended(spec: &RunSpec, config: &Config, handover: &Handover) -> Event {
    let argv: Vec<String> = spec
        .command
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let holder = crate::holding::holder::described(&argv, &config.note);
    let mut event = crate::holding::holder::event(EventKind::Released, &holder);
    event.pid = Some(handover.pid);
    event.held_ms = Some(now_ms().saturating_sub(handover.since_ms));
    event.note = format!(
        "rlock died while COMMAND ran; its guardian killed COMMAND's process group and released the lock{}",
        if holder.note.is_empty() {
            String::new()
        } else {
            format!(" (note: {})", holder.note)
        }
    );
    event
}
