//! The layer stack every HTTP listener of actiond wraps its router in ([`observe`]).
//!
//! Each request gets an `X-Request-Id`: the one the client (or a proxy in front) sent when it
//! is 1 to 128 characters of `A-Z a-z 0-9 - _ . : / + =` (anything else is replaced, so a log
//! line cannot be forged through it), or a fresh UUID v4. The id is echoed on every response,
//! written as `request_id` into every problem document (`application/problem+json`), and
//! carried by a per-request tracing span named `http` (fields `method`, `path`, `request_id`),
//! so every log line written while the request is handled can be matched to it. One access-log
//! line per request (target `actiond::access`: method, route template, status, duration) is
//! written at `INFO` (successful `/healthz`, `/readyz` and `/metrics` at `DEBUG`); never headers, the query string or the body (a bearer token, an OIDC
//! `code`, params).

use axum::Router;
use axum::http::{HeaderName, Request};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tower::ServiceBuilder;
use tower_http::request_id::{
    MakeRequestUuid, PropagateRequestIdLayer, RequestId, SetRequestIdLayer,
};
use tower_http::trace::TraceLayer;

/// The request-id header (`X-Request-Id`, lower-case as HTTP/2 sends it).
pub const REQUEST_ID_HEADER: HeaderName = HeaderName::from_static("x-request-id");

/// Wraps `router` in the observation stack: set `X-Request-Id` when absent (UUID v4), open the
/// `http` span carrying it (tower-http's `TraceLayer`, which also logs each response's status
/// and latency at `DEBUG` and 5xx answers at `ERROR`), and copy the id onto the response.
pub fn observe<S>(router: Router<S>) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    router.layer(
        ServiceBuilder::new()
            .layer(axum::middleware::from_fn(drop_unsafe_request_id))
            .layer(SetRequestIdLayer::new(REQUEST_ID_HEADER, MakeRequestUuid))
            .layer(TraceLayer::new_for_http().make_span_with(request_span))
            .layer(PropagateRequestIdLayer::new(REQUEST_ID_HEADER))
            .layer(axum::middleware::from_fn(access_log))
            // A client that announces a body and never sends it does not hold a connection.
            .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(
                Duration::from_secs(10),
            )),
    )
}

/// Longest `X-Request-Id` accepted from a client.
pub const MAX_REQUEST_ID_LEN: usize = 128;

/// True for a request id a client may choose (see the module documentation).
pub fn acceptable_request_id(id: &[u8]) -> bool {
    !id.is_empty()
        && id.len() <= MAX_REQUEST_ID_LEN
        && id
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:/+=".contains(b))
}

/// Removes a client's `X-Request-Id` that is too long or carries other characters (or is sent
/// twice), so a fresh one is made instead.
async fn drop_unsafe_request_id(
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let ids = request.headers().get_all(&REQUEST_ID_HEADER);
    let mut it = ids.iter();
    let keep =
        matches!((it.next(), it.next()), (Some(v), None) if acceptable_request_id(v.as_bytes()));
    if !keep {
        request.headers_mut().remove(&REQUEST_ID_HEADER);
    }
    next.run(request).await
}

/// Writes the access-log line of one request and puts the request id into a problem document.
async fn access_log(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let start = std::time::Instant::now();
    let method = request.method().clone();
    let route = request
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "(unmatched)".to_owned());
    let request_id = request
        .extensions()
        .get::<RequestId>()
        .and_then(|id| id.header_value().to_str().ok())
        .map(str::to_owned);
    let mut response = next.run(request).await;
    if let Some(id) = &request_id {
        response = with_problem_request_id(response, id).await;
    }
    let status = response.status().as_u16();
    let duration_ms = start.elapsed().as_secs_f64() * 1000.0;
    // Probes and scrapes come every few seconds: they are logged at DEBUG unless they fail.
    if matches!(route.as_str(), "/healthz" | "/readyz" | "/metrics") && status < 400 {
        tracing::debug!(target: "actiond::access", method = %method, route = %route, status, duration_ms, "request");
    } else {
        tracing::info!(target: "actiond::access", method = %method, route = %route, status, duration_ms, "request");
    }
    response
}

