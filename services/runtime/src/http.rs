//! The layer stack every HTTP listener of actiond wraps its router in ([`observe`]).
//!
//! Each request gets an `X-Request-Id`: the one the client (or a proxy in front) sent, or a
//! fresh UUID v4. The id is echoed on the response and carried by a per-request tracing span
//! named `http` (fields `method`, `path`, `request_id`), so every log line written while the
//! request is handled can be matched to it. The query string is left out of the span: it may
//! carry one-time values (an OIDC `code`, a `state`).

use axum::Router;
use axum::http::{HeaderName, Request};
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
            .layer(SetRequestIdLayer::new(REQUEST_ID_HEADER, MakeRequestUuid))
            .layer(TraceLayer::new_for_http().make_span_with(request_span))
            .layer(PropagateRequestIdLayer::new(REQUEST_ID_HEADER)),
    )
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

#[cfg(test)]
mod tests {
    #![allow(
        clippy::unwrap_used,
        clippy::expect_used,
        reason = "test: a failed step stops the test loudly"
    )]

    use super::*;
    use axum::routing::get;

    async fn serve() -> String {
        let app = observe(Router::new().route("/", get(|| async { "ok" })));
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
    }

    fn uuid_like(s: &str) -> bool {
        s.len() == 36 && s.chars().filter(|c| *c == '-').count() == 4
    }
}
