//! Decoding the Redis replies rlock reads into the backend's domain types.
//!
//! The scripts answer with arrays whose shape `src/backend/lua/` defines. A reply of
//! another shape is rlock's own bug ([`Error::internal`], exit 125), not the
//! server being unavailable, so a call returns the raw [`Value`] and [`decode`]
//! turns it into an [`Attempt`] or a [`LockStatus`] afterwards. Fields are read
//! leniently, since Lua hands numbers and text back in either form: a bulk
//! string may carry a number, and text that is not UTF-8 (a holder's note) is
//! replaced, not refused, because it is only shown.

use std::time::Duration;

use redis::{FromRedisValue, ParsingError, Value};

use crate::backend::protocol::{
    DONE, HELD, HOLDER, HOLDING, RENEWED, STATUS, TAKEN, WAITING, WEAKER,
};
use crate::backend::{
    AcquireRequest, AcquiredEvent, Attempt, Hold, HolderInfo, HolderStatus, LockStatus,
    WaiterStatus,
};
use crate::error::{Error, Result};
use crate::lock::kind::Kind;
use crate::lock::token::{Digest, Fence, Token};

/// The field `name` of `items`, a reply of shape `shape`: at the place the
/// shape gives it, fixed at build time.
macro_rules! field {
    ($items:expr, $shape:ident, $name:literal) => {
        $items.get(const { $shape.at($name) })
    };
}

/// `reply` to `what` ("acquire", "status") on lock `name` as a `T`; a reply of
/// another shape is an internal error.
pub(super) fn decode<T: FromRedisValue>(reply: Value, name: &str, what: &str) -> Result<T> {
    T::from_redis_value(reply)
        .map_err(|_| Error::internal(format!("{name}: unexpected reply to {what}")))
}

/// acquire.lua's `reply` to `req` on lock `name`, the owner digest it names
/// turned back into the token it stands for: the caller's or an ancestor's,
/// whose digests are `digests` in that order. A reply of another shape, or
/// that names another owner, is an internal error.
pub(super) fn acquired(
    reply: Value,
    name: &str,
    req: &AcquireRequest<'_>,
    digests: &[Digest],
) -> Result<Attempt> {
    let mut unknown = false;
    let parsed = attempt(reply, name, |owner| {
        // Of a token's shape, or not a reply of acquire.lua's.
        Token::parse(owner)?;
        let at = digests.iter().position(|d| d.as_str() == owner);
        unknown = at.is_none();
        at.map(|at| match at {
            0 => req.token.clone(),
            at => req.inherited[at - 1].clone(),
        })
    });
    if unknown {
        return Err(Error::internal(format!(
            "{name}: the server named a holder this run does not know"
        )));
    }
    parsed
}

/// An acquire script's `reply` on lock `name`, the owner it names (a
/// digest, or a Redisson owner field) turned back into the token it stands
/// for by `owner`; a reply of another shape is an internal error.
pub(super) fn attempt(
    reply: Value,
    name: &str,
    owner: impl FnOnce(&str) -> Option<Token>,
) -> Result<Attempt> {
    parse_attempt(reply, owner)
        .ok_or_else(|| Error::internal(format!("{name}: unexpected reply to acquire")))
}

impl FromRedisValue for LockStatus {
    fn from_redis_value(reply: Value) -> Result<Self, ParsingError> {
        parse_status(reply).ok_or_else(|| "not a reply to status".into())
    }
}

/// renew.lua's reply ([`RENEWED`]) to `what` on lock `name`: whether the
/// token still holds the lock (1) or not (0), and the server's clock in ms.
pub(super) fn renewed(reply: Value, name: &str, what: &str) -> Result<(i64, u64)> {
    let parsed = match &reply {
        Value::Array(items) if items.len() == RENEWED.fields.len() => {
            let held = field!(items, RENEWED, "held").and_then(as_int);
            let now = field!(items, RENEWED, "now").and_then(number);
            held.zip(now)
        }
        _ => None,
    };
    parsed.ok_or_else(|| Error::internal(format!("{name}: unexpected reply to {what}")))
}

