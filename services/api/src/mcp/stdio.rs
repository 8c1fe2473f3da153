//! `actiond mcp-stdio --url URL --token-file FILE`: a stdio bridge for desktop agents that only
//! launch local MCP servers.
//!
//! It reads newline-delimited JSON-RPC messages from stdin, POSTs each one to `<url>/mcp` with
//! the agent's bearer token, and writes every JSON-RPC message of the answer (a JSON body or an
//! SSE stream) to stdout, one per line. Nothing else is ever written to stdout; diagnostics go to
//! the log (stderr).
//!
//! It holds no credential but the agent token, read once from a file and sent only as the
//! `Authorization` header to the configured URL: redirects are not followed, and a plain
//! `http://` URL is accepted for loopback hosts only, so the token never travels in clear.
//! It adds the per-request headers the Streamable HTTP transport expects (`MCP-Protocol-Version`
//! from the negotiated version or the request's `_meta`, and for 2026-07-28 and later
//! `Mcp-Method` / `Mcp-Name`); it does not interpret or filter tool calls: the server decides.
//! Requests run concurrently (a `check_proposal` wait does not hold up other calls). An HTTP
//! failure (401, 403, 5xx, network) answers the request with a JSON-RPC error, so the client
//! never waits forever.

use super::StdioArgs;
use crate::MAX_WAIT_SECS;
use anyhow::{Context, bail};
use axum::http::{HeaderMap, HeaderName, HeaderValue, header};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;

/// Longest stdin line accepted (one JSON-RPC message).
pub const MAX_LINE_BYTES: usize = 1024 * 1024;
/// Largest answer read from the server.
pub const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;
/// Requests forwarded at once.
pub const MAX_IN_FLIGHT: usize = 32;
/// First protocol version whose requests carry the SEP-2243 `Mcp-Method`/`Mcp-Name` headers.
const STANDARD_HEADERS_VERSION: &str = "2026-07-28";
const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";

/// Runs the stdio bridge on the process's stdin and stdout until stdin closes.
pub async fn run_stdio(args: StdioArgs) -> anyhow::Result<()> {
    let token = read_token(&args.token_file)?;
    let bridge = Bridge::new(&args.url, &token)?;
    bridge.serve(tokio::io::stdin(), tokio::io::stdout()).await
}

/// Reads and checks the agent token file: one line of printable ASCII, at most 256 characters.
/// Errors never contain the token.
pub fn read_token(path: &std::path::Path) -> anyhow::Result<String> {
    let raw = std::fs::read_to_string(path)
        .with_context(|| format!("reading the token file {}", path.display()))?;
    let token = raw.trim();
    if token.is_empty() || token.len() > 256 || !token.chars().all(|c| c.is_ascii_graphic()) {
        bail!(
            "the token file {} must hold one agent token (printable ASCII, no spaces, at most 256 characters)",
            path.display()
        );
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path)
            && meta.permissions().mode() & 0o077 != 0
        {
            tracing::warn!(file = %path.display(), "the token file is readable by other users; chmod 600 it");
        }
    }
    Ok(token.to_owned())
}

/// `<base>/mcp` from the API base URL; refuses credentials in the URL, query strings, and plain
/// `http://` to anything but a loopback host.
pub fn endpoint_url(base: &str) -> anyhow::Result<url::Url> {
    let mut url =
        url::Url::parse(base).with_context(|| format!("--url {base:?} is not an absolute URL"))?;
    if !url.username().is_empty() || url.password().is_some() {
        bail!("--url must not carry credentials; the token comes from --token-file");
    }
    if url.query().is_some() || url.fragment().is_some() {
        bail!("--url must not have a query or fragment");
    }
    match url.scheme() {
        "https" => {}
        "http" => {
            let loopback = match url.host() {
                Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
                Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
                Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
                None => false,
            };
            if !loopback {
                bail!(
                    "--url must use https unless the API is on a loopback address: the token would travel in clear"
                );
            }
        }
        other => bail!("--url scheme {other:?} is not supported; use https (or http on loopback)"),
    }
    if !url.path().trim_end_matches('/').ends_with("/mcp") {
        let path = format!("{}/mcp", url.path().trim_end_matches('/'));
        url.set_path(&path);
    }
    Ok(url)
}

/// The bridge: forwards JSON-RPC messages to one `/mcp` endpoint with one token.
pub struct Bridge {
    client: reqwest::Client,
    endpoint: url::Url,
    authorization: HeaderValue,
    /// Version agreed at `initialize` (handshake-era clients), sent as `MCP-Protocol-Version`.
    negotiated: Mutex<Option<String>>,
    /// `Mcp-Session-Id` if the server hands one out (actiond's does not: it is stateless).
    session: Mutex<Option<HeaderValue>>,
}

