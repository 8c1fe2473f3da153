//! Handler implementations of the fixed registry. Each builds its own request from the approved
//! settings (of the document version the grant names) and a credential; it never forwards a
//! URL, host, command or SQL text from the proposal. Only `params` fields declared in the
//! handler's schema are used.

pub(crate) mod db;
pub(crate) mod dns;
pub mod email;

use crate::destinations::check_url;
use actiond_core::handlers::HandlerKind;
use actiond_runtime::credentials::CredentialsDir;
use serde_json::Value;
use std::time::Duration;

/// Operator configuration of destinations (not the tenant's).
#[derive(Debug, Clone, Default)]
pub struct Destinations {
    /// Hosts `webhook.post` may reach (`host` or `host:port`).
    pub webhook_hosts: Vec<String>,
    /// Base URL of the Stripe-style billing API.
    pub billing_base_url: Option<url::Url>,
    /// Base URL of the PowerDNS HTTP API.
    pub pdns_base_url: Option<url::Url>,
    /// SMTP relay of `email.send` (host, port).
    pub smtp_relay: Option<(String, u16)>,
    /// Let `email.send` authenticate to a relay that does not offer STARTTLS, sending the
    /// credential and the message in clear (`--smtp-allow-plaintext`; off by default).
    pub smtp_allow_plaintext: bool,
    /// Allow private/loopback destinations.
    pub allow_private: bool,
}

/// Everything a handler needs for one execution.
pub struct Execution<'a> {
    /// Tenant (credential namespace).
    pub tenant: &'a str,
    /// Proposal id.
    pub proposal_id: uuid::Uuid,
    /// Grant id, sent as the provider idempotency key.
    pub grant_id: uuid::Uuid,
    /// Params as stored (canonical JSON parsed).
    pub params: &'a Value,
    /// Handler settings from the approved document version.
    pub settings: &'a Value,
    /// The executor's credentials.
    pub credentials: &'a CredentialsDir,
    /// HTTP client (no redirects, guarded resolver).
    pub http: &'a reqwest::Client,
    /// Operator destinations.
    pub destinations: &'a Destinations,
    /// Timeout of the whole handler.
    pub timeout: Duration,
}

/// What a handler reports. Details are internal: stored in `outcome_detail` and the audit
/// log, never shown to agents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The provider confirmed the action.
    Succeeded(String),
    /// The provider refused, or nothing was sent.
    Failed(String),
    /// The request may have reached the provider but no answer came (timeout, connection
    /// dropped mid-request): never re-run automatically.
    Unknown(String),
}

impl Outcome {
    /// The stored outcome name.
    pub fn as_str(&self) -> &'static str {
        match self {
            Outcome::Succeeded(_) => "succeeded",
            Outcome::Failed(_) => "failed",
            Outcome::Unknown(_) => "outcome_unknown",
        }
    }
    /// The proposal state this outcome ends in.
    pub fn state(&self) -> actiond_core::state::ProposalState {
        use actiond_core::state::ProposalState;
        match self {
            Outcome::Succeeded(_) => ProposalState::Succeeded,
            Outcome::Failed(_) => ProposalState::Failed,
            Outcome::Unknown(_) => ProposalState::OutcomeUnknown,
        }
    }
    /// The internal detail.
    pub fn detail(&self) -> &str {
        match self {
            Outcome::Succeeded(d) | Outcome::Failed(d) | Outcome::Unknown(d) => d,
        }
    }
}

/// Runs a handler, bounded by `ex.timeout` (a timeout is `Unknown`: the request may have left).
pub async fn execute(kind: HandlerKind, ex: &Execution<'_>) -> Outcome {
    let fut = async {
        match kind {
            HandlerKind::WebhookPost => webhook_post(ex).await,
            HandlerKind::BillingRefundIssue => refund(ex).await,
            HandlerKind::DnsRecordUpdate => dns::update(ex).await,
            HandlerKind::EmailSend => email::send(ex).await,
            HandlerKind::DbStatementExecute => db::execute(ex).await,
        }
    };
    match tokio::time::timeout(ex.timeout, fut).await {
        Ok(o) => o,
        Err(_) => Outcome::Unknown(format!(
            "handler timed out after {:?}; the provider may have acted",
            ex.timeout
        )),
    }
}

pub(crate) fn credential(ex: &Execution<'_>) -> Result<Option<String>, Outcome> {
    match ex.settings.get("credential").and_then(Value::as_str) {
        None => Ok(None),
        Some(name) => ex
            .credentials
            .read_tenant(ex.tenant, name)
            .map(Some)
            .map_err(|e| Outcome::Failed(format!("credential unavailable: {e}"))),
    }
}

