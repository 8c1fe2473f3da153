//! The whole path through the approval web app: a person signs in (dev login, the loopback-only
//! stand-in for SSO), approves one proposal and denies another with one click each; the
//! executor runs exactly the approved one with the web service's grant.

use crate::support::{Options, Stack, refund};
use std::time::Duration;

pub(crate) fn hidden(html: &str, name: &str) -> String {
    let key = format!("name=\"{name}\" value=\"");
    let start = html
        .find(&key)
        .map(|i| i + key.len())
        .unwrap_or_else(|| panic!("no hidden field {name} in:\n{html}"));
    html[start..]
        .split('"')
        .next()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_approves_in_the_web_app_and_the_executor_runs_it() {
    let mut s = Stack::with("web_approval_runs", Options::default()).await;
    let approve_id = s.propose(&refund("pi_web_ok", 12000)).await;
    let deny_id = s.propose(&refund("pi_web_no", 15000)).await;
    s.wait_state(approve_id, "escalated", Duration::from_secs(20))
        .await;
    s.wait_state(deny_id, "escalated", Duration::from_secs(20))
        .await;

    let web = s.start_dev_web().await;
    let web_url = web.url.clone();
    let http = s.dev_sign_in(&web, "alice").await;
    let queue = http
        .get(format!("{web_url}/queue"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        queue.contains("Refund 120.00 USD") || queue.contains(&approve_id.to_string()),
        "{queue}"
    );

    for (id, verdict) in [(approve_id, "approve"), (deny_id, "deny")] {
        let page = http
            .get(format!("{web_url}/p/{id}"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let (csrf, intent, version, shown) = (
            hidden(&page, "csrf"),
            hidden(&page, "intent_hash"),
            hidden(&page, "doc_version"),
            hidden(&page, "shown"),
        );
        let r = http
            .post(format!("{web_url}/p/{id}/decide"))
            .header("origin", &web_url)
            .form(&[
                ("csrf", csrf.as_str()),
                ("intent_hash", intent.as_str()),
                ("doc_version", version.as_str()),
                ("shown", shown.as_str()),
                ("verdict", verdict),
            ])
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{verdict}: {}", r.status());
    }
    s.wait_state(approve_id, "succeeded", Duration::from_secs(20))
        .await;
    s.wait_state(deny_id, "denied", Duration::from_secs(20))
        .await;
    s.sentinel().await;
    let reqs = s.calls();
    assert_eq!(reqs.len(), 1, "only the approved refund ran");
    assert!(String::from_utf8_lossy(&reqs[0].body).contains("payment_intent=pi_web_ok"));
    let c = s.tdb.db.client().await.unwrap();
    let key: String = c
        .query_one(
            "SELECT key_id FROM grants WHERE proposal_id = $1",
            &[&approve_id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(key, "web-1");
    let who: serde_json::Value = c
        .query_one(
            "SELECT detail FROM audit_events WHERE proposal_id = $1 AND kind = 'approval.decided'",
            &[&approve_id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(who["approver"]["subject"], "alice");
    assert_eq!(who["approver"]["email"], "alice@acme.test");
}
