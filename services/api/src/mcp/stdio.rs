//! `actiond mcp-stdio [--url URL] [--token-file FILE]`: a stdio bridge for desktop agents that only
//! launch local MCP servers.
//!
//! The bridge joins two rmcp transports and forwards JSON-RPC messages between them unchanged:
//! rmcp's newline-delimited stdio transport toward the local client (server side), and rmcp's
//! Streamable HTTP **client** transport toward `<url>/mcp` (client side). Answers that actiond
//! streams as SSE are written to stdout message by message as they arrive. Nothing else is ever
//! written to stdout; diagnostics go to the log (stderr).
//!
//! The URL and token are read as the other client commands read them: `--url` or `ACTIOND_URL`,
//! `--token-file` or `ACTIOND_TOKEN`.
//!
//! It holds no credential but the agent token, read once (from a file, or the variable) and sent only as the
//! `Authorization: Bearer` header to the configured URL: redirects are not followed, and a plain
//! `http://` URL is accepted for loopback hosts only, so the token never travels in clear.
//! The per-request headers of the Streamable HTTP transport (`MCP-Protocol-Version`, and from
//! 2026-07-28 on `Mcp-Method` / `Mcp-Name`) are rmcp's; the bridge does not interpret or filter
//! tool calls: the server decides. Requests run concurrently (a `check_proposal` wait does not
//! hold up other calls).
//!
//! Where the two ends differ from a hand-written proxy, rmcp's behaviour holds:
//! - a stdin line that is not JSON is ignored (no `-32700` answer: it has no id to answer, and
//!   answering garbage can start an error storm); well-formed JSON that is not a JSON-RPC
//!   message is answered `-32600 Invalid Request`;
//! - an HTTP refusal of a request (401 bad token, 403, 5xx, network) answers that request with a
//!   JSON-RPC error whose `data.http_status` is the status, so the client never waits forever;
//! - a refused *first* message ends the HTTP session (rmcp treats it as fatal): the bridge answers
//!   it, then exits non-zero with one line naming the cause (for a bad token, `HTTP 401`).

use super::StdioArgs;
use crate::MAX_WAIT_SECS;
use anyhow::{Context, bail};
use rmcp::RoleServer;
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, ClientRequest, ErrorCode, ErrorData, JsonRpcMessage,
    RequestId, ServerJsonRpcMessage,
};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransport, StreamableHttpClientTransportConfig, StreamableHttpError,
};
use serde_json::json;
use std::collections::HashSet;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::JoinSet;

/// The reqwest (0.13, rmcp's) error type carried by the HTTP transport's errors.
type HttpError = StreamableHttpError<reqwest_rmcp::Error>;

/// Runs the stdio bridge on the process's stdin and stdout until stdin closes.
///
/// # Errors
/// A bad token file or URL; actiond ending the MCP connection (e.g. `HTTP 401` on the first
/// message), with one line naming the cause.
pub async fn run_stdio(args: StdioArgs) -> anyhow::Result<()> {
    let token = match &args.token_file {
        Some(f) => read_token(f)?,
        None => token_from_env(std::env::var("ACTIOND_TOKEN").ok())?,
    };
    let bridge = Bridge::new(&args.url, &token)?;
    let (stdin, stdout) = rmcp::transport::io::stdio_pipes();
    bridge.serve(stdin, stdout).await
}

/// A flag whose value does not validate: the CLI ends it with exit 2, naming the flag.
fn invalid(flag: &str, rule: impl Into<String>) -> anyhow::Error {
    actiond_core::FieldErrors::one(flag, rule).into()
}

/// The agent token from `ACTIOND_TOKEN` (`value`), checked as a token file is; none is
/// invalid input naming both ways to give one. Errors never contain the token.
pub fn token_from_env(value: Option<String>) -> anyhow::Result<String> {
    let Some(raw) = value.filter(|v| !v.trim().is_empty()) else {
        return Err(invalid(
            "--token-file",
            "no agent token: pass --token-file FILE or set ACTIOND_TOKEN",
        ));
    };
    let token = raw.trim();
    if token.len() > 256 || !token.chars().all(|c| c.is_ascii_graphic()) {
        return Err(invalid(
            "ACTIOND_TOKEN",
            "must hold one agent token (printable ASCII, no spaces, at most 256 characters)",
        ));
    }
    Ok(token.to_owned())
}

