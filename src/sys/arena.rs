//! A start-up arena: the global allocator of the `rlock` binary.
//!
//! A run allocates a few hundred small blocks between `main` and COMMAND's
//! start (clap's command tree, the URL, the connection's buffers, the
//! scripts' arguments) and frees most of them soon after. musl's allocator
//! answers that churn with mmap/munmap calls and fresh page faults, which cost
//! a run about 0.7–1 ms on the static binary. Until rlock starts renewing
//! for a COMMAND that outlived its first renewal ([`close`]; a short COMMAND's
//! release included), blocks are instead cut from one static buffer by
//! bumping an offset; freeing one is a no-op. After that, and for any block
//! that does not fit, the system allocator serves as usual.
//!
//! Freeing gives a block back only in two cases, so that the arena's touched
//! pages (its share of the resident set) stay few: the last block handed out
//! (a temporary freed before the next allocation) rolls the offset back, and
//! a freed block of 4 KiB or more (the old buffer of a vector that grew) is
//! kept in a short list and handed out again for a request it fits.
//!
//! Soundness rests on three rules: a block of the buffer is handed out to
//! one owner at a time (the offset moves with compare-and-swap; the list of
//! freed blocks is changed under a spin lock, and holds only blocks their
//! owners freed); it is never passed to the system allocator (`dealloc` of a
//! buffer block stays in the arena, `realloc` of one copies into a new block);
//! and the buffer is a `static`, so its blocks stay valid until the process
//! ends. The buffer lives in `.bss`: pages never touched cost no memory.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Bytes in the arena: what a short run allocates in all, with room.
const SIZE: usize = 512 * 1024;
/// The largest block the arena serves; larger ones come from the system.
const MAX_BLOCK: usize = 64 * 1024;
/// Freed blocks from this size up are kept for reuse.
const REUSED: usize = 4096;
/// How many freed blocks are kept (more are left unused).
const SLOTS: usize = 16;

/// The buffer, aligned for any block the standard library asks of it without
/// an over-aligned layout.
#[repr(C, align(4096))]
struct Buffer(UnsafeCell<[u8; SIZE]>);

/// The global allocator: the arena until [`close`], then the system's.
struct Arena {
    buffer: Buffer,
    /// Bytes of `buffer` handed out (only grows).
    used: AtomicUsize,
    /// Set by [`close`]: new blocks come from the system allocator.
    closed: AtomicBool,
    /// Held while `free` is read or changed.
    lock: AtomicBool,
    /// Freed blocks kept for reuse: (offset, size); size 0 is an empty slot.
    free: UnsafeCell<[(usize, usize); SLOTS]>,
}

// SAFETY: the buffer is only reached through blocks handed out by `alloc`,
// each to one owner at a time, chosen by an atomic compare-and-swap on `used`
// or taken from `free` under `lock`, which also guards every use of `free`.
unsafe impl Sync for Arena {}

impl Arena {
    /// An open arena.
    const fn new() -> Self {
        Arena {
            buffer: Buffer(UnsafeCell::new([0; SIZE])),
            used: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            lock: AtomicBool::new(false),
            free: UnsafeCell::new([(0, 0); SLOTS]),
        }
    }

    fn base(&self) -> *mut u8 {
        self.buffer.0.get().cast()
    }

    /// Whether `ptr` is a block of the buffer.
    fn owns(&self, ptr: *mut u8) -> bool {
        let start = self.base() as usize;
        (start..start + SIZE).contains(&(ptr as usize))
    }

    /// A block of the buffer for `layout`, or None when closed or full.
    fn bump(&self, layout: Layout) -> Option<*mut u8> {
        if self.closed.load(Ordering::Relaxed) || layout.size() > MAX_BLOCK {
            return None;
        }
        if let Some(ptr) = self.reuse(layout) {
            return Some(ptr);
        }
        let start = self.base() as usize;
        let mut used = self.used.load(Ordering::Relaxed);
        loop {
            let at = (start + used).checked_next_multiple_of(layout.align())? - start;
            let end = at.checked_add(layout.size())?;
            if end > SIZE {
                return None;
            }
            match self
                .used
                .compare_exchange_weak(used, end, Ordering::Relaxed, Ordering::Relaxed)
            {
                // SAFETY: at + size <= SIZE, so the block is inside the buffer.
                Ok(_) => return Some(unsafe { self.base().add(at) }),
                Err(now) => used = now,
            }
        }
    }

