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
//!   Before that, `Host` must be an authority with a numeric port, if any (400 naming `Host`):
//!   rmcp ignores what follows the host's last `:`, so `127.0.0.1:8080.evil.com` passed.
//! - **Strict JSON**: the request body is read with the same strict parser as REST
//!   (duplicate keys, unsafe integers and non-finite numbers are refused, naming the path), so
//!   the same input is accepted or refused the same way on both paths; on `/mcp` the refusal
//!   is a JSON-RPC parse error (-32700) whose `data.errors` name the field and the rule.
//! - **HTTP and JSON-RPC rules** ([`routes`]): transport refusals (401, 403, 405, 406, 413,
//!   415) are RFC 9457 problem details; invalid messages are JSON-RPC -32600 and unreadable
//!   `tools/call` or `initialize` params -32602 naming the field ([`check_call`]); `Accept: */*`
//!   and a missing `Content-Type` are accepted; batches follow the protocol version.
//! - **Tools**: exactly `propose_action` and `check_proposal` ([`tools`]). No resources, no
//!   prompts, no `list_changed`. Any other tool name is a JSON-RPC error (-32602) at call time,
//!   whatever a client believes the list said; nothing is written.
//! - **One submission path**: `propose_action` calls [`crate::submit::SubmitRequest::from_value`]
//!   and [`crate::submit::submit`], exactly as `POST /v1/proposals`; `check_proposal` calls
//!   [`crate::wait_for_change`], exactly as `GET /v1/proposals/{id}?wait=`. Refusals are the
//!   same [`crate::error::SubmitError`] values as on REST and come back as tool results with
//!   `isError: true` ([`tools::tool_result`]) carrying the problem's detail and field errors, so
//!   the model learns why.
//! - **Tasks** ([`tools::tasks`]): the MCP Tasks extension (`io.modelcontextprotocol/tasks`,
//!   SEP-2663, protocol 2026-07-28) is advertised; a `tools/call` of `propose_action` whose
//!   request declares it (`_meta` client capabilities) is answered with a task whose id is the
//!   proposal id. `tasks/get` follows the proposal for its own agent only; `tasks/cancel`
//!   withdraws a `pending` or `escalated` proposal (final state `withdrawn`, audited) and is
//!   refused for anything approved, running or final. A request without the extension gets
//!   today's two tools and results, unchanged.
//! - **Bridge** ([`stdio`]): a small proxy from newline-delimited JSON-RPC on stdin to
//!   `POST <url>/mcp`, holding only the agent token read from a file.

pub mod stdio;
pub mod tools;

use crate::error::SubmitError;
use crate::problem::Problem;
use crate::{AppState, MAX_BODY_BYTES};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use tower::ServiceExt as _;

pub use stdio::run_stdio;

/// Largest `/mcp` request body: the REST body limit plus room for the JSON-RPC envelope.
pub const MAX_MCP_BODY_BYTES: usize = MAX_BODY_BYTES + 16 * 1024;

/// Loopback origins allowed when no public origin is configured (any port).
pub const DEFAULT_PUBLIC_ORIGINS: [&str; 3] =
    ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"];

/// Arguments of `actiond mcp-stdio`.
#[derive(Debug, Clone, clap::Args)]
pub struct StdioArgs {
    /// Base URL of the actiond API, as for `actiond propose` and `status`.
    #[arg(long, env = "ACTIOND_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// File holding the agent token (else `ACTIOND_TOKEN`, as for `actiond propose` and
    /// `status`).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
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

/// rmcp's stateless Streamable HTTP service, as mounted at `/mcp`.
type McpService = StreamableHttpService<tools::ActiondMcp, NeverSessionManager>;

/// The `/mcp` route: the HTTP and JSON-RPC rules ([`endpoint`]) in front of rmcp's stateless
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
    let service: McpService = StreamableHttpService::new(
        move || Ok(tools::ActiondMcp::new(handler_state.clone())),
        Arc::new(NeverSessionManager::default()),
        server_config,
    );
    Router::new().route(
        "/mcp",
        any(move |State(state): State<AppState>, request: Request| {
            let service = service.clone();
            async move { endpoint(state, service, request).await }
        }),
    )
}

