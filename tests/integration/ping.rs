//! Pings to a monitor (`--ping`, healthchecks.io's protocol), sent by the
//! library's pinger to a real local HTTP or HTTPS server that records each
//! request: the endpoints and the run id, the body and its limit, retries
//! after a 5xx and none after a 4xx, the time bound against a server that
//! never answers, https with `--cacert`'s trust, bad URLs.

use std::time::{Duration, Instant};

use rlock::ping::{ATTEMPT_LIMIT, Finished, Outcome, PING_LIMIT, PingUrl, Pinger, RunId};

use crate::support::http_server::HttpServer;
use crate::support::tls::Tls;

fn pinger_for(url: &str) -> Pinger {
    Pinger::new(PingUrl::parse(url).unwrap(), None).unwrap()
}

fn delivered(n: usize) -> Finished {
    Finished {
        outcomes: vec![Outcome::Delivered; n],
        unfinished: 0,
    }
}

#[test]
fn start_exit_and_log_reach_their_endpoints_with_the_run_id() {
    let server = HttpServer::http();
    let pinger = pinger_for(&server.url("/ping/check-uuid"));
    let (run, skipped) = (RunId::new(), RunId::new());
    pinger.start(&run);
    pinger.exit(70, &run, "nightly: lock lost: renewal refused");
    pinger.log(&skipped, "nightly: held by pid 42 on db-1");
    assert_eq!(pinger.finish(PING_LIMIT), delivered(3));

    let requests = server.requests();
    let seen: Vec<(&str, &str, Option<&str>)> = requests
        .iter()
        .map(|r| (r.method.as_str(), r.path.as_str(), r.param("rid")))
        .collect();
    let (run, skipped) = (run.to_string(), skipped.to_string());
    assert_eq!(
        seen,
        [
            ("POST", "/ping/check-uuid/start", Some(run.as_str())),
            ("POST", "/ping/check-uuid/70", Some(run.as_str())),
            ("POST", "/ping/check-uuid/log", Some(skipped.as_str())),
        ]
    );
    let bodies: Vec<String> = requests.iter().map(|r| r.body_text()).collect();
    assert_eq!(
        bodies,
        [
            "",
            "nightly: lock lost: renewal refused",
            "nightly: held by pid 42 on db-1"
        ]
    );
    let exit = &requests[1];
    let host = format!("127.0.0.1:{}", server.port());
    let version = format!("rlock/{}", env!("CARGO_PKG_VERSION"));
    assert_eq!(exit.header("host"), Some(host.as_str()));
    assert_eq!(exit.header("user-agent"), Some(version.as_str()));
    assert_eq!(
        exit.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(exit.header("content-length"), Some("35"));
    assert_eq!(exit.header("connection"), Some("close"));
    assert_eq!(exit.header("authorization"), None);
}

#[test]
fn a_slug_url_keeps_its_query_and_a_success_is_status_0() {
    let server = HttpServer::http();
    let pinger = pinger_for(&server.url("/KEY/nightly-backup?create=1"));
    let run = RunId::new();
    pinger.exit(0, &run, "");
    assert_eq!(pinger.finish(PING_LIMIT), delivered(1));
    let requests = server.requests();
    assert_eq!(requests[0].path, "/KEY/nightly-backup/0");
    assert_eq!(requests[0].query, format!("create=1&rid={run}"));
}

#[test]
fn the_body_is_cut_at_10_kb_on_a_character_boundary() {
    let server = HttpServer::http();
    let pinger = pinger_for(&server.url("/u"));
    // 'a' then two-byte characters: byte 10,000 falls inside one.
    let long = format!("a{}", "é".repeat(6_000));
    pinger.log(&RunId::new(), &long);
    assert_eq!(pinger.finish(PING_LIMIT), delivered(1));
    let body = server.requests()[0].body_text();
    assert_eq!(body.len(), 9_999);
    assert!(long.starts_with(&body));
}

#[test]
fn a_5xx_or_a_refused_connection_is_tried_again_and_a_4xx_is_not() {
    let server = HttpServer::http();
    server.answer(&[500, 500]);
    let pinger = pinger_for(&server.url("/u"));
    let run = RunId::new();
    pinger.exit(1, &run, "failed");
    assert_eq!(pinger.finish(PING_LIMIT), delivered(1));
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "{requests:?}");
    for r in &requests {
        assert_eq!((r.path.as_str(), r.body_text()), ("/u/1", "failed".into()));
        assert_eq!(r.param("rid"), Some(run.to_string().as_str()));
    }

    let server = HttpServer::http();
    server.answer(&[500, 500, 500]);
    let pinger = pinger_for(&server.url("/u"));
    pinger.start(&RunId::new());
    let failed = "HTTP 500 Internal Server Error (3 attempts)".to_owned();
    assert_eq!(
        pinger.finish(PING_LIMIT).outcomes,
        [Outcome::Failed(failed)]
    );
    assert_eq!(server.requests().len(), 3);

    let server = HttpServer::http();
    server.answer(&[404]);
    let pinger = pinger_for(&server.url("/u"));
    pinger.start(&RunId::new());
    let failed = "HTTP 404 Not Found".to_owned();
    assert_eq!(
        pinger.finish(PING_LIMIT).outcomes,
        [Outcome::Failed(failed)]
    );
    assert_eq!(server.requests().len(), 1);

    // Nothing listens on a port the server had a moment ago.
    let port = HttpServer::http().port();
    let pinger = pinger_for(&format!("http://127.0.0.1:{port}/u"));
    let began = Instant::now();
    pinger.start(&RunId::new());
    let Finished { outcomes, .. } = pinger.finish(PING_LIMIT);
    assert!(
        matches!(&outcomes[..], [Outcome::Failed(c)] if c.starts_with("cannot connect: ") && c.ends_with(" (3 attempts)")),
        "{outcomes:?}"
    );
    // The two pauses between the attempts, no more.
    let took = began.elapsed();
    assert!(
        took >= Duration::from_millis(1_500) && took < Duration::from_secs(5),
        "{took:?}"
    );
}

