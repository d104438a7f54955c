//! The bad-input sweep: one table of malformed URLs, unreachable and refusing
//! servers, wrong passwords, bad durations and options, bad names, keys of
//! other types, missing or unrunnable commands and huge arguments. Each case
//! must exit with its documented status and one `rlock:` line, within a bound,
//! without a panic or a secret in the output, and without a single write to
//! Redis (the server's own count of changes, `rdb_changes_since_last_save`,
//! which also counts writes made inside scripts, must not move).

use std::ffi::OsStr;
use std::io::Write;
use std::net::TcpListener;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use crate::support::redis_server::RedisServer;
use crate::support::rlock::{assert_fails, bare, output, show};
use crate::support::scratch::Scratch;

/// Longest any case may take: the slowest waits out a 300 ms connect timeout.
const BOUND: Duration = Duration::from_secs(5);

struct Case<'a> {
    what: &'static str,
    args: Vec<Vec<u8>>,
    env: Vec<(&'static str, String)>,
    status: i32,
    /// Text the one line must contain.
    says: &'a str,
}

fn case<'a>(what: &'static str, args: &[&str], status: i32, says: &'a str) -> Case<'a> {
    Case {
        what,
        args: args.iter().map(|a| a.as_bytes().to_vec()).collect(),
        env: Vec::new(),
        status,
        says,
    }
}

/// What the table's cases point at.
struct Setup {
    url: String,
    refused: String,
    refused_says: String,
    silent: String,
    wrong_pw: String,
    no_pw: String,
    not_redis: String,
    no_socket: String,
    not_executable: String,
    dir: String,
}

