//! The rules for decisions by people, as pure functions (the store applies them inside the
//! decision's transaction with the proposal row locked; the web app and the break-glass CLI use
//! the same ones to decide who may decide):
//! - who may decide: the document's `approvers` (issuer pin, subjects, claim values);
//! - what they decide on: the intent hash they were shown (a prefix of at least 8 hex
//!   characters) and, where shown, the document version — anything else is stale;
//! - no self-approval: the agent's recorded owner never approves its proposals;
//! - how many people: `approvals_required: N` distinct approvers; break-glass supplies at most
//!   one of them (its `--as` subject is self-asserted).

use crate::tenant::Approvers;
use serde_json::Value;

/// Approve or deny.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Approve.
    Approve,
    /// Deny (final).
    Deny,
}

impl Verdict {
    /// The stored name (`approve` / `deny`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approve => "approve",
            Self::Deny => "deny",
        }
    }
}

/// Why a person's decision is refused. The texts are safe to show to that person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ApprovalRefusal {
    /// The shown intent hash is missing or not at least 8 hex characters.
    #[error("the intent hash shown must be given (at least 8 hex characters)")]
    ShownIntentMissing,
    /// The shown intent hash is not a prefix of the proposal's.
    #[error("the proposal shown is not this proposal's current intent; reload it and decide again")]
    StaleIntent,
    /// The shown document version is not the one that escalated the proposal.
    #[error("the policy version shown is not the one that escalated it; reload")]
    StaleDocVersion,
    /// The approver owns the proposing agent.
    #[error("you own the agent that proposed this; someone else must approve it")]
    SelfApproval,
    /// The proposal records no document version (policy never decided it).
    #[error("proposal has no policy version")]
    NoDocVersion,
    /// Break-glass already supplied an approval of this proposal.
    #[error(
        "break-glass can supply only one approval per proposal; the others must come from the approval web app"
    )]
    BreakGlassLimit,
}

/// True when `claims[claim]` (a string or a list of strings) holds one of `values`.
fn claim_matches(claims: &Value, claim: &str, values: &[String]) -> bool {
    match claims.get(claim) {
        Some(Value::String(s)) => values.iter().any(|v| v == s),
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .any(|s| values.iter().any(|v| v == s)),
        _ => false,
    }
}

/// Whether a person signed in with OIDC (`issuer`, `subject`, ID-token `claims`) may decide
/// for a tenant with these `approvers`: `approvers.issuer`, when set, must equal the issuer
/// (ignoring a trailing `/`); then the subject is in `approvers.subjects`, or the claim
/// `approvers.claim` holds one of `approvers.values`.
pub fn may_decide(approvers: &Approvers, issuer: &str, subject: &str, claims: &Value) -> bool {
    if let Some(required) = &approvers.issuer
        && required.trim_end_matches('/') != issuer.trim_end_matches('/')
    {
        return false;
    }
    may_decide_by_subject(approvers, subject)
        || claim_matches(claims, &approvers.claim, &approvers.values)
}

/// Whether `subject` is listed in `approvers.subjects` (the break-glass CLI sees no ID token,
/// so only the subject list applies there).
pub fn may_decide_by_subject(approvers: &Approvers, subject: &str) -> bool {
    approvers.subjects.iter().any(|s| s == subject)
}

/// Normalizes the intent hash a person was shown: trimmed, lowercase, at least 8 hex
/// characters.
pub fn shown_intent(shown: &str) -> Result<String, ApprovalRefusal> {
    let s = shown.trim().to_ascii_lowercase();
    if s.len() < 8 || !s.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(ApprovalRefusal::ShownIntentMissing);
    }
    Ok(s)
}

/// Checks that what the person saw is what they decide on: `shown_intent` (normalized by
/// [`shown_intent`]) is a prefix of `intent_hash`, and `shown_doc_version`, when the channel
/// shows one, is `doc_version`.
pub fn check_shown(
    intent_hash: &str,
    doc_version: Option<i32>,
    shown_intent: &str,
    shown_doc_version: Option<i32>,
) -> Result<(), ApprovalRefusal> {
    if !intent_hash.starts_with(shown_intent) {
        return Err(ApprovalRefusal::StaleIntent);
    }
    match shown_doc_version {
        Some(v) if Some(v) != doc_version => Err(ApprovalRefusal::StaleDocVersion),
        _ => Ok(()),
    }
}

/// The agent's recorded owner can never approve its proposals (they may deny them).
pub fn check_not_owner(
    owner: Option<&str>,
    subject: &str,
    verdict: Verdict,
) -> Result<(), ApprovalRefusal> {
    if verdict == Verdict::Approve && owner == Some(subject) {
        return Err(ApprovalRefusal::SelfApproval);
    }
    Ok(())
}

