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

use crate::backend::{Attempt, Hold, HolderInfo, HolderStatus, LockStatus, WaiterStatus};
use crate::error::{Error, Result};
use crate::lock::kind::Kind;
use crate::lock::token::{Fence, Token};

/// `reply` to `what` ("acquire", "status") on lock `name` as a `T`; a reply of
/// another shape is an internal error.
pub(super) fn decode<T: FromRedisValue>(reply: Value, name: &str, what: &str) -> Result<T> {
    T::from_redis_value(reply)
        .map_err(|_| Error::internal(format!("{name}: unexpected reply to {what}")))
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

/// The parts of a reply of rlock's own lock scripts (`done()` in prelude/1-layout.lua):
/// the script's own reply, its outbox (digest, message, ...) and the digests
/// of the waiters first in line; None for a reply of another shape.
pub(super) fn split(reply: Value) -> Option<(Value, Vec<String>, Vec<String>)> {
    let Value::Array(items) = reply else {
        return None;
    };
    let mut items = items.into_iter();
    let own = items.next()?;
    let strings = |v: Option<Value>| -> Option<Vec<String>> {
        match v {
            Some(Value::Array(list)) => list.iter().map(as_string).collect(),
            None | Some(Value::Nil) => Some(Vec::new()),
            _ => None,
        }
    };
    let outbox = strings(items.next())?;
    let next = strings(items.next())?;
    Some((own, outbox, next))
}

/// acquire.lua's (and redisson_acquire.lua's) reply: `{1, owner, fence, count}`
/// (held), `{2, held}` (an enclosing hold of a weaker kind), or `{0, pttl,
/// holder, place}` (taken).
fn parse_attempt(reply: Value, owner: impl FnOnce(&str) -> Option<Token>) -> Option<Attempt> {
    let Value::Array(items) = reply else {
        return None;
    };
    match as_int(items.first()?)? {
        1 => Some(Attempt::Acquired(Hold {
            token: owner(&as_string(items.get(1)?)?)?,
            fence: Fence(u64::try_from(as_int(items.get(2)?)?).ok()?),
            count: u64::try_from(as_int(items.get(3)?)?).ok()?,
            // 1, or the entry id of the `acquired` event the script wrote.
            recorded: items.get(4).is_some(),
            history_entry: items
                .get(4)
                .filter(|v| as_int(v).is_none())
                .and_then(as_string),
        })),
        2 => Some(Attempt::Incompatible {
            held: Kind::from_code(&as_string(items.get(1)?)?, 0)?,
        }),
        0 => {
            let pttl = as_int(items.get(1)?)?;
            let holder = match items.get(2) {
                Some(Value::Array(h)) if h.len() >= 4 => Some(HolderInfo {
                    host: as_string(&h[0])?,
                    pid: as_string(&h[1])?,
                    command: as_string(&h[2])?,
                    note: h.get(4).and_then(as_string).unwrap_or_default(),
                    held_for: Duration::from_millis(u64::try_from(as_int(&h[3])?).unwrap_or(0)),
                    detached: false,
                    earlier: h.get(5).and_then(as_string).as_deref() == Some("earlier"),
                }),
                _ => None,
            };
            Some(Attempt::Taken {
                pttl: u64::try_from(pttl).ok().map(Duration::from_millis),
                holder,
                place: items
                    .get(3)
                    .and_then(as_int)
                    .and_then(|n| u32::try_from(n).ok())
                    .filter(|n| *n > 0),
            })
        }
        _ => None,
    }
}

/// status.lua's reply: `{kind, limit, fence, waiting, holders, waiters}`.
fn parse_status(reply: Value) -> Option<LockStatus> {
    let Value::Array(items) = reply else {
        return None;
    };
    let number = |v: &Value| as_int(v).and_then(|n| u64::try_from(n).ok());
    let holders = match items.get(4)? {
        Value::Array(list) => list
            .iter()
            .filter_map(|h| match h {
                Value::Array(f) if f.len() >= 5 => Some(HolderStatus {
                    host: as_string(&f[0])?,
                    pid: as_string(&f[1])?,
                    command: as_string(&f[2])?,
                    since_ms: number(&f[3]).unwrap_or(0),
                    lease_ms: Some(number(&f[4]).unwrap_or(0)),
                    note: f.get(5).and_then(as_string).unwrap_or_default(),
                    earlier: f.get(6).and_then(as_string).as_deref() == Some("earlier"),
                }),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    let waiters = match items.get(5) {
        Some(Value::Array(list)) => list
            .iter()
            .filter_map(|w| match w {
                Value::Array(f) if f.len() >= 4 => Some(WaiterStatus {
                    host: as_string(&f[0])?,
                    pid: as_string(&f[1])?,
                    note: as_string(&f[2])?,
                    waiting_ms: number(&f[3]),
                }),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    let limit = number(items.get(1)?).unwrap_or(1);
    Some(LockStatus {
        kind: Kind::from_code(
            &as_string(items.first()?).unwrap_or_default(),
            u32::try_from(limit).unwrap_or(u32::MAX),
        ),
        limit,
        fence: number(items.get(2)?).unwrap_or(0),
        waiting: number(items.get(3)?).unwrap_or(0),
        holders,
        waiters,
        servers: None,
        redisson: false,
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
