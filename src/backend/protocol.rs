//! The protocol between rlock and its Lua scripts, named once: each script
//! (`script.rs`) lists its ARGV by name, in order, and the [`Shape`]s of its
//! replies, defined here field by field. A script's header says the same in
//! `-- ARGV[n] name: ...` and `-- REPLY name {field, ...}` lines, which the
//! unit test below holds to these definitions; `redis/reply.rs` reads each
//! field at the place its shape gives it.

/// One shape of a script's reply: an array and its fields in order. A field
/// ending in `?` may be missing from the end; a number is the value by which
/// the reply says it has this shape.
#[derive(Debug)]
pub struct Shape {
    /// The shape's name in the scripts' headers.
    #[cfg(test)]
    pub(super) name: &'static str,
    pub(crate) fields: &'static [&'static str],
}

/// A [`Shape`], named as the scripts' headers name it, and its fields.
macro_rules! shape {
    ($name:literal, [$($field:literal),* $(,)?]) => {
        Shape {
            #[cfg(test)]
            name: $name,
            fields: &[$($field),*],
        }
    };
}

impl Shape {
    /// The place of `field` (named with or without its `?`), from 0; a field
    /// the shape does not have fails the build where this is a constant.
    pub const fn at(&self, field: &str) -> usize {
        let mut i = 0;
        while i < self.fields.len() {
            if names(self.fields[i], field) {
                return i;
            }
            i += 1;
        }
        panic!("a reply field that no shape has");
    }

    /// How many fields every reply of this shape has (those without a `?`).
    pub const fn required(&self) -> usize {
        let mut i = 0;
        while i < self.fields.len() {
            let f = self.fields[i].as_bytes();
            if f[f.len() - 1] == b'?' {
                return i;
            }
            i += 1;
        }
        i
    }

    /// The number in the shape's first field, which tells its replies from
    /// the script's other shapes.
    pub const fn tag(&self) -> i64 {
        let digits = self.fields[0].as_bytes();
        let mut i = 0;
        let mut n = 0;
        while i < digits.len() {
            assert!(digits[i].is_ascii_digit(), "a shape without a number first");
            n = n * 10 + (digits[i] - b'0') as i64;
            i += 1;
        }
        n
    }
}

/// Whether the shape's field `declared` is `field` (`declared` perhaps with a `?`).
const fn names(declared: &str, field: &str) -> bool {
    let (d, f) = (declared.as_bytes(), field.as_bytes());
    let len = if d.len() == f.len() + 1 && d[d.len() - 1] == b'?' {
        f.len()
    } else if d.len() == f.len() {
        d.len()
    } else {
        return false;
    };
    let mut i = 0;
    while i < len {
        if d[i] != f[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Every lock script's reply but status.lua's and wake.lua's: its own reply, the messages
/// it could not deliver (`digest, message, ...`) and the digests of the
/// waiters first in line (prelude/1-layout.lua's `done()`).
pub const DONE: Shape = shape!("done", ["reply", "outbox", "next"]);
/// An acquire that holds: the owner digest (or Redisson owner field) that
/// holds, the hold's fence, its count, and the new hold's `acquired` event.
pub const HELD: Shape = shape!("held", ["1", "owner", "fence", "count", "event?"]);
/// An acquire that did not get the lock.
pub const TAKEN: Shape = shape!("taken", ["0", "wait_ms", "holder", "place?"]);
/// A holder in the way of an acquire ([`TAKEN`]'s `holder`, or false).
pub const HOLDER: Shape = shape!(
    "holder",
    ["host", "pid", "command", "held_ms", "note?", "earlier?"]
);
/// An enclosing run holds the lock as a weaker kind.
pub const WEAKER: Shape = shape!("weaker", ["2", "kind"]);
/// A renewal: held 1 or 0, and the server's clock in ms.
pub const RENEWED: Shape = shape!("renewed", ["held", "now"]);
/// A look at one lock.
pub const STATUS: Shape = shape!(
    "status",
    ["kind", "limit", "fence", "waiting", "holders", "waiters"]
);
/// One of [`STATUS`]'s holders.
pub const HOLDING: Shape = shape!(
    "holding",
    [
        "host",
        "pid",
        "command",
        "since_ms",
        "ttl_ms",
        "note?",
        "earlier?",
        "lease_ms?",
        "renewed_ms?",
    ]
);
/// One of [`STATUS`]'s waiters.
pub const WAITING: Shape = shape!("waiting", ["host", "pid", "note", "waiting_ms"]);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shape_names_its_fields_and_the_number_that_marks_it() {
        assert_eq!(HELD.at("fence"), 2);
        assert_eq!(HELD.at("event"), 4);
        assert_eq!(HELD.required(), 4);
        assert_eq!(HELD.tag(), 1);
        assert_eq!(WEAKER.tag(), 2);
        assert_eq!(TAKEN.tag(), 0);
        assert_eq!(DONE.required(), 3);
    }
}
