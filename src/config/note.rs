//! A holder's note: what the holder says it is, shown by `status`, the
//! waiting lines and "not acquired" messages. A CI job is better named by its
//! URL than by its pid on a runner, so when `--note`/`RLOCK_NOTE` is not given
//! the job's URL is taken from the CI system's environment.

/// Longest note stored with a hold, in bytes.
const MAX_NOTE_BYTES: usize = 200;

/// The note for a hold: the one given, else the CI job's URL, else empty.
/// One line, without URL passwords, at most [`MAX_NOTE_BYTES`].
pub fn resolve(given: Option<&str>) -> String {
    let note = match given {
        Some(note) => note.to_owned(),
        None => from_ci().unwrap_or_default(),
    };
    clean(&note)
}

/// The URL of the CI job this process runs in, when one of the common CI
/// systems says so.
fn from_ci() -> Option<String> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    if let (Some(server), Some(repo), Some(run)) = (
        var("GITHUB_SERVER_URL"),
        var("GITHUB_REPOSITORY"),
        var("GITHUB_RUN_ID"),
    ) {
        return Some(format!("{server}/{repo}/actions/runs/{run}"));
    }
    ["CI_JOB_URL", "BUILDKITE_BUILD_URL", "BUILD_URL"]
        .iter()
        .find_map(|name| var(name))
}

/// One line (control characters become spaces), URL passwords hidden, cut
/// to the limit at a character boundary.
fn clean(text: &str) -> String {
    let line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let mut note = crate::lock::redact::url_passwords(line.trim());
    if note.len() > MAX_NOTE_BYTES {
        let mut cut = MAX_NOTE_BYTES;
        while !note.is_char_boundary(cut) {
            cut -= 1;
        }
        note.truncate(cut);
    }
    note
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_are_one_bounded_line_without_passwords() {
        assert_eq!(clean("a\nb\tc"), "a b c");
        assert_eq!(
            clean("see https://u:pw@ci.example/job"),
            "see https://u:***@ci.example/job"
        );
        assert_eq!(clean(&"é".repeat(150)).len(), 200);
    }
}
