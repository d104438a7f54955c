//! A run that holds a lock until the test releases it.

use super::expect_within;
use super::process::Proc;
use super::redis_server::RedisServer;
use super::rlock::{self, rlock, sh, spawn_quiet};
use super::scratch::Scratch;
use std::process::Command;

/// Starts `rlock run OPTS NAME` whose COMMAND holds until [`release`]`(dir,
/// tag)`, then logs "<tag> <start-ms> <end-ms>" to `dir/log`. Returns once it
/// holds.
pub fn holder(redis: &RedisServer, dir: &Scratch, opts: &[&str], name: &str, tag: &str) -> Proc {
    holder_by(rlock(&redis.url()), dir, opts, name, tag)
}

/// [`holder`] run by `rlock`, a command that is an rlock binary with its
/// server given (another build's, for instance).
pub fn holder_by(mut rlock: Command, dir: &Scratch, opts: &[&str], name: &str, tag: &str) -> Proc {
    let ready = dir.file(&format!("{tag}.held"));
    // (It also stops when the test's directory goes.)
    let script = format!(
        "s=$(date +%s%3N); touch {ready}; \
         while [ ! -e {release} ] && [ -d {dir} ]; do sleep 0.01; done; \
         echo \"{tag} $s $(date +%s%3N)\" >> {log}",
        release = dir.file(&format!("{tag}.release")),
        dir = dir.path().display(),
        log = dir.file("log"),
    );
    let run = spawn_quiet(
        rlock
            .arg("run")
            .args(opts)
            .arg(name)
            .arg("--")
            .args(sh(&script)),
    );
    expect_within(rlock::LIMIT, &format!("{tag} to hold {name}"), || {
        std::path::Path::new(&ready).exists()
    });
    run
}

/// An exclusive holder of `name` (tag `name`) whose 60 s lease is not renewed
/// within a test's time.
pub fn hold(redis: &RedisServer, dir: &Scratch, name: &str) -> Proc {
    holder(redis, dir, &["--ttl", "60s"], name, name)
}

/// Lets the holder tagged `tag` finish.
pub fn release(dir: &Scratch, tag: &str) {
    std::fs::write(dir.file(&format!("{tag}.release")), "").unwrap();
}

/// A COMMAND that marks `dir/TAG.held` when it starts, sleeps `secs`, then logs
/// "TAG start-ms end-ms" to `dir/log`.
pub fn timed_job(dir: &Scratch, tag: &str, secs: &str) -> String {
    format!(
        "s=$(date +%s%3N); touch {held}; sleep {secs}; echo \"{tag} $s $(date +%s%3N)\" >> {log}",
        held = dir.file(&format!("{tag}.held")),
        log = dir.file("log"),
    )
}

/// When the [`timed_job`] tagged `tag` ran (start, end in ms), if it finished.
pub fn span(dir: &Scratch, tag: &str) -> Option<(u128, u128)> {
    let lines = dir.lines("log");
    let line = lines.iter().find(|l| l.starts_with(&format!("{tag} ")))?;
    let f: Vec<&str> = line.split_whitespace().collect();
    Some((f[1].parse().ok()?, f[2].parse().ok()?))
}

/// A COMMAND (for `sh -c`) that runs until [`go`]`(dir)`.
pub fn until_go(dir: &Scratch) -> String {
    format!("while [ ! -e {} ]; do sleep 0.01; done", dir.file("go"))
}

/// Lets a COMMAND of [`until_go`] finish.
pub fn go(dir: &Scratch) {
    std::fs::write(dir.file("go"), "").unwrap();
}
