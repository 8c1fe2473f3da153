//! The one submission path shared by REST and MCP: the same input gives the same stored row,
//! decision and audit events.
//!
//! Order of checks: strict JSON (duplicate keys, unsafe integers) → known body fields →
//! handler params schema and tenant settings → derived target (a different submitted target is
//! a 400) → RFC 8785 canonical params → intent hash → store (idempotency, open intent, cap).
//! A request refused by its params or target whose `Idempotency-Key` already holds a proposal
//! is answered by that proposal instead (the same body; another body is a 422): a document
//! applied between a request and its retry never hides what the first one stored.

use crate::AppState;
use crate::error::SubmitError;
use actiond_core::FieldError;
use actiond_core::canonical::{canonicalize, parse_strict, sha256_hex};
use actiond_core::handlers::HandlerKind;
use actiond_core::intent::Intent;
use actiond_store::agents::Agent;
use actiond_store::proposals::{NewProposal, Submitted};
use serde::Serialize;
use serde_json::Value;

/// Longest agent `reason` accepted (characters).
pub const MAX_REASON_CHARS: usize = 4000;
/// Longest `source_text` accepted (characters).
pub const MAX_SOURCE_TEXT_CHARS: usize = 16_000;
/// Longest `session` accepted (characters).
pub const MAX_SESSION_CHARS: usize = 200;

/// Body fields that are accepted and ignored: tenant and agent come from the token, state from
/// the workflow. They are never obeyed.
pub const IGNORED_FIELDS: [&str; 3] = ["state", "tenant_id", "agent_id"];
const KNOWN_FIELDS: [&str; 6] = [
    "action",
    "params",
    "target",
    "reason",
    "source_text",
    "session",
];

/// A parsed submission body.
#[derive(Debug, Clone)]
pub struct SubmitRequest {
    /// Action name (≤ 128 characters; unknown names are stored and then blocked by policy).
    pub action: String,
    /// Params object.
    pub params: Value,
    /// Optional target; must equal the handler-derived one.
    pub target: Option<String>,
    /// The agent's stated reason.
    pub reason: Option<String>,
    /// The text that led to this proposal (ticket, email…).
    pub source_text: Option<String>,
    /// The agent's session id.
    pub session: Option<String>,
    /// SHA-256 of the canonical body without the ignored fields ("the same request").
    pub request_sha256: String,
}

impl SubmitRequest {
    /// Parses raw JSON strictly; errors name the field path.
    pub fn from_json_bytes(raw: &[u8]) -> Result<Self, SubmitError> {
        let v = parse_strict(raw).map_err(|e| {
            let field = if e.path.is_empty() {
                "body".to_owned()
            } else {
                e.path.clone()
            };
            SubmitError::field(&field, e.rule)
        })?;
        Self::from_value(v)
    }

    /// Validates an already-parsed body (MCP tool arguments arrive parsed).
    pub fn from_value(v: Value) -> Result<Self, SubmitError> {
        let Value::Object(mut obj) = v else {
            return Err(SubmitError::field("body", "must be a JSON object"));
        };
        for f in IGNORED_FIELDS {
            obj.remove(f);
        }
        let mut errs = Vec::new();
        for k in obj.keys() {
            if !KNOWN_FIELDS.contains(&k.as_str()) {
                errs.push(FieldError::new(
                    k.clone(),
                    format!(
                        "unknown field; expected one of: {}",
                        KNOWN_FIELDS.join(", ")
                    ),
                ));
            }
        }
        let action = match obj.get("action") {
            Some(Value::String(s)) if s.chars().count() <= actiond_core::ids::MAX_ACTION_LEN => {
                s.clone()
            }
            Some(Value::String(_)) => {
                errs.push(FieldError::new("action", "must be at most 128 characters"));
                String::new()
            }
            Some(_) => {
                errs.push(FieldError::new(
                    "action",
                    "must be a string: the action name, e.g. billing.refund.issue",
                ));
                String::new()
            }
            None => {
                errs.push(FieldError::new(
                    "action",
                    "is required: the action name, e.g. billing.refund.issue",
                ));
                String::new()
            }
        };
        let params = match obj.get("params") {
            Some(p @ Value::Object(_)) => p.clone(),
            None => {
                errs.push(FieldError::new("params", "is required: a JSON object"));
                Value::Null
            }
            Some(_) => {
                errs.push(FieldError::new("params", "must be a JSON object"));
                Value::Null
            }
        };
        let text = |errs: &mut Vec<FieldError>, name: &str, max: usize| -> Option<String> {
            match obj.get(name) {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) if s.chars().count() <= max => Some(s.clone()),
                Some(Value::String(_)) => {
                    errs.push(FieldError::new(
                        name,
                        format!("must be at most {max} characters"),
                    ));
                    None
                }
                Some(_) => {
                    errs.push(FieldError::new(name, "must be a string"));
                    None
                }
            }
        };
        let target = text(&mut errs, "target", 512);
        let reason = text(&mut errs, "reason", MAX_REASON_CHARS);
        let source_text = text(&mut errs, "source_text", MAX_SOURCE_TEXT_CHARS);
        let session = text(&mut errs, "session", MAX_SESSION_CHARS);
        if !errs.is_empty() {
            return Err(SubmitError::Invalid(errs));
        }
        let canonical_body =
            canonicalize(&Value::Object(obj)).map_err(|e| SubmitError::field("body", e.rule))?;
        Ok(Self {
            action,
            params,
            target,
            reason,
            source_text,
            session,
            request_sha256: sha256_hex(canonical_body),
        })
    }
}