/// Reads and checks the agent token file: one line of printable ASCII, at most 256 characters.
/// Errors never contain the token.
pub fn read_token(path: &std::path::Path) -> anyhow::Result<String> {
    let raw = std::fs::read_to_string(path)
        .with_context(|| format!("reading the token file {}", path.display()))?;
    let token = raw.trim();
    if token.is_empty() || token.len() > 256 || !token.chars().all(|c| c.is_ascii_graphic()) {
        return Err(invalid(
            "--token-file",
            format!(
                "{} must hold one agent token (printable ASCII, no spaces, at most 256 characters)",
                path.display()
            ),
        ));
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
    let mut url = url::Url::parse(base)
        .map_err(|e| invalid("--url", format!("{base:?} is not an absolute URL: {e}")))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid(
            "--url",
            "must not carry credentials; the token comes from --token-file or ACTIOND_TOKEN",
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(invalid("--url", "must not have a query or fragment"));
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
                return Err(invalid(
                    "--url",
                    "must use https unless the API is on a loopback address: the token would travel in clear",
                ));
            }
        }
        other => {
            return Err(invalid(
                "--url",
                format!("scheme {other:?} is not supported; use https (or http on loopback)"),
            ));
        }
    }
    if !url.path().trim_end_matches('/').ends_with("/mcp") {
        let path = format!("{}/mcp", url.path().trim_end_matches('/'));
        url.set_path(&path);
    }
    Ok(url)
}

/// The bridge: forwards JSON-RPC messages between a local stdio peer and one `/mcp` endpoint
/// authenticated with one token.
pub struct Bridge {
    client: reqwest_rmcp::Client,
    config: StreamableHttpClientTransportConfig,
}

impl Bridge {
    /// A bridge to `<base_url>/mcp` authenticating with `token` (sent as a bearer token).
    ///
    /// # Errors
    /// A URL refused by [`endpoint_url`], or a token with characters not allowed in a header.
    pub fn new(base_url: &str, token: &str) -> anyhow::Result<Self> {
        let endpoint = endpoint_url(base_url)?;
        if reqwest_rmcp::header::HeaderValue::from_str(&format!("Bearer {token}")).is_err() {
            bail!("the agent token has characters not allowed in a header");
        }
        // reqwest 0.13 is built without a bundled crypto provider: use ring, as the rest of
        // actiond does. A provider installed earlier in the process is kept.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest_rmcp::Client::builder()
            .redirect(reqwest_rmcp::redirect::Policy::none())
            .pool_max_idle_per_host(0)
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(MAX_WAIT_SECS + 30))
            .user_agent(concat!("actiond-mcp-stdio/", env!("CARGO_PKG_VERSION")))
            .build()
            .context("building the HTTP client")?;
        let config =
            StreamableHttpClientTransportConfig::with_uri(endpoint.as_str()).auth_header(token);
        Ok(Self { client, config })
    }

    /// Forwards messages from `input` to actiond and actiond's messages to `output` until
    /// `input` closes and every forwarded request has been answered.
    ///
    /// # Errors
    /// actiond ended the MCP connection while the client was still talking (the message names
    /// the cause, e.g. `HTTP 401`), or `output` could not be written.
    pub async fn serve<R, W>(self, input: R, output: W) -> anyhow::Result<()>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let endpoint = self.config.uri.clone();
        let mut local = AsyncRwTransport::<RoleServer, R, W>::new_server(input, output);
        let mut remote = StreamableHttpClientTransport::with_client(self.client, self.config);
        let mut state = Forwarding::default();
        let mut sends: JoinSet<(Option<RequestId>, Result<(), HttpError>)> = JoinSet::new();
        loop {
            tokio::select! {
                message = local.receive(), if state.input_open => match message {
                    Some(message) => {
                        let id = request_id(&message);
                        if let Some(id) = &id {
                            state.pending.insert(id.clone());
                        }
                        // The handshake goes to rmcp's worker in order (it takes the message
                        // after `initialize` as `notifications/initialized`); the rest run
                        // concurrently.
                        let handshake = is_handshake(&message);
                        let sent = remote.send(message);
                        if handshake {
                            let result = sent.await;
                            if let Some(answer) = state.refused(id, result) {
                                local.send(answer).await.context("writing to stdout")?;
                            }
                        } else {
                            sends.spawn(async move { (id, sent.await) });
                        }
                    }
                    None => state.input_open = false,
                },
                message = remote.receive(), if state.remote_open => match message {
                    Some(message) => {
                        state.answered(&message);
                        local.send(message).await.context("writing to stdout")?;
                    }
                    None => state.remote_open = false,
                },
                Some(done) = sends.join_next() => {
                    let (id, result) = done.context("a forwarding task failed")?;
                    if let Some(answer) = state.refused(id, result) {
                        local.send(answer).await.context("writing to stdout")?;
                    }
                }
            }
            if sends.is_empty()
                && (!state.remote_open || (!state.input_open && state.pending.is_empty()))
            {
                break;
            }
        }
        let _ = remote.close().await;
        let _ = local.close().await;
        match state.ended_by {
            Some(why) if !state.remote_open => {
                bail!("actiond at {endpoint} ended the MCP connection: {why}")
            }
            None if !state.remote_open && state.input_open => {
                bail!("actiond at {endpoint} ended the MCP connection")
            }
            _ => Ok(()),
        }
    }
}

