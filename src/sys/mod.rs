//! The operating system, behind safe functions: every system call rlock
//! makes itself and every `unsafe` block of the crate live below this module.
//! On `rustix` where it has the call; raw `libc` where it has none (each such
//! place says why).

pub mod process;
