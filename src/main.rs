//! The `rlock` binary: parse, run, print one line on failure, exit.

use std::process::ExitCode;

/// Start-up allocations from a static arena until rlock starts renewing
/// (`rlock::StartupAllocator`): musl's allocator churn cost a run about 1 ms.
#[global_allocator]
static ALLOC: rlock::StartupAllocator = rlock::StartupAllocator;

fn main() -> ExitCode {
    rlock::start();
    let cli = match rlock::cli::parse() {
        Ok(cli) => cli,
        Err(exit) => return exit.into(),
    };
    match rlock::run(cli) {
        Ok(exit) => exit.into(),
        Err(err) => {
            rlock::report(&err);
            err.exit().into()
        }
    }
}
