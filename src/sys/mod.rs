//! The operating system, behind safe functions: every system call rlock
//! makes itself and every `unsafe` block of the crate live below this module.
//! On `rustix` where it has the call; raw `libc` where it has none (each such
//! place says why).

// The one module where `unsafe` is allowed (the crate denies it elsewhere).
#![allow(unsafe_code)]

pub mod arena;
pub mod clock;
pub mod fs;
pub mod guardian;
pub mod inotify;
pub mod notify;
pub mod process;
pub mod random;
pub mod signal;
pub mod signals;
pub mod spawn;
pub mod stdio;
pub mod terminal;