#[rustfmt::skip]
fn table(s: &Setup) -> Vec<Case<'_>> {
    let u = s.url.as_str();
    let long_name = "n".repeat(201);
    let huge_url = format!("{u}/{}", "9".repeat(100_000));
    let bad_db = format!("{u}/notadb");
    let mut cases = vec![
        // Malformed URLs and options: usage errors, before any connection.
        case("http scheme", &["--url", "http://127.0.0.1:1", "run", "x", "--", "true"], 2, "--url"),
        case("not a URL", &["--url", "not a url", "run", "x", "--", "true"], 2, "--url"),
        case("no host", &["--url", "redis://:secretpw@", "run", "x", "--", "true"], 2, "--url"),
        case("port out of range", &["--url", "redis://127.0.0.1:99999", "run", "x", "--", "true"], 2, "--url"),
        case("empty URL", &["--url", "", "run", "x", "--", "true"], 2, ""),
        case("negative database", &["--url", "redis://127.0.0.1:1/-1", "run", "x", "--", "true"], 2, "database number"),
        case("bad database", &["--url", &bad_db, "run", "x", "--", "true"], 2, ""),
        case("huge URL", &["--url", &huge_url, "run", "x", "--", "true"], 2, ""),
        case("bad --wait", &["--url", u, "run", "--wait", "soon", "x", "--", "true"], 2, "soon"),
        case("zero --ttl", &["--url", u, "run", "--ttl", "0s", "x", "--", "true"], 2, "ttl"),
        case("tiny --ttl", &["--url", u, "run", "--ttl", "5ms", "x", "--", "true"], 2, "ttl"),
        case("huge --ttl", &["--url", u, "run", "--ttl", "10000000y", "x", "--", "true"], 2, "ttl"),
        case("zero --lease", &["--url", u, "run", "--lease", "0s", "x", "--", "true"], 2, "lease"),
        case("negative --kill-after", &["--url", u, "run", "--kill-after", "-1s", "x", "--", "true"], 2, ""),
        case("bad --connect-timeout", &["--url", u, "--connect-timeout", "never", "run", "x", "--", "true"], 2, "never"),
        case("-E out of range", &["--url", u, "run", "-E", "300", "x", "--", "true"], 2, "300"),
        case("--limit 0", &["--url", u, "run", "--limit", "0", "x", "--", "true"], 2, "limit"),
        case("unknown option", &["--url", u, "run", "--bogus", "x", "--", "true"], 2, "bogus"),
        case("--shared with --limit", &["--url", u, "run", "--shared", "--limit", "2", "x", "--", "true"], 2, ""),
        case("--while-pid 0", &["--url", u, "acquire", "--while-pid", "0", "x"], 2, ""),
        case("unknown shell", &["completions", "nosuchshell"], 2, "nosuchshell"),
        case("unknown subcommand", &["frobnicate"], 2, "frobnicate"),
        // Bad names.
        case("name with a space", &["--url", u, "run", "has space", "--", "true"], 2, "invalid lock name"),
        case("name with a tab", &["--url", u, "run", "tab\there", "--", "true"], 2, "invalid lock name"),
        case("name with a brace", &["--url", u, "run", "brace{", "--", "true"], 2, "invalid lock name"),
        case("name with a control character", &["--url", u, "run", "ctl\u{1}x", "--", "true"], 2, "invalid lock name"),
        case("name of 201 bytes", &["--url", u, "run", &long_name, "--", "true"], 2, "invalid lock name"),
        case("empty name", &["--url", u, "run", "", "--", "true"], 2, ""),
        case("bad name in status", &["--url", u, "status", "a b"], 2, "invalid lock name"),
        case("bad name in release --force", &["--url", u, "release", "--force", "a b"], 2, "invalid lock name"),
        // Missing or unrunnable COMMAND: decided before Redis is touched.
        case("no COMMAND", &["--url", u, "run", "x"], 2, ""),
        case("empty COMMAND", &["--url", u, "run", "x", "--"], 2, ""),
        case("no NAME", &["--url", u, "run", "--", "true"], 2, ""),
        case("command not found", &["--url", u, "run", "x", "--", "no-such-command-rlock-test"], 127, "no-such-command-rlock-test"),
        case("path not found", &["--url", u, "run", "x", "--", "/no/such/path"], 127, "/no/such/path"),
        case("not executable", &["--url", u, "run", "x", "--", &s.not_executable], 126, "not-executable"),
        case("a directory", &["--url", u, "run", "x", "--", &s.dir], 126, ""),
        // Servers that cannot be used.
        case("connection refused", &["--url", &s.refused, "run", "--no-wait", "x", "--", "true"], 69, &s.refused_says),
        case("no such socket", &["--url", &s.no_socket, "run", "--no-wait", "x", "--", "true"], 69, "no such socket"),
        case("host name that cannot resolve", &["--url", "redis://a..b:6379", "run", "x", "--", "true"], 69, "cannot resolve the host name"),
        case("not a Redis server", &["--url", &s.not_redis, "run", "x", "--", "true"], 69, "did not answer as a Redis server (wrong port?)"),
        case("not a Redis server, status", &["--url", &s.not_redis, "status", "x"], 69, "did not answer as a Redis server"),
        case("database the server does not have", &["--url", &format!("{u}/99"), "run", "x", "--", "true"], 2, "has no database 99"),
        case("silent server", &["--url", &s.silent, "--connect-timeout", "300ms", "run", "--no-wait", "x", "--", "true"], 69, ""),
        case("wrong password", &["--url", &s.wrong_pw, "run", "x", "--", "true"], 69, "authentication"),
        case("no password", &["--url", &s.no_pw, "run", "x", "--", "true"], 69, "the server needs a password"),
        case("no password, status", &["--url", &s.no_pw, "status", "x"], 69, "the server needs a password"),
        case("no password, acquire", &["--url", &s.no_pw, "acquire", "--ttl", "5s", "x"], 69, "the server needs a password"),
        case("no password, list", &["--url", &s.no_pw, "list"], 69, "the server needs a password"),
        case("wrong password in status", &["--url", &s.wrong_pw, "status", "x"], 69, "authentication"),
        // Keys rlock did not write: reported, left alone.
        case("lock key of another type", &["--url", u, "run", "taken", "--", "true"], 69, "will not overwrite"),
        case("status of a foreign key", &["--url", u, "status", "taken"], 69, "will not overwrite"),
        case("a key at the lock's bare name", &["--url", u, "run", "bare", "--", "true"], 69, "will not overwrite"),
        case("status of a key at the lock's bare name", &["--url", u, "status", "bare"], 69, "will not overwrite"),
        case("release --force of a foreign key", &["--url", u, "release", "--force", "taken"], 69, "will not overwrite"),
        case("lock hash rlock did not write", &["--url", u, "run", "shape", "--", "true"], 69, "did not write"),
        case("lock hash rlock did not write, waiting", &["--url", u, "run", "--wait", "1s", "shape", "--", "true"], 69, "did not write"),
        case("status of a lock hash rlock did not write", &["--url", u, "status", "shape"], 69, "did not write"),
        case("release --force of a lock hash rlock did not write", &["--url", u, "release", "--force", "shape"], 69, "did not write"),
        case("a hold field rlock did not write", &["--url", u, "run", "shape2", "--", "true"], 69, "did not write"),
        case("fence that is not a counter", &["--url", u, "run", "fenced", "--", "true"], 69, "fencing counter"),
        case("status of a fence that is not a counter", &["--url", u, "status", "fenced"], 69, "fencing counter"),
        case("list of a lock key of another type", &["--url", u, "list", "taken"], 69, "will not overwrite"),
        case("fence beyond 2^53", &["--url", u, "run", "beyond", "--", "true"], 69, "not a fencing counter"),
        case("fence counter at its largest value", &["--url", u, "run", "full", "--", "true"], 69, "at its largest value"),
        case("--redisson fence counter at its largest value", &["--url", u, "run", "--redisson", "full", "--", "true"], 69, "at its largest value"),
        // Malformed tokens for the scripting commands.
        case("malformed token to renew", &["--url", u, "renew", "x", "not-a-token"], 2, ""),
        case("malformed token to release", &["--url", u, "release", "x", "not-a-token"], 2, ""),
    ];
    let mut wrong_auth = case("wrong REDISCLI_AUTH", &["--url", &s.no_pw, "run", "x", "--", "true"], 69, "");
    wrong_auth.env.push(("REDISCLI_AUTH", "wrong-secret-pw".into()));
    cases.push(wrong_auth);
    let mut huge = case("20000 arguments to a missing command", &["--url", u, "run", "x", "--", "no-such-command-rlock-test"], 127, "");
    huge.args.extend((0..20_000).map(|i| format!("argument-{i}").into_bytes()));
    cases.push(huge);
    let mut not_utf8 = case("name that is not UTF-8", &["--url", u, "run"], 2, "");
    not_utf8.args.extend([b"caf\xe9".to_vec(), b"--".to_vec(), b"true".to_vec()]);
    cases.push(not_utf8);
    cases
}

