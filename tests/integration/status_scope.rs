//! `status`, `list` and `-v` name where they looked: the server, the
//! database and the prefix, so a lock held in another database or under
//! another prefix does not read `free` unexplained (issue 37, point 1).

use crate::support::expect::{assert_has_line, assert_lines};
use crate::support::holder::holder_by;
use crate::support::redis_server::RedisServer;
use crate::support::rlock::{self, code, output, rlock, show, stdout};
use crate::support::scratch::Scratch;

/// A lock held in db 1 under `--prefix team-a`: status from the default
/// database and prefix reads it free, and its header says where it looked;
/// status from db 1 and team-a shows the holder under a header naming them,
/// and `--json` carries both.
#[test]
fn status_names_the_database_and_prefix_it_looked_in() {
    let redis = RedisServer::start();
    let dir = Scratch::new();
    let port = redis.port;
    let team = format!("{}/1", redis.url());
    let mut run = rlock(&team);
    run.args(["--prefix", "team-a"]);
    let held = holder_by(run, &dir, &["--ttl", "60s"], "deploy", "deploy");

    let out = output(rlock(&redis.url()).args(["status", "deploy"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert_lines(
        &stdout(&out),
        &format!(
            "server 127.0.0.1:{port} db 0 prefix rlock
NAME   STATE      HOLDERS WAITING
deploy free             0       0"
        ),
    );
    let out = output(rlock(&team).args(["status", "deploy"]));
    assert_lines(
        &stdout(&out),
        &format!(
            "server 127.0.0.1:{port} db 1 prefix rlock
NAME   STATE      HOLDERS WAITING
deploy free             0       0"
        ),
    );
    let out = output(rlock(&team).args(["--prefix", "team-a", "status", "deploy"]));
    assert_lines(
        &stdout(&out),
        &format!(
            "server 127.0.0.1:{port} db 1 prefix team-a
NAME   STATE      HOLDERS WAITING
deploy exclusive        1       0
  pid {} on [..] ('sh -c [..]') held for [..], lease left [..]",
            held.pid
        ),
    );
    let out = output(rlock(&team).args(["--prefix", "team-a", "list"]));
    assert_eq!(
        stdout(&out).lines().next(),
        Some(format!("server 127.0.0.1:{port} db 1 prefix team-a").as_str()),
        "{}",
        show(&out)
    );

    let out = output(rlock(&team).args(["--prefix", "team-a", "status", "--json", "deploy"]));
    let json = stdout(&out);
    assert!(
        json.starts_with(&format!(
            "{{\"name\":\"deploy\",\"server\":\"127.0.0.1:{port}\",\"db\":1,\"prefix\":\"team-a\",\"held\":true,"
        )),
        "{json}"
    );
    let out = output(rlock(&redis.url()).args(["list", "--json", "*"]));
    assert_eq!(stdout(&out), "[]\n", "{}", show(&out));
    let out = output(rlock(&team).args(["--prefix", "team-a", "list", "--json"]));
    assert!(
        stdout(&out).contains(&format!(
            "\"server\":\"127.0.0.1:{port}\",\"db\":1,\"prefix\":\"team-a\""
        )),
        "{}",
        show(&out)
    );
}

/// `-v` names the database and prefix beside the server and where the
/// setting came from; a `file:` directory has neither.
#[test]
fn verbose_names_the_database_and_prefix() {
    let redis = RedisServer::start();
    let out = output(
        rlock(&format!("{}/2", redis.url())).args(["-v", "--prefix", "team-b", "status", "x"]),
    );
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert_has_line(
        &rlock::stderr(&out),
        &format!(
            "rlock: server 127.0.0.1:{} db 2 prefix team-b (from --url)",
            redis.port
        ),
    );
    let dir = Scratch::new();
    let locks = dir.file("locks");
    let out = output(rlock(&format!("file:{locks}")).args(["-v", "run", "f", "--", "true"]));
    assert_eq!(code(&out), 0, "{}", show(&out));
    assert_has_line(
        &rlock::stderr(&out),
        &format!("rlock: file:{locks} (from --url)"),
    );
}
