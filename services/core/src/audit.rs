//! Kinds of audit event. Every state change writes one event of one of these kinds in the same
//! transaction; the stored name is the dotted `as_str` form.

use serde::{Deserialize, Serialize};

/// What an audit event records. The stored names are stable: queries and dashboards read them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AuditKind {
    /// An agent submitted a proposal (`→ pending`).
    #[serde(rename = "proposal.submitted")]
    ProposalSubmitted,
    /// The policy worker decided a proposal (`pending → approved | escalated | blocked`).
    #[serde(rename = "proposal.decided")]
    ProposalDecided,
    /// Nobody decided before the tenant's `escalation_ttl` (`→ expired`).
    #[serde(rename = "proposal.expired")]
    ProposalExpired,
    /// One approval was recorded and the state did not change: more people must approve, or
    /// it completed a stage that is not the last (`detail.passkey` holds its passkey evidence).
    #[serde(rename = "approval.recorded")]
    ApprovalRecorded,
    /// A person decided through the approval web app.
    #[serde(rename = "approval.decided")]
    ApprovalDecided,
    /// An operator decided with the break-glass CLI.
    #[serde(rename = "approval.breakglass")]
    ApprovalBreakglass,
    /// A person's approve or deny was refused (`detail.rule` names the rule); when the refusal
    /// is the escalation TTL, the proposal moves `escalated → expired` with this event.
    #[serde(rename = "approval.refused")]
    ApprovalRefused,
    /// An executor spent the grant (`approved → executing`).
    #[serde(rename = "grant.spent")]
    GrantSpent,
    /// An executor refused the grant (missing, bad signature, replay, mismatch, expiry).
    #[serde(rename = "grant.rejected")]
    GrantRejected,
    /// The grant expired unspent (`approved → expired`, by the sweeper).
    #[serde(rename = "grant.expired")]
    GrantExpired,
    /// The tenant's current policy no longer permits an approved proposal (`→ blocked`).
    #[serde(rename = "proposal.blocked_policy_changed")]
    ProposalBlockedPolicyChanged,
    /// The handler returned (`executing → succeeded | failed | outcome_unknown`).
    #[serde(rename = "proposal.executed")]
    ProposalExecuted,
    /// The executor's lease ran out after the spend (`executing → outcome_unknown`).
    #[serde(rename = "proposal.outcome_unknown")]
    ProposalOutcomeUnknown,
    /// What the executor read back from the provider after a run, with no transition (or,
    /// settling an `outcome_unknown`, `outcome_unknown → succeeded | failed |
    /// effect_mismatch`): `detail` holds the verdict, the `after` text and the provider's
    /// evidence ([`crate::effect::EffectRecord`]).
    #[serde(rename = "proposal.effect")]
    ProposalEffect,
    /// A person approved an escalated proposal with an edit (`escalated → amended`);
    /// `detail` names the new proposal (`amended_to`) and the field-by-field `diff`.
    #[serde(rename = "proposal.amended")]
    ProposalAmended,
    /// The proposal's agent withdrew it before it was approved (`pending | escalated → withdrawn`;
    /// the actor is `agent:<id>`, `detail.via` says how, e.g. `mcp tasks/cancel`).
    #[serde(rename = "proposal.withdrawn")]
    ProposalWithdrawn,
    /// Before running, the executor's read of the provider differed from the preview the grant
    /// is bound to (`executing → stale`); `detail` names the changed binding fields, with the
    /// hash of the approved preview and the values read before and now. The handler did not run.
    #[serde(rename = "proposal.stale")]
    ProposalStale,
    /// The same, for a handler with `on_stale: reapprove` (`executing → escalated`): the handler
    /// did not run, its grant (spent by that run) is void, its approvals are void, and a fresh
    /// preview was stored; `detail` as for `proposal.stale`, with the fresh preview's hash.
    #[serde(rename = "proposal.reescalated")]
    ProposalReescalated,
    /// An agent was registered.
    #[serde(rename = "agent.created")]
    AgentCreated,
    /// An agent's token was revoked.
    #[serde(rename = "agent.revoked")]
    AgentRevoked,
    /// An approver froze an agent: its open escalations are denied, new proposals refused.
    #[serde(rename = "agent.frozen")]
    AgentFrozen,
    /// The agent's owner or a tenant admin unfroze it.
    #[serde(rename = "agent.unfrozen")]
    AgentUnfrozen,
    /// A new tenant document version was applied.
    #[serde(rename = "tenant.document_applied")]
    TenantDocumentApplied,
    /// A retention purge cleared the params, texts and reasons of decided proposals (one event
    /// per batch, `detail.proposals` = how many).
    #[serde(rename = "retention.purged")]
    RetentionPurged,
    /// A candidate (shadow) tenant document was stored for evaluation beside the live one.
    #[serde(rename = "tenant.shadow_stored")]
    TenantShadowStored,
    /// A shadow document was promoted: applied as the tenant's next version.
    #[serde(rename = "tenant.shadow_promoted")]
    TenantShadowPromoted,
    /// A stage of a staged approval opened (`detail`: stage, of, approvers, required, due_at).
    #[serde(rename = "approval.stage_opened")]
    ApprovalStageOpened,
    /// A stage got the approvals it needed (`detail`: stage, of, approvers, subjects).
    #[serde(rename = "approval.stage_completed")]
    ApprovalStageCompleted,
    /// A stage's `within` passed before it completed (`detail.then`: `rerouted` to the next
    /// stage, or `expired`).
    #[serde(rename = "approval.stage_timed_out")]
    ApprovalStageTimedOut,
    /// An approver registered a passkey for a tenant (credential id and algorithm in detail).
    #[serde(rename = "passkey.registered")]
    PasskeyRegistered,
    /// A passkey registration was refused (`detail.reason` names the field and the rule; no
    /// passkey was stored).
    #[serde(rename = "passkey.registration_refused")]
    PasskeyRegistrationRefused,
    /// `actiond tenant export` froze the tenant on this cluster for a move to another cell
    /// (`detail.moved_to`): nothing of it moves forward here from now on.
    #[serde(rename = "tenant.move_frozen")]
    TenantMoveFrozen,
    /// `actiond tenant export` wrote the tenant's file (`detail.data_sha256`: SHA-256 of the
    /// file's data lines, `detail.rows`: how many, `detail.moved_to`). Sealed, so the import
    /// checks the file's data against the chain.
    #[serde(rename = "tenant.exported")]
    TenantExported,
    /// `actiond tenant import` loaded the tenant from another cell's file (`detail.from_head`:
    /// the imported chain's head, `detail.data_sha256`).
    #[serde(rename = "tenant.imported")]
    TenantImported,
}

