//! `billing.refund.issue`: a Stripe-style refund (`POST /v1/refunds` with `Idempotency-Key`),
//! amounts in integer minor units, capped by the tenant's `max_amount`.

use super::card::{Card, CardInput, Fact, money, str_of};
use super::spec::{Spec, check_token, listed, param_str};
use crate::FieldError;
use crate::text::reveal_invisible;
use crate::vocab::{MoneyFields, format_minor_units};
use serde_json::{Map, Value, json};

/// The registry entry of `billing.refund.issue`.
pub(super) static SPEC: Spec = Spec {
    action: "billing.refund.issue",
    description: "Refund part or all of a card payment, in integer minor units.",
    honours_idempotency_key: true,
    history_sum_param: Some("amount"),
    default_risky: &["amount", "currency", "payment_id"],
    editable: &["amount", "reason"],
    default_summary: "Refund {amount} {currency} on payment {payment_id}",
    settings: &["credential", "max_amount", "currencies"],
    credential_required: true,
    params_schema,
    check_params,
    check_settings,
    derive_target,
    placeholder,
    money: Some(MoneyFields {
        amount: "amount",
        currency: "currency",
    }),
    check_applied,
    tenant_schema,
    card,
    card_covers: &["amount", "currency", "payment_id", "order_id", "reason"],
    limits,
    ..Spec::BASE
};

fn params_schema() -> Value {
    json!({
        "type": "object", "additionalProperties": false,
        "required": ["payment_id", "amount", "currency"],
        "properties": {
            "payment_id": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"},
            "amount": {"type": "integer", "minimum": 1, "description": "integer minor units: 50.00 USD is 5000"},
            "currency": {"type": "string", "pattern": "^[A-Z]{3}$", "description": "ISO 4217 code"},
            "reason": {"type": "string", "enum": ["duplicate", "fraudulent", "requested_by_customer"]},
            "order_id": {"type": "string", "maxLength": 64}
        }
    })
}

fn check_params(obj: &Map<String, Value>, settings: &Value, errs: &mut Vec<FieldError>) {
    if let Some(v) = obj.get("payment_id") {
        check_token(errs, "payment_id", v, 64);
    }
    if let Some(v) = obj.get("amount") {
        let max = settings
            .get("max_amount")
            .and_then(Value::as_i64)
            .unwrap_or(i64::MAX);
        match v.as_i64() {
            Some(n) if n >= 1 && n <= max => {}
            Some(n) if n > max => errs.push(FieldError::new(
                "params.amount",
                format!("{n} exceeds this tenant's max_amount of {max} (integer minor units)"),
            )),
            _ => errs.push(FieldError::new(
                "params.amount",
                "must be a positive integer in minor units (50.00 USD is 5000)",
            )),
        }
    }
    if let Some(v) = obj.get("currency") {
        let ok = v
            .as_str()
            .is_some_and(|s| s.len() == 3 && s.chars().all(|c| c.is_ascii_uppercase()));
        if !ok {
            errs.push(FieldError::new(
                "params.currency",
                "must be an ISO 4217 code like USD",
            ));
        } else if let Some(allowed) = settings.get("currencies")
            // A stored document whose `currencies` is not a list (apply refuses it now) enables
            // no currency: it fails closed rather than checking none.
            && !allowed.as_array().is_some_and(|a| a.contains(v))
        {
            errs.push(FieldError::new(
                "params.currency",
                "is not enabled for this tenant",
            ));
        }
    }
    if let Some(v) = obj.get("reason")
        && !matches!(
            v.as_str(),
            Some("duplicate" | "fraudulent" | "requested_by_customer")
        )
    {
        errs.push(FieldError::new(
            "params.reason",
            "must be one of duplicate, fraudulent, requested_by_customer",
        ));
    }
    if let Some(v) = obj.get("order_id") {
        check_token(errs, "order_id", v, 64);
    }
}

fn check_settings(path: &str, settings: &Map<String, Value>, errs: &mut Vec<FieldError>) {
    match settings.get("max_amount") {
        None | Some(Value::Null) => errs.push(FieldError::new(
            format!("{path}.max_amount"),
            "is required: a positive integer in minor units",
        )),
        Some(v) if v.as_i64().is_some_and(|n| n > 0) => {}
        Some(v) => errs.push(FieldError::new(
            format!("{path}.max_amount"),
            format!(
                "must be a positive integer in minor units (got {})",
                crate::vocab::got(v)
            ),
        )),
    }
}

