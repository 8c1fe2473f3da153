//! Tenant authorization from ID-token claims, as each tenant's *current* document says
//! (`approvers: {issuer, claim, values, subjects}`). The documents come from the store's
//! document cache ([`actiond_store::policy_cache::PolicyCache`]).

use actiond_core::tenant::TenantDocument;
use serde_json::Value;
use std::sync::Arc;

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

/// Whether (issuer, subject, claims) may approve for the tenant of `doc`: the document's
/// `approvers.issuer`, when set, must be the session's issuer; then the subject is listed in
/// `approvers.subjects`, or the claim `approvers.claim` holds one of `approvers.values`.
pub(crate) fn may_approve(
    doc: &TenantDocument,
    issuer: &str,
    subject: &str,
    claims: &Value,
) -> bool {
    let a = &doc.approvers;
    if let Some(required) = &a.issuer
        && required.trim_end_matches('/') != issuer.trim_end_matches('/')
    {
        return false;
    }
    a.subjects.iter().any(|s| s == subject) || claim_matches(claims, &a.claim, &a.values)
}

/// The tenants a person approves for, sorted.
pub(crate) fn authorized_tenants(
    docs: &[Arc<TenantDocument>],
    issuer: &str,
    subject: &str,
    claims: &Value,
) -> Vec<String> {
    let mut t: Vec<String> = docs
        .iter()
        .filter(|d| may_approve(d, issuer, subject, claims))
        .map(|d| d.tenant.as_str().to_owned())
        .collect();
    t.sort();
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(approvers: &str) -> TenantDocument {
        TenantDocument::parse(&format!(
            "tenant: acme\npolicy:\n  default: escalate\napprovers:\n{approvers}"
        ))
        .unwrap()
    }

    #[test]
    fn groups_claim_or_subject_authorizes() {
        let d = doc("  claim: groups\n  values: [acme-approvers]\n  subjects: [ops]\n");
        assert!(may_approve(
            &d,
            "https://idp",
            "x",
            &json!({"groups": ["a", "acme-approvers"]})
        ));
        assert!(may_approve(
            &d,
            "https://idp",
            "x",
            &json!({"groups": "acme-approvers"})
        ));
        assert!(may_approve(&d, "https://idp", "ops", &json!({})));
        assert!(!may_approve(
            &d,
            "https://idp",
            "x",
            &json!({"groups": ["acme-approvers-not"]})
        ));
        assert!(!may_approve(
            &d,
            "https://idp",
            "x",
            &json!({"roles": ["acme-approvers"]})
        ));
    }

    #[test]
    fn issuer_is_pinned_when_the_document_says_so() {
        let d = doc("  issuer: https://idp.example\n  values: [g]\n");
        assert!(may_approve(
            &d,
            "https://idp.example",
            "x",
            &json!({"groups": ["g"]})
        ));
        assert!(!may_approve(
            &d,
            "https://evil.example",
            "x",
            &json!({"groups": ["g"]})
        ));
        assert!(!may_approve(
            &d,
            crate::DEV_ISSUER,
            "x",
            &json!({"groups": ["g"]})
        ));
    }
}