/// The parts of a reply of rlock's own lock scripts (`done()` in prelude/1-layout.lua):
/// the script's own reply, its outbox (digest, message, ...) and the digests
/// of the waiters first in line; None for a reply of another shape.
pub(super) fn split(reply: Value) -> Option<(Value, Vec<String>, Vec<String>)> {
    let Value::Array(mut items) = reply else {
        return None;
    };
    let strings = |v: Option<&Value>| -> Option<Vec<String>> {
        match v {
            Some(Value::Array(list)) => list.iter().map(as_string).collect(),
            None | Some(Value::Nil) => Some(Vec::new()),
            _ => None,
        }
    };
    let outbox = strings(field!(items, DONE, "outbox"))?;
    let next = strings(field!(items, DONE, "next"))?;
    const REPLY: usize = DONE.at("reply");
    (REPLY < items.len()).then(|| (items.swap_remove(REPLY), outbox, next))
}

/// acquire.lua's (and redisson_acquire.lua's) reply: [`HELD`], [`WEAKER`]
/// (an enclosing hold of a weaker kind) or [`TAKEN`].
fn parse_attempt(reply: Value, owner: impl FnOnce(&str) -> Option<Token>) -> Option<Attempt> {
    const IS_HELD: i64 = HELD.tag();
    const IS_WEAKER: i64 = WEAKER.tag();
    const IS_TAKEN: i64 = TAKEN.tag();
    let Value::Array(items) = reply else {
        return None;
    };
    let event = field!(items, HELD, "event");
    match as_int(items.first()?)? {
        IS_HELD => Some(Attempt::Acquired(Hold {
            token: owner(&as_string(field!(items, HELD, "owner")?)?)?,
            fence: Fence(u64::try_from(as_int(field!(items, HELD, "fence")?)?).ok()?),
            count: u64::try_from(as_int(field!(items, HELD, "count")?)?).ok()?,
            // 1, the entry id of the `acquired` event the script wrote, or
            // "handed": written before this request (found by its fence).
            recorded: event.is_some(),
            history_entry: event
                .filter(|v| as_int(v).is_none())
                .and_then(as_string)
                .map(|id| match id.as_str() {
                    "handed" => AcquiredEvent::ByFence,
                    _ => AcquiredEvent::Entry(id),
                }),
        })),
        IS_WEAKER => Some(Attempt::Incompatible {
            held: Kind::from_code(&as_string(field!(items, WEAKER, "kind")?)?, 0)?,
        }),
        IS_TAKEN => {
            let pttl = as_int(field!(items, TAKEN, "wait_ms")?)?;
            let holder = match field!(items, TAKEN, "holder") {
                Some(Value::Array(h)) if h.len() >= const { HOLDER.required() } => Some(holder(h)?),
                _ => None,
            };
            Some(Attempt::Taken {
                pttl: u64::try_from(pttl).ok().map(Duration::from_millis),
                holder,
                place: field!(items, TAKEN, "place")
                    .and_then(as_int)
                    .and_then(|n| u32::try_from(n).ok())
                    .filter(|n| *n > 0),
            })
        }
        _ => None,
    }
}

/// A [`HOLDER`] in the way of an acquire; None when a field is not as
/// the shape has it.
fn holder(h: &[Value]) -> Option<HolderInfo> {
    let held_ms = as_int(field!(h, HOLDER, "held_ms")?)?;
    Some(HolderInfo {
        host: as_string(field!(h, HOLDER, "host")?)?,
        pid: as_string(field!(h, HOLDER, "pid")?)?,
        command: as_string(field!(h, HOLDER, "command")?)?,
        note: field!(h, HOLDER, "note")
            .and_then(as_string)
            .unwrap_or_default(),
        held_for: Duration::from_millis(u64::try_from(held_ms).unwrap_or(0)),
        detached: false,
        earlier: field!(h, HOLDER, "earlier").and_then(as_string).as_deref() == Some("earlier"),
    })
}

/// A number that is not negative.
fn number(v: &Value) -> Option<u64> {
    as_int(v).and_then(|n| u64::try_from(n).ok())
}

