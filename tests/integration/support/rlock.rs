//! Running the real `rlock` binary against a test server.

use std::ffi::OsStr;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use super::process::Proc;

/// Longest any single rlock invocation in these tests may take before the test fails.
pub const LIMIT: Duration = Duration::from_secs(30);

/// `rlock --url URL` with a clean environment: no RLOCK_* or REDIS_URL from the
/// developer's shell.
pub fn rlock(url: &str) -> Command {
    let mut cmd = bare();
    cmd.arg("--url").arg(url);
    cmd
}

/// The rlock binary under test: `RLOCK_TEST_BIN` (e.g. the static release
/// binary scripts/dist builds), else the one cargo built for these tests.
pub fn bin() -> String {
    std::env::var("RLOCK_TEST_BIN")
        .ok()
        .filter(|b| !b.is_empty())
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_rlock").to_owned())
}

/// `rlock` without a URL. No option's variable (the definition's list) nor
/// any other variable rlock reads is inherited from the developer's shell.
pub fn bare() -> Command {
    let mut cmd = Command::new(bin());
    for var in ::rlock::cli::option_variables() {
        cmd.env_remove(var);
    }
    for var in [
        "REDIS_URL",
        "RLOCK_TOKEN",
        "RLOCK_TOKENS",
        "RLOCK_NAME",
        "RLOCK_FENCE",
        "REDISCLI_AUTH",
        // A CI system's job URL would become every holder's note.
        "GITHUB_RUN_ID",
        "CI_JOB_URL",
        "BUILD_URL",
        "BUILDKITE_BUILD_URL",
        // A test run under systemd must not tell it about the runs it starts.
        "NOTIFY_SOCKET",
        "WATCHDOG_USEC",
        "WATCHDOG_PID",
    ] {
        cmd.env_remove(var);
    }
    // Off a terminal a waiting run logs a progress line first; the tests that
    // check one-line verdicts of waiting runs do not want it (tests of the
    // progress lines turn it back on).
    cmd.env("RLOCK_PROGRESS_INTERVAL", "0");
    cmd.stdin(Stdio::null());
    cmd
}

/// Starts `cmd` with stdout/stderr piped.
pub fn spawn(cmd: &mut Command) -> Proc {
    Proc::new(
        cmd.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

/// Starts `cmd` with stdout/stderr discarded (for long-running holders).
pub fn spawn_quiet(cmd: &mut Command) -> Proc {
    Proc::new(
        cmd.stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// Runs `cmd` to completion within [`LIMIT`].
pub fn output(cmd: &mut Command) -> Output {
    spawn(cmd).output_within(LIMIT)
}

/// Exit code (panics on death by signal, with the output).
pub fn code(out: &Output) -> i32 {
    out.status
        .code()
        .unwrap_or_else(|| panic!("killed by a signal: {}", show(out)))
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// For assertion messages.
pub fn show(out: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        out.status,
        stdout(out),
        stderr(out)
    )
}

/// Asserts the contract's failure shape: exactly `status`, and stderr is one line
/// starting with `rlock: `.
pub fn assert_fails(out: &Output, status: i32) -> String {
    assert_eq!(out.status.code(), Some(status), "{}", show(out));
    let err = stderr(out);
    assert!(err.starts_with("rlock: "), "{}", show(out));
    assert_eq!(err.trim_end().lines().count(), 1, "{}", show(out));
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "{}",
        show(out)
    );
    err
}

/// `sh -c SCRIPT` as COMMAND arguments.
pub fn sh(script: &str) -> [&OsStr; 3] {
    [OsStr::new("sh"), OsStr::new("-c"), OsStr::new(script)]
}

/// Like [`assert_fails`], for runs that may also print warnings first (e.g. a
/// failed renewal): the last stderr line is the `rlock:` verdict.
pub fn assert_fails_last_line(out: &Output, status: i32) -> String {
    assert_eq!(out.status.code(), Some(status), "{}", show(out));
    let err = stderr(out);
    assert!(
        err.lines().all(|l| l.starts_with("rlock: ")),
        "{}",
        show(out)
    );
    err.lines().last().unwrap_or_default().to_owned()
}
