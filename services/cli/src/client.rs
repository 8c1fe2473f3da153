//! A small client for the REST API: `actiond propose` and `actiond status`.

use actiond_runtime::say;
use anyhow::Context;
use std::path::PathBuf;

/// Where the API is and who the agent is.
#[derive(Debug, Clone, clap::Args)]
pub struct Conn {
    /// API base URL (`http://` or `https://`).
    #[arg(long, env = "ACTIOND_URL", default_value = "http://127.0.0.1:8080", value_parser = api_url)]
    pub url: String,
    /// File holding the agent token (else `ACTIOND_TOKEN`).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
}

/// Checks `--url` / `ACTIOND_URL` when the command line is read, so a value that is not an
/// http(s) URL is invalid input (exit 2) rather than an unreachable API.
fn api_url(s: &str) -> Result<String, String> {
    match url::Url::parse(s) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.has_host() => Ok(s.to_owned()),
        Ok(_) => Err("must be an http:// or https:// URL with a host".into()),
        Err(e) => Err(format!("must be an http:// or https:// URL ({e})")),
    }
}

impl Conn {
    fn token(&self) -> anyhow::Result<String> {
        if let Some(p) = &self.token_file {
            return Ok(std::fs::read_to_string(p)
                .with_context(|| format!("cannot read {}", p.display()))?
                .trim()
                .to_owned());
        }
        match std::env::var("ACTIOND_TOKEN") {
            Ok(t) if !t.trim().is_empty() => Ok(t.trim().to_owned()),
            _ => Err(crate::exit::invalid(
                "no agent token: pass --token-file FILE or set ACTIOND_TOKEN",
            )),
        }
    }
}

/// `actiond propose`.
#[derive(Debug, clap::Args)]
pub struct ProposeArgs {
    #[command(flatten)]
    conn: Conn,
    /// Action name, e.g. billing.refund.issue.
    #[arg(long)]
    action: String,
    /// Params as a JSON object.
    #[arg(long)]
    params: String,
    /// Why the agent proposes it.
    #[arg(long)]
    reason: Option<String>,
    /// The text that led to it.
    #[arg(long)]
    source_text: Option<String>,
    /// Session id.
    #[arg(long)]
    session: Option<String>,
    /// Idempotency key.
    #[arg(long)]
    idempotency_key: Option<String>,
    /// Wait up to this many seconds (at most 60) for a decision, then print one JSON document:
    /// the proposal as `actiond status` shows it, with the submission's `proposal_id` (without
    /// it, the submission's answer: `proposal_id` and `state`).
    #[arg(long, default_value_t = 0)]
    wait: u64,
}

/// The body of an answer as JSON (a string when it is not JSON); a failure status is an error
/// tagged with its exit code and the problem's `detail`.
fn parse_response(status: reqwest::StatusCode, body: &str) -> anyhow::Result<serde_json::Value> {
    let v: serde_json::Value =
        serde_json::from_str(body).unwrap_or(serde_json::Value::String(body.to_owned()));
    if !status.is_success() {
        let detail = v.get("detail").and_then(|d| d.as_str()).unwrap_or(body);
        return Err(crate::exit::tagged(
            crate::exit::of_status(status.as_u16()),
            format!("HTTP {}: {detail}", status.as_u16()),
        ));
    }
    Ok(v)
}

