//! Approve with an edit: a person changes some of an escalated proposal's params ("yes, but
//! 80.00 not 120.00") and the edited intent becomes a new proposal, linked to the original by
//! `amended_from`, that goes through policy like any other. This module is the pure part: which
//! params may change ([`HandlerKind::editable`], declared per handler), the merge, the same
//! validation as a submission ([`HandlerKind::validate_params`] against the tenant's settings),
//! the handler-derived target, the RFC 8785 canonical params and the field-by-field diff. The
//! intent hash of the new proposal is [`crate::intent::Intent::hash`] over these canonical
//! params, exactly as at submission.

use crate::canonical::{canonicalize, sha256_hex};
use crate::handlers::HandlerKind;
use crate::{FieldError, FieldErrors};
use serde::Serialize;
use serde_json::{Map, Value};

/// One changed param: its value before (`null` when absent) and after (`null` when removed).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// Param name (top-level key of `params`).
    pub field: String,
    /// Value the agent proposed (`null`: it was absent).
    pub from: Value,
    /// Value after the edit (`null`: removed).
    pub to: Value,
}

/// An edit that passed every rule: the new proposal's params, ready to store.
#[derive(Debug, Clone, PartialEq)]
pub struct Amendment {
    /// The merged params (original with the edits applied).
    pub params: Value,
    /// RFC 8785 canonical form of [`Amendment::params`].
    pub params_json: String,
    /// SHA-256 (lowercase hex) of `params_json`.
    pub params_sha256: String,
    /// The target the handler derives from the new params.
    pub target: String,
    /// The changed params, in the order of the handler's `editable` list.
    pub diff: Vec<Change>,
}

impl Amendment {
    /// The diff as stored in `proposals.amendment_diff` and the audit events:
    /// `[{"field", "from", "to"}, …]`.
    pub fn diff_json(&self) -> Value {
        serde_json::to_value(&self.diff).unwrap_or(Value::Null)
    }
}