impl AuditKind {
    /// Every kind.
    pub const ALL: [AuditKind; 34] = [
        Self::ProposalSubmitted,
        Self::ProposalDecided,
        Self::ProposalExpired,
        Self::ApprovalRecorded,
        Self::ApprovalDecided,
        Self::ApprovalBreakglass,
        Self::ApprovalRefused,
        Self::GrantSpent,
        Self::GrantRejected,
        Self::GrantExpired,
        Self::ProposalBlockedPolicyChanged,
        Self::ProposalExecuted,
        Self::ProposalOutcomeUnknown,
        Self::ProposalEffect,
        Self::ProposalAmended,
        Self::ProposalWithdrawn,
        Self::ProposalStale,
        Self::ProposalReescalated,
        Self::AgentCreated,
        Self::AgentRevoked,
        Self::AgentFrozen,
        Self::AgentUnfrozen,
        Self::TenantDocumentApplied,
        Self::RetentionPurged,
        Self::TenantShadowStored,
        Self::TenantShadowPromoted,
        Self::ApprovalStageOpened,
        Self::ApprovalStageCompleted,
        Self::ApprovalStageTimedOut,
        Self::PasskeyRegistered,
        Self::PasskeyRegistrationRefused,
        Self::TenantMoveFrozen,
        Self::TenantExported,
        Self::TenantImported,
    ];

    /// The stored (dotted) name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ProposalSubmitted => "proposal.submitted",
            Self::ProposalDecided => "proposal.decided",
            Self::ProposalExpired => "proposal.expired",
            Self::ApprovalRecorded => "approval.recorded",
            Self::ApprovalDecided => "approval.decided",
            Self::ApprovalBreakglass => "approval.breakglass",
            Self::ApprovalRefused => "approval.refused",
            Self::GrantSpent => "grant.spent",
            Self::GrantRejected => "grant.rejected",
            Self::GrantExpired => "grant.expired",
            Self::ProposalBlockedPolicyChanged => "proposal.blocked_policy_changed",
            Self::ProposalExecuted => "proposal.executed",
            Self::ProposalOutcomeUnknown => "proposal.outcome_unknown",
            Self::ProposalEffect => "proposal.effect",
            Self::ProposalAmended => "proposal.amended",
            Self::ProposalWithdrawn => "proposal.withdrawn",
            Self::ProposalStale => "proposal.stale",
            Self::ProposalReescalated => "proposal.reescalated",
            Self::AgentCreated => "agent.created",
            Self::AgentRevoked => "agent.revoked",
            Self::AgentFrozen => "agent.frozen",
            Self::AgentUnfrozen => "agent.unfrozen",
            Self::TenantDocumentApplied => "tenant.document_applied",
            Self::RetentionPurged => "retention.purged",
            Self::TenantShadowStored => "tenant.shadow_stored",
            Self::TenantShadowPromoted => "tenant.shadow_promoted",
            Self::ApprovalStageOpened => "approval.stage_opened",
            Self::ApprovalStageCompleted => "approval.stage_completed",
            Self::ApprovalStageTimedOut => "approval.stage_timed_out",
            Self::PasskeyRegistered => "passkey.registered",
            Self::PasskeyRegistrationRefused => "passkey.registration_refused",
            Self::TenantMoveFrozen => "tenant.move_frozen",
            Self::TenantExported => "tenant.exported",
            Self::TenantImported => "tenant.imported",
        }
    }
}

impl std::fmt::Display for AuditKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for AuditKind {
    type Err = crate::UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| crate::UnknownName::new("audit kind", s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_match_serde() {
        for k in AuditKind::ALL {
            assert_eq!(k.as_str().parse::<AuditKind>().unwrap(), k);
            assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
        }
        assert!("proposal.nope".parse::<AuditKind>().is_err());
    }
}
