//! `webhook.post`: POST the JSON body to the tenant's one configured URL, which must pass the
//! destination guard (the operator's allowed hosts, no private addresses unless allowed).
//! Its effect is read back only when the tenant's settings declare a `read_back_url` the
//! receiver answers (`GET` with the grant as `Idempotency-Key`: the body it received under
//! that key); otherwise the receiver's HTTP answer is all there is ("not readable").

use super::{Execution, Handler, Outcome, credential, send};
use crate::destinations::check_url;
use actiond_core::effect::{EffectRecord, Verdict};
use serde_json::{Value, json};

/// The executor's entry of `webhook.post`: no preview (there is nothing to read).
pub(super) static HANDLER: Handler = Handler {
    run: |ex| Box::pin(post(ex)),
    preview: None,
    read_back: Some(|ex| Box::pin(read_back(ex))),
};

/// An unread record: nothing concluded, `reason` says why.
fn unread(reason: String) -> EffectRecord {
    EffectRecord {
        verdict: Verdict::Unread,
        after: String::new(),
        reason,
        evidence: Value::Null,
        settled: false,
    }
}

/// What the receiver holds under this grant: `GET read_back_url` with `Idempotency-Key: grant`
/// (and the credential, as the post sends it). 200 with a JSON object whose `body` is the
/// approved body matches, another `body` differs, 404 is absent; anything else, or no
/// `read_back_url` in the settings, is unread.
async fn read_back(ex: &Execution<'_>) -> EffectRecord {
    let Some(raw) = ex.settings.get("read_back_url").and_then(Value::as_str) else {
        return unread("not readable: this webhook's settings declare no read_back_url".to_owned());
    };
    let Ok(url) = url::Url::parse(raw) else {
        return unread("bad read_back_url".to_owned());
    };
    if let Err(reason) = check_url(
        &url,
        &ex.destinations.webhook_hosts,
        ex.destinations.allow_private,
    ) {
        return unread(format!("read_back_url refused: {reason}"));
    }
    let cred = match credential(ex) {
        Ok(c) => c,
        Err(o) => return unread(o.detail().to_owned()),
    };
    let grant = ex.grant_id.to_string();
    let mut req = ex.http.get(url).header("idempotency-key", &grant);
    if let Some(c) = cred {
        req = req.bearer_auth(c);
    }
    let resp = match req.send().await {
        Ok(r) => r,
        Err(e) => return unread(format!("could not reach the read_back_url: {e}")),
    };
    let status = resp.status().as_u16();
    let v: Value = resp.json().await.unwrap_or(Value::Null);
    compare(ex.params, &grant, status, &v)
}

/// Compares the receiver's answer (`status`, JSON `v`) with the approved body.
fn compare(params: &Value, grant: &str, status: u16, v: &Value) -> EffectRecord {
    let approved = params.get("body").cloned().unwrap_or(Value::Null);
    match (status, v.get("body")) {
        (404, _) => EffectRecord {
            verdict: Verdict::Absent,
            after: "the receiver holds nothing under this grant".into(),
            reason: format!("the read_back_url answered 404 for idempotency key {grant}"),
            evidence: json!({"grant_id": grant, "status": 404}),
            settled: false,
        },
        (200..=299, Some(got)) => {
            let matches = *got == approved;
            EffectRecord {
                verdict: if matches {
                    Verdict::Matches
                } else {
                    Verdict::Differs
                },
                after: format!(
                    "the receiver holds a body with keys {} under this grant",
                    got.as_object()
                        .map(|o| o.keys().cloned().collect::<Vec<_>>().join(", "))
                        .unwrap_or_else(|| "(not an object)".into())
                ),
                reason: if matches {
                    String::new()
                } else {
                    "the body the receiver holds is not the approved body".into()
                },
                evidence: json!({"grant_id": grant, "status": status, "body_matches": matches}),
                settled: false,
            }
        }
        _ => unread(format!(
            "the read_back_url answered HTTP {status} without the body it received"
        )),
    }
}

async fn post(ex: &Execution<'_>) -> Outcome {
    let Some(url) = ex
        .settings
        .get("url")
        .and_then(Value::as_str)
        .and_then(|u| url::Url::parse(u).ok())
    else {
        return Outcome::Failed("webhook url missing from the approved settings".into());
    };
    if let Err(reason) = check_url(
        &url,
        &ex.destinations.webhook_hosts,
        ex.destinations.allow_private,
    ) {
        return Outcome::Failed(format!("destination refused: {reason}"));
    }
    let cred = match credential(ex) {
        Ok(c) => c,
        Err(o) => return o,
    };
    let body = ex
        .params
        .get("body")
        .cloned()
        .unwrap_or(Value::Object(Default::default()));
    let mut req = ex
        .http
        .post(url)
        .header("content-type", "application/json")
        .header("idempotency-key", ex.grant_id.to_string())
        .header("x-actiond-proposal-id", ex.proposal_id.to_string())
        .body(serde_json::to_vec(&body).unwrap_or_default());
    if let Some(h) = ex.settings.get("headers").and_then(Value::as_object) {
        for (k, v) in h {
            if let Some(v) = v.as_str() {
                req = req.header(k.as_str(), v);
            }
        }
    }
    if let Some(c) = cred {
        req = req.bearer_auth(c);
    }
    send(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_received_body_is_compared_with_the_approved_one() {
        let p = json!({"body": {"event": "x", "n": 1}});
        let ok = compare(&p, "g", 200, &json!({"body": {"n": 1, "event": "x"}}));
        assert_eq!(ok.verdict, Verdict::Matches, "{ok:?}");
        assert_eq!(
            ok.after,
            "the receiver holds a body with keys event, n under this grant"
        );
        assert_eq!(
            compare(&p, "g", 200, &json!({"body": {"n": 2}})).verdict,
            Verdict::Differs
        );
        assert_eq!(compare(&p, "g", 404, &Value::Null).verdict, Verdict::Absent);
        assert_eq!(compare(&p, "g", 500, &Value::Null).verdict, Verdict::Unread);
    }
}