/// `currencies` is optional (absent: any ISO 4217 code), but when present it must be a
/// non-empty list of distinct upper-case three-letter codes. Anything else used to pass: a
/// scalar (`currencies: USD`) was not a list, so no currency was checked at all, and `[]` or
/// `[usd]` matched no submission, so every refund was refused. Checked when a document is
/// applied ([`crate::tenant::TenantDocument::parse`]), not when a stored one is loaded: a
/// stored scalar still loads, and [`check_params`] then enables no currency.
pub(crate) fn check_currencies(path: &str, v: Option<&Value>, errs: &mut Vec<FieldError>) {
    let Some(v) = v else { return };
    let field = format!("{path}.currencies");
    let rule =
        "must be a non-empty list of ISO 4217 codes like [USD, EUR], or left out to allow any";
    let Some(list) = v.as_array().filter(|l| !l.is_empty()) else {
        errs.push(FieldError::new(
            field,
            format!("{rule} (got {})", crate::vocab::got(v)),
        ));
        return;
    };
    for (i, c) in list.iter().enumerate() {
        let ok = c
            .as_str()
            .is_some_and(|s| s.len() == 3 && s.chars().all(|ch| ch.is_ascii_uppercase()));
        if !ok {
            errs.push(FieldError::new(
                format!("{field}[{i}]"),
                format!(
                    "must be an ISO 4217 code: three upper-case letters like USD (got {})",
                    crate::vocab::got(c)
                ),
            ));
        } else if list[..i].contains(c) {
            errs.push(FieldError::new(
                format!("{field}[{i}]"),
                format!("repeats {}", crate::vocab::got(c)),
            ));
        }
    }
}

/// The `currencies` rule, held only by documents being applied ([`check_currencies`]).
fn check_applied(path: &str, settings: &Map<String, Value>, errs: &mut Vec<FieldError>) {
    check_currencies(path, settings.get("currencies"), errs);
}

/// The tenant's `max_amount` as the amount's `maximum` and its `currencies` as the currency's
/// `enum`.
fn tenant_schema(schema: &mut Value, settings: &Value) {
    if let Some(max) = settings.get("max_amount").and_then(Value::as_i64) {
        schema["properties"]["amount"]["maximum"] = json!(max);
    }
    if let Some(cur) = settings.get("currencies").and_then(Value::as_array) {
        schema["properties"]["currency"]["enum"] = json!(cur);
    }
}

/// The target is the payment being refunded.
fn derive_target(params: &Value, _settings: &Value) -> String {
    param_str(params, "payment_id")
}

/// `{amount}` reads in major units of the currency (`12000` USD → `120.00`).
fn placeholder(key: &str, params: &Value) -> Option<String> {
    if key != "amount" {
        return None;
    }
    let cur = params.get("currency").and_then(Value::as_str).unwrap_or("");
    params
        .get("amount")
        .and_then(Value::as_i64)
        .map(|n| format_minor_units(n, cur))
}

/// The card: the amount in major units (beside the handler's maximum), the payment, the
/// order and the reason.
fn card(c: &CardInput<'_>) -> Card {
    let (params, settings) = (c.params, c.settings);
    let cur = str_of(params, "currency");
    let amount = params.get("amount").and_then(Value::as_i64).unwrap_or(0);
    let shown = money(amount, cur);
    let mut fact = Fact::new("Amount", shown.clone(), c.is_hot("amount"));
    if let Some(max) = settings.get("max_amount").and_then(Value::as_i64) {
        fact = fact.note(format!("handler maximum {}", money(max, cur)));
    }
    let mut facts = vec![
        fact,
        Fact::new(
            "Payment",
            reveal_invisible(str_of(params, "payment_id"), false),
            c.is_hot("payment_id"),
        ),
    ];
    for (k, label) in [("order_id", "Order"), ("reason", "Refund reason")] {
        if let Some(v) = params.get(k) {
            let shown = v
                .as_str()
                .map_or_else(|| v.to_string(), |s| reveal_invisible(s, false));
            facts.push(Fact::new(label, shown, c.is_hot(k)));
        }
    }
    Card {
        facts,
        approve_label: format!("Approve refund of {shown}"),
    }
}