/// `POST /mcp`, in this order: the method (405 otherwise, with `Allow: POST`), the bearer
/// token (401), `Host`, `Origin`, `Content-Type` or `MCP-Protocol-Version` sent more than once
/// (400 naming it), `Content-Type` (absent or `application/json`, parsed as a media type; 415),
/// `Accept` (absent, or a range that admits `application/json`; 406), the body size (413),
/// then JSON-RPC: a body that is not strict JSON is -32700, a message without
/// `jsonrpc: "2.0"` or with an `id` that is null or not a string/integer is -32600, and a batch
/// is served only under protocol 2025-03-26 ([`batch`]). Transport refusals, rmcp's included
/// (a foreign `Host` or `Origin` is its 403), are problem details.
async fn endpoint(state: AppState, service: McpService, request: Request) -> Response {
    if request.method() != Method::POST {
        let mut r = Problem::method_not_allowed().into_response();
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
        return r;
    }
    let agent = match crate::authenticate(&state, request.headers()).await {
        Ok(a) => a,
        Err(p) => return p.into_response(),
    };
    if let Some(name) = repeated_header(request.headers()) {
        return SubmitError::field(name, "must be sent once").into_response();
    }
    if !host_is_an_authority(request.headers()) {
        return SubmitError::field(
            "Host",
            "must be host or host:port with a numeric port (RFC 9110 §7.2)",
        )
        .into_response();
    }
    if let Err(p) = check_media_types(request.headers()) {
        return p.into_response();
    }
    let (mut parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_MCP_BODY_BYTES).await else {
        return SubmitError::BodyTooLarge {
            limit: MAX_MCP_BODY_BYTES,
        }
        .into_response();
    };
    let value = match actiond_core::canonical::parse_strict(&bytes) {
        Ok(v) => v,
        Err(e) => {
            let field = if e.path.is_empty() {
                "body".to_owned()
            } else {
                e.path.clone()
            };
            let data = json!({"errors": [{"field": field, "rule": e.rule}]});
            let message = format!("Parse error: {field}: {}", e.rule);
            return rpc_error(
                StatusCode::BAD_REQUEST,
                Value::Null,
                PARSE_ERROR,
                message,
                data,
            );
        }
    };
    // rmcp insists on both types; the answer is JSON whatever the client listed.
    parts.headers.insert(
        header::ACCEPT,
        HeaderValue::from_static("application/json, text/event-stream"),
    );
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    parts.extensions.insert(agent);
    let call = Call {
        service,
        parts: &parts,
    };
    match value {
        Value::Array(items) => batch(&call, items).await,
        message => match check_message(&message) {
            Err((id, why)) => rpc_error(
                StatusCode::BAD_REQUEST,
                id,
                INVALID_REQUEST,
                why,
                Value::Null,
            ),
            Ok(()) => match check_call(&message) {
                Some(refusal) => rpc_answer(refusal),
                None => call.forward(bytes).await,
            },
        },
    }
}

/// JSON-RPC 2.0 error codes used here.
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const INVALID_PARAMS: i64 = -32602;

/// One message handed to rmcp, with the request's method, URI and headers and the agent.
struct Call<'a> {
    service: McpService,
    parts: &'a axum::http::request::Parts,
}

impl Call<'_> {
    /// Sends `body` (one JSON-RPC message) through rmcp; its plain-text refusals become
    /// problem details, and a message it cannot read as MCP becomes -32600.
    async fn forward(&self, body: Bytes) -> Response {
        let mut request = Request::new(Body::from(body));
        *request.method_mut() = self.parts.method.clone();
        *request.uri_mut() = self.parts.uri.clone();
        *request.headers_mut() = self.parts.headers.clone();
        if let Some(agent) = self.parts.extensions.get::<actiond_store::agents::Agent>() {
            request.extensions_mut().insert(agent.clone());
        }
        let response = match self.service.clone().oneshot(request).await {
            Ok(r) => r.map(Body::new),
            Err(never) => match never {},
        };
        let status = response.status();
        let is_json = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| media_essence(v) == "application/json");
        if !(status.is_client_error() || status.is_server_error()) || is_json {
            return response;
        }
        let text = axum::body::to_bytes(response.into_body(), 4096)
            .await
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        if status == StatusCode::UNSUPPORTED_MEDIA_TYPE {
            // The type was checked above: rmcp could not read the message as MCP.
            let why = format!("Invalid request: not an MCP message ({text})");
            return rpc_error(
                StatusCode::BAD_REQUEST,
                Value::Null,
                INVALID_REQUEST,
                why,
                Value::Null,
            );
        }
        let code = match status {
            StatusCode::FORBIDDEN => "host_or_origin_not_allowed",
            StatusCode::PAYLOAD_TOO_LARGE => "body_too_large",
            s if s.is_server_error() => "internal",
            _ => "bad_request",
        };
        Problem::transport(status, code, text).into_response()
    }
}

