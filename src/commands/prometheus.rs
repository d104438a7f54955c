//! Prometheus' text exposition format (version 0.0.4), written by hand: the
//! few gauges and counters rlock prints need ~100 lines, not a client library.
//!
//! Also the one reading rlock does of such text: a metrics file several runs
//! share (node_exporter's textfile collector reads one directory of `*.prom`
//! files) is rewritten with one lock's series replaced and every other line
//! kept, so each run must find the series of its own lock by their `lock`
//! label.

use std::fmt::Write as _;

/// One metric family: `# HELP`, `# TYPE` and its samples.
pub struct Family {
    /// Metric name, with its unit (`rlock_hold_seconds`).
    pub name: &'static str,
    /// One line of help.
    pub help: &'static str,
    /// `gauge` or `counter`.
    pub kind: &'static str,
    /// Its samples.
    pub samples: Vec<Sample>,
}

/// One sample: labels (name, value) and the value.
pub struct Sample {
    /// Label pairs, in the order printed.
    pub labels: Vec<(&'static str, String)>,
    /// The value.
    pub value: f64,
}

impl Family {
    /// A family without samples yet.
    pub fn new(name: &'static str, kind: &'static str, help: &'static str) -> Self {
        Family {
            name,
            help,
            kind,
            samples: Vec::new(),
        }
    }

