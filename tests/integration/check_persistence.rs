//! `rlock check`'s `persistence` and `user` lines say what the server keeps
//! and what the production checklist advises (issue 37, point 4).

use crate::support::expect::assert_lines;
use crate::support::redis_server::RedisServer;
use crate::support::rlock::{assert_fails, code, output, rlock, show, stdout};

/// The `(result, detail)` of the check `name` in `check`'s output.
fn found(text: &str, name: &str) -> (String, String) {
    text.lines()
        .find_map(|line| {
            let mut words = line.split_whitespace();
            let result = words.next()?.to_owned();
            (words.next()? == name).then(|| (result, words.collect::<Vec<_>>().join(" ")))
        })
        .unwrap_or_else(|| panic!("no {name} line in {text}"))
}

/// Debian's defaults: RDB save points, no AOF, the default user. A clean
/// restart keeps the holds, a crash loses those since the last save: still a
/// warning (AOF off), worded as such; the default user is ok, with the
/// checklist's advice in its detail.
#[test]
fn check_on_rdb_save_points_and_the_default_user_says_what_they_keep() {
    let redis = RedisServer::start_with(&["--maxmemory-policy", "noeviction"]);
    redis.cmd::<String>(&["CONFIG", "SET", "save", "3600 1 300 100 60 10000"]);
    let out = output(rlock(&redis.url()).arg("check"));
    assert_eq!(code(&out), 1, "{}", show(&out));
    let text = stdout(&out);
    let (result, detail) = found(&text, "persistence");
    assert_eq!(result, "warn", "{text}");
    assert_lines(
        &detail,
        "appendonly no, RDB save points 3600 1 300 100 60 10000: a clean restart keeps \
         the holds (the server saves as it shuts down), a crash loses those taken since \
         the last save (a second run can then take a lock whose holder still runs): \
         enable appendonly (CONFIG SET appendonly yes, and in the server's configuration)",
    );
    let (result, detail) = found(&text, "user");
    assert_eq!(result, "ok", "{text}");
    assert_lines(
        &detail,
        "authenticated as the default user (ACL WHOAMI), which may run every command \
         on every key: in production give rlock an ACL user of its own, limited to its \
         prefix (README: ACL users)",
    );
    assert_lines(
        &assert_fails(&out, 1),
        "rlock: check: 1 warning(s): persistence (see the lines above)",
    );
}

/// AOF with each fsync policy: ok, and the line says what a crash of the
/// host loses.
#[test]
fn check_on_aof_names_what_each_fsync_policy_loses_in_a_crash() {
    let redis =
        RedisServer::start_with(&["--appendonly", "yes", "--maxmemory-policy", "noeviction"]);
    for (policy, crash) in [
        (
            "always",
            "a crash of the host too (every write is on disk before it is answered)",
        ),
        (
            "everysec",
            "a crash of the host loses about the last second of them",
        ),
        (
            "no",
            "a crash of the host loses what the OS had not yet written to disk \
             (up to about 30 s on Linux): appendfsync everysec or always bounds it",
        ),
    ] {
        redis.cmd::<String>(&["CONFIG", "SET", "appendfsync", policy]);
        let out = output(rlock(&redis.url()).arg("check"));
        assert_eq!(code(&out), 0, "{}", show(&out));
        let (result, detail) = found(&stdout(&out), "persistence");
        assert_eq!(result, "ok");
        assert_lines(
            &detail,
            &format!("appendonly yes, appendfsync {policy}: a restart keeps the holds; {crash}"),
        );
    }
}