/// A JSON array of messages. MCP 2025-03-26 allows batches; 2025-06-18 removed them, so a
/// batch is refused (-32600) when `MCP-Protocol-Version` names a later version, and served
/// message by message when it names 2025-03-26 or is absent (which means 2025-03-26). The
/// answer is the array of the requests' responses (invalid members answered in place), or
/// 202 with no body when the batch held only notifications.
async fn batch(call: &Call<'_>, items: Vec<Value>) -> Response {
    let version = call
        .parts
        .headers
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())
        .unwrap_or(BATCH_VERSION);
    if version != BATCH_VERSION {
        let why = format!(
            "Invalid request: protocol version {version} has no JSON-RPC batches (2025-03-26 had); send one message per request"
        );
        return rpc_error(
            StatusCode::BAD_REQUEST,
            Value::Null,
            INVALID_REQUEST,
            why,
            Value::Null,
        );
    }
    if items.is_empty() {
        let why = "Invalid request: an empty batch".to_owned();
        return rpc_error(
            StatusCode::BAD_REQUEST,
            Value::Null,
            INVALID_REQUEST,
            why,
            Value::Null,
        );
    }
    // A batch is checked whole before any member runs: one malformed member refuses the batch
    // (HTTP 400, a -32600 per malformed member, naming its index), so nothing half-runs.
    let refused: Vec<Value> = items
        .iter()
        .enumerate()
        .filter_map(|(i, item)| {
            let (id, why) = check_message(item).err()?;
            Some(rpc_error_value(
                id,
                INVALID_REQUEST,
                format!("{why} (batch member {i}; nothing in this batch ran)"),
                json!({"index": i}),
            ))
        })
        .collect();
    if !refused.is_empty() {
        return (
            StatusCode::BAD_REQUEST,
            [(header::CONTENT_TYPE, "application/json")],
            Value::Array(refused).to_string(),
        )
            .into_response();
    }
    let mut answers = Vec::new();
    for item in items {
        if let Some(refusal) = check_call(&item) {
            answers.push(refusal);
            continue;
        }
        let response = call.forward(Bytes::from(item.to_string())).await;
        let status = response.status();
        if status == StatusCode::ACCEPTED {
            continue;
        }
        let is_json = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| media_essence(v) == "application/json");
        if !is_json {
            // A transport refusal (foreign Host, …) refuses the whole batch.
            return response;
        }
        match axum::body::to_bytes(response.into_body(), 4 * MAX_MCP_BODY_BYTES).await {
            Ok(b) => answers.push(serde_json::from_slice(&b).unwrap_or(Value::Null)),
            Err(_) => {
                return Problem::from(SubmitError::Store(actiond_store::StoreError::Config(
                    "mcp: unreadable batch answer".into(),
                )))
                .into_response();
            }
        }
    }
    if answers.is_empty() {
        return StatusCode::ACCEPTED.into_response();
    }
    (
        [(header::CONTENT_TYPE, "application/json")],
        Value::Array(answers).to_string(),
    )
        .into_response()
}

/// The one protocol version whose clients may send batches.
const BATCH_VERSION: &str = "2025-03-26";

/// JSON-RPC 2.0 §4: a message is an object with `jsonrpc: "2.0"`; an `id`, when present, is a
/// string or an integer (never null); a request or notification has a string `method`, a
/// response (to a server request) an `id` and a `result` or `error`. Errors carry the id to
/// answer with (null when it is unusable) and the reason.
fn check_message(v: &Value) -> Result<(), (Value, String)> {
    let Some(m) = v.as_object() else {
        return Err((
            Value::Null,
            "Invalid request: a message must be a JSON object".into(),
        ));
    };
    let id = match m.get("id") {
        None => None,
        Some(id @ Value::String(_)) => Some(id.clone()),
        Some(id @ Value::Number(n)) if n.is_i64() || n.is_u64() => Some(id.clone()),
        Some(other) => {
            return Err((
                Value::Null,
                format!(
                    "Invalid request: id must be a string or an integer, not {}",
                    json_kind(other)
                ),
            ));
        }
    };
    let answer_id = id.clone().unwrap_or(Value::Null);
    if m.get("jsonrpc") != Some(&json!("2.0")) {
        return Err((answer_id, "Invalid request: jsonrpc must be \"2.0\"".into()));
    }
    // MCP's params, results and errors are objects (the served OpenAPI document says so too).
    for key in ["params", "result", "error"] {
        if m.get(key).is_some_and(|v| !v.is_object()) {
            return Err((
                answer_id,
                format!("Invalid request: {key} must be an object"),
            ));
        }
    }
    let is_answer = m.contains_key("result") || m.contains_key("error");
    match m.get("method") {
        Some(Value::String(_)) if is_answer => Err((
            answer_id,
            "Invalid request: a message is a request, a notification or a response, not both (method with result or error)".into(),
        )),
        Some(Value::String(_)) => Ok(()),
        Some(_) => Err((answer_id, "Invalid request: method must be a string".into())),
        None if id.is_some() && is_answer => Ok(()),
        None => Err((answer_id, "Invalid request: method is required".into())),
    }
}