    /// Takes back `ptr`, a freed block of `size` bytes: the offset moves back
    /// over it if it is the last one handed out (a temporary freed before the
    /// next allocation), else a large one is kept for reuse; a small one
    /// stays unused.
    fn give_back(&self, ptr: *mut u8, size: usize) {
        let at = ptr as usize - self.base() as usize;
        let last = self
            .used
            .compare_exchange(at + size, at, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok();
        if !last && size >= REUSED {
            self.with_free(|free| {
                if let Some(slot) = free.iter_mut().find(|(_, size)| *size == 0) {
                    *slot = (at, size);
                }
            });
        }
    }

    /// A kept block that fits `layout` (the smallest), taken off the list.
    fn reuse(&self, layout: Layout) -> Option<*mut u8> {
        if layout.size() < REUSED {
            return None;
        }
        let start = self.base() as usize;
        let at = self.with_free(|free| {
            let slot = free
                .iter_mut()
                .filter(|(at, size)| {
                    *size >= layout.size() && (start + *at).is_multiple_of(layout.align())
                })
                .min_by_key(|(_, size)| *size)?;
            let (at, _) = std::mem::take(slot);
            Some(at)
        })?;
        // SAFETY: a kept block lies inside the buffer (it was handed out).
        Some(unsafe { self.base().add(at) })
    }

    /// Runs `f` on the list of kept blocks, under the spin lock (held for a
    /// few instructions, never across an allocation).
    fn with_free<R>(&self, f: impl FnOnce(&mut [(usize, usize); SLOTS]) -> R) -> R {
        while self
            .lock
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
        }
        // SAFETY: the lock is held, so this is the only reference to the list.
        let result = f(unsafe { &mut *self.free.get() });
        self.lock.store(false, Ordering::Release);
        result
    }

