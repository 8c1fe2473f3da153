//! `approvers:` of a tenant document: who may approve for this tenant, by ID-token claim values
//! or by subject (design, "Approvers").

use super::{get_strings, unknown_keys};
use crate::FieldError;
use serde::Serialize;
use serde_json::Value;

/// `approvers:` of a tenant document.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Approvers {
    /// Expected ID-token issuer; any configured issuer when absent.
    pub issuer: Option<String>,
    /// Claim holding group names (default `groups`).
    pub claim: String,
    /// Claim values that make someone an approver.
    pub values: Vec<String>,
    /// Subjects that are approvers regardless of claims.
    pub subjects: Vec<String>,
    /// Subjects that are tenant admins in the approval app: they see the "Approvers" page
    /// (decisions, approve ratio and time on page per person) and may unfreeze any agent of
    /// the tenant. An admin must also be an approver to reach the app at all.
    pub admins: Vec<String>,
}

/// `approvers:` (optional; claim `groups` and nobody else when absent).
pub(super) fn parse_approvers(errs: &mut Vec<FieldError>, v: Option<&Value>) -> Approvers {
    let Some(v) = v else {
        return Approvers {
            claim: "groups".into(),
            ..Approvers::default()
        };
    };
    let Some(m) = v.as_object() else {
        errs.push(FieldError::new(
            "approvers",
            "must be a mapping with claim, values, subjects",
        ));
        return Approvers::default();
    };
    unknown_keys(
        errs,
        "approvers",
        m,
        &["issuer", "claim", "values", "subjects", "admins"],
    );
    let claim = match m.get("claim") {
        None => "groups".to_owned(),
        Some(Value::String(s)) if !s.is_empty() && s.len() <= 64 => s.clone(),
        Some(_) => {
            errs.push(FieldError::new("approvers.claim", "must be a claim name"));
            "groups".into()
        }
    };
    let issuer = match m.get("issuer") {
        None => None,
        Some(Value::String(s)) if url::Url::parse(s).is_ok() => Some(s.clone()),
        Some(_) => {
            errs.push(FieldError::new("approvers.issuer", "must be an issuer URL"));
            None
        }
    };
    Approvers {
        issuer,
        claim,
        values: get_strings(errs, "approvers.values", m.get("values")),
        subjects: get_strings(errs, "approvers.subjects", m.get("subjects")),
        admins: get_strings(errs, "approvers.admins", m.get("admins")),
    }
}