/// What kind of JSON value `v` is, for messages ("null", "an object", "a fraction", …).
fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a fraction",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The params of a request (a message with an `id`) that [`check_message`] has accepted,
/// checked before rmcp sees them, because rmcp answers params it cannot read as if the method
/// did not exist (-32601 and the bare method name). Returns the JSON-RPC error to answer with
/// (HTTP 200, like rmcp's own errors); other methods, known or not, are left to rmcp:
/// - `tools/call` without a string `params.name`, or with `params.arguments` that is neither
///   an object nor null: -32602 naming the field (MCP `CallToolRequestParams`);
/// - `tasks/get` or `tasks/cancel` without a string `params.taskId`: -32602 naming it;
/// - `initialize` without `params`, a string `params.protocolVersion`, an object
///   `params.capabilities`, or an object `params.clientInfo` with string `name` and `version`,
///   or with a capability MCP defines (`experimental`, `roots`, `sampling`, `elicitation`,
///   `tasks`) that is not an object, or `roots.listChanged` not a boolean: -32602 naming the
///   field (MCP `InitializeRequestParams`, `ClientCapabilities`).
fn check_call(message: &Value) -> Option<Value> {
    let id = message.get("id")?.clone();
    let method = message.get("method")?.as_str()?;
    let params = message.get("params");
    let wrong = |field: &str, rule: &str| {
        let why = format!("Invalid params: {field}: {rule}");
        let data = json!({"errors": [{"field": field, "rule": rule}]});
        Some(rpc_error_value(id.clone(), INVALID_PARAMS, why, data))
    };
    let field = |name: &str| params.and_then(|p| p.get(name));
    match method {
        "tools/call" => {
            if !field("name").is_some_and(Value::is_string) {
                return wrong(
                    "params.name",
                    "is required: a string, the tool's name (propose_action or check_proposal)",
                );
            }
            if field("arguments").is_some_and(|a| !(a.is_object() || a.is_null())) {
                return wrong("params.arguments", "must be a JSON object");
            }
            None
        }
        "tasks/get" | "tasks/cancel" => {
            if !field("taskId").is_some_and(Value::is_string) {
                return wrong(
                    "params.taskId",
                    "is required: a string, the task id that propose_action returned",
                );
            }
            None
        }
        "initialize" => {
            if !field("protocolVersion").is_some_and(Value::is_string) {
                return wrong(
                    "params.protocolVersion",
                    "is required: a string, e.g. 2025-06-18",
                );
            }
            for name in ["capabilities", "clientInfo"] {
                if !field(name).is_some_and(Value::is_object) {
                    return wrong(&format!("params.{name}"), "is required: a JSON object");
                }
            }
            for name in ["name", "version"] {
                if !field("clientInfo").is_some_and(|c| c.get(name).is_some_and(Value::is_string)) {
                    return wrong(
                        &format!("params.clientInfo.{name}"),
                        "is required: a string",
                    );
                }
            }
            // The capabilities MCP defines are objects; rmcp answered a wrongly typed one as
            // if `initialize` did not exist.
            let capability = |name: &str| field("capabilities").and_then(|c| c.get(name));
            for name in ["experimental", "roots", "sampling", "elicitation", "tasks"] {
                if capability(name).is_some_and(|v| !(v.is_object() || v.is_null())) {
                    return wrong(
                        &format!("params.capabilities.{name}"),
                        "must be a JSON object when present",
                    );
                }
            }
            if capability("roots")
                .and_then(|r| r.get("listChanged"))
                .is_some_and(|v| !(v.is_boolean() || v.is_null()))
            {
                return wrong(
                    "params.capabilities.roots.listChanged",
                    "must be true or false when present",
                );
            }
            None
        }
        _ => None,
    }
}

