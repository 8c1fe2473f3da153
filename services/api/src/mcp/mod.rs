//! MCP endpoint (`/mcp`) and the stdio bridge (`actiond mcp-stdio`).
//!
//! Design decisions, written down beside the code:
//!
//! - **Transport**: rmcp's Streamable HTTP server in stateless mode (no `Mcp-Session-Id`, no
//!   standalone SSE stream): any replica answers any request, and there is no session to hijack.
//!   Responses are plain JSON when the handler sends nothing before its result.
//! - **Authentication**: every HTTP request to `/mcp` carries the agent's bearer token or
//!   workload JWT and is authorized by [`crate::authenticate`] before rmcp sees it (401
//!   otherwise, pointing at the RFC 9728 metadata: [`crate::resource`]). The resolved
//!   agent rides in the request's extensions to the tool handler; an MCP session id, where a
//!   client sends one, is never treated as authentication.
//! - **DNS rebinding**: rmcp validates `Host` against the configured public origins' authorities
//!   and `Origin` against the origins themselves (403 otherwise); the default is loopback only.
//!   rmcp 3.11.0 contains the fix for GHSA-89vp-x53w-74fx (Host validation, rmcp ≥ 1.4.0).
//! - **Strict JSON**: the request body is read with the same strict parser as REST
//!   (duplicate keys, unsafe integers and non-finite numbers are refused with a 400 naming the
//!   path), so the same input is accepted or refused the same way on both paths.
//! - **Tools**: exactly `propose_action` and `check_proposal` ([`tools`]). No resources, no
//!   prompts, no `list_changed`. Any other tool name is a JSON-RPC error (-32602) at call time,
//!   whatever a client believes the list said; nothing is written.
//! - **One submission path**: `propose_action` calls [`crate::submit::SubmitRequest::from_value`]
//!   and [`crate::submit::submit`], exactly as `POST /v1/proposals`; `check_proposal` calls
//!   [`crate::wait_for_change`], exactly as `GET /v1/proposals/{id}?wait=`. Refusals are the
//!   same [`crate::error::SubmitError`] values as on REST and come back as tool results with
//!   `isError: true` ([`tools::tool_result`]) carrying the problem's detail and field errors, so
//!   the model learns why.
//! - **Bridge** ([`stdio`]): a small proxy from newline-delimited JSON-RPC on stdin to
//!   `POST <url>/mcp`, holding only the agent token read from a file.

pub mod stdio;
pub mod tools;

use crate::error::SubmitError;
use crate::{AppState, MAX_BODY_BYTES};
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::path::PathBuf;
use std::sync::Arc;

pub use stdio::run_stdio;

/// Largest `/mcp` request body: the REST body limit plus room for the JSON-RPC envelope.
pub const MAX_MCP_BODY_BYTES: usize = MAX_BODY_BYTES + 16 * 1024;

/// Loopback origins allowed when no public origin is configured (any port).
pub const DEFAULT_PUBLIC_ORIGINS: [&str; 3] =
    ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"];

/// Arguments of `actiond mcp-stdio`.
#[derive(Debug, Clone, clap::Args)]
pub struct StdioArgs {
    /// Base URL of the actiond API (e.g. http://127.0.0.1:8080).
    #[arg(long)]
    pub url: String,
    /// File holding the agent token.
    #[arg(long)]
    pub token_file: PathBuf,
}

/// Which `Host` and `Origin` values `/mcp` accepts, from the configured public origins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpConfig {
    /// Accepted `Host` authorities (`host` matches any port, `host:port` only that port).
    pub allowed_hosts: Vec<String>,
    /// Accepted browser origins (`scheme://host[:port|:*]`); requests without `Origin` pass.
    pub allowed_origins: Vec<String>,
}

impl Default for McpConfig {
    /// Loopback only, any port.
    fn default() -> Self {
        match Self::from_public_origins(&DEFAULT_PUBLIC_ORIGINS) {
            Ok(c) => c,
            // The constants above always parse; keep a safe, explicit fallback anyway.
            Err(_) => Self {
                allowed_hosts: vec!["127.0.0.1".into(), "localhost".into(), "::1".into()],
                allowed_origins: DEFAULT_PUBLIC_ORIGINS
                    .iter()
                    .map(|s| (*s).to_owned())
                    .collect(),
            },
        }
    }
}