/// The error of a request to the API at `url` that got no answer: the `host:port` tried, the
/// setting it came from (`ACTIOND_URL` or `--url`), what happened and the likely fix. Before,
/// it was reqwest's chain ending in `tcp connect error: Connection refused (os error 111)`.
/// Exit code "unreachable" (4).
fn unreachable(url: &str, e: reqwest::Error) -> anyhow::Error {
    let at = url::Url::parse(url)
        .ok()
        .and_then(|u| {
            let host = u.host_str()?.to_owned();
            Some(format!("{host}:{}", u.port_or_known_default()?))
        })
        .unwrap_or_else(|| url.to_owned());
    let chain: Vec<&(dyn std::error::Error + 'static)> =
        std::iter::successors(Some(&e as &(dyn std::error::Error + 'static)), |s| {
            s.source()
        })
        .collect();
    let refused = chain.iter().any(|s| {
        s.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
    });
    let hint = if refused {
        "nothing listens there: start the API (actiond dev, or actiond api), or set ACTIOND_URL (--url) to where it listens"
    } else if e.is_timeout() {
        "no answer in time: check the host in ACTIOND_URL (--url) and that the API runs there"
    } else {
        "check ACTIOND_URL (--url) and that the API runs there"
    };
    // The innermost cause says what happened (`Connection refused (os error 111)`); the
    // layers above it repeat the URL.
    let what = chain.last().map(ToString::to_string).unwrap_or_default();
    crate::exit::tagged(
        crate::exit::Kind::Unreachable,
        format!("cannot reach the API at {at} (from ACTIOND_URL or --url: {url}): {what}; {hint}"),
    )
}

/// Prints one JSON document on stdout.
fn print_json(v: &serde_json::Value) -> anyhow::Result<()> {
    say(&crate::output::json(v, true)?);
    Ok(())
}

/// `actiond propose`.
pub async fn propose(a: ProposeArgs) -> anyhow::Result<()> {
    let token = a.conn.token()?;
    // Send the params text as written: the server's strict parser must see duplicates etc.
    let params_raw = a.params.trim();
    if !params_raw.starts_with('{') {
        return Err(crate::exit::invalid("--params must be a JSON object"));
    }
    let mut body = format!(
        "{{\"action\":{},\"params\":{params_raw}",
        serde_json::Value::String(a.action.clone())
    );
    for (k, v) in [
        ("reason", &a.reason),
        ("source_text", &a.source_text),
        ("session", &a.session),
    ] {
        if let Some(v) = v {
            body.push_str(&format!(
                ",\"{k}\":{}",
                serde_json::Value::String(v.clone())
            ));
        }
    }
    body.push('}');
    let http = reqwest::Client::new();
    let mut req = http
        .post(format!("{}/v1/proposals", a.conn.url.trim_end_matches('/')))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body(body);
    if let Some(k) = &a.idempotency_key {
        req = req.header("idempotency-key", k);
    }
    let resp = req.send().await.map_err(|e| unreachable(&a.conn.url, e))?;
    let status = resp.status();
    let mut v = parse_response(status, &resp.text().await?)?;
    let Some(id) = v
        .get("proposal_id")
        .and_then(|x| x.as_str())
        .map(str::to_owned)
    else {
        return print_json(&v);
    };
    if a.wait == 0 {
        return print_json(&v);
    }
    // One document: the submission's answer with the later view's fields over it. When the
    // wait fails, the submission's answer is still printed, so its proposal_id is not lost.
    match wait_status(&http, &a.conn.url, &token, &id, a.wait, Some("pending")).await {
        Ok(later) => {
            if let (Some(first), serde_json::Value::Object(later)) = (v.as_object_mut(), later) {
                first.extend(later);
            }
            print_json(&v)
        }
        Err(e) => {
            print_json(&v)?;
            Err(e)
        }
    }
}

/// `actiond status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    #[command(flatten)]
    conn: Conn,
    /// Proposal id.
    id: String,
    /// Wait up to this many seconds for the state to change.
    #[arg(long, default_value_t = 0)]
    wait: u64,
}

/// `GET /v1/proposals/{id}`, long-polled for up to `wait` seconds (at most 60) while the state
/// is still `seen`; the agent's view of the proposal.
async fn wait_status(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    id: &str,
    wait: u64,
    seen: Option<&str>,
) -> anyhow::Result<serde_json::Value> {
    let mut q = format!(
        "{}/v1/proposals/{id}?wait={}",
        url.trim_end_matches('/'),
        wait.min(60)
    );
    if let Some(s) = seen {
        q.push_str(&format!("&state={s}"));
    }
    let resp = http
        .get(q)
        .bearer_auth(token)
        .send()
        .await
        .map_err(|e| unreachable(url, e))?;
    parse_response(resp.status(), &resp.text().await?)
}

/// `actiond status`.
pub async fn status(a: StatusArgs) -> anyhow::Result<()> {
    let token = a.conn.token()?;
    let v = wait_status(
        &reqwest::Client::new(),
        &a.conn.url,
        &token,
        &a.id,
        a.wait,
        None,
    )
    .await?;
    print_json(&v)
}
