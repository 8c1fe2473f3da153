//! Handler implementations of the fixed registry. Each builds its own request from the approved
//! settings (of the document version the grant names) and a credential; it never forwards a
//! URL, host, command or SQL text from the proposal. Only `params` fields declared in the
//! handler's schema are used.

pub(crate) mod db;
pub(crate) mod dns;
mod dns_served;
pub mod email;
mod refund;
mod ticket;
mod webhook;

use actiond_core::handlers::HandlerKind;
use actiond_runtime::credentials::CredentialsDir;
use futures_util::future::BoxFuture;
use serde_json::Value;
use std::time::Duration;

/// Operator configuration of destinations (not the tenant's).
#[derive(Debug, Clone, Default)]
pub struct Destinations {
    /// Hosts a URL from a tenant document may reach (`host` or `host:port`): `webhook.post`'s
    /// `url` and every handler whose settings name a base URL.
    pub webhook_hosts: Vec<String>,
    /// Base URL of the Stripe-style billing API.
    pub billing_base_url: Option<url::Url>,
    /// Base URL of the PowerDNS HTTP API.
    pub pdns_base_url: Option<url::Url>,
    /// DNS address of that PowerDNS server, asked over DNS by the read-back.
    pub pdns_dns_addr: Option<std::net::SocketAddr>,
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
    /// What the run reported, when a read-back follows it (the handler's success detail, such
    /// as `1 row(s) affected`); `None` when settling `outcome_unknown`, previewing or running.
    pub reported: Option<&'a str>,
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
    /// The provider confirmed the action, but what the executor read back afterwards is not
    /// what was approved ([`crate::effects`]): never re-run automatically.
    EffectMismatch(String),
}

impl Outcome {
    /// The stored outcome name.
    pub fn as_str(&self) -> &'static str {
        match self {
            Outcome::Succeeded(_) => "succeeded",
            Outcome::Failed(_) => "failed",
            Outcome::Unknown(_) => "outcome_unknown",
            Outcome::EffectMismatch(_) => "effect_mismatch",
        }
    }
    /// The proposal state this outcome ends in.
    pub fn state(&self) -> actiond_core::state::ProposalState {
        use actiond_core::state::ProposalState;
        match self {
            Outcome::Succeeded(_) => ProposalState::Succeeded,
            Outcome::Failed(_) => ProposalState::Failed,
            Outcome::Unknown(_) => ProposalState::OutcomeUnknown,
            Outcome::EffectMismatch(_) => ProposalState::EffectMismatch,
        }
    }
    /// The internal detail.
    pub fn detail(&self) -> &str {
        match self {
            Outcome::Succeeded(d)
            | Outcome::Failed(d)
            | Outcome::Unknown(d)
            | Outcome::EffectMismatch(d) => d,
        }
    }
}

/// A handler's run: the outcome of performing the approved action.
pub type Run = for<'a> fn(&'a Execution<'a>) -> BoxFuture<'a, Outcome>;

/// What a preview read: the lines for approvers, the handler's binding fields (an object, the
/// members a grant is bound to: before running, the executor reads them again and does not run
/// when one changed) and its warnings for the card and the queue.
pub use actiond_store::previews::Read;

/// A handler's preview: what the provider holds now, or why it could not be read. The same
/// function serves approvers (stored beside an escalated proposal) and the pre-run check
/// (`crate::prerun`), so "what the approver saw" and "what holds now" are read alike.
pub type Preview = for<'a> fn(&'a Execution<'a>) -> BoxFuture<'a, Result<Read, String>>;

/// A handler's read-back: what the provider shows now for the approved action, found under
/// the spent grant (`ex.grant_id`, the idempotency key its run sent) and compared with the
/// approved params. Read-only; a provider that cannot be read is [`Verdict::Unread`], never an
/// error. Used after a successful run and to settle `outcome_unknown` ([`crate::effects`]).
///
/// [`Verdict::Unread`]: actiond_core::effect::Verdict::Unread
pub type ReadBack =
    for<'a> fn(&'a Execution<'a>) -> BoxFuture<'a, actiond_core::effect::EffectRecord>;

/// What the executor does for one handler of the registry: run it and, when the provider can
/// be read without changing anything, preview it for approvers and read its effect back. Each
/// handler module defines one `HANDLER`; [`handler`] is the registry.
pub struct Handler {
    /// Performs the approved action (the grant is spent).
    pub run: Run,
    /// Reads the provider, read-only: the preview stored beside an escalated proposal, and
    /// the read again before the run of a grant bound to it.
    pub preview: Option<Preview>,
    /// Reads the provider, read-only, after the run: the `proposal.effect` event.
    pub read_back: Option<ReadBack>,
}

/// The executor's half of the registry (the other half is [`HandlerKind`]'s spec in core).
pub fn handler(kind: HandlerKind) -> &'static Handler {
    match kind {
        HandlerKind::WebhookPost => &webhook::HANDLER,
        HandlerKind::BillingRefundIssue => &refund::HANDLER,
        HandlerKind::DnsRecordUpdate => &dns::HANDLER,
        HandlerKind::EmailSend => &email::HANDLER,
        HandlerKind::DbStatementExecute => &db::HANDLER,
        HandlerKind::TicketCommentAdd => &ticket::HANDLER,
    }
}

/// Runs a handler, bounded by `ex.timeout` (a timeout is `Unknown`: the request may have left).
pub async fn execute(kind: HandlerKind, ex: &Execution<'_>) -> Outcome {
    match tokio::time::timeout(ex.timeout, (handler(kind).run)(ex)).await {
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

pub(crate) async fn send(req: reqwest::RequestBuilder) -> Outcome {
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