/// Adds `"request_id"` to an `application/problem+json` body (problem documents are small).
async fn with_problem_request_id(
    response: axum::response::Response,
    id: &str,
) -> axum::response::Response {
    let is_problem = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/problem+json"));
    if !is_problem {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 256 * 1024).await else {
        return axum::response::Response::from_parts(parts, axum::body::Body::empty());
    };
    let body = match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(serde_json::Value::Object(mut m)) => {
            m.entry("request_id")
                .or_insert_with(|| serde_json::Value::String(id.to_owned()));
            parts.headers.remove(axum::http::header::CONTENT_LENGTH);
            serde_json::to_vec(&m).unwrap_or_else(|_| bytes.to_vec())
        }
        _ => bytes.to_vec(),
    };
    axum::response::Response::from_parts(parts, axum::body::Body::from(body))
}

/// The `http` span of one request.
fn request_span<B>(request: &Request<B>) -> tracing::Span {
    let request_id = request
        .extensions()
        .get::<RequestId>()
        .and_then(|id| id.header_value().to_str().ok())
        .unwrap_or("");
    tracing::info_span!(
        "http",
        method = %request.method(),
        path = %request.uri().path(),
        request_id = %request_id,
    )
}

/// What one listener lets a client hold ([`serve`]).
#[derive(Debug, Clone, Copy)]
pub struct Edge {
    /// From the moment a connection waits for a request head (just connected, or idle between
    /// keep-alive requests) to the end of that head: a client that dribbles its headers, or an
    /// idle connection, is closed after this long.
    pub header_read_timeout: Duration,
    /// Open connections at most; past it a new connection is answered at once with `503
    /// Service Unavailable` and `Retry-After` ([`OVERFLOW_RESPONDERS`] at a time) and closed.
    pub max_connections: usize,
    /// After the shutdown signal, how long in-flight requests may take to finish before their
    /// connections are dropped.
    pub drain_timeout: Duration,
}

impl Default for Edge {
    /// 10 s to send a request head (or to stay idle), 4,096 connections, a 10 s drain (under
    /// the 30 s stop timeouts of the systemd units and the Helm chart).
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            max_connections: 4096,
            drain_timeout: Duration::from_secs(10),
        }
    }
}

/// The [`Edge`] limits as flags (and environment variables) of each HTTP service (`actiond
/// api`, `actiond web`), flattened into its arguments. Defaults are [`Edge::default`]'s.
#[derive(Debug, Clone, clap::Args)]
pub struct EdgeArgs {
    /// How long a connection may take to send a request head, or stay idle between keep-alive
    /// requests, before it is closed (100ms to 10m).
    #[arg(long = "http-header-timeout", env = "ACTIOND_HTTP_HEADER_TIMEOUT", value_name = "DURATION", default_value = "10s", value_parser = edge_duration)]
    pub header_read_timeout: Duration,
    /// Open client connections at most (1 to 1,000,000); past it a new client gets `503` with
    /// `Retry-After` and is closed. Keep it under the process's open-file limit.
    #[arg(long = "http-max-connections", env = "ACTIOND_HTTP_MAX_CONNECTIONS", value_name = "N", default_value_t = 4096, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_connections: u32,
    /// After SIGTERM, how long in-flight requests may take to finish (100ms to 10m); keep it
    /// under the orchestrator's stop timeout (30 s in the Helm chart and systemd units).
    #[arg(long = "http-drain-timeout", env = "ACTIOND_HTTP_DRAIN_TIMEOUT", value_name = "DURATION", default_value = "10s", value_parser = edge_duration)]
    pub drain_timeout: Duration,
}

/// A duration flag of [`EdgeArgs`]: `250ms`, `10s`, `2m`, from 100 ms to 10 min.
fn edge_duration(s: &str) -> Result<Duration, String> {
    let d = actiond_core::ids::parse_duration(s)?;
    if d < Duration::from_millis(100) || d > Duration::from_secs(600) {
        return Err(format!("{s:?} is outside 100ms..10m"));
    }
    Ok(d)
}

impl From<&EdgeArgs> for Edge {
    fn from(a: &EdgeArgs) -> Self {
        Self {
            header_read_timeout: a.header_read_timeout,
            max_connections: a.max_connections as usize,
            drain_timeout: a.drain_timeout,
        }
    }
}

/// Log target of the line each listener writes once it is bound ([`bind`]).
pub const LISTEN_LOG_TARGET: &str = "actiond::listen";

