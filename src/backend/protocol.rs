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
    name: &'static str,
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
        "host", "pid", "command", "since_ms", "ttl_ms", "note?", "earlier?",
    ]
);
/// One of [`STATUS`]'s waiters.
pub const WAITING: Shape = shape!("waiting", ["host", "pid", "note", "waiting_ms"]);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::script;

    /// The leading comment of `text`.
    fn header(text: &str) -> Vec<&str> {
        text.lines().take_while(|l| l.starts_with("--")).collect()
    }

    /// The names of a header's `-- ARGV[n] name: ...` lines, in order, a
    /// last `-- ARGV[n..] name: ...` as `name..`; panics on a line that is
    /// not so, or out of order.
    fn header_argv(header: &[&str]) -> Vec<String> {
        let mut names = Vec::new();
        for line in header {
            let Some(rest) = line.strip_prefix("-- ARGV[") else {
                continue;
            };
            let (n, rest) = rest.split_once("] ").expect(line);
            let (n, many) = match n.strip_suffix("..") {
                Some(n) => (n, ".."),
                None => (n, ""),
            };
            assert_eq!(n.parse::<usize>().ok(), Some(names.len() + 1), "{line}");
            let (name, _) = rest.split_once(':').expect(line);
            assert!(
                !name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{line}"
            );
            names.push(format!("{name}{many}"));
        }
        names
    }

    /// A header's `-- REPLY name {field, ...}` lines as (name, fields).
    fn header_replies(header: &[&str]) -> Vec<(String, Vec<String>)> {
        let mut shapes = Vec::new();
        for line in header {
            let Some(rest) = line.strip_prefix("-- REPLY ") else {
                continue;
            };
            let (name, rest) = rest.split_once(" {").expect(line);
            let (fields, _) = rest.split_once('}').expect(line);
            let fields = fields.split(", ").map(str::to_owned).collect();
            shapes.push((name.to_owned(), fields));
        }
        shapes
    }

    /// Whether a header's `fields` are the shape's: all of them, or all
    /// up to some it may leave out (those with a `?`).
    fn agree(shape: &Shape, fields: &[String]) -> bool {
        fields.len() >= shape.required()
            && fields.len() <= shape.fields.len()
            && shape.fields.iter().zip(fields).all(|(s, f)| s == f)
    }

    #[test]
    fn each_scripts_header_names_its_argv_and_replies_as_its_definition_does() {
        for script in script::every_script() {
            let header = header(script.own_text());
            let first = header.first().copied().unwrap_or_default();
            assert_eq!(header_argv(&header), script.argv(), "{first}");
            let replies = header_replies(&header);
            let named: Vec<&str> = replies.iter().map(|(name, _)| name.as_str()).collect();
            let defined: Vec<&str> = script.replies().iter().map(|s| s.name).collect();
            assert_eq!(named, defined, "{first}");
            for (shape, (name, fields)) in script.replies().iter().zip(&replies) {
                assert!(agree(shape, fields), "{first}: {name} {fields:?}");
            }
        }
        let prelude = script::ACQUIRE.prelude();
        let replies = header_replies(&header(prelude));
        assert_eq!(replies.len(), 1, "the prelude's REPLY");
        assert_eq!(replies[0].0, DONE.name);
        assert!(agree(&DONE, &replies[0].1), "{replies:?}");
    }

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