impl Bridge {
    /// A bridge to `<base_url>/mcp` authenticating with `token`.
    pub fn new(base_url: &str, token: &str) -> anyhow::Result<Self> {
        let endpoint = endpoint_url(base_url)?;
        let mut authorization =
            HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                anyhow::anyhow!("the agent token has characters not allowed in a header")
            })?;
        authorization.set_sensitive(true);
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(MAX_WAIT_SECS + 30))
            .user_agent(concat!("actiond-mcp-stdio/", env!("CARGO_PKG_VERSION")))
            .build()
            .context("building the HTTP client")?;
        Ok(Self {
            client,
            endpoint,
            authorization,
            negotiated: Mutex::new(None),
            session: Mutex::new(None),
        })
    }

    /// Forwards messages from `input` until it closes, writing answers to `output`; waits for
    /// requests in flight before returning.
    pub async fn serve<R, W>(self, input: R, output: W) -> anyhow::Result<()>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let bridge = Arc::new(self);
        let (tx, mut rx) = mpsc::channel::<String>(64);
        let writer = tokio::spawn(async move {
            let mut output = output;
            while let Some(line) = rx.recv().await {
                output.write_all(line.as_bytes()).await?;
                output.write_all(b"\n").await?;
                output.flush().await?;
            }
            anyhow::Ok(())
        });
        let limit = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
        let mut tasks = JoinSet::new();
        let mut reader = BufReader::new(input);
        let mut line = Vec::new();
        loop {
            line.clear();
            let n = (&mut reader)
                .take(MAX_LINE_BYTES as u64 + 1)
                .read_until(b'\n', &mut line)
                .await
                .context("reading stdin")?;
            if n == 0 {
                break;
            }
            if line.len() > MAX_LINE_BYTES && !line.ends_with(b"\n") {
                // Skip the rest of the oversized line, then answer it as unparseable.
                let mut rest = Vec::new();
                reader
                    .read_until(b'\n', &mut rest)
                    .await
                    .context("reading stdin")?;
                send(
                    &tx,
                    error_message(Value::Null, -32700, "message too large", None),
                )
                .await;
                continue;
            }
            let text = String::from_utf8_lossy(&line);
            let text = text.trim();
            if text.is_empty() {
                continue;
            }
            let message: Value = match serde_json::from_str(text) {
                Ok(v) => v,
                Err(e) => {
                    send(
                        &tx,
                        error_message(Value::Null, -32700, &format!("parse error: {e}"), None),
                    )
                    .await;
                    continue;
                }
            };
            while let Some(done) = tasks.try_join_next() {
                if let Err(e) = done {
                    tracing::warn!(error = %e, "a forwarding task failed");
                }
            }
            let permit = limit
                .clone()
                .acquire_owned()
                .await
                .context("semaphore closed")?;
            let (bridge, tx) = (bridge.clone(), tx.clone());
            tasks.spawn(async move {
                for answer in bridge.forward(message).await {
                    send(&tx, answer).await;
                }
                drop(permit);
            });
        }
        while let Some(done) = tasks.join_next().await {
            if let Err(e) = done {
                tracing::warn!(error = %e, "a forwarding task failed");
            }
        }
        drop(tx);
        writer.await.context("stdout writer")??;
        Ok(())
    }

    /// Forwards one message; returns the JSON-RPC messages to write back (none for an accepted
    /// notification or response).
    pub async fn forward(&self, message: Value) -> Vec<Value> {
        let id = message.get("id").cloned();
        let method = message
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let is_request = id.is_some() && method.is_some();
        let headers = self.headers_for(&message, method.as_deref());
        let body = match serde_json::to_vec(&message) {
            Ok(b) => b,
            Err(e) => {
                return answer_error(
                    is_request,
                    id,
                    -32603,
                    &format!("cannot encode the message: {e}"),
                    None,
                );
            }
        };
        let response = match self
            .client
            .post(self.endpoint.clone())
            .headers(headers)
            .body(body)
            .send()
            .await
        {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "actiond is unreachable");
                let why = if e.is_timeout() {
                    "timed out"
                } else {
                    "unreachable"
                };
                return answer_error(
                    is_request,
                    id,
                    -32603,
                    &format!("actiond at {} is {why}", self.endpoint),
                    None,
                );
            }
        };
        let status = response.status();
        if let Some(sid) = response.headers().get("mcp-session-id")
            && let Ok(mut s) = self.session.lock()
        {
            *s = Some(sid.clone());
        }
        let content_type = media_type(response.headers());
        let bytes = match read_limited(response).await {
            Ok(b) => b,
            Err(e) => {
                return answer_error(
                    is_request,
                    id,
                    -32603,
                    &format!("reading actiond's answer failed: {e}"),
                    None,
                );
            }
        };
        let messages = decode_messages(&content_type, &bytes);
        if !messages.is_empty() {
            if method.as_deref() == Some("initialize") {
                self.remember_version(&messages);
            }
            return messages;
        }
        if status.is_success() {
            if is_request {
                return answer_error(
                    is_request,
                    id,
                    -32603,
                    "actiond sent no answer to this request",
                    None,
                );
            }
            return Vec::new();
        }
        http_refusal(status, &bytes, is_request, id)
    }

    fn remember_version(&self, messages: &[Value]) {
        let version = messages.iter().find_map(|m| {
            m.get("result")
                .and_then(|r| r.get("protocolVersion"))
                .and_then(Value::as_str)
        });
        if let (Some(v), Ok(mut n)) = (version, self.negotiated.lock()) {
            *n = Some(v.to_owned());
        }
    }

    fn headers_for(&self, message: &Value, method: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, self.authorization.clone());
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        if let Ok(Some(sid)) = self.session.lock().map(|s| s.clone()) {
            h.insert(HeaderName::from_static("mcp-session-id"), sid);
        }
        let params = message.get("params");
        let meta_version = params
            .and_then(|p| p.get("_meta"))
            .and_then(|m| m.get(META_PROTOCOL_VERSION))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let version = if method == Some("initialize") {
            None
        } else {
            meta_version.or_else(|| self.negotiated.lock().ok().and_then(|n| n.clone()))
        };
        if let Some(v) = version {
            if let Ok(value) = HeaderValue::from_str(&v) {
                h.insert(HeaderName::from_static("mcp-protocol-version"), value);
            }
            if v.as_str() >= STANDARD_HEADERS_VERSION
                && let Some(m) = method
            {
                if let Ok(value) = HeaderValue::from_str(m) {
                    h.insert(HeaderName::from_static("mcp-method"), value);
                }
                if let Some(name) = mcp_name(m, params)
                    && let Ok(value) = HeaderValue::from_str(&encode_header_value(&name))
                {
                    h.insert(HeaderName::from_static("mcp-name"), value);
                }
            }
        }
        h
    }
}