/// Binds the listener named `listener` (`http` for a service's `--listen`, `admin` for its
/// `--admin-listen`) on `addr` and logs the address it got, at `INFO` under
/// [`LISTEN_LOG_TARGET`] with the fields `listener` and `addr`: with port 0 the system picks a
/// free port, and this line is the only place that says which (the test harness reads it).
/// The error names the listener and the address (`Address already in use`, a permission).
pub async fn bind(
    listener: &'static str,
    addr: std::net::SocketAddr,
) -> anyhow::Result<TcpListener> {
    use anyhow::Context as _;
    let bound = TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot bind the {listener} listener on {addr}"))?;
    let local = bound.local_addr()?;
    tracing::info!(target: LISTEN_LOG_TARGET, listener, addr = %local, "listening");
    Ok(bound)
}

/// Serves `router` on `listener` until `shutdown` resolves, then drains: stops accepting,
/// lets each connection finish its in-flight request (closing idle keep-alive connections at
/// once), and returns when all are closed or `edge.drain_timeout` has passed. Unlike
/// `axum::serve`, a connection that does not send a complete request head within
/// `edge.header_read_timeout` is closed, and at most `edge.max_connections` are served at
/// once: a client past it gets `503` with `Retry-After` ([`refuse_busy`]), never silence.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    edge: Edge,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    raise_fd_limit();
    let slots = Arc::new(Semaphore::new(edge.max_connections.max(1)));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut shutdown = std::pin::pin!(shutdown);
    let overflow = Arc::new(Semaphore::new(OVERFLOW_RESPONDERS));
    loop {
        let (stream, _peer) = tokio::select! {
            () = &mut shutdown => break,
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(e) => {
                    // EMFILE and friends: wait a little instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    crate::clock::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        match slots.clone().try_acquire_owned() {
            Ok(permit) => {
                tokio::spawn(serve_connection(
                    stream,
                    router.clone(),
                    edge,
                    stop_rx.clone(),
                    permit,
                ));
            }
            // At the ceiling: a short answer saying so, never a connection left hanging.
            Err(_) => match overflow.clone().try_acquire_owned() {
                Ok(p) => {
                    tokio::spawn(refuse_busy(stream, p));
                }
                Err(_) => drop(stream),
            },
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let max = u32::try_from(edge.max_connections.max(1)).unwrap_or(u32::MAX);
    if tokio::time::timeout(edge.drain_timeout, slots.acquire_many(max))
        .await
        .is_err()
    {
        tracing::warn!(
            open = edge.max_connections - slots.available_permits(),
            "drain timeout: closing the connections still open"
        );
    }
}

/// Connections past `Edge::max_connections` answered at once with a 503 by [`refuse_busy`];
/// beyond these the connection is closed without an answer (the client sees it end).
pub const OVERFLOW_RESPONDERS: usize = 256;

/// `Retry-After` of the 503 at the connection ceiling, seconds.
pub const BUSY_RETRY_AFTER_SECS: u64 = 1;

/// Answers a connection past the ceiling: reads its request head (at most 8 KiB, 1 s), writes
/// `503 Service Unavailable` with `Retry-After` and a problem document, closes, and reads what
/// is left for at most 1 s more so the close does not reset the answer away.
async fn refuse_busy(mut stream: TcpStream, _slot: OwnedSemaphorePermit) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = [0u8; 8192];
    let mut head = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        while head.len() < buf.len() && !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    let body = format!(
        r#"{{"type":"about:blank","title":"Service Unavailable","status":503,"detail":"this listener is at its connection limit (--http-max-connections); retry after {BUSY_RETRY_AFTER_SECS} s"}}"#
    );
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\nRetry-After: {BUSY_RETRY_AFTER_SECS}\r\nContent-Type: application/problem+json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        stream.write_all(answer.as_bytes()).await?;
        stream.shutdown().await
    })
    .await;
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {}
    })
    .await;
}

/// One connection: HTTP/1.1 with the header-read timeout, graceful close on `stop`.
async fn serve_connection(
    stream: TcpStream,
    router: Router,
    edge: Edge,
    mut stop: watch::Receiver<bool>,
    permit: OwnedSemaphorePermit,
) {
    let service = TowerToHyperService::new(router);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(edge.header_read_timeout);
    let conn = builder
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades();
    let mut conn = std::pin::pin!(conn);
    let mut stopping = *stop.borrow();
    if stopping {
        conn.as_mut().graceful_shutdown();
    }
    loop {
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!(error = %e, "connection closed with an error");
                }
                break;
            }
            c = stop.changed(), if !stopping => {
                stopping = true;
                if c.is_ok() {
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }
    drop(permit);
}