/// A JSON-RPC answer (a response object) with HTTP 200.
fn rpc_answer(value: Value) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

/// `Content-Type` absent or `application/json` (any case, any parameters): 415 otherwise.
/// `Accept` absent, or admitting `application/json` through `*/*`, `application/*` or itself
/// with a non-zero `q`: 406 otherwise.
/// The first of the headers `/mcp` reads once that was sent more than once, by its usual
/// spelling: only one of each is checked (`Origin` against the public origins, `Content-Type`
/// as JSON), so a second one must not ride along unchecked.
fn repeated_header(headers: &HeaderMap) -> Option<&'static str> {
    [
        (header::HOST, "Host"),
        (header::ORIGIN, "Origin"),
        (header::CONTENT_TYPE, "Content-Type"),
        (
            header::HeaderName::from_static("mcp-protocol-version"),
            "MCP-Protocol-Version",
        ),
    ]
    .into_iter()
    .find(|(h, _)| headers.get_all(h).iter().count() > 1)
    .map(|(_, name)| name)
}

/// Whether `Host` (when sent) parses as an authority without user info and with a numeric port,
/// if any. rmcp compares the host part with the allowed hosts and ignores what follows its
/// last `:`, so `127.0.0.1:8080.evil.com` would pass as `127.0.0.1`.
fn host_is_an_authority(headers: &HeaderMap) -> bool {
    let Some(v) = headers.get(header::HOST) else {
        return true;
    };
    let Ok(text) = v.to_str() else { return false };
    let port_ok = |p: &str| (1..=5).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit());
    let name_ok = |h: &str| {
        !h.is_empty()
            && h.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'_')
    };
    if let Some(rest) = text.strip_prefix('[') {
        // An IPv6 literal: `[addr]` or `[addr]:port`.
        return match rest.split_once(']') {
            Some((addr, tail)) => {
                !addr.is_empty()
                    && addr
                        .bytes()
                        .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
                    && (tail.is_empty() || tail.strip_prefix(':').is_some_and(port_ok))
            }
            None => false,
        };
    }
    match text.split_once(':') {
        None => name_ok(text),
        Some((h, p)) => name_ok(h) && port_ok(p),
    }
}

fn check_media_types(headers: &HeaderMap) -> Result<(), Box<Problem>> {
    if let Some(ct) = headers.get(header::CONTENT_TYPE) {
        // Parsed as on REST: `Application/JSON; charset=utf-8` is JSON, `application/jsonp` not.
        let ok = ct
            .to_str()
            .is_ok_and(|v| actiond_runtime::http::check_json_media_type(v).is_ok());
        if !ok {
            return Err(Box::new(Problem::transport(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "send Content-Type: application/json (or none)",
            )));
        }
    }
    let admits_json = actiond_runtime::http::accept_admits(
        headers,
        &["*/*", "application/*", "application/json"],
    )
    .unwrap_or(true);
    if admits_json {
        Ok(())
    } else {
        Err(Box::new(Problem::transport(
            StatusCode::NOT_ACCEPTABLE,
            "not_acceptable",
            "this endpoint answers application/json: send Accept: application/json (text/event-stream may be listed too), */*, or no Accept",
        )))
    }
}

/// The lower-case `type/subtype` of a media type, without parameters.
fn media_essence(value: &str) -> String {
    value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// A JSON-RPC error object for `id`.
fn rpc_error_value(id: Value, code: i64, message: String, data: Value) -> Value {
    let mut error = json!({"code": code, "message": message});
    if !data.is_null() {
        error["data"] = data;
    }
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}

/// A JSON-RPC error answered with HTTP `status`.
fn rpc_error(status: StatusCode, id: Value, code: i64, message: String, data: Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        rpc_error_value(id, code, message, data).to_string(),
    )
        .into_response()
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
    fn host_must_be_an_authority_with_a_numeric_port() {
        let with = |h: &str| {
            let mut m = HeaderMap::new();
            m.insert(header::HOST, HeaderValue::from_str(h).unwrap());
            host_is_an_authority(&m)
        };
        for ok in [
            "127.0.0.1:8080",
            "localhost",
            "[::1]:3000",
            "api.example.com",
        ] {
            assert!(with(ok), "{ok}");
        }
        for bad in [
            "127.0.0.1:8080.evil.com",
            "a@127.0.0.1:8080",
            "127.0.0.1:",
            "x y",
        ] {
            assert!(!with(bad), "{bad}");
        }
        assert!(host_is_an_authority(&HeaderMap::new()));
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