    /// Grows the last block handed out, `ptr`, to `new_size` where it is.
    fn grow_in_place(&self, ptr: *mut u8, old_size: usize, new_size: usize) -> bool {
        if self.closed.load(Ordering::Relaxed) {
            return false;
        }
        let at = ptr as usize - self.base() as usize;
        let Some(end) = at.checked_add(new_size).filter(|&end| end <= SIZE) else {
            return false;
        };
        self.used
            .compare_exchange(at + old_size, end, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }
}

/// The arena of the `rlock` binary (its `main` names [`StartupAllocator`] as the
/// global allocator); other programs linking the library leave it untouched.
static ARENA: Arena = Arena::new();

/// The global allocator of the `rlock` binary: the arena, then the system's.
pub struct StartupAllocator;

/// From now on, new blocks come from the system allocator: rlock is past its
/// start-up, and its long-running parts (renewals, the wait for COMMAND) free
/// what they allocate. Blocks already in the arena stay valid.
pub fn close() {
    close_arena(&ARENA);
}

fn close_arena(arena: &Arena) {
    arena.closed.store(true, Ordering::Relaxed);
}

// SAFETY: every call goes to ARENA, a sound allocator (below).
unsafe impl GlobalAlloc for StartupAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller keeps GlobalAlloc's contract, passed on as is.
        unsafe { ARENA.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        unsafe { ARENA.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as in `alloc`.
        unsafe { ARENA.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as in `alloc`.
        unsafe { ARENA.realloc(ptr, layout, new_size) }
    }
}

// SAFETY: every block returned is either fresh from `bump` (inside the static
// buffer, aligned for and as large as its layout, handed out once) or from
// `System`; blocks of the buffer never reach `System`, and `System`'s blocks
// are returned to it with their own layouts.
unsafe impl GlobalAlloc for Arena {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match self.bump(layout) {
            Some(ptr) => ptr,
            // SAFETY: the caller's layout has a non-zero size (GlobalAlloc's contract).
            None => unsafe { System.alloc(layout) },
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match self.bump(layout) {
            Some(ptr) => {
                // A block given back may be handed out again, dirty.
                // SAFETY: the block holds layout.size() bytes.
                unsafe { ptr.write_bytes(0, layout.size()) };
                ptr
            }
            // SAFETY: as in `alloc`.
            None => unsafe { System.alloc_zeroed(layout) },
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if self.owns(ptr) {
            self.give_back(ptr, layout.size());
        } else {
            // SAFETY: not a block of the buffer, so System handed it out with `layout`.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !self.owns(ptr) {
            // SAFETY: System's block with `layout`; the caller's new_size is valid.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        if new_size <= layout.size() || self.grow_in_place(ptr, layout.size(), new_size) {
            return ptr;
        }
        // SAFETY: the caller guarantees new_size and align form a valid layout.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: new_layout has a non-zero size.
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: both blocks hold at least layout.size() bytes and are
            // distinct (the new one was handed out after the old one).
            unsafe { std::ptr::copy_nonoverlapping(ptr, new, layout.size()) };
            self.give_back(ptr, layout.size());
        }
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh arena on the heap (one on a test thread's stack would not fit).
    fn fresh() -> Box<Arena> {
        // SAFETY: all zeroes is a fresh arena: an empty, zeroed buffer, nothing
        // used, not closed (that is what `Arena::new` builds).
        unsafe { Box::<Arena>::new_zeroed().assume_init() }
    }

    #[test]
    fn blocks_are_aligned_distinct_and_fall_back_to_the_system_when_full() {
        let arena = fresh();
        let small = Layout::from_size_align(3, 1).unwrap();
        let wide = Layout::from_size_align(16, 64).unwrap();
        let a = arena.bump(small).unwrap();
        let b = arena.bump(wide).unwrap();
        assert_eq!(b as usize % 64, 0);
        assert!(b as usize >= a as usize + 3);
        assert!(arena.owns(a) && arena.owns(b));
        let big = Layout::from_size_align(SIZE, 1).unwrap();
        assert!(arena.bump(big).is_none());
        // SAFETY: a valid, non-zero layout; the block is freed with it.
        unsafe {
            let p = arena.alloc(big);
            assert!(!p.is_null() && !arena.owns(p));
            arena.dealloc(p, big);
        }
    }

    #[test]
    fn a_freed_large_block_is_handed_out_again_for_a_request_it_fits() {
        let arena = fresh();
        let big = Layout::from_size_align(8192, 8).unwrap();
        let small = Layout::from_size_align(16, 8).unwrap();
        // SAFETY: valid layouts; each block is written within its size.
        unsafe {
            let a = arena.alloc(big);
            let b = arena.alloc(small);
            a.write_bytes(1, 8192);
            arena.dealloc(a, big);
            let c = arena.alloc_zeroed(Layout::from_size_align(6000, 8).unwrap());
            assert_eq!(c, a, "the kept block, not a new one");
            assert!(std::slice::from_raw_parts(c, 6000).iter().all(|&x| x == 0));
            let d = arena.alloc(Layout::from_size_align(5000, 8).unwrap());
            assert_ne!(d, c, "a kept block is handed out once");
            assert!(d as usize > b as usize);
            // The last block goes back to the offset.
            arena.dealloc(d, Layout::from_size_align(5000, 8).unwrap());
            assert_eq!(arena.alloc(Layout::from_size_align(5000, 8).unwrap()), d);
        }
    }

    #[test]
    fn realloc_grows_the_last_block_in_place_and_copies_the_others() {
        let arena = fresh();
        let layout = Layout::from_size_align(8, 8).unwrap();
        // SAFETY: valid layouts; each block is read within its size.
        unsafe {
            let a = arena.alloc(layout);
            a.write_bytes(7, 8);
            let a2 = arena.realloc(a, layout, 32);
            assert_eq!(a, a2, "the last block grows where it is");
            let b = arena.alloc(layout);
            let a3 = arena.realloc(a2, Layout::from_size_align(32, 8).unwrap(), 64);
            assert_ne!(a3, a2);
            assert_eq!(std::slice::from_raw_parts(a3, 8), &[7; 8]);
            arena.dealloc(b, layout);
            close_arena(&arena);
            let c = arena.alloc(layout);
            assert!(
                !arena.owns(c),
                "a closed arena hands out the system's blocks"
            );
            let c2 = arena.realloc(a3, Layout::from_size_align(64, 8).unwrap(), 128);
            assert!(!arena.owns(c2));
            assert_eq!(std::slice::from_raw_parts(c2, 8), &[7; 8]);
            arena.dealloc(c2, Layout::from_size_align(128, 8).unwrap());
            arena.dealloc(c, layout);
        }
    }
}
