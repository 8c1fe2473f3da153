//! `billing.refund.issue` against a Stripe-style API: `POST /v1/refunds` with the grant id as
//! `Idempotency-Key` (and as `metadata[actiond_grant_id]`, so the refund can be found again);
//! its preview reads the payment and what was already refunded; its read-back lists the
//! payment's refunds (`GET /v1/refunds?payment_intent=…`) and finds the one of this grant.

use super::{Execution, Handler, Outcome, Read, credential, send};
use actiond_core::effect::{EffectRecord, Verdict};
use actiond_core::handlers::format_minor_units;
use serde_json::{Value, json};

/// The executor's entry of `billing.refund.issue`.
pub(super) static HANDLER: Handler = Handler {
    run: |ex| Box::pin(refund(ex)),
    preview: Some(|ex| Box::pin(preview(ex))),
    read_back: Some(|ex| Box::pin(read_back(ex))),
};

async fn refund(ex: &Execution<'_>) -> Outcome {
    let Some(base) = &ex.destinations.billing_base_url else {
        return Outcome::Failed(
            "no billing provider is configured on this executor (--billing-base-url)".into(),
        );
    };
    let Ok(url) = base.join("v1/refunds") else {
        return Outcome::Failed("bad billing base URL".into());
    };
    let cred = match credential(ex) {
        Ok(Some(c)) => c,
        Ok(None) => return Outcome::Failed("billing.refund.issue needs a credential".into()),
        Err(o) => return o,
    };
    let p = ex.params;
    let body = {
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        form.append_pair(
            "payment_intent",
            p.get("payment_id")
                .and_then(Value::as_str)
                .unwrap_or_default(),
        );
        form.append_pair(
            "amount",
            &p.get("amount")
                .and_then(Value::as_i64)
                .unwrap_or_default()
                .to_string(),
        );
        // Stripe infers the currency from the payment when it is left out; the approved
        // currency is sent so a refund can never run in another one.
        form.append_pair(
            "currency",
            &p.get("currency")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_ascii_lowercase(),
        );
        if let Some(r) = p.get("reason").and_then(Value::as_str) {
            form.append_pair("reason", r);
        }
        if let Some(o) = p.get("order_id").and_then(Value::as_str) {
            form.append_pair("metadata[order_id]", o);
        }
        form.append_pair("metadata[actiond_proposal_id]", &ex.proposal_id.to_string());
        form.append_pair("metadata[actiond_grant_id]", &ex.grant_id.to_string());
        form.finish()
    };
    let req = ex
        .http
        .post(url)
        .bearer_auth(cred)
        .header("idempotency-key", ex.grant_id.to_string())
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body);
    send(req).await
}

/// The payment's amount and what was already refunded (`GET /v1/payment_intents/{id}` with
/// its latest charge expanded), beside this refund. Binding: the payment's amount, currency
/// and the amount already refunded. Warning: a refund larger than what is left to refund.
async fn preview(ex: &Execution<'_>) -> Result<Read, String> {
    let p = ex.params;
    let payment = p
        .get("payment_id")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let (status, v) = billing_get(
        ex,
        &format!("v1/payment_intents/{payment}"),
        &[("expand[]", "latest_charge")],
    )
    .await?;
    let (Some(amount), Some(currency)) = (
        v.get("amount").and_then(Value::as_i64),
        v.get("currency").and_then(Value::as_str),
    ) else {
        return Err(format!(
            "the billing API answered HTTP {status} without the payment's amount and currency"
        ));
    };
    let cur = currency.to_ascii_uppercase();
    let refunded = v
        .pointer("/latest_charge/amount_refunded")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let this = p.get("amount").and_then(Value::as_i64).unwrap_or_default();
    let money = |n: i64| format!("{} {cur}", format_minor_units(n, &cur));
    let left = amount.saturating_sub(refunded);
    let mut warnings = Vec::new();
    if this > left {
        warnings.push(format!(
            "this refund of {} is larger than what is left to refund: {}",
            money(this),
            money(left)
        ));
    }
    Ok(Read {
        text: format!(
            "Payment {payment}: {} paid, {} already refunded; this refund of {} would leave {}",
            money(amount),
            money(refunded),
            money(this),
            money(left - this)
        ),
        binding: json!({"amount": amount, "currency": cur, "amount_refunded": refunded}),
        warnings,
    })
}

/// A read-only `GET` of the billing API at `path` (relative to its base URL) with `query`, as
/// the executor's billing credential; the HTTP status and the JSON body (`null` when the body
/// is not JSON). Errors: no billing provider or credential configured, the API unreachable.
async fn billing_get(
    ex: &Execution<'_>,
    path: &str,
    query: &[(&str, &str)],
) -> Result<(u16, Value), String> {
    let base = ex
        .destinations
        .billing_base_url
        .as_ref()
        .ok_or("no billing provider is configured on this executor")?;
    let mut url = base.join(path).map_err(|_| "bad billing base URL")?;
    url.query_pairs_mut().extend_pairs(query);
    let key = credential(ex)
        .map_err(|o| o.detail().to_owned())?
        .ok_or("billing.refund.issue needs a credential")?;
    let resp = ex
        .http
        .get(url)
        .bearer_auth(key)
        .send()
        .await
        .map_err(|e| format!("could not reach the billing API: {e}"))?;
    let status = resp.status().as_u16();
    Ok((status, resp.json().await.unwrap_or(Value::Null)))
}

