//! Each script's header (its `-- ARGV[n] name` and `-- REPLY name {fields}`
//! lines) read and held to the Rust definitions of its arguments and replies.

use super::protocol::{DONE, Shape};
use super::script;

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
