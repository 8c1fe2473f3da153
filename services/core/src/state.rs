//! Proposal states and the legal transitions between them (design, "Proposal states").
//! The database enforces the same table with a trigger (`sql/migrations`).

use serde::{Deserialize, Serialize};

/// Where a proposal is in its life. "allowed" is an effect, not a state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProposalState {
    /// Submitted, waiting for the policy worker.
    Pending,
    /// A person must decide.
    Escalated,
    /// A grant exists; waiting for an executor.
    Approved,
    /// Final: policy blocked it (or it changed since approval, or its grant was refused).
    Blocked,
    /// Final: a person denied it (or froze its agent while it was pending or escalated).
    Denied,
    /// Final: nobody decided in time, or the grant expired unspent.
    Expired,
    /// The grant is spent; the handler is running.
    Executing,
    /// Final: the handler reported success.
    Succeeded,
    /// Final: the handler reported failure.
    Failed,
    /// Final: the executor lost its lease after spending the grant; never re-run automatically.
    OutcomeUnknown,
    /// Final: a person approved it with an edit; the edited intent is a new proposal whose
    /// `amended_from` names this one ([`crate::amend`]).
    Amended,
    /// Final: its agent withdrew it while it was `pending` or `escalated` (MCP `tasks/cancel`);
    /// nothing was approved or performed. An approved proposal is never withdrawn.
    Withdrawn,
    /// Final: before running, the executor read the provider again with the handler's preview
    /// code and a field the approval was bound to had changed since the approver's preview
    /// (a payment refunded elsewhere, a record changed by someone else); the handler did not
    /// run. The grant was spent by that check and is never used again.
    Stale,
    /// Final: the handler ran, but what the executor read back from the provider afterwards is
    /// not what was approved (a refund in another amount or status, a DNS name that does not
    /// serve the approved records). Like `outcome_unknown`, never re-run: a person looks.
    EffectMismatch,
}

impl ProposalState {
    /// Every state, in lifecycle order.
    pub const ALL: [ProposalState; 14] = [
        Self::Pending,
        Self::Escalated,
        Self::Approved,
        Self::Blocked,
        Self::Denied,
        Self::Expired,
        Self::Executing,
        Self::Succeeded,
        Self::Failed,
        Self::OutcomeUnknown,
        Self::Amended,
        Self::Withdrawn,
        Self::Stale,
        Self::EffectMismatch,
    ];

    /// The snake_case name stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Escalated => "escalated",
            Self::Approved => "approved",
            Self::Blocked => "blocked",
            Self::Denied => "denied",
            Self::Expired => "expired",
            Self::Executing => "executing",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::OutcomeUnknown => "outcome_unknown",
            Self::Amended => "amended",
            Self::Withdrawn => "withdrawn",
            Self::Stale => "stale",
            Self::EffectMismatch => "effect_mismatch",
        }
    }

    /// Parses a stored name; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// True when no further transition is possible.
    pub fn is_final(self) -> bool {
        Self::ALL.iter().all(|to| !self.can_become(*to))
    }

    /// True when an agent following the proposal has its answer: a final state, or
    /// `outcome_unknown` (no step of the lifecycle runs it again; only a read-back of the
    /// provider may still settle it, so a waiting agent is told now, not when that happens).
    pub fn is_answered(self) -> bool {
        self.is_final() || self == Self::OutcomeUnknown
    }

    /// The transition table (the lifecycle in docs/ARCHITECTURE.md). `pending → denied` happens only
    /// when a person freezes or revokes the proposal's agent (the database checks that the agent
    /// is frozen or revoked);
    /// `escalated → amended` only when a person approves it with an edit (the database checks
    /// that the proposal amending it exists).
    /// `→ withdrawn` only when the proposal's own agent withdraws it before it is approved
    /// (partial approvals, of N of M or of a stage, do not stop it);
    /// `executing → stale` only when the executor's pre-run read of the provider differs from
    /// the preview the grant is bound to; `executing → escalated` in the same case when the
    /// handler's entry says `on_stale: reapprove` (the database checks that the grant is void,
    /// the approvals' round moved and a fresh preview was read).
    /// `outcome_unknown → succeeded | failed | effect_mismatch` only when the executor's sweep
    /// read the provider back under the spent grant ([`crate::effect`]): never by a second run.
    pub fn can_become(self, to: ProposalState) -> bool {
        use ProposalState::*;
        matches!(
            (self, to),
            (
                Pending,
                Approved | Escalated | Blocked | Expired | Denied | Withdrawn
            ) | (Escalated, Approved | Denied | Expired | Amended | Withdrawn)
                | (Approved, Executing | Blocked | Expired)
                | (
                    Executing,
                    Succeeded | Failed | OutcomeUnknown | Stale | EffectMismatch | Escalated
                )
                | (OutcomeUnknown, Succeeded | Failed | EffectMismatch)
        )
    }
}

impl std::str::FromStr for ProposalState {
    type Err = crate::UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s).ok_or_else(|| crate::UnknownName::new("proposal state", s))
    }
}

impl PartialEq<&str> for ProposalState {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl std::fmt::Display for ProposalState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn transitions() {
        use ProposalState::*;
        assert!(Escalated.can_become(Approved));
        assert!(!Pending.can_become(Succeeded));
        assert!(!Denied.can_become(Approved));
        assert!(Escalated.can_become(Amended));
        assert!(!Pending.can_become(Amended) && !Approved.can_become(Amended));
        assert!(Executing.can_become(Stale) && !Approved.can_become(Stale));
        assert!(Executing.can_become(Escalated) && !Approved.can_become(Escalated));
        for s in [
            Blocked,
            Denied,
            Expired,
            Succeeded,
            Failed,
            Amended,
            Withdrawn,
            Stale,
            EffectMismatch,
        ] {
            assert!(s.is_final());
        }
        // Settled by reading the provider back, never re-run.
        assert!(!OutcomeUnknown.is_final());
        assert!(OutcomeUnknown.can_become(Succeeded) && OutcomeUnknown.can_become(Failed));
        assert!(!OutcomeUnknown.can_become(Executing) && !OutcomeUnknown.can_become(Approved));
        assert!(Executing.can_become(EffectMismatch));
        // An agent withdraws only what nobody approved yet.
        assert!(Pending.can_become(Withdrawn) && Escalated.can_become(Withdrawn));
        for s in [Approved, Executing, Succeeded, Blocked, Denied, Expired] {
            assert!(!s.can_become(Withdrawn), "{s}");
        }
        for s in ProposalState::ALL {
            assert_eq!(ProposalState::parse(s.as_str()), Some(s));
        }
    }
}
