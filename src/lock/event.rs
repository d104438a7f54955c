//! One event of a lock's history (`rlock history`, README: "What happened
//! last night?"): what happened, when, to whom, with the figures that apply.
//!
//! Stored as flat field/value pairs (a Redis stream entry's fields; a line of
//! a `file:` history), so no JSON has to be read back; printed as JSON or as
//! a line.

use std::fmt::Write as _;
use std::time::{Duration, UNIX_EPOCH};

use serde::{Serialize, Serializer};

use crate::report;

/// What happened to a hold (or to a wait for one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventKind {
    /// A new hold was made.
    Acquired,
    /// The holder gave it back.
    Released,
    /// The hold ended under its holder (its lease could have lapsed).
    Lost,
    /// The lock was taken, or `--wait` ran out: not acquired.
    Busy,
    /// `rlock release --force` ended someone else's hold.
    Forced,
    /// COMMAND ran past `--max-hold` and was stopped.
    MaxHold,
    /// A signal ended the wait.
    Interrupted,
    /// A kind this version does not know (another program's, or a newer
    /// version's), kept as stored; empty when the stored event names none.
    Unknown(String),
}

impl EventKind {
    /// Every kind rlock writes, in the order `rlock metrics` lists them.
    pub const KNOWN: [EventKind; 7] = [
        EventKind::Acquired,
        EventKind::Released,
        EventKind::Lost,
        EventKind::Busy,
        EventKind::Forced,
        EventKind::MaxHold,
        EventKind::Interrupted,
    ];

    /// The word stored and printed for it.
    pub fn as_str(&self) -> &str {
        match self {
            EventKind::Acquired => "acquired",
            EventKind::Released => "released",
            EventKind::Lost => "lost",
            EventKind::Busy => "busy",
            EventKind::Forced => "forced",
            EventKind::MaxHold => "max-hold",
            EventKind::Interrupted => "interrupted",
            EventKind::Unknown(word) => word,
        }
    }

    /// The kind a stored word names.
    pub fn parse(word: &str) -> EventKind {
        EventKind::KNOWN
            .into_iter()
            .find(|kind| kind.as_str() == word)
            .unwrap_or_else(|| EventKind::Unknown(word.to_owned()))
    }
}

impl Default for EventKind {
    fn default() -> Self {
        EventKind::Unknown(String::new())
    }
}

/// Default number of events kept per lock (`--history`).
pub const DEFAULT_CAP: u32 = 100;

/// How long a lock's history outlives its last event.
pub const IDLE: Duration = Duration::from_secs(30 * 24 * 3600);

/// One event. `time_ms` is set by whoever stores it (the server's clock for
/// Redis: the stream entry's id).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Event {
    /// When it was stored, ms since the epoch.
    pub time_ms: u64,
    /// What happened.
    pub event: EventKind,
    /// Host of the process it concerns.
    pub host: String,
    /// Its pid.
    pub pid: Option<u64>,
    /// Its note, or empty.
    pub note: String,
    /// Its command line (secrets already removed, as stored with a hold).
    pub command: String,
    /// The hold's fence.
    pub fence: Option<u64>,
    /// How long it waited (acquired, busy, interrupted).
    pub waited_ms: Option<u64>,
    /// How long it held the lock (released, lost, max-hold, forced).
    pub held_ms: Option<u64>,
    /// The exit status given (released by `run`, lost, busy, max-hold, interrupted).
    pub exit: Option<i64>,
}

impl Event {
    /// The stored fields, in order (absent ones left out; the time is not a
    /// field: the store gives it).
    pub fn fields(&self) -> Vec<(&'static str, String)> {
        let mut out = vec![
            ("event", self.event.as_str().to_owned()),
            ("host", self.host.clone()),
        ];
        let mut number = |name, value: Option<String>| {
            if let Some(v) = value {
                out.push((name, v));
            }
        };
        number("pid", self.pid.map(|v| v.to_string()));
        number("fence", self.fence.map(|v| v.to_string()));
        number("waited_ms", self.waited_ms.map(|v| v.to_string()));
        number("held_ms", self.held_ms.map(|v| v.to_string()));
        number("exit", self.exit.map(|v| v.to_string()));
        if !self.note.is_empty() {
            out.push(("note", self.note.clone()));
        }
        out.push(("command", self.command.clone()));
        out
    }

    /// An event from stored fields; unknown fields are ignored, bad numbers
    /// read as absent (another program's or a newer version's data).
    pub fn from_fields<'a>(
        time_ms: u64,
        fields: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Self {
        let mut e = Event {
            time_ms,
            ..Event::default()
        };
        for (k, v) in fields {
            match k {
                "event" => e.event = EventKind::parse(v),
                "host" => e.host = v.to_owned(),
                "pid" => e.pid = v.parse().ok(),
                "note" => e.note = v.to_owned(),
                "command" => e.command = v.to_owned(),
                "fence" | "f" => e.fence = v.parse().ok(),
                "waited_ms" => e.waited_ms = v.parse().ok(),
                "held_ms" => e.held_ms = v.parse().ok(),
                "exit" => e.exit = v.parse().ok(),
                _ => {}
            }
        }
        e
    }

