//! The files of one lock directory: safe file names for lock names, the
//! kernel locks on them, and the records holders and waiters leave there.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Longest file-name stem: NAME_MAX (255) less the longest suffix
/// (`.h.` and a 32-digit token).
const MAX_STEM: usize = 200;

/// The files of locks in one directory.
#[derive(Clone)]
pub struct Paths {
    dir: PathBuf,
}

impl Paths {
    pub fn new(dir: PathBuf) -> Self {
        Paths { dir }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `DIR/STEM.suffix` for lock `name`.
    pub fn of(&self, name: &str, suffix: &str) -> PathBuf {
        self.dir.join(format!("{}.{suffix}", stem(name)))
    }

    /// Records that a shortened stem stands for `name` (so `list` can name it).
    pub fn remember(&self, name: &str) {
        if stem(name).contains('~') {
            let path = self.of(name, "name");
            if fs::read_to_string(&path).ok().as_deref() != Some(name) {
                let _ = fs::write(path, name);
            }
        }
    }

    /// The name a file-name stem stands for.
    pub fn name_of(&self, stem: &str) -> Option<String> {
        if stem.contains('~') {
            fs::read_to_string(self.dir.join(format!("{stem}.name"))).ok()
        } else {
            decode(stem)
        }
    }

    /// Files `STEM.TAG.*` of lock `name`, with what follows the tag.
    pub fn tagged(&self, name: &str, tag: &str) -> Vec<(PathBuf, String)> {
        let prefix = format!("{}.{tag}.", stem(name));
        fs::read_dir(&self.dir)
            .map(|entries| {
                entries
                    .flatten()
                    .filter_map(|e| {
                        let file = e.file_name().into_string().ok()?;
                        let rest = file.strip_prefix(&prefix)?.to_owned();
                        Some((e.path(), rest))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// NAME as a file-name stem: ASCII bytes outside `[A-Za-z0-9_-]` as `%XX`
/// (so no '/', '.', or control character), other UTF-8 kept as it is; a stem
/// too long for a file name is cut and ends in `~` and a hash of NAME.
pub fn stem(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || c == '-' || !c.is_ascii() {
            out.push(c);
        } else {
            out.push_str(&format!("%{:02X}", c as u32));
        }
    }
    if out.len() <= MAX_STEM {
        return out;
    }
    let mut cut = MAX_STEM - 33;
    while !out.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}~{:032x}", &out[..cut], fnv128(name.as_bytes()))
}

/// The name an unshortened stem stands for.
pub fn decode(stem: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(stem.len());
    let mut it = stem.bytes();
    while let Some(b) = it.next() {
        if b == b'%' {
            let hex = [it.next()?, it.next()?];
            bytes.push(u8::from_str_radix(std::str::from_utf8(&hex).ok()?, 16).ok()?);
        } else {
            bytes.push(b);
        }
    }
    String::from_utf8(bytes).ok()
}

/// 128-bit FNV-1a: tells long names apart in their shortened stems.
fn fnv128(bytes: &[u8]) -> u128 {
    const OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
    const PRIME: u128 = 0x0000000001000000000000000000013B;
    bytes
        .iter()
        .fold(OFFSET, |h, &b| (h ^ u128::from(b)).wrapping_mul(PRIME))
}

/// Opens (creating, mode 0600) a file of the lock directory, never through a
/// symbolic link.
pub fn open(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// `flock` without waiting; false when someone else holds it.
pub fn try_flock(file: &File, exclusive: bool) -> io::Result<bool> {
    crate::sys::fs::try_flock(file, exclusive)
}

/// LOCK_EX on `file`, trying until `within` has passed.
pub fn lock_within(file: &File, within: Duration) -> io::Result<bool> {
    let until = Instant::now() + within;
    loop {
        if try_flock(file, true)? {
            return Ok(true);
        }
        if Instant::now() >= until {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Whether a process holds a lock on the file at `path` (a live holder or
/// waiter keeps LOCK_EX on its own record; a stale record is unlocked).
/// Unlike a pid, this cannot be fooled by a reused pid or another pid namespace.
pub fn held_by_someone(path: &Path) -> bool {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path);
    match file {
        Ok(file) => !try_flock(&file, false).unwrap_or(true),
        Err(_) => false,
    }
}

/// Lets a child inherit `file`, so the kernel lock lasts as long as the child
/// (COMMAND, or the `--while-pid` keeper) holds it open, as with flock(1).
pub fn inheritable(file: &File) {
    crate::sys::fs::inheritable(file);
}

/// Writes `text` to `path` in one step (a new file renamed over it), so a
/// reader sees the old text or the new, never a torn one. Called under the
/// lock's gate, so one writer at a time uses the temporary name.
///
/// Nothing is flushed to the disk (no fdatasync, no fsync of the directory):
/// the one file written this way is the fence counter, whose next value is
/// never below the clock in microseconds, so a counter that a power cut sent
/// back (or emptied) still gives larger fences than before the cut unless the
/// clock went back too. The two flushes cost an acquisition 1.5–1.75 ms.
pub fn replace(path: &Path, text: &str) -> io::Result<()> {
    use std::io::Write;
    let mut temp = path.as_os_str().to_owned();
    temp.push(".new");
    let temp = PathBuf::from(temp);
    let written = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&temp)
        .and_then(|mut file| file.write_all(text.as_bytes()))
        .and_then(|()| fs::rename(&temp, path));
    if let Err(err) = written {
        // A full disk or a failing device: leave nothing half-written behind.
        let _ = fs::remove_file(&temp);
        return Err(err);
    }
    Ok(())
}

/// A `key=value` record, one per line; the last key takes the rest of the
/// text, so a newline in it cannot forge a field.
pub struct Record(Vec<(&'static str, String)>);

impl Record {
    pub fn new() -> Self {
        Record(Vec::new())
    }

    pub fn with(mut self, key: &'static str, value: impl ToString) -> Self {
        self.0.push((key, value.to_string()));
        self
    }

    pub fn render(&self) -> String {
        self.0
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Reads field `key` of a rendered record whose last field is `last`.
pub fn field(text: &str, key: &str, last: &str) -> Option<String> {
    if key == last {
        let start = text
            .strip_prefix(&format!("{last}="))
            .or_else(|| text.split_once(&format!("\n{last}=")).map(|(_, v)| v))?;
        return Some(start.to_owned());
    }
    let head = text
        .split_once(&format!("\n{last}="))
        .map_or(text, |(h, _)| h);
    head.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .map(str::to_owned)
}

/// `*` and `?` glob matching (the patterns `list` takes): `*` matches any
/// run of bytes, `?` exactly one byte, every other byte itself.
///
/// Greedy with backtracking to the last `*` only, so it takes
/// O(pattern × text) steps at worst, whatever the number of `*`s: a later
/// `*` can absorb anything an earlier one would have, so earlier ones never
/// need to be revisited.
pub fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    // The last `*` seen, and where in the text what follows it was tried.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&c) if c == b'?' || c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                // Let that `*` take one more byte and try again after it.
                Some((sp, st)) => {
                    star = Some((sp, st + 1));
                    p = sp + 1;
                    t = st + 1;
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_safe_file_names_and_back() {
        for name in [
            "a",
            "../etc/passwd",
            "..",
            "caf\u{e9}",
            "100%",
            "a.b.c",
            "x/y",
            "~home",
        ] {
            let stem = stem(name);
            assert!(!stem.contains(['/', '.', '~']), "{stem}");
            assert_eq!(decode(&stem).as_deref(), Some(name));
        }
    }

    #[test]
    fn long_names_get_short_distinct_stems() {
        let a = "%".repeat(200);
        let b = format!("{}&", "%".repeat(199));
        for name in [&a, &b] {
            let stem = stem(name);
            assert!(stem.len() <= MAX_STEM, "{}", stem.len());
            assert!(stem.contains('~'));
        }
        assert_ne!(stem(&a), stem(&b));
        // Two-byte characters stay as they are: 100 of them fit whole.
        assert!(!stem(&"\u{e9}".repeat(100)).contains('~'));
    }

    #[test]
    fn records_keep_their_last_field_whole() {
        let text = Record::new()
            .with("pid", 7)
            .with("command", "a\nkind=s")
            .render();
        assert_eq!(field(&text, "pid", "command").as_deref(), Some("7"));
        assert_eq!(field(&text, "kind", "command"), None);
        assert_eq!(
            field(&text, "command", "command").as_deref(),
            Some("a\nkind=s")
        );
    }

    #[test]
    fn globs_match_like_scan() {
        assert!(glob(b"*", b"anything"));
        assert!(glob(b"deploy-*", b"deploy-prod"));
        assert!(!glob(b"deploy-*", b"backup"));
        assert!(glob(b"a?c", b"abc"));
    }

    /// The plain recursive definition of a glob match, to check `glob`'s
    /// faster loop against.
    fn reference(pattern: &[u8], text: &[u8]) -> bool {
        match (pattern.first(), text.first()) {
            (None, None) => true,
            (Some(b'*'), _) => {
                reference(&pattern[1..], text)
                    || (!text.is_empty() && reference(pattern, &text[1..]))
            }
            (Some(b'?'), Some(_)) => reference(&pattern[1..], &text[1..]),
            (Some(p), Some(t)) if p == t => reference(&pattern[1..], &text[1..]),
            _ => false,
        }
    }

    /// Every string of up to `max` bytes from `alphabet`.
    fn strings(alphabet: &[u8], max: usize) -> Vec<Vec<u8>> {
        let mut all = vec![vec![]];
        let mut last = vec![vec![]];
        for _ in 0..max {
            last = last
                .iter()
                .flat_map(|s: &Vec<u8>| {
                    alphabet.iter().map(move |&c| {
                        let mut s = s.clone();
                        s.push(c);
                        s
                    })
                })
                .collect();
            all.extend(last.iter().cloned());
        }
        all
    }

    #[test]
    fn globs_agree_with_the_recursive_definition() {
        let texts = strings(b"ab", 6);
        for pattern in strings(b"ab*?", 5) {
            for text in &texts {
                assert_eq!(
                    glob(&pattern, text),
                    reference(&pattern, text),
                    "{:?} against {:?}",
                    String::from_utf8_lossy(&pattern),
                    String::from_utf8_lossy(text)
                );
            }
        }
    }

    #[test]
    fn globs_edge_cases() {
        assert!(glob(b"", b""));
        assert!(!glob(b"", b"a"));
        assert!(glob(b"*", b""));
        assert!(glob(b"**", b""));
        assert!(!glob(b"?", b""));
        assert!(glob(b"*a", b"bba"));
        assert!(!glob(b"*a", b"ab"));
        assert!(glob(b"a*b*c", b"aXbYbZc"));
        assert!(!glob(b"a*b*c", b"aXbYbZ"));
        // No escapes or classes: `\`, `[` and `]` are ordinary bytes.
        assert!(glob(b"[a]\\*", b"[a]\\x"));
        assert!(!glob(b"[a]", b"a"));
        // Bytes, not characters: `?` is one byte of a two-byte character.
        assert!(glob("caf??".as_bytes(), "caf\u{e9}".as_bytes()));
        assert!(!glob("caf?".as_bytes(), "caf\u{e9}".as_bytes()));
    }

    #[test]
    fn globs_with_many_stars_take_linear_time() {
        // Exponential for the recursive definition; instant here.
        let text = "a".repeat(10_000);
        let start = std::time::Instant::now();
        assert!(!glob(b"*a*a*a*a*a*a*a*a*a*a*b", text.as_bytes()));
        assert!(glob(b"*a*a*a*a*a*a*a*a*a*a*", text.as_bytes()));
        assert!(glob(
            b"*a*a*a*a*a*a*a*a*a*a*b",
            format!("{text}b").as_bytes()
        ));
        assert!(start.elapsed() < std::time::Duration::from_secs(1));
    }
}
