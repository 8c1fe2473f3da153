//! The classifier hook over real processes: a tenant names an operator-configured classifier;
//! a local classifier server answers, raises, tries to lower, stalls, fails and returns
//! garbage; policy may only raise, and escalates whenever the answer is missing or unreadable.
//! Every answer, its latency and whether it changed the decision are in the audit event.

use crate::support::{Options, Stack, TENANT, refund};
use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A classifier that answers by the proposal's `source_text`, and keeps what it was sent.
struct Classifier {
    url: String,
    seen: Arc<Mutex<Vec<Value>>>,
}

#[expect(
    clippy::disallowed_methods,
    reason = "a classifier that stalls: the stall is the fixture"
)]
async fn answer(seen: Arc<Mutex<Vec<Value>>>, req: Value) -> Response {
    seen.lock().unwrap().push(req.clone());
    let same = req["effect"].clone();
    match req["source_text"].as_str().unwrap_or_default() {
        "agree" => Json(json!({"effect": same})).into_response(),
        "raise-escalate" => {
            Json(json!({"effect": "escalate", "reason": "asks to bypass review"})).into_response()
        }
        "raise-block" => {
            Json(json!({"effect": "block", "reason": "injected instructions"})).into_response()
        }
        "lower" => Json(json!({"effect": "allow", "reason": "trust me"})).into_response(),
        "stall" => {
            tokio::time::sleep(Duration::from_secs(3)).await;
            Json(json!({"effect": "allow"})).into_response()
        }
        "garbage" => (StatusCode::OK, "<html>allow</html>").into_response(),
        "unknown-effect" => Json(json!({"effect": "approve"})).into_response(),
        _ => (StatusCode::INTERNAL_SERVER_ERROR, "boom").into_response(),
    }
}

impl Classifier {
    async fn start() -> Self {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        let app = axum::Router::new().route(
            "/classify",
            axum::routing::post(move |Json(req): Json<Value>| answer(s.clone(), req)),
        );
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/classify", l.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
        Self { url, seen }
    }
}

/// The test tenant with `policy.classifier` naming `endpoint`.
fn tenant_with(endpoint: &str) -> String {
    TENANT.replace(
        "  escalation_ttl: 1h\n",
        &format!("  escalation_ttl: 1h\n  classifier: {{endpoint: {endpoint}, timeout: 300ms}}\n"),
    )
}

async fn apply(s: &Stack, doc: &str) {
    let doc = doc
        .replace("RECEIVER", &s.recv.url)
        .replace("WEBHOOK_PATH", "hook");
    actiond_store::tenants::apply(&s.tdb.db, &doc, "test")
        .await
        .unwrap();
}

fn with_source(body: &str, source: &str) -> String {
    let mut v: Value = serde_json::from_str(body).unwrap();
    v["source_text"] = json!(source);
    v.to_string()
}

