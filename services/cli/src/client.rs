//! A small client for the REST API: `actiond propose` and `actiond status`.

use crate::args::IdArg;
use crate::output::Format;
use anyhow::Context;
use std::path::PathBuf;
use std::time::Duration;

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
    /// The agent token, from `--token-file` or `ACTIOND_TOKEN`, trimmed. Errors (one line, the
    /// token never shown): none given, or one holding a character an HTTP header cannot carry
    /// (a line break or other control character inside it).
    fn token(&self) -> anyhow::Result<String> {
        let (token, from) = if let Some(p) = &self.token_file {
            (
                std::fs::read_to_string(p)
                    .with_context(|| format!("cannot read {}", p.display()))?
                    .trim()
                    .to_owned(),
                format!("the token in {}", p.display()),
            )
        } else {
            match std::env::var("ACTIOND_TOKEN") {
                Ok(t) if !t.trim().is_empty() => (t.trim().to_owned(), "ACTIOND_TOKEN".to_owned()),
                _ => {
                    return Err(crate::exit::invalid(
                        "no agent token: pass --token-file FILE or set ACTIOND_TOKEN",
                    ));
                }
            }
        };
        if token.chars().any(|c| c.is_control() || !c.is_ascii()) {
            return Err(crate::exit::invalid(format!(
                "{from} holds a control or non-ASCII character (a line break inside it?): an agent token is one line of printable ASCII"
            )));
        }
        Ok(token)
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
    /// Wait up to this long (`10s`, `2m`, or a number of seconds; at most 1h) while actiond is
    /// still working on the proposal (`pending`, `approved`, `executing`), then print one
    /// document: the proposal as `actiond status` shows it, with the submission's
    /// `proposal_id` (without it, the submission's answer: `proposal_id` and `state`). It
    /// returns at once when the proposal waits for a person (`escalated`) or has ended.
    #[arg(long, default_value = "0", value_parser = crate::args::wait, allow_negative_numbers = true)]
    wait: Duration,
    #[command(flatten)]
    out: crate::output::OutputJson,
}

/// The body of an answer from the API at `url` as JSON (a string when it is not JSON); a
/// failure status is an error tagged with its exit code and the problem's `detail`. A failure
/// that is not JSON did not come from the actiond API (every error of it is a JSON problem):
/// said so, with the setting to fix, instead of printing the page. Before, `ACTIOND_URL` set to
/// the web app's address printed its whole 404 page as the error.
fn parse_response(
    url: &str,
    status: reqwest::StatusCode,
    body: &str,
) -> anyhow::Result<serde_json::Value> {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    if !status.is_success() && parsed.is_none() {
        let looks = if body.trim_start().starts_with('<') {
            "an HTML page (the approval web app, or another web server?)"
        } else {
            "an answer that is not JSON"
        };
        return Err(crate::exit::tagged(
            crate::exit::of_status(status.as_u16()),
            format!(
                "HTTP {} with {looks} from {url} (ACTIOND_URL or --url), not the actiond API (its errors are JSON); \
                 set ACTIOND_URL to the address of the `API` line of actiond dev's banner (the `export …` line sets it)",
                status.as_u16()
            ),
        ));
    }
    let v = parsed.unwrap_or(serde_json::Value::String(body.to_owned()));
    if !status.is_success() {
        let detail = v.get("detail").and_then(|d| d.as_str()).unwrap_or(body);
        return Err(crate::exit::tagged(
            crate::exit::of_status(status.as_u16()),
            format!("HTTP {}: {detail}", status.as_u16()),
        ));
    }
    Ok(v)
}