/// The SEP-2243 `Mcp-Name` of a request, where its method has one.
fn mcp_name(method: &str, params: Option<&Value>) -> Option<String> {
    let key = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => "uri",
        "tasks/get" | "tasks/update" | "tasks/cancel" => "taskId",
        _ => return None,
    };
    params?.get(key)?.as_str().map(str::to_owned)
}

/// SEP-2243 value encoding: values that would not survive as a header are sent as
/// `=?base64?<standard base64>?=`.
fn encode_header_value(value: &str) -> String {
    use base64::Engine;
    let edge_space = value.starts_with([' ', '\t']) || value.ends_with([' ', '\t']);
    let unsafe_char = value
        .chars()
        .any(|c| (c as u32) < 0x20 || (c as u32) > 0x7e);
    let looks_wrapped = value.starts_with("=?base64?") && value.ends_with("?=");
    if !value.is_empty() && (edge_space || unsafe_char || looks_wrapped) {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(value)
        )
    } else {
        value.to_owned()
    }
}

async fn read_limited(mut response: reqwest::Response) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if out.len() + chunk.len() > MAX_RESPONSE_BYTES {
            bail!("the answer is larger than {MAX_RESPONSE_BYTES} bytes");
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// The JSON messages carried by the `data:` fields of an SSE body.
fn sse_messages(body: &[u8]) -> Vec<Value> {
    let text = String::from_utf8_lossy(body).replace("\r\n", "\n");
    let mut out = Vec::new();
    for event in text.split("\n\n") {
        let data: Vec<&str> = event
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|d| d.strip_prefix(' ').unwrap_or(d))
            .collect();
        if data.is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(&data.join("\n")) {
            Ok(v) if v.is_object() => out.push(v),
            _ => {}
        }
    }
    out
}

fn error_message(id: Value, code: i64, message: &str, data: Option<Value>) -> Value {
    let mut error = json!({"code": code, "message": message});
    if let (Some(d), Value::Object(m)) = (data, &mut error) {
        m.insert("data".into(), d);
    }
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}

