//! The preview a grant is bound to (issue 34, point 2) and the warnings it carries (point 4).
//!
//! The executor reads the provider, read-only, for each escalated proposal; what it read is
//! stored as one canonical document ([`PreviewDoc`], RFC 8785 JSON) with its SHA-256. A person
//! approving the proposal approves that document too: the grant signs its hash
//! (`GrantClaims::preview_sha256`). Before running, the executor reads the provider again with
//! the same handler code and compares the handler's *binding* fields ([`changed`]): when one
//! differs, the handler does not run and the proposal ends `stale`.
//!
//! Which fields bind is the handler's choice, made in the value it returns as `binding`: a
//! refund binds the amount already refunded (and the payment's amount and currency), DNS the
//! RRset PowerDNS holds now, a statement the affected rows' key columns and their count. The
//! lines (`text`) and warnings are for people; they never bind (a changed wording is not a
//! changed world).

use crate::canonical::{CanonicalError, canonicalize, sha256_hex};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

/// The stored preview document; its canonical JSON is what is hashed and signed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PreviewDoc {
    /// The proposal's action (`billing.refund.issue`, …).
    pub action: String,
    /// The proposal previewed.
    pub proposal_id: Uuid,
    /// When the provider was read: microseconds since the Unix epoch, database clock.
    pub read_at_us: i64,
    /// The lines shown to approvers ("Payment pi_1: 120.00 EUR paid, …").
    pub text: String,
    /// The handler's binding fields: an object whose members are compared one by one before
    /// the run ([`changed`]). `{}` when the handler binds nothing.
    pub binding: Value,
    /// Warnings for the card and the queue, in plain words ("this refund is larger than what
    /// is left to refund: 30.00 EUR").
    pub warnings: Vec<String>,
}

impl PreviewDoc {
    /// RFC 8785 canonical JSON of the document.
    ///
    /// Errors: [`CanonicalError`] when a value cannot be canonicalized (an integer beyond
    /// ±(2^53−1) in `binding`).
    pub fn canonical(&self) -> Result<String, CanonicalError> {
        canonicalize(&serde_json::to_value(self).unwrap_or(Value::Null))
    }
}

/// Lowercase hex SHA-256 of a stored canonical preview: the value a grant signs.
pub fn hash(canonical: &str) -> String {
    sha256_hex(canonical)
}

/// One binding field whose value differs between the approved preview and the read before
/// the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// The member of `binding` (e.g. `amount_refunded`, `rrset`, `rows`).
    pub field: String,
    /// Its value in the approved preview (`null` when absent).
    pub before: Value,
    /// Its value now (`null` when absent).
    pub now: Value,
}

/// The binding fields that differ between `approved` and `now`, by member name, sorted.
/// A binding that is not an object is compared whole, as the field `binding`.
pub fn changed(approved: &Value, now: &Value) -> Vec<Change> {
    match (approved.as_object(), now.as_object()) {
        (Some(a), Some(n)) => {
            let mut names: Vec<&String> = a.keys().chain(n.keys()).collect();
            names.sort();
            names.dedup();
            names
                .into_iter()
                .filter_map(|k| {
                    let (before, now) = (
                        a.get(k).cloned().unwrap_or(Value::Null),
                        n.get(k).cloned().unwrap_or(Value::Null),
                    );
                    (before != now).then(|| Change {
                        field: k.clone(),
                        before,
                        now,
                    })
                })
                .collect()
        }
        _ if approved == now => Vec::new(),
        _ => vec![Change {
            field: "binding".into(),
            before: approved.clone(),
            now: now.clone(),
        }],
    }
}

/// What the agent is told about a `stale` proposal (REST `reason`, MCP `check_proposal`): the
/// changed fields by name only (their values are provider data, kept in the audit event).
pub fn stale_reason(changes: &[Change]) -> String {
    let names: Vec<&str> = changes.iter().map(|c| c.field.as_str()).collect();
    format!(
        "not performed: what the provider holds changed after the approver's preview ({}); propose again if it is still wanted",
        names.join(", ")
    )
}

/// What the agent and the approvers are told when a run found the provider changed and its
/// handler's `on_stale: reapprove` sent it back to the approvers (`decision_reason` of the
/// escalated proposal): the changed fields by name only.
pub fn reescalated_reason(changes: &[Change]) -> String {
    let names: Vec<&str> = changes.iter().map(|c| c.field.as_str()).collect();
    format!(
        "not performed yet: what the provider holds changed after the approved preview ({}); it went back to the approvers with a fresh preview, and the earlier approvals no longer count",
        names.join(", ")
    )
}

/// The card's and the history's words for a `stale` proposal (docs/ARCHITECTURE.md uses the
/// same).
pub const STALE_CARD: &str =
    "Not performed: what the provider holds changed after the approver's preview (stale).";

/// What the agent is told when the preview the grant names could not be checked (missing,
/// altered, or the provider could not be read before the run).
pub const UNCHECKED_REASON: &str = "not performed: the provider could not be read again before the run to confirm it still matches the approver's preview; propose again if it is still wanted";

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(binding: Value) -> PreviewDoc {
        PreviewDoc {
            action: "billing.refund.issue".into(),
            proposal_id: Uuid::nil(),
            read_at_us: 1_800_000_000_000_000,
            text: "Payment pi_1".into(),
            binding,
            warnings: vec![],
        }
    }

    #[test]
    fn the_document_is_canonical_and_its_hash_covers_every_member() {
        let d = doc(json!({"amount_refunded": 0, "amount": 12000}));
        let c = d.canonical().unwrap();
        assert!(c.starts_with("{\"action\":\"billing.refund.issue\",\"binding\":{\"amount\":12000,\"amount_refunded\":0}"));
        let mut later = d.clone();
        later.read_at_us += 1;
        assert_ne!(hash(&c), hash(&later.canonical().unwrap()));
        assert_eq!(hash(&c).len(), 64);
    }

    #[test]
    fn changed_names_each_binding_field_that_differs() {
        let a = json!({"amount_refunded": 0, "amount": 12000, "currency": "eur"});
        assert!(changed(&a, &a.clone()).is_empty());
        let n = json!({"amount_refunded": 3000, "amount": 12000, "currency": "eur"});
        let c = changed(&a, &n);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].field, "amount_refunded");
        assert_eq!(
            (c[0].before.clone(), c[0].now.clone()),
            (json!(0), json!(3000))
        );
        // A member that appears or disappears is a change too.
        let c = changed(&json!({"rrset": ["192.0.2.1"]}), &json!({}));
        assert_eq!(c[0].now, Value::Null);
        // Not objects: compared whole.
        assert_eq!(changed(&json!(1), &json!(2))[0].field, "binding");
        assert!(stale_reason(&changed(&a, &n)).contains("(amount_refunded)"));
    }
}
