//! Tenant authorization from ID-token claims, as each tenant's *current* document says
//! (`approvers: {issuer, claim, values, subjects}`). The documents come from the store's
//! document cache ([`actiond_store::policy_cache::PolicyCache`]).

use actiond_core::tenant::TenantDocument;
use serde_json::Value;
use std::sync::Arc;

/// Whether (issuer, subject, claims) may approve for the tenant of `doc`: the one rule in
/// [`actiond_core::approval::may_decide`], applied to the document's `approvers` section, with
/// this deployment's issuer (`deployment_issuer`) as the pin when the document sets none.
pub(crate) fn may_approve(
    doc: &TenantDocument,
    deployment_issuer: &str,
    issuer: &str,
    subject: &str,
    claims: &Value,
) -> bool {
    actiond_core::approval::may_decide(&doc.approvers, deployment_issuer, issuer, subject, claims)
}

/// The tenants a person approves for, sorted.
pub(crate) fn authorized_tenants(
    docs: &[Arc<TenantDocument>],
    deployment_issuer: &str,
    issuer: &str,
    subject: &str,
    claims: &Value,
) -> Vec<String> {
    let mut t: Vec<String> = docs
        .iter()
        .filter(|d| may_approve(d, deployment_issuer, issuer, subject, claims))
        .map(|d| d.tenant.as_str().to_owned())
        .collect();
    t.sort();
    t
}

/// The tenants a person administers (`admins:` of each current document, identified like
/// approvers), sorted.
pub(crate) fn admin_tenants(
    docs: &[Arc<TenantDocument>],
    deployment_issuer: &str,
    issuer: &str,
    subject: &str,
    claims: &Value,
) -> Vec<String> {
    let mut t: Vec<String> = docs
        .iter()
        .filter(|d| {
            d.admins
                .includes(&d.approvers, deployment_issuer, issuer, subject, claims)
        })
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
            "https://idp",
            "x",
            &json!({"groups": ["a", "acme-approvers"]})
        ));
        assert!(may_approve(
            &d,
            "https://idp",
            "https://idp",
            "x",
            &json!({"groups": "acme-approvers"})
        ));
        assert!(may_approve(
            &d,
            "https://idp",
            "https://idp",
            "ops",
            &json!({})
        ));
        assert!(!may_approve(
            &d,
            "https://idp",
            "https://other",
            "ops",
            &json!({})
        ));
        assert!(!may_approve(
            &d,
            "https://idp",
            "https://idp",
            "x",
            &json!({"groups": ["acme-approvers-not"]})
        ));
        assert!(!may_approve(
            &d,
            "https://idp",
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
            "https://web.example",
            "https://idp.example",
            "x",
            &json!({"groups": ["g"]})
        ));
        assert!(!may_approve(
            &d,
            "https://evil.example",
            "https://evil.example",
            "x",
            &json!({"groups": ["g"]})
        ));
        assert!(!may_approve(
            &d,
            crate::DEV_ISSUER,
            crate::DEV_ISSUER,
            "x",
            &json!({"groups": ["g"]})
        ));
    }
}