    /// One line for a terminal, text other hosts wrote escaped.
    pub fn to_line(&self) -> String {
        let pid = self.pid.map_or_else(|| "?".to_owned(), |p| p.to_string());
        let mut line = format!(
            "{}  {:<11} {}",
            rfc3339(self.time_ms),
            report::sanitize(self.event.as_str()),
            report::holder(&pid, &self.host, &self.command, &self.note)
        );
        let human = |ms: u64| humantime::format_duration(Duration::from_millis(ms)).to_string();
        if let Some(f) = self.fence {
            let _ = write!(line, ", fence {f}");
        }
        if let Some(ms) = self.waited_ms {
            let _ = write!(line, ", waited {}", human(ms));
        }
        if let Some(ms) = self.held_ms {
            let _ = write!(line, ", held {}", human(ms));
        }
        if let Some(code) = self.exit {
            let _ = write!(line, ", exit {code}");
        }
        line
    }
}

/// The event as the JSON object `history --json` prints: every field, in
/// this order, absent ones (and an empty note) as null.
impl Serialize for Event {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Json<'a> {
            time: String,
            event: &'a str,
            host: &'a str,
            pid: Option<u64>,
            note: Option<&'a str>,
            command: &'a str,
            fence: Option<u64>,
            waited_ms: Option<u64>,
            held_ms: Option<u64>,
            exit: Option<i64>,
        }
        Json {
            time: rfc3339(self.time_ms),
            event: self.event.as_str(),
            host: &self.host,
            pid: self.pid,
            note: Some(self.note.as_str()).filter(|n| !n.is_empty()),
            command: &self.command,
            fence: self.fence,
            waited_ms: self.waited_ms,
            held_ms: self.held_ms,
            exit: self.exit,
        }
        .serialize(serializer)
    }
}

/// RFC 3339 in UTC, to the second.
fn rfc3339(ms: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_reads_back_from_its_word() {
        for kind in EventKind::KNOWN {
            assert_eq!(EventKind::parse(kind.as_str()), kind);
        }
        assert_eq!(EventKind::MaxHold.as_str(), "max-hold");
        assert_eq!(
            EventKind::parse("renamed"),
            EventKind::Unknown("renamed".into())
        );
        let unnamed = Event::from_fields(0, [("host", "h")]);
        assert_eq!(unnamed.event.as_str(), "");
    }

    #[test]
    fn fields_read_back_into_the_same_event() {
        let e = Event {
            time_ms: 1_000,
            event: EventKind::Released,
            host: "ci-3".into(),
            pid: Some(42),
            note: "n\"x".into(),
            command: "make deploy".into(),
            fence: Some(7),
            waited_ms: None,
            held_ms: Some(1500),
            exit: Some(0),
        };
        let fields = e.fields();
        let back = Event::from_fields(1_000, fields.iter().map(|(k, v)| (*k, v.as_str())));
        assert_eq!(back, e);
        assert_eq!(
            report::json::to_string(&e),
            "{\"time\":\"1970-01-01T00:00:01Z\",\"event\":\"released\",\"host\":\"ci-3\",\"pid\":42,\"note\":\"n\\\"x\",\"command\":\"make deploy\",\"fence\":7,\"waited_ms\":null,\"held_ms\":1500,\"exit\":0}"
        );
    }

    /// `history --json`: every field present, absent ones and an empty note
    /// null, text other hosts wrote escaped where JSON or a terminal needs it.
    #[test]
    fn json_nulls_what_is_absent_and_escapes_what_hosts_wrote() {
        let e = Event {
            time_ms: 1_700_000_000_999,
            event: EventKind::Busy,
            host: "h\u{202e}ö".into(),
            command: "sh -c 'printf \"\\a\\b\"'\r\u{7}".into(),
            ..Event::default()
        };
        assert_eq!(
            report::json::to_string(&e),
            r#"{"time":"2023-11-14T22:13:20Z","event":"busy","host":"h\u202eö","pid":null,"note":null,"command":"sh -c 'printf \"\\a\\b\"'\r\u0007","fence":null,"waited_ms":null,"held_ms":null,"exit":null}"#
        );
        let later = Event {
            exit: Some(-1),
            ..e.clone()
        };
        assert_eq!(
            report::json::to_string(&[&e, &later]),
            format!(
                "[{},{}]",
                report::json::to_string(&e),
                report::json::to_string(&later)
            )
        );
    }
}
