//! The run's history: one recorder per run decides every event it writes,
//! from the holds and from how the run ended. The acquiring and releasing
//! scripts write the events that go with their change (no round trip of
//! their own); the recorder says what those events are, and which events
//! only the run's end knows.

use std::time::Duration;

use super::ending::Ending;
use super::held::HeldLock;
use crate::backend::HolderInfo;
use crate::exit::Exit;
use crate::lock::event::{Event, EventKind};
use crate::lock::name::LockId;

/// Writes one run's history: its cap, the holder, and each lock's fence
/// once held.
#[derive(Debug, Clone)]
pub struct Recorder {
    /// Events kept per lock (`--history`); 0 writes none.
    cap: u32,
    holder: HolderInfo,
    /// The run's locks (in the order they are acquired), each with its fence
    /// once held.
    locks: Vec<(LockId, Option<u64>)>,
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Recorder {
    pub(crate) fn new(cap: u32, holder: HolderInfo, locks: &[LockId]) -> Recorder {
        Recorder {
            cap,
            holder,
            locks: locks.iter().map(|lock| (lock.clone(), None)).collect(),
        }
    }

    fn event(&self, kind: EventKind) -> Event {
        super::holder::event(kind, &self.holder)
    }

    /// The `acquired` event the acquiring script writes with a new hold.
    pub(crate) fn acquired(&self) -> Option<(u32, Event)> {
        (self.cap > 0).then(|| (self.cap, self.event(EventKind::Acquired)))
    }

    /// Notes the fences of the holds taken.
    pub(crate) fn held(&mut self, held: &[HeldLock]) {
        for (lock, fence) in &mut self.locks {
            *fence = held
                .iter()
                .find(|h| h.id.name == lock.name)
                .map(|h| h.fence().0);
        }
    }

    /// The `acquired` events the acquiring script did not write (a hold
    /// handed over by a release, several locks, Redlock): written once
    /// COMMAND runs.
    pub(crate) fn unrecorded(&self, held: &[HeldLock], waited: Duration) -> Vec<(LockId, Event)> {
        let Some((_, acquired)) = self.acquired() else {
            return Vec::new();
        };
        held.iter()
            // A re-entry (count above 1) is no new hold.
            .filter(|h| !h.hold.recorded && h.hold.count == 1)
            .map(|h| {
                let event = Event {
                    fence: Some(h.fence().0),
                    waited_ms: Some(millis(waited)),
                    ..acquired.clone()
                };
                (h.id.clone(), event)
            })
            .collect()
    }

    /// The history's cap.
    pub fn cap(&self) -> u32 {
        self.cap
    }

    /// The event the releasing script writes when a kept hold ends: how
    /// COMMAND ended (`ending`, or an error when its end is not known), after
    /// holding for `held`. Each lock's fence is added by the release.
    pub(crate) fn at_release(
        &self,
        ending: Option<Ending>,
        held: Duration,
    ) -> Option<(u32, Event)> {
        if self.cap == 0 {
            return None;
        }
        let (kind, exit) = match ending {
            Some(Ending::MaxHold) => (EventKind::MaxHold, Some(124)),
            Some(Ending::Exited(code)) => (EventKind::Released, Some(i64::from(code))),
            _ => (EventKind::Released, None),
        };
        let event = Event {
            held_ms: Some(millis(held)),
            exit,
            ..self.event(kind)
        };
        Some((self.cap, event))
    }

    /// The events only the run's end knows, one per lock: not acquired
    /// (`busy`), a wait a signal stopped (`interrupted`), a hold lost
    /// (`lost`, with its cause in the note). The others were written by the
    /// scripts that made and ended the holds.
    pub fn at_end(
        &self,
        ending: &Ending,
        exit: Exit,
        waited: Option<Duration>,
    ) -> Vec<(LockId, Event)> {
        if self.cap == 0 {
            return Vec::new();
        }
        let exit = Some(i64::from(exit.code()));
        let waited = waited.map(millis);
        let event = match ending {
            Ending::Busy => Event {
                waited_ms: waited,
                exit,
                ..self.event(EventKind::Busy)
            },
            Ending::Interrupted => Event {
                waited_ms: waited,
                exit,
                ..self.event(EventKind::Interrupted)
            },
            Ending::Lost { line, held } => Event {
                held_ms: Some(millis(*held)),
                note: line.clone(),
                exit,
                ..self.event(EventKind::Lost)
            },
            _ => return Vec::new(),
        };
        self.locks
            .iter()
            .map(|(lock, fence)| {
                let event = Event {
                    fence: *fence,
                    ..event.clone()
                };
                (lock.clone(), event)
            })
            .collect()
    }
}