/// The answer to a submission.
#[derive(Debug, Clone, Serialize)]
pub struct SubmitResponse {
    /// The proposal's id.
    pub proposal_id: uuid::Uuid,
    /// Its state (`pending` when new).
    pub state: String,
    /// True when an earlier proposal answered (same idempotency key, or same open intent).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub replayed: bool,
}

/// The proposal's target: derived by the tenant's handler from validated params (a sent
/// `target` must equal it), or as sent for an action outside the registry.
///
/// Errors: [`SubmitError::Invalid`] naming the param and its rule; a `target` field error when
/// the sent target differs from the derived one.
fn checked_target(
    doc: &actiond_core::tenant::TenantDocument,
    req: &SubmitRequest,
) -> Result<String, SubmitError> {
    let target = match doc.handler(&req.action) {
        Some(entry) => {
            let kind: HandlerKind = entry.kind;
            kind.validate_params(&req.params, &entry.settings)
                .map_err(|e| SubmitError::Invalid(e.0))?;
            let derived = kind.derive_target(&req.params, &entry.settings);
            if let Some(t) = &req.target
                && *t != derived
            {
                return Err(SubmitError::field(
                    "target",
                    format!(
                        "does not match the target derived from params ({derived}); omit it or send that value"
                    ),
                ));
            }
            derived
        }
        // Not in this tenant's registry: stored as submitted, then blocked by policy with
        // "no handler for <action>" (a signal worth reading the transcript for).
        None => req.target.clone().unwrap_or_default(),
    };
    Ok(target)
}

/// Validates a request against the tenant's handler registry and stores it.
///
/// The document validated against is the latest this process has seen, so a valid request
/// needs no read before its insert; the insert checks in its own statement that the version
/// is still the latest, and when it is not, the request is validated again against the latest
/// it names (at most three times). A request that a remembered version refuses is refused
/// only once a read of the latest version confirms it. Either way a newly applied document
/// takes effect at once.
pub async fn submit(
    state: &AppState,
    agent: &Agent,
    req: SubmitRequest,
    idempotency_key: Option<String>,
) -> Result<SubmitResponse, SubmitError> {
    // `agent` may come from the api's agent cache: whether it is still live and not frozen is
    // decided by the insert itself (see `proposals::submit`), never from this copy.
    let tenant = &agent.tenant_id;
    let (mut policy, mut remembered) = state.docs.latest_seen(&state.db, tenant).await?;
    let mut new = NewProposal {
        id: uuid::Uuid::now_v7(),
        tenant_id: tenant.clone(),
        agent_id: agent.id,
        action: req.action.clone(),
        target: String::new(),
        params_json: String::new(),
        params_sha256: String::new(),
        intent_hash: String::new(),
        agent_reason: req.reason.clone(),
        source_text: req.source_text.clone(),
        session_id: req.session.clone(),
        idempotency_key,
        request_sha256: req.request_sha256.clone(),
        on_behalf_of: agent.on_behalf_of.clone(),
        facts: None,
    };
    for _attempt in 0..3 {
        let Some(p) = policy else {
            return Err(SubmitError::TenantNotConfigured);
        };
        new.target = match checked_target(&p.doc, &req) {
            Ok(t) => t,
            Err(e) if remembered => {
                // Refused by a version remembered from an earlier request: refuse only what
                // the latest version refuses too.
                let c = state.db.client().await?;
                let latest = state.docs.latest_now(&c, tenant).await?;
                remembered = false;
                if latest.as_ref().map(|l| l.version) != Some(p.version) {
                    policy = latest;
                    continue;
                }
                return refused(state, agent, &new, e).await;
            }
            Err(e) => return refused(state, agent, &new, e).await,
        };
        new.params_json =
            canonicalize(&req.params).map_err(|e| SubmitError::field("params", e.rule))?;
        new.params_sha256 = sha256_hex(&new.params_json);
        new.intent_hash = Intent {
            tenant_id: tenant,
            agent_id: &agent.id.to_string(),
            action: &new.action,
            target: &new.target,
            params_json: &new.params_json,
        }
        .hash();
        if let Some(entry) = p.doc.handler(&new.action)
            && new.facts.is_none()
        {
            // Facts policy reads without I/O: computed here, from the database, once.
            new.facts = actiond_store::proposals::facts_at_submission(
                &state.db,
                tenant,
                entry.kind,
                &req.params,
            )
            .await?;
        }
        let cap = i64::from(p.doc.policy.max_open_escalations_per_agent);
        match state.submitter.submit(&new, cap, p.version).await? {
            Submitted::StaleDocument { latest } => {
                let c = state.db.client().await?;
                policy = state.docs.seen_version(&c, tenant, latest).await?;
                remembered = false;
            }
            done => return answer(state, agent, done),
        }
    }
    Err(SubmitError::Store(actiond_store::StoreError::Conflict(
        "the tenant's document changed three times during this submission; try again".into(),
    )))
}