/// Raises this process's open-file limit to its hard limit, so the connection cap, not the
/// default soft limit of 1,024 descriptors, bounds how many clients a listener holds.
fn raise_fd_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE)
        && soft < hard
    {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
}

/// Whether the `Accept` header admits one of `types` (lowercase `type/subtype`, wildcards
/// written out, e.g. `*/*`): some listed range equals one of them (case-insensitive) without
/// `q=0` (RFC 9110, section 12.5.1). `None` when the request has no `Accept` header at all, which
/// each caller reads its own way.
pub fn accept_admits(headers: &axum::http::HeaderMap, types: &[&str]) -> Option<bool> {
    let mut ranges = headers
        .get_all(axum::http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .peekable();
    ranges.peek()?;
    Some(ranges.any(|range| {
        let mut pieces = range.split(';');
        let essence = pieces.next().unwrap_or("").trim().to_ascii_lowercase();
        let refused = pieces.any(|p| {
            p.trim()
                .strip_prefix("q=")
                .and_then(|q| q.trim().parse::<f32>().ok())
                .is_some_and(|q| q <= 0.0)
        });
        !refused && types.contains(&essence.as_str())
    }))
}

/// Why a `Content-Type` is not JSON, or `Ok` when it is `application/json` (type and subtype
/// case-insensitive, optional whitespace, parameters allowed; a `charset` must be UTF-8).
/// `application/jsonp`, `application/json-seq` and `text/json` are not JSON. The same check
/// runs on REST and on `/mcp`.
pub fn check_json_media_type(value: &str) -> Result<(), String> {
    let mut parts = value.split(';');
    let essence = parts.next().unwrap_or("").trim();
    let Some((ty, sub)) = essence.split_once('/') else {
        return Err(format!("{essence:?} is not a media type (type/subtype)"));
    };
    let token = |t: &str| {
        !t.is_empty()
            && t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
    };
    if !token(ty) || !token(sub) {
        return Err(format!("{essence:?} is not a media type (type/subtype)"));
    }
    if !ty.eq_ignore_ascii_case("application") || !sub.eq_ignore_ascii_case("json") {
        return Err(format!("must be application/json, not {essence}"));
    }
    for param in parts {
        let param = param.trim();
        if param.is_empty() {
            continue;
        }
        let Some((name, v)) = param.split_once('=') else {
            return Err(format!("parameter {param:?} has no value"));
        };
        let v = v.trim().trim_matches('"');
        if name.trim().eq_ignore_ascii_case("charset")
            && !v.eq_ignore_ascii_case("utf-8")
            && !v.eq_ignore_ascii_case("utf8")
        {
            return Err(format!("charset must be utf-8, not {v}"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::get;

    async fn serve() -> String {
        let app = observe(Router::new().route("/", get(|| async { "ok" })).route(
            "/problem",
            get(|| async {
                (
                    axum::http::StatusCode::NOT_FOUND,
                    [("content-type", "application/problem+json")],
                    r#"{"type":"about:blank","status":404,"title":"Not found"}"#,
                )
            }),
        ));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{addr}/")
    }

    async fn get_request_id(url: &str, sent: Option<&str>) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let authority = url.trim_start_matches("http://").trim_end_matches('/');
        let mut stream = tokio::net::TcpStream::connect(authority).await.unwrap();
        let extra = sent
            .map(|id| format!("X-Request-Id: {id}\r\n"))
            .unwrap_or_default();
        let request =
            format!("GET / HTTP/1.1\r\nHost: {authority}\r\n{extra}Connection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        response
            .lines()
            .find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("x-request-id")
                    .then(|| value.trim().to_owned())
            })
            .expect("the response carries X-Request-Id")
    }

    #[tokio::test]
    async fn request_ids_are_set_and_propagated() {
        let url = serve().await;
        let fresh = get_request_id(&url, None).await;
        assert!(uuid_like(&fresh), "{fresh}");
        assert_ne!(fresh, get_request_id(&url, None).await);
        assert_eq!(get_request_id(&url, Some("abc-123")).await, "abc-123");
        // (sent, kept?)
        let long = "a".repeat(MAX_REQUEST_ID_LEN + 1);
        let max = "a".repeat(MAX_REQUEST_ID_LEN);
        for (sent, kept) in [
            ("req:01/2+x=.y_z", true),
            (max.as_str(), true),
            (long.as_str(), false),
            ("a b", false),
            ("x\"}{\"level\":\"ERROR", false),
            ("caf\u{e9}", false),
        ] {
            let got = get_request_id(&url, Some(sent)).await;
            if kept {
                assert_eq!(got, sent);
            } else {
                assert!(uuid_like(&got), "{sent:?} → {got:?}");
            }
        }
    }

    #[test]
    fn json_media_types_are_parsed_not_prefix_matched() {
        for ok in [
            "application/json",
            "Application/JSON",
            "application/json; charset=utf-8",
            "application/json;charset=\"UTF-8\"",
            " application/json ",
        ] {
            assert!(check_json_media_type(ok).is_ok(), "{ok}");
        }
        for (bad, says) in [
            ("application/jsonp", "must be application/json"),
            ("application/json-seq", "must be application/json"),
            ("application/json+x", "must be application/json"),
            ("text/json", "must be application/json"),
            (
                "application/x-www-form-urlencoded",
                "must be application/json",
            ),
            ("json", "not a media type"),
            ("application/json; charset=latin1", "charset"),
            ("", "not a media type"),
        ] {
            let err = check_json_media_type(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[tokio::test]
    async fn problem_documents_carry_the_request_id() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let url = serve().await;
        let authority = url.trim_start_matches("http://").trim_end_matches('/');
        let mut stream = tokio::net::TcpStream::connect(authority).await.unwrap();
        let request = format!(
            "GET /problem HTTP/1.1\r\nHost: {authority}\r\nX-Request-Id: trace-42\r\nConnection: close\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        let body = response.split("\r\n\r\n").nth(1).unwrap();
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["request_id"], "trace-42", "{response}");
        assert_eq!(v["status"], 404);
    }

    fn uuid_like(s: &str) -> bool {
        s.len() == 36 && s.chars().filter(|c| *c == '-').count() == 4
    }

    /// At the connection ceiling a new client gets a 503 with `Retry-After` at once (real
    /// sockets, the real `serve`), and is served again once a connection closes.
    #[tokio::test]
    async fn at_the_connection_ceiling_new_clients_get_503_with_retry_after() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let edge = Edge {
            max_connections: 2,
            ..Edge::default()
        };
        let app = Router::new().route("/", get(|| async { "ok" }));
        tokio::spawn(super::serve(listener, app, edge, std::future::pending()));
        async fn request(s: &mut TcpStream, close: bool) -> String {
            let conn = if close { "close" } else { "keep-alive" };
            let req = format!("GET / HTTP/1.1\r\nHost: x\r\nConnection: {conn}\r\n\r\n");
            s.write_all(req.as_bytes()).await.unwrap();
            let mut buf = vec![0u8; 4096];
            let mut got = String::new();
            let read = async {
                loop {
                    let n = s.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    got.push_str(&String::from_utf8_lossy(&buf[..n]));
                    if got.contains("\r\n\r\n") && (got.ends_with("ok") || got.contains('}')) {
                        break;
                    }
                }
            };
            tokio::time::timeout(Duration::from_secs(3), read)
                .await
                .expect("an answer within 3 s, not silence");
            got
        }
        let mut a = TcpStream::connect(addr).await.unwrap();
        let mut b = TcpStream::connect(addr).await.unwrap();
        assert!(request(&mut a, false).await.starts_with("HTTP/1.1 200"));
        assert!(request(&mut b, false).await.starts_with("HTTP/1.1 200"));
        let mut c = TcpStream::connect(addr).await.unwrap();
        let answer = request(&mut c, true).await;
        assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
        assert!(answer.contains("Retry-After: 1\r\n"), "{answer}");
        assert!(answer.contains("connection limit"), "{answer}");
        drop(a);
        // A slot is free again once a client leaves (its close reaches the server first).
        let mut served = false;
        for _ in 0..20 {
            let mut d = TcpStream::connect(addr).await.unwrap();
            if request(&mut d, true).await.starts_with("HTTP/1.1 200") {
                served = true;
                break;
            }
            crate::clock::sleep(Duration::from_millis(50)).await;
        }
        assert!(served);
        drop(b);
    }
}