fn answer_error(
    is_request: bool,
    id: Option<Value>,
    code: i64,
    message: &str,
    data: Option<Value>,
) -> Vec<Value> {
    match (is_request, id) {
        (true, Some(id)) => vec![error_message(id, code, message, data)],
        _ => Vec::new(),
    }
}

async fn send(tx: &mpsc::Sender<String>, message: Value) {
    match serde_json::to_string(&message) {
        Ok(line) => {
            if tx.send(line).await.is_err() {
                tracing::warn!("stdout is closed; dropping an answer");
            }
        }
        Err(e) => tracing::warn!(error = %e, "cannot encode an answer"),
    }
}

/// The media type of a response (`text/event-stream`, `application/json`, …), lowercase and
/// without parameters; empty when there is none.
fn media_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|s| {
            s.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .unwrap_or_default()
}

/// The JSON-RPC messages in an answer body: SSE events, a JSON batch or one JSON-RPC object;
/// nothing for any other body.
fn decode_messages(content_type: &str, bytes: &[u8]) -> Vec<Value> {
    match content_type {
        "text/event-stream" => sse_messages(bytes),
        "application/json" => match serde_json::from_slice::<Value>(bytes) {
            Ok(Value::Array(items)) => items,
            Ok(v) if v.get("jsonrpc").is_some() => vec![v],
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// An HTTP-level refusal (401 token, 403 Host/Origin, 413, 5xx) answered as a JSON-RPC error so
/// the client does not wait, carrying the problem detail when there is one.
fn http_refusal(
    status: reqwest::StatusCode,
    bytes: &[u8],
    is_request: bool,
    id: Option<Value>,
) -> Vec<Value> {
    let detail = serde_json::from_slice::<Value>(bytes)
        .ok()
        .and_then(|v| v.get("detail").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_else(|| {
            String::from_utf8_lossy(&bytes[..bytes.len().min(512)])
                .trim()
                .to_owned()
        });
    tracing::warn!(status = status.as_u16(), %detail, "actiond refused a message");
    answer_error(
        is_request,
        id,
        -32603,
        &format!("actiond answered HTTP {}: {detail}", status.as_u16()),
        Some(json!({"http_status": status.as_u16()})),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_urls() {
        assert_eq!(
            endpoint_url("http://127.0.0.1:8080").unwrap().as_str(),
            "http://127.0.0.1:8080/mcp"
        );
        assert_eq!(
            endpoint_url("http://localhost:8080/").unwrap().as_str(),
            "http://localhost:8080/mcp"
        );
        assert_eq!(
            endpoint_url("https://gw.example.com/actiond")
                .unwrap()
                .as_str(),
            "https://gw.example.com/actiond/mcp"
        );
        assert_eq!(
            endpoint_url("https://gw.example.com/mcp").unwrap().as_str(),
            "https://gw.example.com/mcp"
        );
        for bad in [
            "http://gw.example.com",
            "https://u:p@gw.example.com",
            "ftp://x",
            "gw.example.com",
            "https://gw.example.com/?a=b",
        ] {
            assert!(endpoint_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sse_bodies_yield_their_messages() {
        let body = b"id: 1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n: ping\n\ndata: {\"jsonrpc\":\"2.0\",\ndata: \"id\":3,\"result\":{}}\n\n";
        let msgs = sse_messages(body);
        assert_eq!(msgs.len(), 2);
        assert_eq!(msgs[0]["id"], 1);
        assert_eq!(msgs[1]["id"], 3);
        let body = b"data: {\"jsonrpc\":\"2.0\",\r\ndata: \"id\":2,\"result\":{}}\r\n\r\n";
        assert_eq!(sse_messages(body)[0]["id"], 2);
    }

    #[test]
    fn header_values_are_encoded_when_needed() {
        assert_eq!(encode_header_value("propose_action"), "propose_action");
        assert_eq!(encode_header_value(" x"), "=?base64?IHg=?=");
        assert_eq!(encode_header_value("é"), "=?base64?w6k=?=");
    }

    #[test]
    fn token_files_are_checked() {
        let dir = std::env::temp_dir().join(format!("actiond-token-{}", uuid::Uuid::new_v4()));
        std::fs::write(&dir, "actiond_abc\n").unwrap();
        assert_eq!(read_token(&dir).unwrap(), "actiond_abc");
        std::fs::write(&dir, "two words\n").unwrap();
        let err = read_token(&dir).unwrap_err().to_string();
        assert!(!err.contains("two words"));
        std::fs::remove_file(&dir).unwrap();
    }
}
