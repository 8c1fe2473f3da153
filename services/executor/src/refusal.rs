//! Every way the executor refuses an approved proposal without running it, and what each
//! refusal means: the state the proposal ends in, the text the agent reads, the
//! `grants_rejected_total` label and the audit event kind. The mappings are exhaustive matches,
//! so a new refusal cannot be added without deciding all four.

use actiond_core::audit::AuditKind;
use actiond_core::grant::GrantError;
use actiond_core::state::ProposalState;
use serde_json::{Value, json};
use uuid::Uuid;

/// Why a grant's signature check failed: the verifier's error and the key id the grant named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantFault {
    /// The verifier's error text (internal: audit log only).
    pub error: String,
    /// The key id the grant claims.
    pub key_id: String,
}

/// Every `reason` label of `grants_rejected_total` ([`Refusal::metric_label`]): the executor
/// makes each present at 0 from its first scrape.
pub const METRIC_LABELS: [&str; 12] = [
    "missing",
    "untrusted_key",
    "unknown_version",
    "bad_signature",
    "intent_mismatch",
    "policy_changed",
    "replayed",
    "expired",
    "agent_frozen",
    "agent_revoked",
    "document_changed",
    "expiry_too_far",
];

/// A refusal to run a claimed `approved` proposal.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// No grant row exists for the proposal.
    MissingGrant,
    /// The grant names a key id this executor does not trust.
    UntrustedKey(GrantFault),
    /// The grant's claims version is not one this executor knows.
    UnknownVersion(GrantFault),
    /// The signature does not verify (wrong length, wrong key, altered claims).
    BadSignature(GrantFault),
    /// The grant's proposal, tenant or intent hash, or the stored intent hash, differs from the
    /// intent hash recomputed from the stored row.
    IntentMismatch {
        /// Intent hash in the grant.
        grant_intent: String,
        /// Intent hash recomputed from the proposal's columns.
        recomputed: String,
        /// Intent hash stored on the proposal.
        stored: String,
    },
    /// The tenant has no current document to re-check against.
    NoDocument,
    /// The tenant's current policy no longer permits it (a `policy-` grant needs `allow` now,
    /// a person's grant needs "not `block`" now).
    PolicyChanged {
        /// The effect the current policy gives.
        effect_now: &'static str,
        /// The rule that decided it.
        rule: Option<String>,
        /// The current document version.
        doc_version: i32,
        /// `policy`, `approver` or `breakglass`.
        grant_kind: &'static str,
    },
    /// The document version the grant names no longer exists.
    ApprovedVersionMissing,
    /// The document version the grant names has no handler for the action.
    NoHandler {
        /// The action.
        action: String,
    },
    /// The grant was already spent: nothing ran (investigate).
    Replayed {
        /// The grant.
        grant_id: Uuid,
        /// The executor that spent it.
        used_by: Option<String>,
    },
    /// The grant expired unspent.
    Expired {
        /// The grant.
        grant_id: Uuid,
    },
    /// The proposal's agent was frozen after the approval (seen at the claim or in the spend's
    /// own statement): the grant stays unspent and nothing runs.
    AgentFrozen,
    /// The proposal's agent was revoked after the approval (seen at the claim or in the
    /// spend's own statement): the grant stays unspent and nothing runs.
    AgentRevoked,
    /// The grant names a document version other than the one that decided the proposal
    /// (`proposals.doc_version`, which only policy writes): every issuer signs that version,
    /// so a holder of an approver's or break-glass key could otherwise choose which stored
    /// version's handler settings (an older URL or credential) the action runs with.
    VersionMismatch {
        /// The version the grant signed.
        signed: i32,
        /// The version that decided the proposal, if any.
        decided: Option<i32>,
    },
    /// The grant's signed expiry lies further ahead of the database clock than the longest
    /// grant lifetime plus the clock skew (`executor_queue::MAX_GRANT_AHEAD_US`): a trusted key
    /// signed a grant no issuer makes. Not spent, nothing runs.
    ExpiresTooFar {
        /// The grant.
        grant_id: Uuid,
        /// Its signed expiry, microseconds since the epoch.
        expires_at_us: i64,
    },
    /// The approved document version's source no longer hashes to the SHA-256 the grant
    /// signed (`GrantClaims::doc_sha256`): the stored document was rewritten after the
    /// decision, so the handler settings it would run with are not the ones decided under.
    DocumentChanged {
        /// The approved version.
        doc_version: i32,
        /// The SHA-256 the grant signed.
        signed: String,
        /// The SHA-256 of that version's source as stored now.
        stored: String,
    },
}

