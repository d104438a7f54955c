//! Exact expectations for what rlock prints: a line, or a block of lines,
//! where `[..]` stands for any text within one line (snapbox's and trycmd's
//! wildcard). Only what varies from run to run (ports, pids, hosts, times,
//! durations) goes under `[..]`; the rest of the line is the contract.

/// The wildcard: any text, possibly empty, within one line.
pub const ANY: &str = "[..]";

/// Whether the single line `actual` is `pattern`, `[..]` matching any text
/// that has no line break.
pub fn line_matches(pattern: &str, actual: &str) -> bool {
    if actual.contains('\n') {
        return false;
    }
    let mut pieces = pattern.split(ANY);
    let first = pieces.next().unwrap_or_default();
    let Some(mut rest) = actual.strip_prefix(first) else {
        return false;
    };
    let pieces: Vec<&str> = pieces.collect();
    let Some((last, middle)) = pieces.split_last() else {
        // No wildcard: the whole line.
        return rest.is_empty();
    };
    // Leftmost matches of the middle pieces leave the most room for the rest.
    for piece in middle {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// Asserts that `actual`, line by line, is `expected`: the same number of
/// lines (a final line break is not a line), each matching its pattern.
#[track_caller]
pub fn assert_lines(actual: &str, expected: &str) {
    let want: Vec<&str> = expected.lines().collect();
    let got: Vec<&str> = actual.lines().collect();
    let same = want.len() == got.len()
        && want
            .iter()
            .zip(&got)
            .all(|(pattern, line)| line_matches(pattern, line));
    assert!(same, "{}", mismatch("lines", expected, actual));
}

/// Asserts that one of `actual`'s lines matches `expected`, for outputs whose
/// other lines are checked elsewhere or vary (warnings, progress lines).
#[track_caller]
pub fn assert_has_line(actual: &str, expected: &str) {
    assert!(
        actual.lines().any(|line| line_matches(expected, line)),
        "{}",
        mismatch("a line", expected, actual)
    );
}

fn mismatch(what: &str, expected: &str, actual: &str) -> String {
    format!(
        "expected {what} (`[..]` is any text within a line):\n{}\nactual:\n{}",
        indent(expected),
        indent(actual)
    )
}

fn indent(text: &str) -> String {
    if text.is_empty() {
        return "    (nothing)".to_owned();
    }
    text.lines()
        .map(|line| format!("    |{line}|"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::line_matches;

    #[test]
    fn wildcards_match_within_one_line_only() {
        assert!(line_matches("rlock: x", "rlock: x"));
        assert!(!line_matches("rlock: x", "rlock: xy"));
        assert!(!line_matches("rlock: x", "rlock: "));
        assert!(line_matches("pid [..] on [..]", "pid 12 on host"));
        assert!(line_matches("pid [..] on [..]", "pid  on "));
        assert!(!line_matches("pid [..] on [..]", "pid 12 at host"));
        assert!(line_matches("[..]: lost", "a: b: lost"));
        assert!(!line_matches("[..]: lost", "a: lost\nb"));
        assert!(line_matches("a[..]b[..]b", "abbb"));
        assert!(!line_matches("a[..]bc[..]c", "abc"));
        assert!(line_matches("[..]", ""));
    }
}
