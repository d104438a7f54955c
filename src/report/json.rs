//! `--json` output: serde_json writes it, escaping what JSON requires; what
//! other hosts stored also reaches terminals this way (`status --json` run
//! by hand), so the characters [`super::needs_escape`] names are escaped too,
//! as `\uXXXX`, like JSON's own control-character escapes.

use std::io::{self, Write};

use serde::Serialize;
use serde_json::ser::{CharEscape, CompactFormatter, Formatter, Serializer};

/// `value` as one line of compact JSON, nothing a terminal acts on left raw.
pub fn to_string(value: &impl Serialize) -> String {
    let mut out = Vec::new();
    value
        .serialize(&mut Serializer::with_formatter(&mut out, TerminalSafe))
        .expect("plain structs of strings and numbers always serialise");
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

/// serde_json's compact shape, with the escapes above.
struct TerminalSafe;

impl Formatter for TerminalSafe {
    /// A run of text serde_json leaves unescaped: C1 controls, DEL, bidi
    /// controls and the two line separators JavaScript reads as line ends
    /// are escaped here.
    fn write_string_fragment<W>(&mut self, writer: &mut W, fragment: &str) -> io::Result<()>
    where
        W: ?Sized + Write,
    {
        let mut start = 0;
        for (at, c) in fragment.char_indices() {
            if super::needs_escape(c) || matches!(c, '\u{2028}' | '\u{2029}') {
                writer.write_all(&fragment.as_bytes()[start..at])?;
                write!(writer, "\\u{:04x}", u32::from(c))?;
                start = at + c.len_utf8();
            }
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }

    /// Backspace and form feed as `\u0008` and `\u000c`, as every other
    /// control character without a one-letter escape, not `\b` and `\f`.
    fn write_char_escape<W>(&mut self, writer: &mut W, escape: CharEscape) -> io::Result<()>
    where
        W: ?Sized + Write,
    {
        match escape {
            CharEscape::Backspace => writer.write_all(b"\\u0008"),
            CharEscape::FormFeed => writer.write_all(b"\\u000c"),
            other => CompactFormatter.write_char_escape(writer, other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string(text: &str) -> String {
        to_string(&text)
    }

    #[test]
    fn strings_escape_everything_a_terminal_or_parser_could_trip_on() {
        assert_eq!(string("a\"b\\c\n\u{1b}"), "\"a\\\"b\\\\c\\n\\u001b\"");
        assert_eq!(
            string("\t\r\u{0}\u{8}\u{c}\u{1f}\u{7f}\u{9b}"),
            "\"\\t\\r\\u0000\\u0008\\u000c\\u001f\\u007f\\u009b\""
        );
        assert_eq!(
            string("x\u{202e}y\u{200e}\u{2066}\u{2028}\u{2029}"),
            "\"x\\u202ey\\u200e\\u2066\\u2028\\u2029\""
        );
    }

    #[test]
    fn other_text_is_left_as_written() {
        assert_eq!(string("/ünïcødé ✓ 日本 🔒 '"), "\"/ünïcødé ✓ 日本 🔒 '\"");
        assert_eq!(string(""), "\"\"");
    }
}