/// Prints the proposal document `v` on stdout as `format` asks (`table`: `field  value` lines,
/// untrusted text made visible).
fn print_doc(format: Format, v: &serde_json::Value) -> anyhow::Result<()> {
    crate::output::print(format, v, || {
        let Some(m) = v.as_object() else {
            return crate::output::text(&v.to_string());
        };
        let width = m.keys().map(|k| k.chars().count()).max().unwrap_or(0);
        m.iter()
            .map(|(k, x)| {
                let shown = match x {
                    serde_json::Value::String(s) => s.clone(),
                    serde_json::Value::Null => "-".to_owned(),
                    other => other.to_string(),
                };
                format!("{k:width$}  {}", crate::output::text(&shown))
            })
            .collect::<Vec<_>>()
            .join("\n")
    })
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

/// `actiond propose`.
pub async fn propose(a: ProposeArgs) -> anyhow::Result<()> {
    let token = a.conn.token()?;
    // Send the params text as written: the server's strict parser must see duplicates etc.
    let params_raw = a.params.trim();
    if !params_raw.starts_with('{') {
        return Err(crate::exit::invalid("--params must be a JSON object"));
    }
    // Its syntax is checked here, so an error points into what was typed, not into the body
    // built around it; the rest (duplicate keys, number ranges) is the server's to judge.
    if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(params_raw) {
        return Err(crate::exit::invalid(format!(
            "--params is not valid JSON: {e}"
        )));
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
    let mut v = parse_response(&a.conn.url, status, &resp.text().await?)?;
    let Some(id) = v
        .get("proposal_id")
        .and_then(|x| x.as_str())
        .map(str::to_owned)
    else {
        return print_doc(a.out.output, &v);
    };
    if a.wait.is_zero() {
        return print_doc(a.out.output, &v);
    }
    // One document: the submission's answer with the later view's fields over it. When the
    // wait fails, the submission's answer is still printed, so its proposal_id is not lost.
    match wait_status(&http, &a.conn.url, &token, &id, a.wait).await {
        Ok(later) => {
            if let (Some(first), serde_json::Value::Object(later)) = (v.as_object_mut(), later) {
                first.extend(later);
            }
            print_doc(a.out.output, &v)
        }
        Err(e) => {
            print_doc(a.out.output, &v)?;
            Err(e)
        }
    }
}

/// `actiond status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    #[command(flatten)]
    conn: Conn,
    /// Proposal id, whole (the API looks proposals up by their whole id; `approvals show`
    /// also takes a unique prefix).
    #[arg(value_parser = crate::args::id_arg)]
    id: IdArg,
    /// Wait up to this long (`10s`, `2m`, or a number of seconds; at most 1h) while actiond
    /// is still working on the proposal (`pending`, `approved`, `executing`). It returns at
    /// once when the proposal waits for a person (`escalated`) or has ended.
    #[arg(long, default_value = "0", value_parser = crate::args::wait, allow_negative_numbers = true)]
    wait: Duration,
    #[command(flatten)]
    out: crate::output::OutputJson,
}

/// The states in which actiond itself is still working on a proposal: `--wait` waits through
/// them, and returns at once in any other (a person must decide, or it has ended).
pub const WORKING_STATES: [&str; 3] = ["pending", "approved", "executing"];

/// `GET /v1/proposals/{id}`: the agent's view of the proposal; with `wait`, long-polled (at
/// most 60 s a request, the API's bound) while the state is one of [`WORKING_STATES`], until
/// `wait` has passed.
async fn wait_status(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    id: &str,
    wait: Duration,
) -> anyhow::Result<serde_json::Value> {
    let deadline = tokio::time::Instant::now() + wait;
    let mut seen: Option<String> = None;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let mut q = format!(
            "{}/v1/proposals/{id}?wait={}",
            url.trim_end_matches('/'),
            if seen.is_some() {
                left.as_secs().min(60)
            } else {
                0
            }
        );
        if let Some(s) = &seen {
            q.push_str(&format!("&state={s}"));
        }
        let resp = http
            .get(q)
            .bearer_auth(token)
            .send()
            .await
            .map_err(|e| unreachable(url, e))?;
        let v = parse_response(url, resp.status(), &resp.text().await?)?;
        let state = v.get("state").and_then(|s| s.as_str()).unwrap_or_default();
        if !WORKING_STATES.contains(&state) || left.as_secs() == 0 {
            return Ok(v);
        }
        if seen.as_deref() == Some(state) {
            // The API answered early without a change (its cap of long-polls per agent):
            // ask again a little later rather than at once.
            actiond_runtime::clock::sleep(Duration::from_millis(250)).await;
        }
        seen = Some(state.to_owned());
    }
}

/// `actiond status`.
pub async fn status(a: StatusArgs) -> anyhow::Result<()> {
    let token = a.conn.token()?;
    let IdArg::Full(id) = a.id else {
        return Err(crate::exit::invalid(format!(
            "proposal id {}: status needs the whole id (the API looks proposals up by it; `actiond approvals show {}` finds one by a prefix)",
            a.id, a.id
        )));
    };
    let v = wait_status(
        &reqwest::Client::new(),
        &a.conn.url,
        &token,
        &id.to_string(),
        a.wait,
    )
    .await?;
    print_doc(a.out.output, &v)
}
