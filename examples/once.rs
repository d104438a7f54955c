//! A one-shot critical section: a cron job that compacts a table, which a
//! service (or `rlock run nightly -- …` in a crontab) must not touch
//! meanwhile.
//!
//! ```text
//! cargo run --example once -- redis://127.0.0.1:6379
//! ```
//!
//! Exits 0 after the work, 75 when another holder has the lock for longer
//! than the wait (as `rlock run --wait 10s` would), 69 when the server
//! cannot be reached.

use std::process::ExitCode;
use std::time::Duration;

fn main() -> ExitCode {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "redis://127.0.0.1:6379".to_owned());
    match compact(&url) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("once: {err}");
            ExitCode::from(err.exit_code())
        }
    }
}

fn compact(url: &str) -> Result<(), rlock::Error> {
    let client = rlock::Client::open(url)?;
    let hold = client
        .lock("nightly")
        .wait(Duration::from_secs(10))
        .note("examples/once.rs")
        .acquire()?;
    // The fence goes with every write the work makes, so the storage can
    // refuse a write from an older holder.
    println!("compacting under fence {}", hold.fence());
    std::thread::sleep(Duration::from_millis(100));
    // Released here; also when `hold` is dropped on an early return.
    hold.release()?;
    println!("released");
    Ok(())
}