impl Refusal {
    /// The refusal for a failed signature check.
    pub fn from_grant_error(e: &GrantError, key_id: &str) -> Self {
        let fault = GrantFault {
            error: e.to_string(),
            key_id: key_id.to_owned(),
        };
        match e {
            GrantError::UntrustedKey(_) => Self::UntrustedKey(fault),
            GrantError::UnknownVersion(_) => Self::UnknownVersion(fault),
            GrantError::BadSignature | GrantError::BadKey(_) => Self::BadSignature(fault),
        }
    }

    /// The state the proposal moves to.
    pub fn state(&self) -> ProposalState {
        match self {
            Self::Expired { .. } => ProposalState::Expired,
            Self::MissingGrant
            | Self::UntrustedKey(_)
            | Self::UnknownVersion(_)
            | Self::BadSignature(_)
            | Self::IntentMismatch { .. }
            | Self::VersionMismatch { .. }
            | Self::NoDocument
            | Self::PolicyChanged { .. }
            | Self::ApprovedVersionMissing
            | Self::NoHandler { .. }
            | Self::Replayed { .. }
            | Self::AgentFrozen
            | Self::AgentRevoked
            | Self::DocumentChanged { .. }
            | Self::ExpiresTooFar { .. } => ProposalState::Blocked,
        }
    }

    /// The reason the agent reads (no internal detail).
    pub fn agent_text(&self) -> String {
        match self {
            Self::MissingGrant => "no grant exists for this proposal".into(),
            Self::UntrustedKey(_)
            | Self::UnknownVersion(_)
            | Self::BadSignature(_)
            | Self::ExpiresTooFar { .. } => "the grant for this proposal was refused".into(),
            Self::IntentMismatch { .. } | Self::VersionMismatch { .. } => {
                "grant does not match this proposal".into()
            }
            Self::NoDocument | Self::PolicyChanged { .. } => "policy changed since approval".into(),
            Self::ApprovedVersionMissing => "the approved policy version is missing".into(),
            Self::NoHandler { action } => format!("no handler for {action}"),
            Self::Replayed { .. } => "this approval was already used; nothing ran".into(),
            Self::Expired { .. } => {
                "the approval expired before an executor ran it; propose again".into()
            }
            Self::AgentFrozen => {
                "its agent was frozen after the approval: an approver stopped it, so nothing ran"
                    .into()
            }
            Self::AgentRevoked => {
                "its agent was revoked after the approval: an operator stopped it, so nothing ran"
                    .into()
            }
            Self::DocumentChanged { .. } => {
                "the approved policy document was changed after the approval; nothing ran".into()
            }
        }
    }

