//! Files appearing in or leaving the lock directory (inotify), so waiters and
//! keepers wake when something happens instead of looking again and again.

use std::ffi::OsString;
use std::fs::File;
use std::io::Read;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStringExt;
use std::path::Path;
use std::time::Duration;

/// An inotify watch on one directory.
pub struct DirWatch(File);

/// One event: its mask (`IN_CREATE`, `IN_DELETE`, ...) and the file's name.
pub type DirEvent = (u32, OsString);

impl DirWatch {
    /// None when the kernel refuses (no inotify, or the user's instances are
    /// used up): callers then look again on a timer.
    pub fn new(dir: &Path, mask: u32) -> Option<Self> {
        use rustix::fs::inotify;
        let fd =
            inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK).ok()?;
        inotify::add_watch(&fd, dir, inotify::WatchFlags::from_bits_retain(mask)).ok()?;
        Some(DirWatch(File::from(fd)))
    }

    /// The inotify descriptor, to poll with others.
    pub fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.0.as_fd()
    }

    /// Waits up to `timeout` (None: without end) for events; returns those
    /// that came (none when the time passed).
    pub fn wait(&self, timeout: Option<Duration>) -> Vec<DirEvent> {
        let timeout = timeout.map(|t| t.max(Duration::from_millis(1)));
        if !super::process::poll_readable(&[self.0.as_fd()], timeout).is_ok_and(|n| n > 0) {
            return Vec::new();
        }
        self.drain()
    }

    /// The events queued now, without waiting.
    pub fn drain(&self) -> Vec<DirEvent> {
        let mut events = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = (&self.0).read(&mut buf) {
            if n == 0 {
                break;
            }
            parse(&buf[..n], &mut events);
        }
        events
    }
}

/// `struct inotify_event`s: wd, mask, cookie, len (4 bytes each), then `len`
/// bytes of NUL-padded name.
fn parse(mut bytes: &[u8], events: &mut Vec<DirEvent>) {
    const HEAD: usize = 16;
    while bytes.len() >= HEAD {
        let word = |at: usize| {
            u32::from_ne_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
        };
        let (mask, len) = (word(4), word(12) as usize);
        let Some(name) = bytes.get(HEAD..HEAD + len) else {
            return;
        };
        let end = name.iter().position(|&b| b == 0).unwrap_or(len);
        events.push((mask, OsString::from_vec(name[..end].to_vec())));
        bytes = &bytes[HEAD + len..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sees_files_created_and_removed() {
        let dir = std::env::temp_dir().join(format!("rlock-watch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let watch = DirWatch::new(&dir, libc::IN_CREATE | libc::IN_DELETE).unwrap();
        assert!(watch.wait(Some(Duration::from_millis(1))).is_empty());
        std::fs::write(dir.join("a.h.x"), "").unwrap();
        std::fs::remove_file(dir.join("a.h.x")).unwrap();
        let mut all = watch.wait(Some(Duration::from_secs(5)));
        assert_eq!(all[0], (libc::IN_CREATE, OsString::from("a.h.x")));
        let deleted = (libc::IN_DELETE, OsString::from("a.h.x"));
        if !all.contains(&deleted) {
            all.extend(watch.wait(Some(Duration::from_secs(5))));
        }
        assert!(all.contains(&deleted), "{all:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
