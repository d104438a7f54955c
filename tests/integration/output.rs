//! Output that cannot be written is an error: a token nobody got is given
//! back (125), and `status`/`list` that cannot write exit 125 with one line;
//! a reader that went away (`| head`) is not an error.

use std::process::Stdio;

use crate::support::process::Proc;
use crate::support::redis_server::RedisServer;
use crate::support::rlock::{self, assert_fails, code, rlock, show};

fn dev_full() -> Stdio {
    Stdio::from(std::fs::File::create("/dev/full").unwrap())
}

#[test]
fn acquire_with_stdout_closed_gives_the_lock_back() {
    let redis = RedisServer::start();
    let bin = &crate::support::rlock::bin();
    let script = format!(
        "exec {bin} --url '{}' acquire --ttl 30s closed >&-",
        redis.url()
    );
    let out = rlock::output(std::process::Command::new("sh").args(["-c", &script]));
    let err = assert_fails(&out, 125);
    assert!(err.contains("the lock was given back"), "{err}");
    // Nobody got the token: the hold leaves no `acquired` event behind.
    let history = rlock::output(rlock(&redis.url()).args(["history", "closed", "--json"]));
    assert_eq!(code(&history), 0, "{}", show(&history));
    assert_eq!(rlock::stdout(&history).trim(), "[]", "{}", show(&history));
    assert!(
        redis
            .lock_keys("closed")
            .iter()
            .all(|k| k.ends_with(":fence")),
        "{:?}",
        redis.lock_keys("closed")
    );
    // A shell's >/dev/null is a place to write to: the lock is taken.
    let script = format!(
        "exec {bin} --url '{}' acquire --ttl 30s closed >/dev/null",
        redis.url()
    );
    let out = rlock::output(std::process::Command::new("sh").args(["-c", &script]));
    assert_eq!(code(&out), 0, "{}", show(&out));
}

#[test]
fn status_and_list_that_cannot_write_exit_125() {
    let redis = RedisServer::start();
    for args in [
        &["status", "x"][..],
        &["list"][..],
        &["status", "--json", "x"][..],
    ] {
        let child = rlock(&redis.url())
            .args(args)
            .stdout(dev_full())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = Proc::new(child).output_within(rlock::LIMIT);
        let err = assert_fails(&out, 125);
        assert!(err.contains("cannot write to standard output"), "{err}");
    }
    // A reader that is gone (`| head -c0`) is no error.
    let bin = &crate::support::rlock::bin();
    let out = rlock::output(std::process::Command::new("bash").args([
        "-c",
        &format!(
            "{bin} --url '{}' status a b c d | true; echo \"${{PIPESTATUS[0]}}\"",
            redis.url()
        ),
    ]));
    assert_eq!(rlock::stdout(&out).trim(), "0", "{}", show(&out));
}

/// Each `rlock:` line leaves in one write: many rlocks sharing one pipe (a
/// CI pane, a log) never mix their lines.
#[test]
fn lines_of_concurrent_runs_sharing_a_pipe_stay_whole() {
    use std::io::Read;
    let dir = crate::support::scratch::Scratch::new();
    let url = format!("file:{}", dir.path().display());
    let (mut reader, writer) = std::io::pipe().unwrap();
    let runs: Vec<_> = (0..24)
        .map(|i| {
            let mut cmd = rlock(&url);
            cmd.args(["-v", "run", &format!("pipe-{i}"), "--", "true"])
                .stdout(Stdio::null())
                .stderr(writer.try_clone().unwrap());
            Proc::new(cmd.spawn().unwrap())
        })
        .collect();
    drop(writer);
    let mut all = String::new();
    let reading = std::thread::spawn(move || {
        reader.read_to_string(&mut all).unwrap();
        all
    });
    for mut run in runs {
        assert_eq!(run.wait_within(rlock::LIMIT).code(), Some(0));
    }
    let all = reading.join().unwrap();
    let lines: Vec<&str> = all.lines().collect();
    assert!(lines.len() >= 24 * 2, "{all}");
    for line in &lines {
        assert!(
            line.starts_with("rlock: ") && line.matches("rlock: ").count() == 1,
            "a line mixed with another: {line:?}\n{all}"
        );
    }
}