/// The answer to a request the tenant's latest document refuses: the proposal already filed
/// under its `Idempotency-Key` when there is one (`proposals::answer_by_key`: a retry whose
/// first answer was lost finds it even when a stricter document came in between; another body
/// under the key is a 422), else the refusal `e`, counted.
async fn refused(
    state: &AppState,
    agent: &Agent,
    new: &NewProposal,
    e: SubmitError,
) -> Result<SubmitResponse, SubmitError> {
    match actiond_store::proposals::answer_by_key(&state.db, new).await? {
        Some(stored) => answer(state, agent, stored),
        None => Err(invalid(state, e)),
    }
}

/// Counts a refused request (`actiond_api_submissions_total{result="invalid"}`) and returns
/// its error.
fn invalid(state: &AppState, e: SubmitError) -> SubmitError {
    state
        .metrics
        .submissions
        .with_label_values(&["invalid"])
        .inc();
    e
}

/// The answer to a submission that did not meet a stale document.
fn answer(
    state: &AppState,
    agent: &Agent,
    submitted: Submitted,
) -> Result<SubmitResponse, SubmitError> {
    match submitted {
        Submitted::Created(id) => {
            state
                .metrics
                .submissions
                .with_label_values(&["created"])
                .inc();
            state.notifier.hint();
            Ok(SubmitResponse {
                proposal_id: id,
                state: "pending".into(),
                replayed: false,
            })
        }
        Submitted::Existing { id, state: s } => {
            state
                .metrics
                .submissions
                .with_label_values(&["existing"])
                .inc();
            Ok(SubmitResponse {
                proposal_id: id,
                state: s,
                replayed: true,
            })
        }
        Submitted::KeyReused => {
            state
                .metrics
                .submissions
                .with_label_values(&["key_reused"])
                .inc();
            Err(SubmitError::IdempotencyKeyReused)
        }
        Submitted::AgentNotLive => {
            Err(state.auth_failure("invalid", "the token is unknown, expired or revoked"))
        }
        Submitted::AgentFrozen => Err(SubmitError::AgentFrozen),
        Submitted::TenantMoved(m) => Err(SubmitError::TenantMoved {
            moved_to: m.moved_to,
            moved_at: m.moved_at.to_rfc3339(),
        }),
        Submitted::StaleDocument { .. } => Err(SubmitError::Store(
            actiond_store::StoreError::Conflict("the tenant's document changed; try again".into()),
        )),
        Submitted::TooManyEscalations { cap } => {
            state
                .metrics
                .submissions
                .with_label_values(&["too_many_escalations"])
                .inc();
            tracing::warn!(tenant = %agent.tenant_id, agent = %agent.id, cap, "ALERT: agent reached its cap of open escalations");
            Err(SubmitError::TooManyOpenEscalations { cap })
        }
    }
}
