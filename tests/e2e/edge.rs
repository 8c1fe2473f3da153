//! The HTTP edge and the shutdown of `actiond api`, over a real process: what a slow or idle
//! client may hold, media types, and SIGTERM (readiness, long-polls, drain, a second signal).

use crate::support::{Options, Stack, refund};
use actiond_testkit::Service;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The api's default header-read timeout (`Edge::default()`), which is also its idle timeout.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Raises this test process's open-file limit (1,000 client sockets on a 1,024 default).
fn raise_fd_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard).unwrap();
    }
}

/// Reads until the server closes the connection; returns how long that took (None: still open
/// after `limit`).
async fn closed_within(stream: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(limit.saturating_sub(start.elapsed()), stream.read(&mut buf))
            .await
        {
            Err(_) => return None,
            Ok(Ok(0) | Err(_)) => return Some(start.elapsed()),
            Ok(Ok(_)) => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[expect(
    clippy::disallowed_methods,
    reason = "a client dribbling its headers one line a second: the slowness is the attack"
)]
async fn idle_and_dribbling_clients_are_closed_and_never_delay_a_submit() {
    raise_fd_limit();
    let s = Stack::with(
        "edge_idle_dribble",
        Options {
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let addr = s.api_url.trim_start_matches("http://").to_owned();
    // 1,000 connections that never send a byte.
    let mut idle = Vec::new();
    for _ in 0..1000 {
        idle.push(TcpStream::connect(&addr).await.unwrap());
    }
    // A client dribbling its headers, one line a second, forever.
    let dribble_addr = addr.clone();
    let dribbler = tokio::spawn(async move {
        let mut c = TcpStream::connect(&dribble_addr).await.unwrap();
        let start = Instant::now();
        c.write_all(b"POST /v1/proposals HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            .await
            .unwrap();
        for i in 0.. {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if c.write_all(format!("X-Slow-{i}: a\r\n").as_bytes())
                .await
                .is_err()
            {
                break;
            }
            if start.elapsed() > Duration::from_secs(40) {
                break;
            }
        }
        start.elapsed()
    });
    // With all of them open, a real submit is answered at once.
    let start = Instant::now();
    let (status, body) = s.post(&refund("pi_edge", 1000), None).await;
    let took = start.elapsed();
    assert_eq!(status, 202, "{body}");
    eprintln!("submit with 1,000 idle sockets and a dribbler open: {took:?}");
    assert!(took < Duration::from_secs(3), "submit took {took:?}");
    // A keep-alive connection left idle after a request is closed too.
    let mut kept = TcpStream::connect(&addr).await.unwrap();
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 1024];
    let n = kept.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    let kept_closed = closed_within(&mut kept, Duration::from_secs(30)).await;
    eprintln!("idle keep-alive connection closed after {kept_closed:?}");
    assert!(kept_closed.is_some_and(|d| d <= HEADER_TIMEOUT + Duration::from_secs(5)));
    // The idle sockets were closed by the server within 30 s of opening.
    for c in idle.iter_mut().step_by(97) {
        assert!(
            closed_within(c, Duration::from_secs(5)).await.is_some(),
            "an idle connection is still open"
        );
    }
    let dribbled = dribbler.await.unwrap();
    eprintln!("dribbling client closed after {dribbled:?}");
    assert!(
        dribbled >= HEADER_TIMEOUT - Duration::from_secs(1) && dribbled <= Duration::from_secs(30),
        "dribbling client held its connection {dribbled:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn media_types_are_parsed_the_same_on_rest_and_mcp() {
    let s = Stack::with(
        "edge_media_types",
        Options {
            policy: false,
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    // (Content-Type, accepted?)
    let cases = [
        ("application/json", true),
        ("Application/JSON", true),
        ("APPLICATION/json; charset=UTF-8", true),
        ("application/json ; charset=\"utf-8\"", true),
        ("application/jsonp", false),
        ("application/json-seq", false),
        ("text/json", false),
        ("application/json; charset=latin1", false),
        ("text/plain", false),
    ];
    for (i, (ct, accepted)) in cases.iter().enumerate() {
        let rest = s
            .http
            .post(format!("{}/v1/proposals", s.api_url))
            .bearer_auth(&s.token)
            .header("content-type", *ct)
            .body(refund(&format!("pi_ct_{i}"), 1000))
            .send()
            .await
            .unwrap();
        let rest_status = rest.status().as_u16();
        let mcp = s
            .http
            .post(format!("{}/mcp", s.api_url))
            .bearer_auth(&s.token)
            .header("content-type", *ct)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .body(init)
            .send()
            .await
            .unwrap();
        let mcp_status = mcp.status().as_u16();
        if *accepted {
            assert_eq!(rest_status, 202, "REST {ct}");
            assert_eq!(mcp_status, 200, "/mcp {ct}");
        } else {
            assert_eq!(rest_status, 415, "REST {ct}");
            assert_eq!(mcp_status, 415, "/mcp {ct}");
        }
    }
}

/// A header the server reads once is refused when sent twice, as `Authorization` and
/// `Idempotency-Key` already were: `Content-Type: application/json` followed by
/// `Content-Type: text/plain` was stored (only the first was checked), and an allowed `Origin`
/// followed by a foreign one passed `/mcp`'s origin check. Each is a 400 naming the header;
/// nothing is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_header_sent_twice_is_refused_naming_it() {
    let s = Stack::with(
        "edge_header_twice",
        Options {
            policy: false,
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let rest = s
        .http
        .post(format!("{}/v1/proposals", s.api_url))
        .bearer_auth(&s.token)
        .header("content-type", "application/json")
        .header("content-type", "text/plain")
        .body(refund("pi_ct_twice", 1000))
        .send()
        .await
        .unwrap();
    assert_eq!(rest.status().as_u16(), 400, "REST Content-Type twice");
    let body: serde_json::Value = rest.json().await.unwrap();
    assert_eq!(body["errors"][0]["field"], "Content-Type", "{body}");
    assert_eq!(body["errors"][0]["rule"], "must be sent once", "{body}");
    let own_origin = s.api_url.trim_end_matches('/').to_owned();
    for (header, first, second) in [
        ("origin", own_origin.as_str(), "https://evil.example"),
        ("content-type", "application/json", "text/plain"),
        ("mcp-protocol-version", "2025-06-18", "2025-03-26"),
    ] {
        let mcp = s
            .http
            .post(format!("{}/mcp", s.api_url))
            .bearer_auth(&s.token)
            .header("accept", "application/json")
            .header(header, first)
            .header(header, second)
            .body(init)
            .send()
            .await
            .unwrap();
        assert_eq!(mcp.status().as_u16(), 400, "/mcp {header} twice");
        let body: serde_json::Value = mcp.json().await.unwrap();
        assert_eq!(
            body["errors"][0]["rule"], "must be sent once",
            "/mcp {header} twice: {body}"
        );
    }
    let su = s.tdb.superuser().await;
    let n: i64 = su
        .query_one("SELECT count(*) FROM proposals", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0, "a refused request stored a proposal");
}

/// The edge limits are the operator's: `--http-header-timeout 1s` closes an idle connection
/// after a second, `--http-max-connections 2` leaves a third client waiting until one of two
/// closes, and an out-of-range value stops the process with one line naming the flag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edge_limits_are_flags() {
    let s = Stack::with(
        "edge_limit_flags",
        Options {
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let extra = [
        ("ACTIOND_HTTP_HEADER_TIMEOUT", "1s".to_owned()),
        ("ACTIOND_HTTP_MAX_CONNECTIONS", "2".to_owned()),
    ];
    let (_api, url, _) = api_with_admin_env(&s, "edge_flags_api", &extra).await;
    let addr = url.trim_start_matches("http://").to_owned();
    let mut a = TcpStream::connect(&addr).await.unwrap();
    let opened = Instant::now();
    let mut b = TcpStream::connect(&addr).await.unwrap();
    // The third is answered at once with 503 and Retry-After while two are open: never
    // silence.
    let mut c = TcpStream::connect(&addr).await.unwrap();
    c.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 1024];
    let n = tokio::time::timeout(Duration::from_secs(2), c.read(&mut buf))
        .await
        .expect("a third client is answered while two connections are open")
        .unwrap();
    let busy = String::from_utf8_lossy(&buf[..n]).into_owned();
    assert!(busy.starts_with("HTTP/1.1 503"), "{busy}");
    assert!(busy.contains("Retry-After: 1\r\n"), "{busy}");
    let idle_a = closed_within(&mut a, Duration::from_secs(5))
        .await
        .map(|_| opened.elapsed());
    assert!(
        idle_a.is_some_and(|d| d >= Duration::from_millis(800) && d < Duration::from_secs(3)),
        "an idle connection was closed after {idle_a:?}, not about 1 s"
    );
    let _ = closed_within(&mut b, Duration::from_secs(5)).await;
    // Slots are free again: a new client is served.
    let mut d = TcpStream::connect(&addr).await.unwrap();
    d.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let n = tokio::time::timeout(Duration::from_secs(5), d.read(&mut buf))
        .await
        .expect("a client is served once a slot frees")
        .unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));

    for (flag, value) in [
        ("--http-max-connections", "0"),
        ("--http-header-timeout", "0s"),
        ("--http-drain-timeout", "1h"),
    ] {
        let (ok, _, err) = actiond_testkit::cli(
            &["api", flag, value],
            &[("DATABASE_URL", s.tdb.role_url("api").await)],
        );
        assert!(!ok, "{flag} {value} was accepted");
        assert!(err.contains(flag), "{flag} {value}: {err}");
    }
}

/// Starts `actiond api` and learns its admin port; returns (service, api url, readyz url).
async fn api_with_admin(s: &Stack, name: &str) -> (Service, String, String) {
    api_with_admin_env(s, name, &[]).await
}

/// [`api_with_admin`] with extra environment variables.
async fn api_with_admin_env(
    s: &Stack,
    name: &str,
    extra: &[(&'static str, String)],
) -> (Service, String, String) {
    let mut env = vec![
        ("DATABASE_URL", s.tdb.role_url("api").await),
        ("ACTIOND_API_LISTEN", "127.0.0.1:0".into()),
        ("ACTIOND_API_ADMIN_LISTEN", "127.0.0.1:0".into()),
    ];
    env.extend(extra.iter().cloned());
    let mut svc = Service::spawn("api", name, &[], &env, &s.logs);
    let url = svc.url("http").await;
    let readyz = format!("{}/readyz", svc.url("admin").await);
    actiond_testkit::eventually(Duration::from_secs(20), "api ready", || {
        let (h, u) = (s.http.clone(), readyz.clone());
        async move {
            let r = h.get(&u).send().await.ok()?;
            (r.status() == 200).then_some(())
        }
    })
    .await;
    (svc, url, readyz)
}

fn signal(svc: &Service, sig: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(svc.child.id() as i32), sig).unwrap();
}

/// Waits for the process to exit; returns its exit code and how long it took.
async fn exited(svc: &mut Service, limit: Duration) -> (Option<i32>, Duration) {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Some(st) = svc.child.try_wait().unwrap() {
            return (st.code(), start.elapsed());
        }
        actiond_testkit::poll_pause(Duration::from_millis(10)).await;
    }
    panic!("{} did not exit within {limit:?}", svc.role);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(
    clippy::disallowed_methods,
    reason = "lets the half-sent request reach the server; nothing outside the process shows it arrived"
)]
async fn sigterm_turns_readyz_503_at_once_and_answers_long_polls() {
    let s = Stack::with(
        "edge_sigterm",
        Options {
            api: false,
            policy: false,
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let (mut api, url, readyz) = api_with_admin(&s, "api-sigterm").await;
    // No policy runs: the proposal stays pending, so a long-poll would wait its full 60 s.
    let resp = s
        .http
        .post(format!("{url}/v1/proposals"))
        .bearer_auth(&s.token)
        .header("content-type", "application/json")
        .body(refund("pi_drain", 1000))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 202);
    let id = resp.json::<serde_json::Value>().await.unwrap()["proposal_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let poll = {
        let (h, u, t) = (
            s.http.clone(),
            format!("{url}/v1/proposals/{id}?wait=60"),
            s.token.clone(),
        );
        tokio::spawn(async move {
            let r = h.get(&u).bearer_auth(&t).send().await.unwrap();
            let at = Instant::now();
            (r.status().as_u16(), r.text().await.unwrap(), at)
        })
    };
    // A request whose body is half sent is in flight: the drain waits for it (up to the body
    // timeout), so the process is still up while /readyz is asked. Without it the drain can
    // end within milliseconds and the process exit before the first /readyz.
    let mut half = tokio::net::TcpStream::connect(url.trim_start_matches("http://"))
        .await
        .unwrap();
    let head = format!(
        "POST /v1/proposals HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {}\r\ncontent-type: application/json\r\ncontent-length: 4000\r\n\r\n{{",
        s.token
    );
    half.write_all(head.as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let sent = Instant::now();
    signal(&api, nix::sys::signal::Signal::SIGTERM);
    // /readyz says 503 at once (the admin listener outlives the drain).
    let mut not_ready = None;
    while sent.elapsed() < Duration::from_secs(5) {
        match s.http.get(&readyz).send().await {
            Ok(r) if r.status() == 503 => {
                not_ready = Some(sent.elapsed());
                break;
            }
            Ok(_) => actiond_testkit::poll_pause(Duration::from_millis(5)).await,
            Err(_) => break,
        }
    }
    let (status, body, answered) = poll.await.unwrap();
    drop(half);
    let (code, took) = exited(&mut api, Duration::from_secs(15)).await;
    eprintln!(
        "SIGTERM → readyz 503 after {not_ready:?}, long-poll answered after {:?}, exit after {took:?}",
        answered.saturating_duration_since(sent)
    );
    assert!(
        not_ready.is_some_and(|d| d < Duration::from_secs(1)),
        "readyz never said 503 while draining"
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"pending\""), "{body}");
    assert!(answered.saturating_duration_since(sent) < Duration::from_secs(2));
    assert_eq!(code, Some(0));
    assert!(took < Duration::from_secs(5), "drain took {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(
    clippy::disallowed_methods,
    reason = "lets the half-sent request reach the server, then checks the process is still up a second into the drain: time is the subject"
)]
async fn a_second_signal_ends_the_drain_at_once() {
    let s = Stack::with(
        "edge_second_signal",
        Options {
            api: false,
            policy: false,
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let (mut api, url, _) = api_with_admin(&s, "api-second-signal").await;
    // A request whose body never finishes keeps a connection busy through the drain.
    let mut c = TcpStream::connect(url.trim_start_matches("http://"))
        .await
        .unwrap();
    let head = format!(
        "POST /v1/proposals HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"action\":",
        s.token
    );
    c.write_all(head.as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    signal(&api, nix::sys::signal::Signal::SIGTERM);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        api.child.try_wait().unwrap().is_none(),
        "the api exited while a request was in flight"
    );
    let sent = Instant::now();
    signal(&api, nix::sys::signal::Signal::SIGTERM);
    let (code, took) = exited(&mut api, Duration::from_secs(5)).await;
    eprintln!("second SIGTERM → exit {code:?} after {:?}", sent.elapsed());
    assert_eq!(code, Some(130));
    assert!(took < Duration::from_secs(1), "{took:?}");
}

/// An executor finishing a handler after SIGTERM keeps its admin listener: `/readyz` says 503
/// (draining) until the process exits, and the handler's outcome is recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executor_readyz_is_503_while_a_handler_drains() {
    let s = Stack::with(
        "executor_readyz_drain",
        Options {
            webhook_path: "slow-hook",
            slow_delay: Duration::from_secs(2),
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let env = s.executor_env("drainer").await;
    let mut ex = Service::spawn("executor", "drainer", &[], &env, &s.logs);
    let readyz = format!("{}/readyz", ex.url("admin").await);
    let id = s
        .propose(r#"{"action":"webhook.post","params":{"body":{"kind":"ping"}}}"#)
        .await;
    let n = || s.recv.count();
    actiond_testkit::eventually(Duration::from_secs(20), "request at the receiver", || {
        let c = n();
        async move { (c == 1).then_some(()) }
    })
    .await;
    signal(&ex, nix::sys::signal::Signal::SIGTERM);
    // 503 while the process is still up (a refused connection is not an answer).
    actiond_testkit::wait_until(
        Duration::from_secs(5),
        "readyz 503 while the handler drains",
        || {
            let (http, readyz) = (s.http.clone(), readyz.clone());
            async move {
                let r = http.get(&readyz).send().await;
                matches!(r.map(|r| r.status().as_u16()), Ok(503))
            }
        },
    )
    .await;
    let (code, _) = exited(&mut ex, Duration::from_secs(15)).await;
    assert_eq!(code, Some(0));
    s.wait_state(id, "succeeded", Duration::from_secs(5)).await;
}

/// Every listener asked for port 0 gets a free port of its own and logs which
/// (`actiond_runtime::http::bind`), which is how the harness learns it (`Service::bound`): two
/// api processes (listener and admin listener each), a policy and an executor come up on six
/// distinct ports, each answering its own routes. A port the harness picked before the start
/// could have been taken by another process in between (`Address already in use`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_on_port_0_report_the_ports_they_bound() {
    let mut s = Stack::with(
        "edge_port_0",
        Options {
            api: false,
            policy: false,
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let (_a, a_url, a_readyz) = api_with_admin(&s, "api-a").await;
    let (_b, b_url, b_readyz) = api_with_admin(&s, "api-b").await;
    s.start_policy().await;
    let policy = s.services[0].url("admin").await;
    let ex = s.start_executor("exec-port-0").await;
    let executor = s.services[ex].url("admin").await;
    let mut ports: Vec<u16> = [&a_url, &a_readyz, &b_url, &b_readyz, &policy, &executor]
        .iter()
        .map(|u| {
            let authority = u.trim_start_matches("http://").split('/').next().unwrap();
            authority.parse::<std::net::SocketAddr>().unwrap().port()
        })
        .collect();
    assert!(ports.iter().all(|p| *p != 0), "{ports:?}");
    ports.sort_unstable();
    ports.dedup();
    assert_eq!(ports.len(), 6, "{ports:?}");
    for url in [&a_url, &b_url] {
        let r = s.http.get(format!("{url}/healthz")).send().await.unwrap();
        assert_eq!(r.status(), 200, "{url}");
    }
    for readyz in [a_readyz, b_readyz] {
        let r = s.http.get(&readyz).send().await.unwrap();
        assert_eq!(r.text().await.unwrap(), "ready\n", "{readyz}");
    }
    for admin in [&policy, &executor] {
        let metrics = s.http.get(format!("{admin}/metrics")).send().await.unwrap();
        assert!(
            metrics.text().await.unwrap().contains("actiond_build_info"),
            "{admin}"
        );
    }
}

/// A listen address another process holds stops the api at once, naming the listener, the
/// address and the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_port_stops_the_api_naming_the_listener() {
    let s = Stack::with(
        "edge_port_taken",
        Options {
            api: false,
            policy: false,
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let squatter = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = squatter.local_addr().unwrap();
    let mut api = Service::spawn(
        "api",
        "api-port-taken",
        &[],
        &[
            ("DATABASE_URL", s.tdb.role_url("api").await),
            ("ACTIOND_API_LISTEN", taken.to_string()),
            ("ACTIOND_API_ADMIN_LISTEN", "127.0.0.1:0".into()),
        ],
        &s.logs,
    );
    let (code, _) = exited(&mut api, Duration::from_secs(20)).await;
    assert_ne!(code, Some(0));
    let log = api.log_text();
    assert!(
        log.contains(&format!(
            "cannot bind the http listener on {taken}: Address already in use"
        )),
        "{log}"
    );
    assert!(actiond_testkit::ports::says_port_taken(&log), "{log}");
}