fn writes(redis: &RedisServer) -> u64 {
    let info: String = redis.cmd(&["INFO", "persistence"]);
    info.lines()
        .find_map(|l| l.strip_prefix("rdb_changes_since_last_save:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("INFO persistence reports rdb_changes_since_last_save")
}

#[test]
fn every_bad_input_gets_its_status_and_one_line_and_writes_nothing() {
    let redis = RedisServer::start();
    let guarded = RedisServer::start_with(&["--requirepass", "right-secret-pw"]);
    let dir = Scratch::new();
    // Keys of another type and a fence that is not a counter, in place before
    // the writes are counted.
    redis.cmd::<String>(&["SET", "rlock:{taken}:leases", "someone else's value"]);
    redis.cmd::<String>(&["SET", "rlock:{bare}", "another program's value"]);
    redis.cmd::<String>(&["SET", "rlock:{fenced}:fence", "abc"]);
    // Hashes of another shape at a lock's keys (another program's): never
    // taken over, pruned or deleted.
    redis.cmd::<i64>(&["HSET", "rlock:{shape}:leases", "foo", "bar"]);
    redis.cmd::<i64>(&["HSET", "rlock:{shape2}:leases", "foo", "1|soon|x|{}"]);
    // Fences stay below 2^53: no next fence after 2^53 - 1, never a wrap.
    redis.cmd::<String>(&["SET", "rlock:{beyond}:fence", "9007199254740992"]);
    redis.cmd::<String>(&["SET", "rlock:{full}:fence", "9007199254740991"]);
    redis.cmd::<String>(&["SET", "{full}:rlock-fence", "9007199254740991"]);
    let not_executable = dir.path().join("not-executable");
    std::fs::write(&not_executable, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&not_executable, std::fs::Permissions::from_mode(0o644)).unwrap();
    // Accepts connections (the kernel's backlog) but never answers.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    // Answers like a web server, as a service on a mistyped port would.
    let web = TcpListener::bind("127.0.0.1:0").unwrap();
    let not_redis = format!("redis://127.0.0.1:{}", web.local_addr().unwrap().port());
    std::thread::spawn(move || {
        for mut con in web.incoming().flatten() {
            let _ = con.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let (_reserved, refused) = crate::support::redis_server::refusing_port();
    let setup = Setup {
        url: redis.url(),
        refused: format!("redis://127.0.0.1:{refused}"),
        refused_says: format!(
            "connection refused (is redis-server running on 127.0.0.1:{refused}?)"
        ),
        not_redis,
        no_socket: format!("unix://{}/none.sock", dir.path().display()),
        silent: format!("redis://127.0.0.1:{}", silent.local_addr().unwrap().port()),
        wrong_pw: format!("redis://:wrong-secret-pw@127.0.0.1:{}", guarded.port),
        no_pw: format!("redis://127.0.0.1:{}", guarded.port),
        not_executable: not_executable.to_str().unwrap().to_owned(),
        dir: dir.path().to_str().unwrap().to_owned(),
    };
    let cases = table(&setup);
    let before = (writes(&redis), writes(&guarded));
    let mut report = Vec::new();
    for c in &cases {
        let mut cmd = bare();
        for arg in &c.args {
            cmd.arg(OsStr::from_bytes(arg));
        }
        for (k, v) in &c.env {
            cmd.env(k, v);
        }
        let start = Instant::now();
        let out = output(&mut cmd);
        let took = start.elapsed();
        let err = assert_fails(&out, c.status);
        assert!(took < BOUND, "{}: took {took:?}", c.what);
        assert!(
            err.contains(c.says),
            "{}: expected {:?} in {err}",
            c.what,
            c.says
        );
        assert!(out.stdout.is_empty(), "{}: {}", c.what, show(&out));
        assert!(
            !err.trim_end().chars().any(char::is_control),
            "{}: control characters reach the terminal: {err:?}",
            c.what
        );
        for secret in ["secretpw", "wrong-secret-pw", "right-secret-pw"] {
            assert!(!err.contains(secret), "{}: a secret in {err}", c.what);
        }
        assert_eq!(
            (writes(&redis), writes(&guarded)),
            before,
            "{}: wrote to Redis",
            c.what
        );
        report.push(format!(
            "{:>4} {:>7.1} ms  {}",
            c.status,
            took.as_secs_f64() * 1000.0,
            c.what
        ));
    }
    let value: String = redis.cmd(&["GET", "rlock:{taken}:leases"]);
    assert_eq!(value, "someone else's value");
    let shape: Vec<String> = redis.cmd(&["HGETALL", "rlock:{shape}:leases"]);
    assert_eq!(shape, ["foo", "bar"], "left as it was");
    assert_eq!(
        redis.keys(),
        [
            "rlock:{bare}",
            "rlock:{beyond}:fence",
            "rlock:{fenced}:fence",
            "rlock:{full}:fence",
            "rlock:{shape2}:leases",
            "rlock:{shape}:leases",
            "rlock:{taken}:leases",
            "{full}:rlock-fence"
        ]
    );
    println!(
        "bad-input sweep: {} cases, none wrote to Redis\n{}",
        cases.len(),
        report.join("\n")
    );
    drop(silent);
}
