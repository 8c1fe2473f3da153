//! `admins:` of a tenant document: who may read the tenant's administrative pages (the shadow
//! policy report) in the approval web app.
//!
//! ```yaml
//! admins:
//!   values: [acme-admins]     # values of approvers.claim (same issuer rule as approvers)
//!   subjects: [ops-lead]      # subjects, whatever their claims
//! ```
//!
//! Admins are identified exactly like approvers — by the tenant's `approvers.issuer` and
//! `approvers.claim` — through the one rule in [`super::approvers::may_decide`].

use super::approvers::Approvers;
use super::read::{get_strings, unknown_keys};
use crate::FieldError;
use serde::Serialize;
use serde_json::Value;

/// `admins:` of a tenant document; nobody when absent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Admins {
    /// Values of the approvers' claim that make someone a tenant admin.
    pub values: Vec<String>,
    /// Subjects that are tenant admins.
    pub subjects: Vec<String>,
}

impl Admins {
    /// Whether (issuer, subject, claims) is a tenant admin: `approvers`' issuer and claim name
    /// with this section's values and subjects (and `approvers.admins`, the same meaning).
    pub fn includes(
        &self,
        approvers: &Approvers,
        deployment_issuer: &str,
        issuer: &str,
        subject: &str,
        claims: &Value,
    ) -> bool {
        let as_approvers = Approvers {
            issuer: approvers.issuer.clone(),
            claim: approvers.claim.clone(),
            values: self.values.clone(),
            subjects: self
                .subjects
                .iter()
                .chain(&approvers.admins)
                .cloned()
                .collect(),
            admins: Vec::new(),
            max_claims_age: approvers.max_claims_age,
            require_passkey: approvers.require_passkey,
            passkey_attestation: approvers.passkey_attestation,
            passkey_aaguids: approvers.passkey_aaguids.clone(),
        };
        super::approvers::may_decide(&as_approvers, deployment_issuer, issuer, subject, claims)
    }
}

/// `admins:` (optional).
pub(super) fn parse_admins(errs: &mut Vec<FieldError>, v: Option<&Value>) -> Admins {
    let m = match v {
        None | Some(Value::Null) => return Admins::default(),
        Some(Value::Object(m)) => m,
        Some(_) => {
            errs.push(FieldError::new(
                "admins",
                "must be a mapping with values, subjects",
            ));
            return Admins::default();
        }
    };
    unknown_keys(errs, "admins", m, &["values", "subjects"]);
    Admins {
        values: get_strings(errs, "admins.values", m.get("values")),
        subjects: get_strings(errs, "admins.subjects", m.get("subjects")),
    }
}

#[cfg(test)]
mod tests {
    use crate::tenant::TenantDocument;
    use serde_json::json;

    #[test]
    fn admins_use_the_approvers_claim_and_issuer() {
        let d = TenantDocument::parse(
            "tenant: acme\npolicy:\n  default: escalate\napprovers:\n  issuer: https://idp.example\n  claim: roles\n  values: [approvers]\nadmins:\n  values: [admins]\n  subjects: [lead]\n",
        )
        .unwrap();
        let a = &d.admins;
        let iss = "https://idp.example";
        assert!(a.includes(&d.approvers, iss, iss, "x", &json!({"roles": ["admins"]})));
        assert!(a.includes(&d.approvers, iss, iss, "lead", &json!({})));
        assert!(!a.includes(
            &d.approvers,
            iss,
            iss,
            "x",
            &json!({"roles": ["approvers"]})
        ));
        assert!(!a.includes(&d.approvers, iss, iss, "x", &json!({"groups": ["admins"]})));
        assert!(!a.includes(&d.approvers, iss, "https://other", "lead", &json!({})));
        let e = TenantDocument::parse("tenant: acme\npolicy:\n  default: escalate\nadmins: [x]\n")
            .unwrap_err()
            .to_string();
        assert_eq!(e, "admins: must be a mapping with values, subjects");
    }
}
