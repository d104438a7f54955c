//! A redis-server whose wall clock the test steps: an `LD_PRELOAD` shim
//! (`clock_shim.c`, built here with `cc`) adds the offset written in a file
//! to `CLOCK_REALTIME`, `gettimeofday` and `time`.

use std::process::Command;
use std::sync::OnceLock;

use super::redis_server::RedisServer;
use super::scratch::Scratch;

/// The shim, built once per test run.
fn shim() -> &'static str {
    static BUILT: OnceLock<String> = OnceLock::new();
    BUILT.get_or_init(|| {
        let out = std::env::temp_dir().join(format!("rlock-clock-shim-{}.so", std::process::id()));
        let source = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/integration/support/clock_shim.c"
        );
        let status = Command::new("cc")
            .args(["-shared", "-fPIC", "-O2", "-o"])
            .arg(&out)
            .arg(source)
            .status()
            .expect("cc (gcc) builds the clock shim: scripts/test installs it");
        assert!(status.success(), "the clock shim did not build");
        out.to_string_lossy().into_owned()
    })
}

/// A server and the file whose offset (ms) its clock runs at.
pub struct SteppedServer {
    pub redis: RedisServer,
    offset: String,
    at: std::cell::Cell<i64>,
    _dir: Scratch,
}

impl SteppedServer {
    pub fn start() -> Self {
        let dir = Scratch::new();
        let offset = dir.file("offset");
        std::fs::write(&offset, "0").unwrap();
        let redis = RedisServer::start_with_env(
            &[],
            &[("LD_PRELOAD", shim()), ("RLOCK_CLOCK_SHIM_FILE", &offset)],
        );
        SteppedServer {
            redis,
            offset,
            at: std::cell::Cell::new(0),
            _dir: dir,
        }
    }

    /// Steps the server's clock to `ms` off the real one, and returns once
    /// its TIME shows it.
    pub fn step_to(&self, ms: i64) {
        let step = ms - self.at.replace(ms);
        let before = self.redis.time_us() as i64;
        std::fs::write(&self.offset, ms.to_string()).unwrap();
        super::expect_within(
            std::time::Duration::from_secs(2),
            "the server's clock to step",
            || {
                let moved = self.redis.time_us() as i64 - before;
                (moved / 1000 - step).abs() < 1000
            },
        );
    }
}