    /// The `reason` label of `grants_rejected_total` (one of [`METRIC_LABELS`]).
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::MissingGrant | Self::ApprovedVersionMissing | Self::NoHandler { .. } => "missing",
            Self::UntrustedKey(_) => "untrusted_key",
            Self::UnknownVersion(_) => "unknown_version",
            Self::BadSignature(_) => "bad_signature",
            Self::IntentMismatch { .. } | Self::VersionMismatch { .. } => "intent_mismatch",
            Self::NoDocument | Self::PolicyChanged { .. } => "policy_changed",
            Self::Replayed { .. } => "replayed",
            Self::Expired { .. } => "expired",
            Self::AgentFrozen => "agent_frozen",
            Self::AgentRevoked => "agent_revoked",
            Self::DocumentChanged { .. } => "document_changed",
            Self::ExpiresTooFar { .. } => "expiry_too_far",
        }
    }

    /// The kind of the audit event that records it.
    pub fn audit_kind(&self) -> AuditKind {
        match self {
            Self::NoDocument | Self::PolicyChanged { .. } => {
                AuditKind::ProposalBlockedPolicyChanged
            }
            Self::MissingGrant
            | Self::UntrustedKey(_)
            | Self::UnknownVersion(_)
            | Self::BadSignature(_)
            | Self::IntentMismatch { .. }
            | Self::VersionMismatch { .. }
            | Self::ApprovedVersionMissing
            | Self::NoHandler { .. }
            | Self::Replayed { .. }
            | Self::Expired { .. }
            | Self::AgentFrozen
            | Self::AgentRevoked
            | Self::DocumentChanged { .. }
            | Self::ExpiresTooFar { .. } => AuditKind::GrantRejected,
        }
    }

    /// The audit event's detail: `{"reason": <metric label>, "detail": <internal cause>}`, plus
    /// `"agent_frozen": true` at the top level for [`Self::AgentFrozen`] and `"agent_revoked":
    /// true` for [`Self::AgentRevoked`].
    pub fn audit_detail(&self) -> Value {
        let detail = match self {
            Self::MissingGrant | Self::ApprovedVersionMissing | Self::NoHandler { .. } => {
                json!({})
            }
            Self::UntrustedKey(f) | Self::UnknownVersion(f) | Self::BadSignature(f) => {
                json!({"error": f.error, "key_id": f.key_id})
            }
            Self::IntentMismatch {
                grant_intent,
                recomputed,
                stored,
            } => json!({"grant_intent": grant_intent, "recomputed": recomputed, "stored": stored}),
            Self::VersionMismatch { signed, decided } => {
                json!({"grant_doc_version": signed, "decided_doc_version": decided})
            }
            Self::NoDocument => json!({"error": "no document"}),
            Self::PolicyChanged {
                effect_now,
                rule,
                doc_version,
                grant_kind,
            } => {
                json!({"effect_now": effect_now, "rule": rule, "doc_version": doc_version, "grant_kind": grant_kind})
            }
            Self::Replayed { grant_id, used_by } => {
                json!({"grant_id": grant_id, "used_by": used_by})
            }
            Self::Expired { grant_id } => json!({"grant_id": grant_id}),
            Self::AgentFrozen => json!({"agent_frozen": true}),
            Self::AgentRevoked => json!({"agent_revoked": true}),
            Self::DocumentChanged {
                doc_version,
                signed,
                stored,
            } => {
                json!({"doc_version": doc_version, "signed_doc_sha256": signed, "stored_doc_sha256": stored})
            }
            Self::ExpiresTooFar {
                grant_id,
                expires_at_us,
            } => json!({"grant_id": grant_id, "expires_at_us": expires_at_us}),
        };
        let mut out = json!({"reason": self.metric_label(), "detail": detail});
        if matches!(self, Self::AgentFrozen) {
            // Top level too, like the freeze's denials and policy's `agent-frozen` block, so
            // `detail->>'agent_frozen' = 'true'` finds every proposal a freeze stopped.
            out["agent_frozen"] = json!(true);
        }
        if matches!(self, Self::AgentRevoked) {
            // Likewise `detail->>'agent_revoked' = 'true'` for a revocation.
            out["agent_revoked"] = json!(true);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_expired_grant_ends_expired_and_only_policy_changes_use_their_kind() {
        let fault = GrantFault {
            error: "e".into(),
            key_id: "k".into(),
        };
        let all = [
            Refusal::MissingGrant,
            Refusal::UntrustedKey(fault.clone()),
            Refusal::UnknownVersion(fault.clone()),
            Refusal::BadSignature(fault),
            Refusal::IntentMismatch {
                grant_intent: "a".into(),
                recomputed: "b".into(),
                stored: "c".into(),
            },
            Refusal::VersionMismatch {
                signed: 2,
                decided: Some(1),
            },
            Refusal::NoDocument,
            Refusal::PolicyChanged {
                effect_now: "block",
                rule: None,
                doc_version: 2,
                grant_kind: "policy",
            },
            Refusal::ApprovedVersionMissing,
            Refusal::NoHandler {
                action: "x.y".into(),
            },
            Refusal::Replayed {
                grant_id: Uuid::nil(),
                used_by: None,
            },
            Refusal::Expired {
                grant_id: Uuid::nil(),
            },
            Refusal::AgentFrozen,
            Refusal::AgentRevoked,
            Refusal::DocumentChanged {
                doc_version: 2,
                signed: "a".repeat(64),
                stored: "b".repeat(64),
            },
            Refusal::ExpiresTooFar {
                grant_id: Uuid::nil(),
                expires_at_us: i64::MAX,
            },
        ];
        for r in &all {
            let expired = matches!(r, Refusal::Expired { .. });
            assert_eq!(r.state() == ProposalState::Expired, expired);
            assert!(ProposalState::Approved.can_become(r.state()));
            let changed = r.metric_label() == "policy_changed";
            assert_eq!(
                r.audit_kind() == AuditKind::ProposalBlockedPolicyChanged,
                changed
            );
            assert_eq!(r.audit_detail()["reason"], r.metric_label());
            assert!(!r.agent_text().is_empty());
            // Pre-created at 0, so a rate over it never starts at "No data".
            assert!(METRIC_LABELS.contains(&r.metric_label()), "{r:?}");
        }
        // And no pre-created label that no refusal uses.
        for l in METRIC_LABELS {
            assert!(all.iter().any(|r| r.metric_label() == l), "{l}");
        }
    }
}
