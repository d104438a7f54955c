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

/// `rlock run` through `url` of NAME `kept`, replicated (`--min-replicas 1`)
/// with a lease that rides out a failover on a loaded machine (`--ttl 20s
/// --kill-after 1s`: 16.9 s), of a COMMAND that runs until [`go`]. Returns
/// once it holds.
pub fn replicated_holder(url: &str, dir: &Scratch) -> Proc {
    let holder = super::rlock::spawn(
        super::rlock::bare()
            .args([
                "-v",
                "--url",
                url,
                "run",
                "--ttl",
                "20s",
                "--kill-after",
                "1s",
            ])
            .args(["--min-replicas", "1", "kept", "--"])
            .args(sh(&format!(
                "touch {}; {}",
                dir.file("held"),
                until_go(dir)
            ))),
    );
    expect_within(rlock::LIMIT, "the holder to hold", || {
        std::path::Path::new(&dir.file("held")).exists()
    });
    holder
}

/// After a failover to `new_master`, the [`replicated_holder`] rode it out: a
/// `--no-wait` probe through `url` finds the lock taken (75), a renewal
/// reaches the new master, and COMMAND runs to its end (exit 0). Returns
/// the holder's output.
pub fn assert_rode_out(
    holder: Proc,
    url: &str,
    new_master: &RedisServer,
    dir: &Scratch,
) -> std::process::Output {
    // 69 while no master answers yet (a Redis 6 master stays paused a
    // moment after a forced failover); free (0), never.
    let mut probe = None;
    expect_within(rlock::LIMIT, "a probe to reach the new master", || {
        let args = ["--url", url, "run", "--no-wait", "kept", "--", "true"];
        let out = rlock::output(super::rlock::bare().args(args));
        let answered = rlock::code(&out) != 69;
        probe = Some(out);
        answered
    });
    let probe = probe.expect("a probe ran");
    assert_eq!(
        rlock::code(&probe),
        75,
        "the hold is on the new master: {}",
        rlock::show(&probe)
    );
    // A renewal moves the lease's end later: its time to live, plus the time
    // since the first reading, grows by about a renewal period (read at once
    // after a renewal, the time to live alone may never read higher again).
    let pttl = || new_master.cmd::<i64>(&["PTTL", "rlock:{kept}:leases"]);
    let first = std::time::Instant::now();
    let before = pttl();
    let renewed = super::wait_until(std::time::Duration::from_secs(5), || {
        let since = i64::try_from(first.elapsed().as_millis()).unwrap_or(i64::MAX);
        pttl().saturating_add(since) > before + 200
    });
    go(dir);
    let out = holder.output_within(rlock::LIMIT);
    assert!(
        renewed,
        "no renewal on the new master: {}",
        rlock::show(&out)
    );
    assert_eq!(
        rlock::code(&out),
        0,
        "COMMAND ran through the failover: {}",
        rlock::show(&out)
    );
    out
}