/// Applies `edits` (a JSON object of param name → new value; `null` removes an optional
/// param) to `original` params of handler `kind`, validated against the tenant's `settings`
/// for that handler, as a submission is.
///
/// Errors (each names `params.<field>` or `edits` and the rule): `edits` not an object or
/// empty; a param the handler does not declare editable (including `state` or any name the
/// handler does not know); an edited value the schema or the tenant's limits refuse; an edit
/// that changes nothing; a target that would change.
pub fn apply(
    kind: HandlerKind,
    settings: &Value,
    original: &Value,
    original_target: &str,
    edits: &Value,
) -> Result<Amendment, FieldErrors> {
    let Some(edits) = edits.as_object() else {
        return Err(FieldErrors::one(
            "edits",
            "must be a JSON object of param name to new value",
        ));
    };
    if edits.is_empty() {
        return Err(FieldErrors::one(
            "edits",
            "is empty: change at least one param",
        ));
    }
    let editable = kind.editable();
    let mut errs = Vec::new();
    for k in edits.keys() {
        if !editable.contains(&k.as_str()) {
            let allowed = if editable.is_empty() {
                "none".to_owned()
            } else {
                editable.join(", ")
            };
            errs.push(FieldError::new(
                format!("params.{k}"),
                format!(
                    "may not be edited for {}; editable params: {allowed}",
                    kind.action()
                ),
            ));
        }
    }
    if !errs.is_empty() {
        return Err(FieldErrors(errs));
    }
    let mut params: Map<String, Value> = original.as_object().cloned().unwrap_or_default();
    for (k, v) in edits {
        if v.is_null() {
            params.remove(k);
        } else {
            params.insert(k.clone(), v.clone());
        }
    }
    let params = Value::Object(params);
    kind.validate_params(&params, settings)?;
    let diff: Vec<Change> = editable
        .iter()
        .filter_map(|f| {
            let from = original.get(*f).cloned().unwrap_or(Value::Null);
            let to = params.get(*f).cloned().unwrap_or(Value::Null);
            (from != to).then(|| Change {
                field: (*f).to_owned(),
                from,
                to,
            })
        })
        .collect();
    if diff.is_empty() {
        return Err(FieldErrors::one(
            "edits",
            "change nothing: approve the proposal as it is instead",
        ));
    }
    let target = kind.derive_target(&params, settings);
    if target != original_target {
        return Err(FieldErrors::one(
            "edits",
            format!(
                "would change the target ({original_target} → {target}); file a new proposal instead"
            ),
        ));
    }
    let params_json = canonicalize(&params).map_err(|e| FieldErrors::one("edits", e.rule))?;
    Ok(Amendment {
        params_sha256: sha256_hex(&params_json),
        params,
        params_json,
        target,
        diff,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refund() -> (Value, Value) {
        (
            json!({"credential": "stripe", "max_amount": 50000, "currencies": ["USD"]}),
            json!({"payment_id": "pi_1", "amount": 12000, "currency": "USD"}),
        )
    }

    #[test]
    fn an_amount_edit_gives_new_canonical_params_and_a_diff() {
        let (settings, orig) = refund();
        let k = HandlerKind::BillingRefundIssue;
        let t = k.derive_target(&orig, &settings);
        let a = apply(k, &settings, &orig, &t, &json!({"amount": 8000})).unwrap();
        assert_eq!(
            a.params_json,
            r#"{"amount":8000,"currency":"USD","payment_id":"pi_1"}"#
        );
        assert_eq!(a.params_sha256, sha256_hex(&a.params_json));
        assert_eq!(
            a.diff_json(),
            json!([{"field": "amount", "from": 12000, "to": 8000}])
        );
        assert_eq!(a.target, t);
    }

    #[test]
    fn state_unknown_and_non_editable_params_are_refused_by_name() {
        let (settings, orig) = refund();
        let k = HandlerKind::BillingRefundIssue;
        let t = k.derive_target(&orig, &settings);
        for (edit, field) in [
            (json!({"state": "approved"}), "params.state"),
            (json!({"payment_id": "pi_2"}), "params.payment_id"),
            (json!({"amount": 8000, "extra": 1}), "params.extra"),
        ] {
            let e = apply(k, &settings, &orig, &t, &edit).unwrap_err();
            assert_eq!(e.0[0].field, field, "{edit}");
            assert!(e.0[0].rule.contains("may not be edited"), "{e}");
        }
    }

    #[test]
    fn an_edit_outside_the_limits_is_refused_as_a_submission_would_be() {
        let (settings, orig) = refund();
        let k = HandlerKind::BillingRefundIssue;
        let t = k.derive_target(&orig, &settings);
        let e = apply(k, &settings, &orig, &t, &json!({"amount": 60000})).unwrap_err();
        assert_eq!(e.0[0].field, "params.amount");
        assert!(e.0[0].rule.contains("max_amount"), "{e}");
        let e = apply(k, &settings, &orig, &t, &json!({"amount": "80.00"})).unwrap_err();
        assert_eq!(e.0[0].field, "params.amount");
        let e = apply(k, &settings, &orig, &t, &json!({"amount": null})).unwrap_err();
        assert_eq!(e.0[0].field, "params.amount", "{e}");
    }

    #[test]
    fn empty_unchanged_and_non_object_edits_are_refused() {
        let (settings, orig) = refund();
        let k = HandlerKind::BillingRefundIssue;
        let t = k.derive_target(&orig, &settings);
        for edit in [json!({}), json!({"amount": 12000}), json!([1])] {
            let e = apply(k, &settings, &orig, &t, &edit).unwrap_err();
            assert_eq!(e.0[0].field, "edits", "{edit}");
        }
    }

    #[test]
    fn every_declared_editable_param_is_in_the_handlers_schema() {
        for k in HandlerKind::ALL {
            let schema = k.params_schema();
            for f in k.editable() {
                assert!(
                    schema["properties"].get(*f).is_some(),
                    "{} declares {f} editable but has no such param",
                    k.action()
                );
            }
        }
    }
}
