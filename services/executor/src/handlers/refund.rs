//! `billing.refund.issue` against a Stripe-style API: `POST /v1/refunds` with the grant id as
//! `Idempotency-Key`; its preview reads the payment and what was already refunded.

use super::{Execution, Handler, Outcome, Read, credential, send};
use actiond_core::handlers::format_minor_units;
use serde_json::{Value, json};

/// The executor's entry of `billing.refund.issue`.
pub(super) static HANDLER: Handler = Handler {
    run: |ex| Box::pin(refund(ex)),
    preview: Some(|ex| Box::pin(preview(ex))),
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
    let base = ex
        .destinations
        .billing_base_url
        .as_ref()
        .ok_or("no billing provider is configured on this executor")?;
    let p = ex.params;
    let payment = p
        .get("payment_id")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut url = base
        .join(&format!("v1/payment_intents/{payment}"))
        .map_err(|_| "bad billing base URL")?;
    url.query_pairs_mut()
        .append_pair("expand[]", "latest_charge");
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
    let v: Value = resp.json().await.unwrap_or(Value::Null);
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