async fn send(req: reqwest::RequestBuilder) -> Outcome {
    send_with(req, |_, body| body.to_owned()).await
}

/// Sends `req`; a non-2xx answer is `Failed` with `reason(status, body)` (the body cut to 500
/// characters), a connect error `Failed`, anything after the request may have left `Unknown`.
pub(crate) async fn send_with(
    req: reqwest::RequestBuilder,
    reason: impl Fn(u16, &str) -> String,
) -> Outcome {
    match req.send().await {
        Ok(resp) => {
            let status = resp.status();
            let body: String = resp
                .text()
                .await
                .unwrap_or_default()
                .chars()
                .take(500)
                .collect();
            if status.is_success() {
                Outcome::Succeeded(format!("HTTP {}", status.as_u16()))
            } else {
                Outcome::Failed(format!(
                    "provider answered HTTP {}: {}",
                    status.as_u16(),
                    reason(status.as_u16(), &body)
                ))
            }
        }
        // Nothing was sent if we could not connect; otherwise the provider may have acted.
        Err(e) if e.is_connect() || e.is_builder() => {
            Outcome::Failed(format!("could not reach the provider: {e}"))
        }
        Err(e) => Outcome::Unknown(format!("request failed after it may have been sent: {e}")),
    }
}

async fn webhook_post(ex: &Execution<'_>) -> Outcome {
    let Some(url) = ex
        .settings
        .get("url")
        .and_then(Value::as_str)
        .and_then(|u| url::Url::parse(u).ok())
    else {
        return Outcome::Failed("webhook url missing from the approved settings".into());
    };
    if let Err(reason) = check_url(
        &url,
        &ex.destinations.webhook_hosts,
        ex.destinations.allow_private,
    ) {
        return Outcome::Failed(format!("destination refused: {reason}"));
    }
    let cred = match credential(ex) {
        Ok(c) => c,
        Err(o) => return o,
    };
    let body = ex
        .params
        .get("body")
        .cloned()
        .unwrap_or(Value::Object(Default::default()));
    let mut req = ex
        .http
        .post(url)
        .header("content-type", "application/json")
        .header("idempotency-key", ex.grant_id.to_string())
        .header("x-actiond-proposal-id", ex.proposal_id.to_string())
        .body(serde_json::to_vec(&body).unwrap_or_default());
    if let Some(h) = ex.settings.get("headers").and_then(Value::as_object) {
        for (k, v) in h {
            if let Some(v) = v.as_str() {
                req = req.header(k.as_str(), v);
            }
        }
    }
    if let Some(c) = cred {
        req = req.bearer_auth(c);
    }
    send(req).await
}

async fn refund(ex: &Execution<'_>) -> Outcome {
    let Some(base) = &ex.destinations.billing_base_url else {
        return Outcome::Failed(
            "no billing provider is configured on this executor (--billing-base-url)".into(),
        );
    };
    let Ok(url) = base.join("v1/refunds") else {
        return Outcome::Failed("bad billing base URL".into());
    };
    let cred = match credential(ex) {
        Ok(Some(c)) => c,
        Ok(None) => return Outcome::Failed("billing.refund.issue needs a credential".into()),
        Err(o) => return o,
    };
    let p = ex.params;
    let body = {
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        form.append_pair(
            "payment_intent",
            p.get("payment_id")
                .and_then(Value::as_str)
                .unwrap_or_default(),
        );
        form.append_pair(
            "amount",
            &p.get("amount")
                .and_then(Value::as_i64)
                .unwrap_or_default()
                .to_string(),
        );
        // Stripe infers the currency from the payment when it is left out; the approved
        // currency is sent so a refund can never run in another one.
        form.append_pair(
            "currency",
            &p.get("currency")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_ascii_lowercase(),
        );
        if let Some(r) = p.get("reason").and_then(Value::as_str) {
            form.append_pair("reason", r);
        }
        if let Some(o) = p.get("order_id").and_then(Value::as_str) {
            form.append_pair("metadata[order_id]", o);
        }
        form.append_pair("metadata[actiond_proposal_id]", &ex.proposal_id.to_string());
        form.finish()
    };
    let req = ex
        .http
        .post(url)
        .bearer_auth(cred)
        .header("idempotency-key", ex.grant_id.to_string())
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body);
    send(req).await
}