#[test]
fn a_monitor_that_never_answers_holds_a_ping_no_longer_than_its_bound() {
    let server = HttpServer::http();
    server.stall();
    let pinger = pinger_for(&server.url("/u"));
    let began = Instant::now();
    pinger.start(&RunId::new());
    // In the background: the caller goes on at once.
    assert!(began.elapsed() < Duration::from_millis(500));
    server.wait_for(1, Duration::from_secs(5));
    let finished = pinger.finish(PING_LIMIT + Duration::from_secs(5));
    let took = began.elapsed();
    assert_eq!(
        finished.outcomes,
        [Outcome::Failed("timed out (3 attempts)".into())]
    );
    // Three attempts of ATTEMPT_LIMIT each, with 0.5 s and 1 s between.
    let tried = ATTEMPT_LIMIT * 3 + Duration::from_millis(1500);
    assert!(
        took >= tried - Duration::from_millis(500) && took < PING_LIMIT + Duration::from_secs(2),
        "{took:?}"
    );
    assert_eq!(server.requests().len(), 3);
}

#[test]
fn finish_waits_no_longer_than_its_own_bound() {
    let server = HttpServer::http();
    server.stall();
    let pinger = pinger_for(&server.url("/u"));
    let run = RunId::new();
    pinger.start(&run);
    pinger.exit(0, &run, "");
    server.wait_for(1, Duration::from_secs(5));
    let began = Instant::now();
    let finished = pinger.finish(Duration::from_secs(1));
    let took = began.elapsed();
    assert_eq!(
        finished,
        Finished {
            outcomes: vec![],
            unfinished: 2
        }
    );
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(2),
        "{took:?}"
    );
    // After finish, pings are dropped, not sent.
    pinger.log(&run, "late");
    assert_eq!(pinger.finish(Duration::from_secs(1)), delivered(0));
}