    /// Adds a sample.
    pub fn push(&mut self, labels: Vec<(&'static str, String)>, value: f64) {
        self.samples.push(Sample { labels, value });
    }
}

/// The families as exposition text; families without samples are left out.
pub fn encode(families: &[Family]) -> String {
    let mut out = String::new();
    for family in families.iter().filter(|f| !f.samples.is_empty()) {
        let _ = writeln!(out, "# HELP {} {}", family.name, escape_help(family.help));
        let _ = writeln!(out, "# TYPE {} {}", family.name, family.kind);
        for sample in &family.samples {
            out.push_str(&sample_line(family.name, sample));
        }
    }
    out
}

fn sample_line(name: &str, sample: &Sample) -> String {
    let mut line = name.to_owned();
    if !sample.labels.is_empty() {
        let labels: Vec<String> = sample
            .labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
            .collect();
        let _ = write!(line, "{{{}}}", labels.join(","));
    }
    let _ = writeln!(line, " {}", number(sample.value));
    line
}

/// A value as Prometheus reads it (`NaN`, `+Inf`; integers without `.0`).
fn number(value: f64) -> String {
    if value.is_nan() {
        "NaN".into()
    } else if value.is_infinite() {
        if value > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{value}")
    }
}

/// A label value: backslash, double quote and line feed escaped.
pub fn escape_label(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// Help text: backslash and line feed escaped.
fn escape_help(help: &str) -> String {
    help.replace('\\', "\\\\").replace('\n', "\\n")
}

/// The unescaped value of label `label` on a sample line, if it has one.
pub fn label_value(line: &str, label: &str) -> Option<String> {
    let open = line.find('{')?;
    let mut rest = &line[open + 1..];
    loop {
        rest = rest.trim_start_matches([' ', ',']);
        if rest.starts_with('}') || rest.is_empty() {
            return None;
        }
        let eq = rest.find('=')?;
        let key = rest[..eq].trim();
        rest = rest[eq + 1..].trim_start().strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next()? {
                (i, '"') => break i,
                (_, '\\') => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                (_, c) => value.push(c),
            }
        };
        if key == label {
            return Some(value);
        }
        rest = &rest[end + 1..];
    }
}

/// The metric name of a sample line (None for comments and blank lines).
pub fn sample_name(line: &str) -> Option<&str> {
    let line = line.trim_start();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let end = line.find(['{', ' ', '\t']).unwrap_or(line.len());
    Some(&line[..end])
}

/// The value of a sample line.
pub fn sample_value(line: &str) -> Option<f64> {
    let after = match line.rfind('}') {
        Some(close) => &line[close + 1..],
        None => line.trim_start().split_once([' ', '\t'])?.1,
    };
    after.split_whitespace().next()?.parse().ok()
}

/// Rewrites `existing` exposition text: the samples whose `lock` label is one
/// of `locks` are dropped, `ours` take their place, and every other sample,
/// with its family's `# HELP` and `# TYPE`, is kept (families in their first
/// order, ours first). Lines that are not samples or those comments are kept
/// at the end (an unknown comment is no reason to lose it).
pub fn merge(existing: &str, ours: &[Family], locks: &[String]) -> String {
    // name → (help line, type line, kept sample lines), in first-seen order.
    type Kept = Vec<(String, Option<String>, Option<String>, Vec<String>)>;
    let mut kept: Kept = Vec::new();
    let mut other = Vec::new();
    fn slot(kept: &mut Kept, name: &str) -> usize {
        if let Some(i) = kept.iter().position(|(n, ..)| n == name) {
            return i;
        }
        kept.push((name.to_owned(), None, None, Vec::new()));
        kept.len() - 1
    }
    let mut family_of_comment: Option<String> = None;
    for line in existing.lines() {
        let words: Vec<&str> = line.splitn(4, ' ').collect();
        if words.len() >= 3 && words[0] == "#" && matches!(words[1], "HELP" | "TYPE") {
            let i = slot(&mut kept, words[2]);
            family_of_comment = Some(words[2].to_owned());
            if words[1] == "HELP" {
                kept[i].1 = Some(line.to_owned());
            } else {
                kept[i].2 = Some(line.to_owned());
            }
            continue;
        }
        let Some(name) = sample_name(line) else {
            if !line.trim().is_empty() {
                other.push(line.to_owned());
            }
            continue;
        };
        if label_value(line, "lock").is_some_and(|l| locks.contains(&l)) {
            continue;
        }
        // `x_bucket`, `x_sum`, `x_count` belong to the family `x` announced.
        let family = match &family_of_comment {
            Some(f) if name.starts_with(f.as_str()) => f.clone(),
            _ => name.to_owned(),
        };
        let i = slot(&mut kept, &family);
        kept[i].3.push(line.to_owned());
    }
    let mut out = String::new();
    for family in ours {
        let i = kept.iter().position(|(n, ..)| n == family.name);
        let mut samples: Vec<String> = family
            .samples
            .iter()
            .map(|s| sample_line(family.name, s))
            .collect();
        if let Some(i) = i {
            samples.extend(kept[i].3.drain(..).map(|l| l + "\n"));
            kept.remove(i);
        }
        if samples.is_empty() {
            continue;
        }
        let _ = writeln!(out, "# HELP {} {}", family.name, escape_help(family.help));
        let _ = writeln!(out, "# TYPE {} {}", family.name, family.kind);
        samples.iter().for_each(|s| out.push_str(s));
    }
    for (_, help, kind, samples) in kept {
        if samples.is_empty() {
            continue;
        }
        for line in help.iter().chain(kind.iter()).chain(samples.iter()) {
            out.push_str(line);
            out.push('\n');
        }
    }
    for line in other {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn family(lock: &str, value: f64) -> Family {
        let mut f = Family::new("rlock_exit_status", "gauge", "Exit status.");
        f.push(vec![("lock", lock.to_owned())], value);
        f
    }

    #[test]
    fn label_values_are_escaped_and_read_back() {
        let text = encode(&[family("a\"b\\c\nd", 3.0)]);
        assert_eq!(
            text,
            "# HELP rlock_exit_status Exit status.\n# TYPE rlock_exit_status gauge\n\
             rlock_exit_status{lock=\"a\\\"b\\\\c\\nd\"} 3\n"
        );
        let line = text.lines().nth(2).unwrap();
        assert_eq!(label_value(line, "lock").as_deref(), Some("a\"b\\c\nd"));
        assert_eq!(sample_name(line), Some("rlock_exit_status"));
        assert_eq!(sample_value(line), Some(3.0));
    }

    #[test]
    fn merging_replaces_only_the_series_of_our_lock() {
        let first = encode(&[family("a", 1.0)]);
        let both = merge(&first, &[family("b", 2.0)], &["b".to_owned()]);
        let again = merge(&both, &[family("a", 5.0)], &["a".to_owned()]);
        assert_eq!(again.matches("# TYPE").count(), 1, "{again}");
        assert!(again.contains("{lock=\"a\"} 5\n"), "{again}");
        assert!(again.contains("{lock=\"b\"} 2\n"), "{again}");
        assert!(!again.contains("{lock=\"a\"} 1\n"), "{again}");
    }

    #[test]
    fn foreign_families_and_comments_are_kept() {
        let existing = "# HELP x_total X.\n# TYPE x_total counter\nx_total 4\n# a note\n";
        let out = merge(existing, &[family("a", 0.0)], &["a".to_owned()]);
        assert!(out.contains("# TYPE x_total counter\nx_total 4\n"), "{out}");
        assert!(out.ends_with("# a note\n"), "{out}");
    }
}