/// The `classifier` object of the proposal's `proposal.decided` event.
async fn audited(s: &Stack, id: uuid::Uuid) -> Value {
    s.audit_kinds(id)
        .await
        .into_iter()
        .find(|(k, _)| k == "proposal.decided")
        .map(|(_, d)| d["classifier"].clone())
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn a_classifier_can_only_raise_and_its_silence_escalates() {
    let classifier = Classifier::start().await;
    let mut s = Stack::with(
        "classifier",
        Options {
            policy: false,
            executor: false,
            ..Options::default()
        },
    )
    .await;
    apply(&s, &tenant_with("guard")).await;
    s.start_policy_with(vec![(
        "ACTIOND_POLICY_CLASSIFIERS",
        format!("guard={},other=http://127.0.0.1:9/", classifier.url),
    )])
    .await;

    // (source text, amount, state, outcome, changed, recorded rule)
    let small = 1000; // the rules allow it
    let large = 9000; // the rules escalate it
    let cases: [(&str, i64, &str, &str, bool, &str); 8] = [
        ("agree", small, "approved", "agreed", false, "small-refund"),
        (
            "raise-escalate",
            small,
            "escalated",
            "raised",
            true,
            "classifier:guard",
        ),
        (
            "raise-block",
            large,
            "blocked",
            "raised",
            true,
            "classifier:guard",
        ),
        (
            "lower",
            large,
            "escalated",
            "lower_ignored",
            false,
            "large-refund",
        ),
        (
            "stall",
            small,
            "escalated",
            "timeout",
            true,
            "classifier-unavailable:guard",
        ),
        (
            "garbage",
            small,
            "escalated",
            "malformed",
            true,
            "classifier-unavailable:guard",
        ),
        (
            "unknown-effect",
            small,
            "escalated",
            "malformed",
            true,
            "classifier-unavailable:guard",
        ),
        (
            "fail",
            small,
            "escalated",
            "error",
            true,
            "classifier-unavailable:guard",
        ),
    ];
    let mut ids = Vec::new();
    for (i, (source, amount, ..)) in cases.iter().enumerate() {
        let body = with_source(&refund(&format!("pi_cls_{i}"), *amount), source);
        ids.push(s.propose(&body).await);
    }
    for ((source, _, state, outcome, changed, rule), id) in cases.iter().zip(&ids) {
        s.wait_state(*id, state, Duration::from_secs(20)).await;
        let row = s.row(*id).await;
        assert_eq!(
            row.get::<_, Option<String>>("rule_name").as_deref(),
            Some(*rule),
            "{source}"
        );
        let c = audited(&s, *id).await;
        assert_eq!(c["endpoint"], "guard", "{source}: {c}");
        assert_eq!(c["outcome"], *outcome, "{source}: {c}");
        assert_eq!(c["changed"], *changed, "{source}: {c}");
        assert!(c["latency_ms"].as_u64().is_some(), "{source}: {c}");
        if *outcome == "timeout" {
            // The tenant's 300ms budget, not the classifier's 3 s stall.
            assert!(c["latency_ms"].as_u64().unwrap() < 2000, "{c}");
        }
    }
    // A raise records the classifier's reason for the agent and approvers.
    let reason: Option<String> = s.row(ids[2]).await.get("decision_reason");
    assert_eq!(
        reason.as_deref(),
        Some("Classifier guard: injected instructions")
    );
    // No grant exists for anything the classifier raised or could not judge.
    let c = s.tdb.db.client().await.unwrap();
    for id in &ids[1..] {
        let n: i64 = c
            .query_one("SELECT count(*) FROM grants WHERE proposal_id = $1", &[id])
            .await
            .unwrap()
            .get(0);
        assert_eq!(n, 0, "grant for {id}");
    }
    // What the classifier was sent: the action, target, params and source text.
    let seen = classifier.seen.lock().unwrap().clone();
    let first = seen
        .iter()
        .find(|r| r["source_text"] == "agree")
        .expect("the classifier was asked");
    assert_eq!(first["action"], "billing.refund.issue");
    assert_eq!(first["target"], "pi_cls_0");
    assert_eq!(first["params"]["amount"], small);
    assert_eq!(first["tenant"], "acme");
    assert_eq!(first["effect"], "allow");

    // A document naming an endpoint the operator never configured escalates, audited.
    apply(&s, &tenant_with("nobody")).await;
    let id = s.propose(&refund("pi_cls_unconfigured", small)).await;
    s.wait_state(id, "escalated", Duration::from_secs(20)).await;
    assert_eq!(audited(&s, id).await["outcome"], "unconfigured");
    // A blocked proposal is never sent (nothing to raise): shell.* stays blocked by the rules.
    let before = classifier.seen.lock().unwrap().len();
    apply(&s, &tenant_with("guard")).await;
    let (st, v) = s
        .post(r#"{"action":"shell.exec","params":{"cmd":"id"}}"#, None)
        .await;
    assert!(st == 202 || st == 400 || st == 403, "{st} {v}");
    let id = s
        .propose(&with_source(&refund("pi_cls_after", small), "agree"))
        .await;
    s.wait_state(id, "approved", Duration::from_secs(20)).await;
    let asked: Vec<Value> = classifier.seen.lock().unwrap()[before..].to_vec();
    assert!(
        asked.iter().all(|r| r["action"] != "shell.exec"),
        "{asked:?}"
    );
}