/// What the forwarding loop knows about the two ends.
struct Forwarding {
    /// stdin has not reached end of file.
    input_open: bool,
    /// The HTTP transport is still running.
    remote_open: bool,
    /// Requests forwarded to actiond and not answered yet.
    pending: HashSet<RequestId>,
    /// The first HTTP failure, reported when the HTTP transport has ended.
    ended_by: Option<String>,
}

impl Default for Forwarding {
    fn default() -> Self {
        Self {
            input_open: true,
            remote_open: true,
            pending: HashSet::new(),
            ended_by: None,
        }
    }
}

impl Forwarding {
    /// Notes an answer from actiond.
    fn answered(&mut self, message: &ServerJsonRpcMessage) {
        let id = match message {
            JsonRpcMessage::Response(response) => Some(&response.id),
            JsonRpcMessage::Error(error) => error.id.as_ref(),
            _ => None,
        };
        if let Some(id) = id {
            self.pending.remove(id);
        }
    }

    /// The JSON-RPC error answering a request whose POST failed; `None` when it was delivered
    /// or was not a request.
    fn refused(
        &mut self,
        id: Option<RequestId>,
        result: Result<(), HttpError>,
    ) -> Option<ServerJsonRpcMessage> {
        let error = result.err()?;
        let (message, status) = describe(&error);
        tracing::warn!(error = %message, "actiond refused a message");
        self.ended_by.get_or_insert_with(|| message.clone());
        let id = id?;
        if !self.pending.remove(&id) {
            return None;
        }
        let data = status.map(|s| json!({"http_status": s}));
        Some(ServerJsonRpcMessage::error(
            ErrorData::new(ErrorCode::INTERNAL_ERROR, message, data),
            Some(id),
        ))
    }
}

/// `initialize` and `notifications/initialized`, which must reach actiond in order.
fn is_handshake(message: &ClientJsonRpcMessage) -> bool {
    match message {
        JsonRpcMessage::Request(request) => {
            matches!(request.request, ClientRequest::InitializeRequest(_))
        }
        JsonRpcMessage::Notification(notification) => matches!(
            notification.notification,
            ClientNotification::InitializedNotification(_)
        ),
        _ => false,
    }
}

/// The id of a client request (the messages that expect an answer).
fn request_id(message: &ClientJsonRpcMessage) -> Option<RequestId> {
    match message {
        JsonRpcMessage::Request(request) => Some(request.id.clone()),
        _ => None,
    }
}

/// One readable line for an HTTP transport error, and the HTTP status it carries if any
/// (401 for a refused token, 403, 429, 5xx).
fn describe(error: &HttpError) -> (String, Option<u16>) {
    let status = match error {
        StreamableHttpError::AuthRequired(_) => Some(401),
        StreamableHttpError::InsufficientScope(_) => Some(403),
        StreamableHttpError::HttpStatus(e) => Some(e.status),
        StreamableHttpError::UnexpectedServerResponse(text) => text
            .strip_prefix("HTTP ")
            .and_then(|rest| rest.get(..3))
            .and_then(|code| code.parse().ok()),
        _ => None,
    };
    let message = match status {
        Some(401) => "actiond answered HTTP 401: the agent token was refused".to_owned(),
        Some(403) => "actiond answered HTTP 403: forbidden".to_owned(),
        Some(status) => format!("actiond answered HTTP {status}: {error}"),
        None => format!("actiond is unreachable or answered badly: {error}"),
    };
    (message, status)
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
    fn token_files_are_checked() {
        let dir = std::env::temp_dir().join(format!("actiond-token-{}", uuid::Uuid::new_v4()));
        std::fs::write(&dir, "actiond_abc\n").unwrap();
        assert_eq!(read_token(&dir).unwrap(), "actiond_abc");
        assert_eq!(
            token_from_env(Some(" actiond_abc\n".into())).unwrap(),
            "actiond_abc"
        );
        for bad in [None, Some(String::new()), Some("two words".into())] {
            let e = token_from_env(bad).unwrap_err().to_string();
            assert!(e.contains("ACTIOND_TOKEN") && !e.contains("two"), "{e}");
        }
        std::fs::write(&dir, "two words\n").unwrap();
        let err = read_token(&dir).unwrap_err().to_string();
        assert!(!err.contains("two words"));
        std::fs::remove_file(&dir).unwrap();
    }
}
