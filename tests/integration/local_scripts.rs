//! `rlock acquire --while-pid`, `renew` and `release` with the file:DIR
//! backend: a background keeper holds the lock files for the calling script.

use std::path::Path;

use crate::support::expect_within;
use crate::support::process::Proc;
use crate::support::rlock::{self, assert_fails, bare, code, output, sh, show, spawn, stdout};
use crate::support::scratch::Scratch;

fn local(dir: &Scratch) -> std::process::Command {
    let mut cmd = bare();
    cmd.arg("--url").arg(format!("file:{}", dir.file("locks")));
    cmd
}

/// A stand-in for the calling shell: its pid is what --while-pid watches.
fn caller() -> Proc {
    Proc::new(
        std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap(),
    )
}

fn acquire(dir: &Scratch, name: &str, pid: u32) -> String {
    let out = output(local(dir).args(["acquire", "--while-pid", &pid.to_string(), "--", name]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    stdout(&out).trim().to_owned()
}

fn waiting(dir: &Scratch, name: &str) -> usize {
    let out = output(local(dir).args(["status", "--json", name]));
    (0..10)
        .find(|n| stdout(&out).contains(&format!("\"waiting\":{n}")))
        .expect("waiting in status")
}

fn free(dir: &Scratch, name: &str) -> bool {
    code(&output(local(dir).args(["run", "-n", name, "--", "true"]))) == 0
}

/// Holder and release records of the lock directory.
fn records(dir: &Scratch) -> Vec<String> {
    std::fs::read_dir(dir.file("locks"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|f| f.contains(".h.") || f.contains(".r."))
        .collect()
}

#[test]
fn acquire_while_pid_holds_until_released_forced_or_the_caller_exits() {
    let dir = Scratch::new();
    let mut shell = caller();
    let token = acquire(&dir, "x", shell.pid);
    let out = output(local(&dir).args(["run", "-n", "x", "--", "true"]));
    // The holder is the caller: its command line, not rlock's.
    let err = assert_fails(&out, 75);
    assert!(err.contains("('sleep 60')"), "{err}");
    let out = output(local(&dir).args(["status", "--json", "x"]));
    assert!(stdout(&out).contains("\"held\":true"), "{}", show(&out));
    let out = output(local(&dir).args(["renew", "x", "--token", &token]));
    assert_eq!(code(&out), 0, "{}", show(&out));

    let out = output(local(&dir).args(["release", "x", "--token", &token]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert!(free(&dir, "x"), "free at once after release");
    assert_fails(
        &output(local(&dir).args(["release", "x", "--token", &token])),
        1,
    );
    assert_fails(
        &output(local(&dir).args(["renew", "x", "--token", &token])),
        1,
    );
    assert!(records(&dir).is_empty(), "{:?}", records(&dir));

    // The caller exits: the keeper lets go by itself.
    let _token = acquire(&dir, "x", shell.pid);
    assert!(!free(&dir, "x"));
    shell.kill();
    expect_within(rlock::LIMIT, "the lock to be freed", || free(&dir, "x"));
    expect_within(rlock::LIMIT, "no record left", || records(&dir).is_empty());

    // An operator's release --force asks the keeper to let go.
    let shell = caller();
    let _token = acquire(&dir, "x", shell.pid);
    let out = output(local(&dir).args(["release", "--force", "x"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert!(free(&dir, "x"));
    assert!(records(&dir).is_empty(), "{:?}", records(&dir));
}

#[test]
fn a_script_inside_a_run_reenters_and_a_runs_hold_is_not_released_from_outside() {
    let dir = Scratch::new();
    let bin = &crate::support::rlock::bin();
    let url = format!("file:{}", dir.file("locks"));
    let inside = dir.file("inside");
    let go = dir.file("go");
    std::fs::write(&go, "").unwrap();
    let run = spawn(local(&dir).args(["run", "x", "--"]).args(sh(&format!(
        "t=$({bin} --url {url} acquire x --while-pid $$) || exit 9; \
         {bin} --url {url} release x --token $t; echo inner=$?; \
         env -u RLOCK_TOKEN -u RLOCK_TOKENS {bin} --url {url} release x --token $RLOCK_TOKEN; echo outer=$?; \
         touch {inside}; while [ -e {go} ]; do sleep 0.02; done"
    ))));
    expect_within(rlock::LIMIT, "the script", || Path::new(&inside).exists());
    // The run still holds it, and cannot be forced out.
    assert!(!free(&dir, "x"));
    let err = assert_fails(&output(local(&dir).args(["release", "--force", "x"])), 2);
    assert!(err.contains("pid"), "{err}");
    std::fs::remove_file(&go).unwrap();
    let out = run.output_within(rlock::LIMIT);
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert!(stdout(&out).contains("inner=0"), "{}", show(&out));
    assert!(stdout(&out).contains("outer=2"), "{}", show(&out));
    assert!(free(&dir, "x"));
}

#[test]
fn acquire_without_while_pid_is_refused_and_a_home_dir_works() {
    let dir = Scratch::new();
    let err = assert_fails(&output(local(&dir).args(["acquire", "x"])), 2);
    assert!(err.contains("--while-pid"), "{err}");
    // A relative DIR would depend on the working directory (cron's is not a
    // shell's): refused, with the absolute path to use instead.
    let out = output(
        bare()
            .current_dir(dir.path())
            .args(["--url", "file:rel", "run", "r", "--", "true"]),
    );
    let err = assert_fails(&out, 2);
    assert!(
        err.contains("use an absolute path, e.g. file:") && err.contains("/rel"),
        "{err}"
    );
    // `~/` is $HOME's, for the keeper too.
    let shell = caller();
    let relative = |args: &[&str]| {
        output(
            bare()
                .env("HOME", dir.path())
                .args(["--url", "file:~/rel"])
                .args(args),
        )
    };
    let out = relative(&["acquire", "r", "--while-pid", &shell.pid.to_string()]);
    assert_eq!(code(&out), 0, "{}", show(&out));
    let token = stdout(&out).trim().to_owned();
    assert_fails(&relative(&["run", "-n", "r", "--", "true"]), 75);
    let out = relative(&["release", "r", "--token", &token]);
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert_eq!(code(&relative(&["run", "-n", "r", "--", "true"])), 0);
    assert!(dir.path().join("rel").is_dir(), "~ is $HOME");
    // The URL form file:///DIR is that absolute DIR; file://~/x names a
    // host, not the home directory: refused, nothing created.
    let url = format!("file://{}", dir.file("triple"));
    let out = output(bare().args(["--url", &url, "run", "t", "--", "true"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert!(dir.path().join("triple").is_dir(), "file:///DIR is DIR");
    let out = output(bare().env("HOME", dir.path()).args([
        "--url",
        "file://~/tilde",
        "run",
        "t",
        "--",
        "true",
    ]));
    let err = assert_fails(&out, 2);
    assert!(err.contains("file:~/DIR"), "{err}");
    assert!(!std::path::Path::new("/~").exists(), "nothing made at /~");
}

#[test]
fn a_keeper_started_inside_a_run_keeps_only_its_own_lock() {
    let dir = Scratch::new();
    let bin = &crate::support::rlock::bin();
    let url = format!("file:{}", dir.file("locks"));
    let shell = caller();
    // COMMAND inherits the run's lock on x; the keeper of y must not.
    let out = output(local(&dir).args(["run", "x", "--"]).args(sh(&format!(
        "{bin} --url {url} acquire y --while-pid {} >/dev/null",
        shell.pid
    ))));
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert!(free(&dir, "x"), "x ended with its run");
    assert!(!free(&dir, "y"), "y is kept while the caller lives");
}

#[test]
fn the_keeper_takes_over_or_nothing_is_left_held() {
    let dir = Scratch::new();
    let shell = caller();
    // A NAME that looks like an option is still a NAME to the keeper.
    let token = acquire(&dir, "-v", shell.pid);
    assert!(!free(&dir, "-v"), "the keeper holds -v");
    let out = output(local(&dir).args(["renew", "--token", &token, "--", "-v"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    // The token cannot be handed over: nothing stays held.
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let mut cmd = local(&dir);
    cmd.args(["acquire", "x", "--while-pid", &shell.pid.to_string()])
        .stderr(std::process::Stdio::piped());
    let out = Proc::new(cmd.stdout(full).spawn().unwrap()).output_within(rlock::LIMIT);
    let err = assert_fails(&out, 125);
    assert!(err.contains("given back"), "{err}");
    assert!(free(&dir, "x"));
    // Two releases of one token: one releases, the other finds it released.
    let token = acquire(&dir, "y", shell.pid);
    let releases: Vec<_> = (0..2)
        .map(|_| spawn(local(&dir).args(["release", "y", "--token", &token])))
        .collect();
    let mut codes: Vec<i32> = releases
        .into_iter()
        .map(|r| code(&r.output_within(rlock::LIMIT)))
        .collect();
    codes.sort_unstable();
    assert_eq!(codes, [0, 1]);
    assert!(free(&dir, "y"));
}

#[test]
fn a_caller_that_exits_while_waiting_gets_no_lock() {
    let dir = Scratch::new();
    let go = dir.file("go");
    std::fs::write(&go, "").unwrap();
    let holder = spawn(
        local(&dir)
            .args(["run", "x", "--"])
            .args(sh(&format!("while [ -e {go} ]; do sleep 0.02; done"))),
    );
    expect_within(rlock::LIMIT, "the holder", || !free(&dir, "x"));
    let mut shell = caller();
    let waiter = spawn(local(&dir).args([
        "acquire",
        "--wait",
        "20s",
        "x",
        "--while-pid",
        &shell.pid.to_string(),
    ]));
    expect_within(rlock::LIMIT, "the acquire to wait", || {
        waiting(&dir, "x") == 1
    });
    // The wait ends when the caller does, while the lock is still taken.
    shell.kill();
    let out = waiter.output_within(rlock::LIMIT);
    let err = assert_fails(&out, 125);
    assert!(err.contains("exited while waiting"), "{err}");
    assert_eq!(waiting(&dir, "x"), 0);
    std::fs::remove_file(&go).unwrap();
    assert_eq!(code(&holder.output_within(rlock::LIMIT)), 0);
    assert!(free(&dir, "x"));
    assert!(records(&dir).is_empty(), "{:?}", records(&dir));
}