/// status.lua's reply: [`STATUS`], with [`HOLDING`]s and [`WAITING`]s.
fn parse_status(reply: Value) -> Option<LockStatus> {
    let Value::Array(items) = reply else {
        return None;
    };
    let holders = match field!(items, STATUS, "holders")? {
        Value::Array(list) => list
            .iter()
            .filter_map(|h| match h {
                Value::Array(f) if f.len() >= const { HOLDING.required() } => holding(f),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    let waiters = match field!(items, STATUS, "waiters") {
        Some(Value::Array(list)) => list
            .iter()
            .filter_map(|w| match w {
                Value::Array(f) if f.len() >= const { WAITING.required() } => waiting(f),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    let limit = number(field!(items, STATUS, "limit")?).unwrap_or(1);
    Some(LockStatus {
        kind: Kind::from_code(
            &as_string(field!(items, STATUS, "kind")?).unwrap_or_default(),
            u32::try_from(limit).unwrap_or(u32::MAX),
        ),
        limit,
        fence: number(field!(items, STATUS, "fence")?).unwrap_or(0),
        waiting: number(field!(items, STATUS, "waiting")?).unwrap_or(0),
        holders,
        waiters,
        servers: None,
        redisson: false,
    })
}

/// One of status.lua's [`HOLDING`]s; None when a field is missing.
fn holding(f: &[Value]) -> Option<HolderStatus> {
    Some(HolderStatus {
        host: as_string(field!(f, HOLDING, "host")?)?,
        pid: as_string(field!(f, HOLDING, "pid")?)?,
        command: as_string(field!(f, HOLDING, "command")?)?,
        since_ms: number(field!(f, HOLDING, "since_ms")?).unwrap_or(0),
        lease_ms: Some(number(field!(f, HOLDING, "ttl_ms")?).unwrap_or(0)),
        note: field!(f, HOLDING, "note")
            .and_then(as_string)
            .unwrap_or_default(),
        earlier: field!(f, HOLDING, "earlier").and_then(as_string).as_deref() == Some("earlier"),
        ttl_ms: field!(f, HOLDING, "lease_ms").and_then(number),
        renewed_ms: field!(f, HOLDING, "renewed_ms").and_then(number),
    })
}

/// One of status.lua's [`WAITING`]s; None when a field is missing.
fn waiting(f: &[Value]) -> Option<WaiterStatus> {
    Some(WaiterStatus {
        host: as_string(field!(f, WAITING, "host")?)?,
        pid: as_string(field!(f, WAITING, "pid")?)?,
        note: as_string(field!(f, WAITING, "note")?)?,
        waiting_ms: number(field!(f, WAITING, "waiting_ms")?),
    })
}

/// An integer reply, or a bulk string that spells one.
pub(super) fn as_int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(n) => Some(*n),
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

/// A string reply (invalid UTF-8 replaced), or an integer as text.
pub(super) fn as_string(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Int(n) => Some(n.to_string()),
        _ => None,
    }
}

/// XREVRANGE's reply (`[[id, [field, value, ...]], ...]`) as events; the
/// time is the entry id's milliseconds (the server's clock when it was
/// written). Entries that are not shaped so are skipped.
pub(super) fn events(reply: Value) -> Vec<crate::lock::event::Event> {
    let Value::Array(entries) = reply else {
        return Vec::new();
    };
    entries
        .into_iter()
        .filter_map(|entry| {
            let Value::Array(parts) = entry else {
                return None;
            };
            let id = as_string(parts.first()?)?;
            let ms: u64 = id.split('-').next()?.parse().ok()?;
            let Some(Value::Array(fields)) = parts.get(1) else {
                return None;
            };
            let texts: Vec<String> = fields.iter().filter_map(as_string).collect();
            let pairs = texts.chunks(2).filter(|p| p.len() == 2);
            Some(crate::lock::event::Event::from_fields(
                ms,
                pairs.map(|p| (p[0].as_str(), p[1].as_str())),
            ))
        })
        .collect()
}
