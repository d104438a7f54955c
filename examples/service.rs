//! A service loop that works only while it holds its lock, and stops its
//! work as soon as the hold is lost (before the lease can end, so no other
//! holder ever works beside it).
//!
//! ```text
//! cargo run --example service -- redis://127.0.0.1:6379 [BATCHES]
//! ```
//!
//! Waits for the lock `nightly` (however long it takes), works through
//! BATCHES batches (default 50) of 100 ms each, then releases. Exits 0 when
//! it finished, 70 when the hold was lost (as `rlock run` does).

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .unwrap_or_else(|| "redis://127.0.0.1:6379".to_owned());
    let batches: u32 = args.next().and_then(|n| n.parse().ok()).unwrap_or(50);
    match serve(&url, batches) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("service: {err}");
            ExitCode::from(err.exit_code())
        }
    }
}

fn serve(url: &str, batches: u32) -> Result<(), rlock::Error> {
    let client = rlock::Client::open(url)?;
    let hold = client
        .lock("nightly")
        .ttl(Duration::from_secs(3))
        .wait_forever()
        .note("examples/service.rs")
        .acquire()?;
    println!("holding nightly, fence {}", hold.fence());
    // A watcher thread turns the loss into a flag the work checks between
    // steps; `hold.is_lost()` read directly does the same.
    let stop = Arc::new(AtomicBool::new(false));
    let lost = hold.lost();
    let watcher = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            if let Some(loss) = lost.wait() {
                eprintln!("service: {loss}; stopping the work");
                stop.store(true, Ordering::SeqCst);
            }
        })
    };
    for batch in 0..batches {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        println!("batch {batch}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // After a loss the release says so: an Error whose kind is Lost.
    let released = hold.release();
    let _ = watcher.join();
    released?;
    println!("released");
    Ok(())
}
