//! Facts a handler computes at submission (issue #34, point 4): what a rule may know beyond the
//! proposal itself, read from the database when the proposal is filed and stored with it
//! (`proposal_facts`, V46), so that policy stays without I/O. Rules read them as `facts`
//! (declared and typed in [`crate::rule_types`]); the executor adds their warnings to the
//! proposal's preview, so the card shows them as a banner and the queue counts them.
//!
//! Today one handler has facts: an email's recipient domains the tenant never wrote to before
//! (no earlier `succeeded` proposal of the tenant's email handler to that domain).
//! `facts.new_recipient_domain` is true when there is at least one, and
//! `facts.new_recipient_domains` lists them. A proposal of another handler has the defaults
//! (false, empty); an email proposal stored without facts (filed before V46) has no `facts`,
//! and a rule that reads them fails closed.

use crate::handlers::HandlerKind;
use crate::rule_types::Ty;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The facts of one proposal, as computed at submission.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facts {
    /// Recipient domains of this email that no earlier succeeded email of the tenant went to,
    /// sorted.
    pub new_recipient_domains: Vec<String>,
}

impl Facts {
    /// The stored and rule-visible form: `{"new_recipient_domain": bool,
    /// "new_recipient_domains": [..]}`.
    pub fn to_json(&self) -> Value {
        json!({
            "new_recipient_domain": !self.new_recipient_domains.is_empty(),
            "new_recipient_domains": self.new_recipient_domains,
        })
    }
}

/// Whether proposals of `kind` have facts computed at submission (only those are stored).
pub fn computed_for(kind: HandlerKind) -> bool {
    kind == HandlerKind::EmailSend
}

/// The facts rules see for a proposal of `kind` with stored facts `stored`: the stored ones,
/// the defaults for a handler that computes none, `None` (rules reading `facts` fail closed)
/// for a handler that computes them but whose proposal has none stored.
pub fn for_rules(kind: HandlerKind, stored: Option<&Value>) -> Option<Value> {
    match stored {
        Some(v) => Some(v.clone()),
        None if computed_for(kind) => None,
        None => Some(Facts::default().to_json()),
    }
}

/// The type of `facts` in rules.
pub fn rule_type() -> Ty {
    Ty::Object(
        "facts".into(),
        BTreeMap::from([
            ("new_recipient_domain".to_owned(), Ty::Bool),
            (
                "new_recipient_domains".to_owned(),
                Ty::List(Box::new(Ty::string())),
            ),
        ]),
    )
}

/// The recipient domains of an email's params (`recipients`, `local@domain`), sorted, each
/// once.
pub fn recipient_domains(params: &Value) -> Vec<String> {
    let mut out: Vec<String> = params
        .get("recipients")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .filter_map(|r| r.rsplit_once('@').map(|(_, d)| d.to_ascii_lowercase()))
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out.dedup();
    out
}

/// The warnings of stored facts, in the words of the card's banner.
pub fn warnings(stored: Option<&Value>) -> Vec<String> {
    let domains: Vec<&str> = stored
        .and_then(|f| f.get("new_recipient_domains"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    match domains.as_slice() {
        [] => Vec::new(),
        [one] => vec![format!(
            "this email goes to {one}, a domain this tenant has never sent email to before"
        )],
        many => vec![format!(
            "this email goes to domains this tenant has never sent email to before: {}",
            many.join(", ")
        )],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_of_recipients_once_and_sorted() {
        let p = json!({"recipients": ["a@y.example", "b@x.example", "c@y.example"]});
        assert_eq!(recipient_domains(&p), ["x.example", "y.example"]);
        assert!(recipient_domains(&json!({})).is_empty());
    }

    #[test]
    fn facts_for_rules_fail_closed_only_where_they_are_computed() {
        let f = Facts {
            new_recipient_domains: vec!["new.example".into()],
        }
        .to_json();
        assert_eq!(f["new_recipient_domain"], true);
        assert_eq!(for_rules(HandlerKind::EmailSend, Some(&f)), Some(f.clone()));
        assert_eq!(for_rules(HandlerKind::EmailSend, None), None);
        assert_eq!(
            for_rules(HandlerKind::BillingRefundIssue, None),
            Some(json!({"new_recipient_domain": false, "new_recipient_domains": []}))
        );
    }

    #[test]
    fn warnings_name_the_new_domains() {
        let one = Facts {
            new_recipient_domains: vec!["new.example".into()],
        }
        .to_json();
        assert_eq!(
            warnings(Some(&one)),
            ["this email goes to new.example, a domain this tenant has never sent email to before"]
        );
        assert!(warnings(Some(&Facts::default().to_json())).is_empty());
        assert!(warnings(None).is_empty());
    }
}