#[test]
fn https_pings_trust_the_cacert_given_and_nothing_else() {
    let tls = Tls::new();
    let server = HttpServer::https(&tls);
    let ca = tls.file("ca.crt");
    for host in ["127.0.0.1", "localhost"] {
        let url = format!("https://{host}:{}/u", server.port());
        let pinger = Pinger::new(PingUrl::parse(&url).unwrap(), Some(ca.as_ref())).unwrap();
        pinger.exit(0, &RunId::new(), "done");
        assert_eq!(pinger.finish(PING_LIMIT), delivered(1), "{host}");
    }
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].body_text(), "done");
    let host = format!("localhost:{}", server.port());
    assert_eq!(requests[1].header("host"), Some(host.as_str()));

    // Another CA, or the system's store (which knows nothing of the test's
    // CA): refused at once, not tried again.
    let other = tls.file("other-ca.crt");
    for cacert in [Some(other.as_ref()), None] {
        let pinger = Pinger::new(PingUrl::parse(&server.url("/u")).unwrap(), cacert).unwrap();
        pinger.start(&RunId::new());
        let Finished { outcomes, .. } = pinger.finish(PING_LIMIT);
        assert!(
            matches!(&outcomes[..], [Outcome::Failed(c)] if c.starts_with("TLS: invalid peer certificate: UnknownIssuer") || c.starts_with("no system CA certificates")),
            "{cacert:?}: {outcomes:?}"
        );
    }
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn credentials_in_the_url_are_sent_as_basic_auth_and_never_shown() {
    let server = HttpServer::http();
    let url = format!("http://robot:s3cret@127.0.0.1:{}/u", server.port());
    let pinger = pinger_for(&url);
    assert_eq!(
        pinger.display(),
        format!("http://127.0.0.1:{}/u", server.port())
    );
    pinger.start(&RunId::new());
    assert_eq!(pinger.finish(PING_LIMIT), delivered(1));
    // "robot:s3cret"
    assert_eq!(
        server.requests()[0].header("authorization"),
        Some("Basic cm9ib3Q6czNjcmV0")
    );
}

#[test]
fn a_bad_url_or_cacert_is_a_usage_error_that_does_not_quote_the_url() {
    for (url, expected) in [
        (
            "ftp://user:s3cret@host/x",
            "expected an http:// or https:// URL, not ftp:",
        ),
        (
            "hc-ping.com/s3cret",
            "not a valid URL (relative URL without a base): expected https://HOST/PATH (e.g. https://hc-ping.com/UUID)",
        ),
        (
            "https://user:s3cret@host:99999/x",
            "not a valid URL (invalid port number): expected https://HOST/PATH (e.g. https://hc-ping.com/UUID)",
        ),
    ] {
        assert_eq!(PingUrl::parse(url).unwrap_err(), expected, "{url}");
    }
    let url = PingUrl::parse("https://hc-ping.com/u").unwrap();
    let err = Pinger::new(url.clone(), Some("/nonexistent/ca.crt".as_ref()))
        .err()
        .unwrap();
    assert_eq!(err.exit().code(), 2);
    assert_eq!(
        err.to_string(),
        "cannot read --cacert /nonexistent/ca.crt: No such file or directory (os error 2)"
    );
    let tls = Tls::new();
    let err = Pinger::new(url, Some(tls.file("server.key").as_ref()))
        .err()
        .unwrap();
    assert_eq!(err.exit().code(), 2);
    assert_eq!(
        err.to_string(),
        format!(
            "--cacert {}: no PEM certificate in it",
            tls.file("server.key")
        )
    );
    // An http:// URL does not read it at all (RLOCK_CACERT may be set for rediss://).
    let plain = PingUrl::parse("http://127.0.0.1/u").unwrap();
    assert!(Pinger::new(plain, Some("/nonexistent/ca.crt".as_ref())).is_ok());
}