/// Break-glass supplies at most one approval per proposal: `prior_breakglass_approvals` is
/// how many it already supplied.
pub fn check_breakglass(
    breakglass: bool,
    verdict: Verdict,
    prior_breakglass_approvals: i64,
) -> Result<(), ApprovalRefusal> {
    if breakglass && verdict == Verdict::Approve && prior_breakglass_approvals > 0 {
        return Err(ApprovalRefusal::BreakGlassLimit);
    }
    Ok(())
}

/// Where the approvals of a proposal stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tally {
    /// Enough distinct people approved: issue the grant.
    Complete,
    /// More distinct approvers are needed.
    NeedsMore {
        /// Approvals so far.
        have: i64,
        /// Approvals required.
        need: i64,
    },
}

/// The tally after `have` distinct approvals (one per issuer and subject) of a handler that
/// requires `required` (`approvals_required`).
pub fn tally(have: i64, required: u32) -> Tally {
    let need = i64::from(required);
    if have < need {
        Tally::NeedsMore { have, need }
    } else {
        Tally::Complete
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn approvers(issuer: Option<&str>) -> Approvers {
        Approvers {
            issuer: issuer.map(str::to_owned),
            claim: "groups".into(),
            values: vec!["acme-approvers".into()],
            subjects: vec!["ops".into()],
            admins: Vec::new(),
        }
    }

    #[test]
    fn subject_or_claim_value_may_decide_under_the_pinned_issuer() {
        let a = approvers(None);
        assert!(may_decide(&a, "https://idp", "ops", &json!({})));
        assert!(may_decide(
            &a,
            "https://idp",
            "x",
            &json!({"groups": ["acme-approvers"]})
        ));
        assert!(may_decide(
            &a,
            "https://idp",
            "x",
            &json!({"groups": "acme-approvers"})
        ));
        assert!(!may_decide(
            &a,
            "https://idp",
            "x",
            &json!({"groups": ["other"]})
        ));
        let pinned = approvers(Some("https://idp/"));
        assert!(may_decide(&pinned, "https://idp", "ops", &json!({})));
        assert!(!may_decide(&pinned, "https://evil", "ops", &json!({})));
        assert!(may_decide_by_subject(&a, "ops"));
        assert!(!may_decide_by_subject(&a, "acme-approvers"));
    }

    #[test]
    fn the_shown_intent_must_be_a_long_enough_prefix() {
        assert_eq!(shown_intent(" ABCDEF12 ").unwrap(), "abcdef12");
        assert_eq!(
            shown_intent("abcdef1"),
            Err(ApprovalRefusal::ShownIntentMissing)
        );
        assert_eq!(
            shown_intent("abcdefgh"),
            Err(ApprovalRefusal::ShownIntentMissing)
        );
        assert_eq!(check_shown("abcdef1234", Some(2), "abcdef12", None), Ok(()));
        assert_eq!(
            check_shown("abcdef1234", Some(2), "abcdef12", Some(2)),
            Ok(())
        );
        assert_eq!(
            check_shown("abcdef1234", Some(2), "abcdef13", None),
            Err(ApprovalRefusal::StaleIntent)
        );
        assert_eq!(
            check_shown("abcdef1234", Some(3), "abcdef12", Some(2)),
            Err(ApprovalRefusal::StaleDocVersion)
        );
    }

    #[test]
    fn the_owner_may_deny_but_never_approve() {
        assert_eq!(
            check_not_owner(Some("alice"), "alice", Verdict::Approve),
            Err(ApprovalRefusal::SelfApproval)
        );
        assert_eq!(
            check_not_owner(Some("alice"), "alice", Verdict::Deny),
            Ok(())
        );
        assert_eq!(
            check_not_owner(Some("alice"), "bob", Verdict::Approve),
            Ok(())
        );
        assert_eq!(check_not_owner(None, "bob", Verdict::Approve), Ok(()));
    }

    #[test]
    fn break_glass_supplies_at_most_one_approval() {
        assert_eq!(check_breakglass(true, Verdict::Approve, 0), Ok(()));
        assert_eq!(
            check_breakglass(true, Verdict::Approve, 1),
            Err(ApprovalRefusal::BreakGlassLimit)
        );
        assert_eq!(check_breakglass(true, Verdict::Deny, 1), Ok(()));
        assert_eq!(check_breakglass(false, Verdict::Approve, 3), Ok(()));
    }

    #[test]
    fn n_distinct_approvals_complete_the_tally() {
        assert_eq!(tally(1, 2), Tally::NeedsMore { have: 1, need: 2 });
        assert_eq!(tally(2, 2), Tally::Complete);
        assert_eq!(tally(1, 1), Tally::Complete);
    }
}