/// The refund this grant made, as the provider lists it now: the payment's refunds
/// (`GET /v1/refunds?payment_intent=…&limit=100`), the one whose `metadata.actiond_grant_id`
/// is this grant's id (the run's idempotency key). It matches when its amount and currency are
/// the approved ones and its status is `succeeded` or `pending`; none found is
/// [`Verdict::Absent`].
async fn read_back(ex: &Execution<'_>) -> EffectRecord {
    match find_refund(ex).await {
        Ok(found) => compare(ex.params, &ex.grant_id.to_string(), found),
        Err(reason) => EffectRecord {
            verdict: Verdict::Unread,
            after: String::new(),
            reason,
            evidence: Value::Null,
            settled: false,
        },
    }
}

/// The refund of this grant at the provider, if it lists one.
async fn find_refund(ex: &Execution<'_>) -> Result<Option<Value>, String> {
    let payment = ex
        .params
        .get("payment_id")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let (status, v) = billing_get(
        ex,
        "v1/refunds",
        &[("payment_intent", payment), ("limit", "100")],
    )
    .await?;
    let Some(list) = v.get("data").and_then(Value::as_array) else {
        return Err(format!(
            "the billing API answered HTTP {status} without a list of refunds"
        ));
    };
    let grant = ex.grant_id.to_string();
    Ok(list
        .iter()
        .find(|r| {
            r.pointer("/metadata/actiond_grant_id")
                .and_then(Value::as_str)
                == Some(&grant)
        })
        .cloned())
}

/// Compares the provider's refund of grant `grant` (if any) with the approved `params`.
fn compare(params: &Value, grant: &str, found: Option<Value>) -> EffectRecord {
    let payment = params
        .get("payment_id")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let amount = params
        .get("amount")
        .and_then(Value::as_i64)
        .unwrap_or_default();
    let currency = params
        .get("currency")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_ascii_uppercase();
    let Some(r) = found else {
        return EffectRecord {
            verdict: Verdict::Absent,
            after: format!("no refund on payment {payment} under this grant"),
            reason: format!("the billing API lists no refund whose metadata names grant {grant}"),
            evidence: json!({"payment_intent": payment, "grant_id": grant, "refund": null}),
            settled: false,
        };
    };
    let id = r.get("id").and_then(Value::as_str).unwrap_or("(no id)");
    let status = r
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or("(no status)");
    let got = r.get("amount").and_then(Value::as_i64);
    let cur = r
        .get("currency")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_ascii_uppercase();
    let shown = got.map_or_else(
        || "no amount".to_owned(),
        |n| format!("{} {cur}", format_minor_units(n, &cur)),
    );
    let after = format!("Refund {id} of {shown} on payment {payment}: {status} at the provider");
    let mut wrong = Vec::new();
    if got != Some(amount) || cur != currency {
        wrong.push(format!(
            "approved {} {currency}, the provider holds {shown}",
            format_minor_units(amount, &currency)
        ));
    }
    if !matches!(status, "succeeded" | "pending") {
        wrong.push(format!("its status is {status}"));
    }
    EffectRecord {
        verdict: if wrong.is_empty() {
            Verdict::Matches
        } else {
            Verdict::Differs
        },
        after,
        reason: wrong.join("; "),
        evidence: json!({"refund_id": id, "status": status, "amount": got, "currency": cur,
                         "payment_intent": payment, "grant_id": grant}),
        settled: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grant_s_refund_is_compared_with_what_was_approved() {
        let p = json!({"payment_id": "pi_1", "amount": 2500, "currency": "USD"});
        let ok = compare(
            &p,
            "g",
            Some(json!({"id": "re_1", "status": "succeeded", "amount": 2500, "currency": "usd"})),
        );
        assert_eq!(ok.verdict, Verdict::Matches, "{ok:?}");
        assert_eq!(
            ok.after,
            "Refund re_1 of 25.00 USD on payment pi_1: succeeded at the provider"
        );
        let other = compare(
            &p,
            "g",
            Some(json!({"id": "re_1", "status": "failed", "amount": 2000, "currency": "usd"})),
        );
        assert_eq!(other.verdict, Verdict::Differs);
        assert_eq!(
            other.reason,
            "approved 25.00 USD, the provider holds 20.00 USD; its status is failed"
        );
        assert_eq!(compare(&p, "g", None).verdict, Verdict::Absent);
    }
}