impl McpConfig {
    /// Builds the configuration from public origins such as `https://actiond.example.com` or
    /// `http://127.0.0.1:8080` (`:*` for any port). An origin without a port accepts its host
    /// on any port in `Host` (proxies omit default ports) and only the scheme's default port in
    /// `Origin`. Empty list → loopback only.
    pub fn from_public_origins<S: AsRef<str>>(origins: &[S]) -> Result<Self, String> {
        if origins.is_empty() {
            return Self::from_public_origins(&DEFAULT_PUBLIC_ORIGINS);
        }
        let mut allowed_hosts = Vec::new();
        let mut allowed_origins = Vec::new();
        for raw in origins {
            let raw = raw.as_ref().trim();
            let (base, any_port) = match raw.strip_suffix(":*") {
                Some(b) => (b, true),
                None => (raw, false),
            };
            let url = url::Url::parse(base).map_err(|e| format!("public origin {raw:?}: {e}"))?;
            if !matches!(url.scheme(), "http" | "https") {
                return Err(format!(
                    "public origin {raw:?}: the scheme must be http or https"
                ));
            }
            if !url.username().is_empty()
                || url.password().is_some()
                || url.query().is_some()
                || url.fragment().is_some()
                || url.path() != "/"
            {
                return Err(format!(
                    "public origin {raw:?}: give only scheme://host[:port], without path, query or credentials"
                ));
            }
            let Some(host) = url.host_str() else {
                return Err(format!("public origin {raw:?}: a host is required"));
            };
            let host = host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_ascii_lowercase();
            let bracketed = if host.contains(':') {
                format!("[{host}]")
            } else {
                host.clone()
            };
            match (any_port, url.port()) {
                (true, Some(_)) => {
                    return Err(format!("public origin {raw:?}: give either a port or :*"));
                }
                (true, None) => {
                    allowed_hosts.push(host.clone());
                    allowed_origins.push(format!("{}://{bracketed}:*", url.scheme()));
                }
                (false, Some(port)) => {
                    allowed_hosts.push(format!("{bracketed}:{port}"));
                    allowed_origins.push(format!("{}://{bracketed}:{port}", url.scheme()));
                }
                (false, None) => {
                    allowed_hosts.push(host.clone());
                    let port = if url.scheme() == "https" { 443 } else { 80 };
                    allowed_origins.push(format!("{}://{bracketed}:{port}", url.scheme()));
                }
            }
        }
        Ok(Self {
            allowed_hosts,
            allowed_origins,
        })
    }
}

/// The `/mcp` route: bearer authentication and strict JSON in front of rmcp's stateless
/// Streamable HTTP service. Merge it into the API router.
pub fn routes(state: AppState, config: &McpConfig) -> Router<AppState> {
    let server_config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_sse_retry(None)
        .with_allowed_hosts(config.allowed_hosts.clone())
        .with_allowed_origins(config.allowed_origins.clone())
        .enforce_origin_validation()
        .with_max_request_body_bytes(MAX_MCP_BODY_BYTES);
    let handler_state = state.clone();
    let service = StreamableHttpService::new(
        move || Ok(tools::ActiondMcp::new(handler_state.clone())),
        Arc::new(NeverSessionManager::default()),
        server_config,
    );
    Router::new()
        .route_service("/mcp", service)
        .route_layer(axum::middleware::from_fn_with_state(state, authorize))
}

/// Authenticates the bearer token (401 otherwise), refuses non-strict JSON bodies (400), and
/// hands the agent to the tool handler through the request's extensions.
async fn authorize(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let agent = match crate::authenticate(&state, request.headers()).await {
        Ok(a) => a,
        Err(p) => return p.into_response(),
    };
    // Media types are parsed as on REST (`Application/JSON` is JSON, `application/jsonp` not).
    if request.method() == axum::http::Method::POST
        && let Some(ct) = request.headers().get(axum::http::header::CONTENT_TYPE)
        && ct
            .to_str()
            .map_err(|_| String::new())
            .and_then(actiond_runtime::http::check_json_media_type)
            .is_err()
    {
        return SubmitError::UnsupportedMediaType.into_response();
    }
    let (mut parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_MCP_BODY_BYTES).await {
        Ok(b) => b,
        Err(_) => {
            return SubmitError::BodyTooLarge {
                limit: MAX_MCP_BODY_BYTES,
            }
            .into_response();
        }
    };
    if !bytes.is_empty()
        && let Err(e) = actiond_core::canonical::parse_strict(&bytes)
    {
        let field = if e.path.is_empty() {
            "body".to_owned()
        } else {
            e.path.clone()
        };
        return SubmitError::field(&field, e.rule).into_response();
    }
    parts.extensions.insert(agent);
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_loopback_on_any_port() {
        let c = McpConfig::default();
        assert_eq!(c.allowed_hosts, vec!["127.0.0.1", "localhost", "::1"]);
        assert_eq!(
            c.allowed_origins,
            vec!["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
        );
    }

    #[test]
    fn public_origins_become_hosts_and_origins() {
        let c = McpConfig::from_public_origins(&[
            "https://actiond.example.com",
            "http://10.0.0.5:8080",
        ])
        .unwrap();
        assert_eq!(
            c.allowed_hosts,
            vec!["actiond.example.com", "10.0.0.5:8080"]
        );
        assert_eq!(
            c.allowed_origins,
            vec!["https://actiond.example.com:443", "http://10.0.0.5:8080"]
        );
    }

    #[test]
    fn bad_public_origins_are_refused() {
        for bad in [
            "actiond.example.com",
            "ftp://x.example",
            "https://x.example/mcp",
            "https://u:p@x.example",
            "https://x.example:80:*",
        ] {
            assert!(McpConfig::from_public_origins(&[bad]).is_err(), "{bad}");
        }
    }
}