/// For agents: the currencies and the maximum amount.
fn limits(s: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(c) = listed(s, "currencies") {
        out.push(format!("currency one of {c}"));
    }
    if let Some(max) = s.get("max_amount").and_then(Value::as_i64) {
        out.push(format!(
            "amount at most {max} (integer minor units of the currency)"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::HandlerKind;
    use super::*;

    #[test]
    fn refund_params_are_validated_against_settings() {
        let h = HandlerKind::BillingRefundIssue;
        let settings = json!({"max_amount": 100000, "currencies": ["USD"]});
        assert!(
            h.validate_params(
                &json!({"payment_id":"pi_1","amount":12000,"currency":"USD"}),
                &settings
            )
            .is_ok()
        );
        let e = h
            .validate_params(
                &json!({"payment_id":"pi_1","amount":"120.00","currency":"usd","url":"x"}),
                &settings,
            )
            .unwrap_err();
        let fields: Vec<_> = e.0.iter().map(|f| f.field.as_str()).collect();
        assert!(fields.contains(&"params.amount"));
        assert!(fields.contains(&"params.currency"));
        assert!(fields.contains(&"params.url"));
        let e = h
            .validate_params(
                &json!({"payment_id":"pi_1","amount":100001,"currency":"USD"}),
                &settings,
            )
            .unwrap_err();
        assert!(e.to_string().contains("max_amount"));
    }

    #[test]
    fn currencies_must_be_a_list_of_iso_codes() {
        let errs = |cur: Value| {
            let mut errs = Vec::new();
            check_currencies("h", Some(&cur), &mut errs);
            errs.into_iter().map(|f| f.to_string()).collect::<Vec<_>>()
        };
        assert!(errs(json!(["USD", "EUR"])).is_empty());
        let list_rule =
            "must be a non-empty list of ISO 4217 codes like [USD, EUR], or left out to allow any";
        // A scalar is not a list: it used to pass, and then no currency was checked at all.
        assert_eq!(
            errs(json!("USD")),
            [format!("h.currencies: {list_rule} (got \"USD\")")]
        );
        assert_eq!(
            errs(json!([])),
            [format!("h.currencies: {list_rule} (got [])")]
        );
        assert_eq!(
            errs(json!({"USD": true})),
            [format!("h.currencies: {list_rule} (got {{\"USD\":true}})")]
        );
        assert_eq!(
            errs(json!(["usd", 1, "USD", "USD"])),
            [
                "h.currencies[0]: must be an ISO 4217 code: three upper-case letters like USD (got \"usd\")",
                "h.currencies[1]: must be an ISO 4217 code: three upper-case letters like USD (got 1)",
                "h.currencies[3]: repeats \"USD\"",
            ]
        );
        // Apply refuses it, naming the field; a stored one still loads.
        let doc = |cur: &str| {
            format!(
                "tenant: acme\npolicy:\n  default: escalate\nhandlers:\n  billing.refund.issue:\n    credential: pay\n    max_amount: 100\n    currencies: {cur}\n"
            )
        };
        let e = crate::tenant::TenantDocument::parse(&doc("USD")).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("handlers[\"billing.refund.issue\"].currencies: {list_rule} (got \"USD\")")
        );
        assert!(crate::tenant::TenantDocument::parse(&doc("[USD]")).is_ok());
        let stored = crate::tenant::TenantDocument::parse_stored(&doc("USD")).unwrap();
        // …and enables no currency, rather than every one.
        let e = HandlerKind::BillingRefundIssue
            .validate_params(
                &json!({"payment_id":"pi_1","amount":40,"currency":"KWD"}),
                &stored.handlers["billing.refund.issue"].settings,
            )
            .unwrap_err();
        assert!(
            e.to_string().contains("is not enabled for this tenant"),
            "{e}"
        );
    }

    #[test]
    fn summaries_read_as_a_sentence() {
        let p = json!({"payment_id":"pi_1234","amount":12000,"currency":"USD"});
        assert_eq!(
            HandlerKind::BillingRefundIssue.summary(None, &p, "pi_1234"),
            "Refund 120.00 USD on payment pi_1234"
        );
        assert_eq!(format_minor_units(500, "JPY"), "500");
        assert_eq!(format_minor_units(1234, "KWD"), "1.234");
    }
}
