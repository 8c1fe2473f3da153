//! OAuth 2.0 Protected Resource Metadata (RFC 9728) for agents and MCP clients.
//!
//! - `GET /.well-known/oauth-protected-resource` → `{resource, authorization_servers,
//!   bearer_methods_supported, resource_name, resource_documentation}` for the whole API
//!   (`resource` is the API's origin); `…/oauth-protected-resource/mcp` the same for the
//!   `/mcp` endpoint (`resource` is `<origin>/mcp`, RFC 9728 §3.1's path-suffixed location).
//! - every 401 the API answers carries `WWW-Authenticate: Bearer
//!   resource_metadata="<origin>/.well-known/oauth-protected-resource"` (RFC 9728 §5.1), so an
//!   MCP client that gets a 401 from `/mcp` learns which issuers' tokens are accepted.
//!
//! The origin is the first configured public origin with a fixed port; without one, the
//! request's own `Host` (only a plain host name or address; anything else omits the pointer).

use crate::AppState;
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;

/// Path of the metadata document (RFC 9728 §3).
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// The origin to name in metadata from `--public-origin` values: the first one without `:*`,
/// without a trailing slash.
pub fn public_origin<S: AsRef<str>>(origins: &[S]) -> Option<String> {
    origins
        .iter()
        .map(|o| o.as_ref().trim())
        .find(|o| !o.ends_with(":*") && url::Url::parse(o).is_ok())
        .map(|o| o.trim_end_matches('/').to_owned())
}

/// The origin for this request: the configured one, or `http://<Host>` when `Host` is a
/// plain authority (letters, digits, `.-:[]`).
fn origin(state: &AppState, headers: &HeaderMap) -> Option<String> {
    if let Some(o) = &state.public_origin {
        return Some(o.clone());
    }
    let host = headers.get(header::HOST)?.to_str().ok()?;
    let plain = !host.is_empty()
        && host.len() <= 255
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c));
    plain.then(|| format!("http://{host}"))
}

/// The metadata routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            METADATA_PATH,
            get(|s: State<AppState>, h: HeaderMap| metadata(s, h, "")),
        )
        .route(
            &format!("{METADATA_PATH}/mcp"),
            get(|s: State<AppState>, h: HeaderMap| metadata(s, h, "/mcp")),
        )
}

async fn metadata(
    State(state): State<AppState>,
    headers: HeaderMap,
    path: &'static str,
) -> Response {
    let Some(origin) = origin(&state, &headers) else {
        return crate::error::SubmitError::field(
            "Host",
            "must be a plain host name or address, or configure --public-origin",
        )
        .into_response();
    };
    let servers = state
        .jwt
        .as_ref()
        .map(|v| v.issuer_ids())
        .unwrap_or_default();
    let body = json!({
        "resource": format!("{origin}{path}"),
        "authorization_servers": servers,
        "bearer_methods_supported": ["header"],
        "resource_name": "actiond agent API",
        "resource_documentation": format!("{origin}/openapi.yaml"),
    });
    (
        [(
            header::CACHE_CONTROL,
            HeaderValue::from_static("max-age=300"),
        )],
        axum::Json(body),
    )
        .into_response()
}

/// Middleware: on a 401, points `WWW-Authenticate` at the metadata (RFC 9728 §5.1).
pub async fn point_to_metadata(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let origin = origin(&state, request.headers());
    let mut response = next.run(request).await;
    if response.status() == StatusCode::UNAUTHORIZED
        && let Some(origin) = origin
        && let Ok(v) = HeaderValue::from_str(&format!(
            "Bearer realm=\"actiond\", resource_metadata=\"{origin}{METADATA_PATH}\""
        ))
    {
        response.headers_mut().insert(header::WWW_AUTHENTICATE, v);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_fixed_origin_is_named() {
        assert_eq!(
            public_origin(&["http://127.0.0.1:*", "https://actiond.example.com/"]),
            Some("https://actiond.example.com".into())
        );
        assert_eq!(public_origin::<&str>(&[]), None);
    }
}
