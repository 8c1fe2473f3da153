//! actiond-core: the domain of the approval gateway, with no I/O.
//!
//! - [`audit_chain`]: per-tenant audit hash chains, Ed25519 seals and their verification.
//! - [`audit_export`]: lines of an audit export (JSON Lines or CloudEvents 1.0).
//! - [`canonical`]: strict JSON parsing and RFC 8785 (JCS) canonical form of `params`.
//! - [`intent`]: the intent hash that binds a grant to exactly one action.
//! - [`grant`]: Ed25519-signed, single-use grants (signing and verification).
//! - [`state`]: proposal states and their legal transitions.
//! - [`audit`]: the kinds of audit event.
//! - [`approval`]: the rules for decisions by people (who, how many, no self-approval).
//! - [`policy`]: effects, CEL rules, and the deterministic decision procedure.
//! - [`rule_check`]: what a CEL rule must be when its document is applied.
//! - [`tenant`]: the versioned tenant document (policy, handlers, approvers, notify).
//! - [`handlers`]: the fixed handler registry's specs (param schema, target, summary).
//! - [`ids`]: validated identifiers and durations.
//! - [`external_time`]: the one window every time taken from outside must fall in.
//! - [`netaddr`]: which IP addresses are public destinations (every IPv4-in-IPv6 form judged).
//! - [`injection`]: the phrase list that flags source text giving orders or claiming approval.
//! - [`text`]: making agent-written text visible and safe (hidden characters named).
//! - [`vocab`]: the shared words (effects, handler kinds, field kinds), importing nothing else.

pub mod amend;
pub mod approval;
pub mod audit;
pub mod audit_chain;
pub mod audit_export;
pub mod audit_head;
pub mod canonical;
pub mod classifier;
pub mod effect;
pub mod external_time;
pub mod facts;
pub mod grant;
pub mod handlers;
pub mod ids;
pub mod injection;
pub mod intent;
pub mod netaddr;
pub mod passkey;
pub mod passkey_attestation;
pub mod policy;
pub mod preview;
pub mod rule_check;
pub mod rule_types;
pub mod state;
pub mod tenant;
pub mod tenant_move;
pub mod text;
pub mod vocab;

/// One rejected input field: `field` is a dotted path (`params.amount`,
/// `handlers["billing.refund.issue"].max_amount`), `rule` says what it must be.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FieldError {
    /// Dotted path of the offending field.
    pub field: String,
    /// The rule it broke, readable by a person ("must be an integer between 1 and 100000").
    pub rule: String,
}

impl FieldError {
    /// Builds a field error from a path and a rule.
    pub fn new(field: impl Into<String>, rule: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            rule: rule.into(),
        }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.rule)
    }
}

/// A list of field errors, reported together.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct FieldErrors(pub Vec<FieldError>);

impl FieldErrors {
    /// A single error.
    pub fn one(field: impl Into<String>, rule: impl Into<String>) -> Self {
        Self(vec![FieldError::new(field, rule)])
    }
}

/// A stored name (state, effect, audit kind) that is not one of the known values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what}: {name:?}")]
pub struct UnknownName {
    /// What was being parsed (`proposal state`, `effect`, `audit kind`).
    pub what: &'static str,
    /// The name that was found.
    pub name: String,
}

impl UnknownName {
    /// Builds the error for `name` of kind `what`.
    pub fn new(what: &'static str, name: &str) -> Self {
        Self {
            what,
            name: name.to_owned(),
        }
    }
}
