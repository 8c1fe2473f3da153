//! A preview the grant is bound to, and its warnings (issue #34, points 2 and 4), over real
//! processes: `actiond api`, `policy` and `executor`, the break-glass CLI and the loopback
//! billing sink (the test changes what the payment reads as already refunded, as a refund
//! made elsewhere would). A person's grant signs the hash of the stored preview; before
//! running, the executor reads the payment again and ends the proposal `stale` when a binding
//! field changed, with nothing paid and the grant spent once. The same for a DNS change
//! against the real PowerDNS (`crate::handlers::Hx`), and the web form's refusal of an
//! approval whose page showed another preview than the stored one (`stale_preview`).

use crate::amend::mcp_check;
use crate::handlers::{Hx, dns};
use crate::support::{Options, Stack, refund};
use crate::web::hidden;
use actiond_core::grant::{GRANT_VERSION, GrantClaims};
use actiond_testkit::providers::PowerDns;
use serde_json::{Value, json};
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

/// Waits for the stored preview of `id`: (sha256, canonical, warnings).
async fn stored_preview(s: &Stack, id: uuid::Uuid) -> (String, String, Value) {
    let db = s.tdb.db.clone();
    actiond_testkit::eventually(T, "a stored preview", || {
        let db = db.clone();
        async move {
            let c = db.client().await.ok()?;
            c.query_opt(
                "SELECT sha256, canonical, warnings FROM proposal_previews WHERE proposal_id = $1 AND ok",
                &[&id],
            )
            .await
            .ok()?
            .map(|r| (r.get(0), r.get(1), r.get(2)))
        }
    })
    .await
}

/// Refunds at the sink so far (the sentinels left out).
fn refunds(s: &Stack) -> usize {
    s.calls().iter().filter(|r| r.path == "/v1/refunds").count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refund_changed_after_its_preview_ends_stale_and_an_unchanged_one_runs() {
    let mut s = Stack::new("refund_changed_after_preview_is_stale").await;
    // Two escalated refunds of 60.00 against a payment of 150.00 with 25.00 refunded.
    let same = s.propose(&refund("pi_same", 6000)).await;
    let moved = s.propose(&refund("pi_moved", 6000)).await;
    for id in [same, moved] {
        s.wait_state(id, "escalated", T).await;
    }
    let (sha_same, canonical, warnings) = stored_preview(&s, same).await;
    assert_eq!(
        actiond_core::preview::hash(&canonical),
        sha_same,
        "the stored hash is the canonical document's"
    );
    let doc: Value = serde_json::from_str(&canonical).unwrap();
    assert_eq!(
        doc["binding"],
        serde_json::json!({"amount": 15000, "currency": "USD", "amount_refunded": 2500})
    );
    assert!(doc["read_at_us"].as_i64().unwrap() > 0, "{doc}");
    assert_eq!(
        warnings,
        serde_json::json!([]),
        "60.00 of 125.00 left warns of nothing"
    );
    let (sha_moved, _, _) = stored_preview(&s, moved).await;

    // Unchanged between preview and run: it runs, its grant signs the preview's hash.
    s.approve_as_alice(same).await;
    s.wait_state(same, "succeeded", T).await;
    assert_eq!(refunds(&s), 1);
    let c = s.tdb.superuser().await;
    let bound: Option<String> = c
        .query_one(
            "SELECT preview_sha256 FROM grants WHERE proposal_id = $1",
            &[&same],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(bound.as_deref(), Some(sha_same.as_str()));

    // Someone refunds 70.00 more elsewhere after the approver's preview: not run, `stale`.
    s.recv.set_amount_refunded(9500);
    s.approve_as_alice(moved).await;
    s.wait_state(moved, "stale", T).await;
    s.sentinel().await;
    assert_eq!(refunds(&s), 1, "no refund was paid for the stale proposal");
    let used: Option<String> = c
        .query_one(
            "SELECT used_by FROM grants WHERE proposal_id = $1",
            &[&moved],
        )
        .await
        .unwrap()
        .get(0);
    assert!(used.is_some(), "the grant was spent once, by the check");
    let events = s.audit_kinds(moved).await;
    let (kind, detail) = events.last().unwrap();
    assert_eq!(kind, "proposal.stale");
    assert_eq!(detail["check"], "changed");
    assert_eq!(detail["preview_sha256"], sha_moved.as_str());
    assert_eq!(detail["changes"][0]["field"], "amount_refunded");
    assert_eq!(detail["changes"][0]["before"], 2500);
    assert_eq!(detail["changes"][0]["now"], 9500);
    assert!(
        !events.iter().any(|e| e.0 == "proposal.executed"),
        "{events:?}"
    );
    // The agent is told why, over REST and MCP, by field name only.
    let (_, v) = s.get(&s.token, &moved.to_string(), "").await;
    assert_eq!(v["state"], "stale", "{v}");
    let reason = v["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("(amount_refunded)"), "{v}");
    assert!(!reason.contains("9500") && !reason.contains("95.00"), "{v}");
    let m = mcp_check(&s, moved).await;
    assert_eq!(m["state"], "stale", "{m}");
    assert!(
        m["message"]
            .as_str()
            .unwrap_or_default()
            .contains("NOT performed"),
        "{m}"
    );
    // The approver's reason is kept (as the run of `same` kept it); why it did not run is
    // where outcomes go, and the card says "not performed" beside who approved it.
    let reasons: Vec<(Option<String>, Option<String>)> = c
        .query(
            "SELECT decision_reason, outcome_detail FROM proposals WHERE id = ANY($1) ORDER BY id = $2",
            &[&vec![same, moved], &moved],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let approver_reason = reasons[0].0.clone().expect("the approver's reason");
    assert_eq!(reasons[1].0.as_deref(), Some(approver_reason.as_str()));
    let outcome: Value = serde_json::from_str(reasons[1].1.as_deref().unwrap()).unwrap();
    assert_eq!(outcome["agent_reason"], reason, "{outcome}");
    assert_eq!(
        outcome["changes"][0]["field"], "amount_refunded",
        "{outcome}"
    );
    let web = s.start_dev_web().await;
    let http = s.dev_sign_in(&web, "alice").await;
    let card = page(&http, &format!("{}/p/{moved}", web.url)).await;
    let not_performed = actiond_core::preview::STALE_CARD
        .split('\'')
        .next()
        .unwrap();
    assert!(card.contains(not_performed), "{card}");
    assert!(card.contains(&approver_reason), "{card}");
    // Nothing runs it again: stale is final.
    s.sentinel().await;
    assert_eq!(s.state(moved).await, "stale");
    assert_eq!(refunds(&s), 1);
}

/// The body of the page at `url`.
async fn page(http: &reqwest::Client, url: &str) -> String {
    http.get(url).send().await.unwrap().text().await.unwrap()
}

/// The same with a DNS change and the real PowerDNS: an RRset someone else changed between
/// the approver's preview and the run is not written (`stale`, the changed RRset named); the
/// unchanged one runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dns_change_whose_rrset_changed_after_its_preview_ends_stale_and_an_unchanged_one_runs() {
    let pdns = PowerDns::start(&["prod.example.com"]).await;
    let hx = Hx::new(
        "dns_changed_after_preview_is_stale",
        &[("ACTIOND_PDNS_BASE_URL", pdns.base_url.clone())],
        &[("pdns", &pdns.api_key)],
    )
    .await;
    let z = "prod.example.com";
    let (www, api) = ("www.prod.example.com", "api.prod.example.com");
    for name in [www, api] {
        pdns.set(z, name, "A", 300, &["192.0.2.7"]).await;
    }
    let same = hx
        .propose(
            "dns.record.update",
            dns(z, www, "A", json!(["203.0.113.9"])),
        )
        .await;
    let moved = hx
        .propose(
            "dns.record.update",
            dns(z, api, "A", json!(["203.0.113.10"])),
        )
        .await;
    for id in [same, moved] {
        hx.s.wait_state(id, "escalated", T).await;
        let (ok, text) = hx.preview(id).await;
        assert!(ok && text.contains("192.0.2.7 → 203.0.113."), "{text}");
    }
    // Someone else changes the api RRset in PowerDNS after the approver's preview.
    pdns.set(z, api, "A", 300, &["192.0.2.8"]).await;
    hx.approve(same).await;
    hx.approve(moved).await;
    hx.s.wait_state(same, "succeeded", T).await;
    hx.s.wait_state(moved, "stale", T).await;
    let rrset = |name: &'static str| {
        let pdns = &pdns;
        async move { pdns.rrset(z, name, "A").await.unwrap().1 }
    };
    assert_eq!(rrset(www).await, ["203.0.113.9"], "the unchanged one ran");
    assert_eq!(
        rrset(api).await,
        ["192.0.2.8"],
        "PowerDNS was not written for the stale one"
    );
    let events = hx.s.audit_kinds(moved).await;
    let (kind, detail) = events.last().unwrap();
    assert_eq!(kind, "proposal.stale");
    assert_eq!(detail["check"], "changed", "{detail}");
    assert_eq!(detail["changes"][0]["field"], "rrset", "{detail}");
    assert_eq!(
        detail["changes"][0]["before"]["records"],
        json!(["192.0.2.7"])
    );
    assert_eq!(detail["changes"][0]["now"]["records"], json!(["192.0.2.8"]));
    assert!(
        !events.iter().any(|e| e.0 == "proposal.executed"),
        "{events:?}"
    );
    let (_, v) = hx.s.get(&hx.token, &moved.to_string(), "").await;
    assert_eq!(v["state"], "stale", "{v}");
    let reason = v["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("(rrset)") && !reason.contains("192.0.2.8"),
        "{v}"
    );
}

/// Posts the decision form of `page` with `verdict`: (status, body).
async fn post_decision(
    http: &reqwest::Client,
    web_url: &str,
    id: uuid::Uuid,
    page: &str,
    verdict: &str,
) -> (u16, String) {
    let fields: Vec<(&str, String)> = [
        "csrf",
        "intent_hash",
        "doc_version",
        "shown",
        "preview_sha256",
    ]
    .into_iter()
    .map(|k| (k, hidden(page, k)))
    .chain([("verdict", verdict.to_owned())])
    .collect();
    let r = http
        .post(format!("{web_url}/p/{id}/decide"))
        .header("origin", web_url)
        .form(&fields)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// The web form's `stale_preview` refusal through the real POST (session, CSRF): a person
/// approves with the preview their page showed, but the stored one is another (read after the
/// page showed none; rebuilt after the payment changed): 409 with the reason, and nothing is
/// decided (no approval, no grant, still escalated). Reloaded, the page shows the stored
/// preview and its approval runs, bound to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_web_approval_of_a_preview_read_since_is_refused_and_nothing_is_granted() {
    let mut s = Stack::with(
        "web_stale_preview_refused",
        Options {
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let id = s.propose(&refund("pi_web_stale", 6000)).await;
    s.wait_state(id, "escalated", T).await;
    let web = s.start_dev_web().await;
    let http = s.dev_sign_in(&web, "alice").await;
    let url = format!("{}/p/{id}", web.url);
    let nothing_decided = |s: &Stack| {
        let db = s.tdb.db.clone();
        async move {
            let c = db.client().await.unwrap();
            let n = |sql: &'static str| {
                let c = &c;
                async move { c.query_one(sql, &[&id]).await.unwrap().get::<_, i64>(0) }
            };
            (
                n("SELECT count(*) FROM grants WHERE proposal_id = $1").await,
                n("SELECT count(*) FROM approvals WHERE proposal_id = $1").await,
                n("SELECT count(*) FROM audit_events WHERE proposal_id = $1 AND kind = 'approval.decided'").await,
            )
        }
    };
    let refusal = "the provider preview shown is not the one read since; reload it and decide again. Nothing was decided.";

    // The page showed no preview (none was read yet); the executor reads one meanwhile.
    let shown = page(&http, &url).await;
    assert_eq!(hidden(&shown, "preview_sha256"), "", "no preview yet");
    s.start_executor("exec-1").await;
    let (first, _, _) = stored_preview(&s, id).await;
    let (st, body) = post_decision(&http, &web.url, id, &shown, "approve").await;
    assert_eq!(st, 409, "{body}");
    assert!(body.contains(refusal), "{body}");
    assert_eq!(s.state(id).await, "escalated");
    assert_eq!(nothing_decided(&s).await, (0, 0, 0));

    // Reloaded, it shows the first preview; the payment changes and the preview is rebuilt.
    let shown = page(&http, &url).await;
    assert_eq!(hidden(&shown, "preview_sha256"), first);
    s.recv.set_amount_refunded(8000);
    s.tdb
        .superuser()
        .await
        .execute(
            "DELETE FROM proposal_previews WHERE proposal_id = $1",
            &[&id],
        )
        .await
        .unwrap();
    let (rebuilt, canonical, _) = stored_preview(&s, id).await;
    assert_ne!(rebuilt, first);
    assert!(
        canonical.contains("\"amount_refunded\":8000"),
        "{canonical}"
    );
    let (st, body) = post_decision(&http, &web.url, id, &shown, "approve").await;
    assert_eq!(st, 409, "{body}");
    assert!(body.contains(refusal), "{body}");
    assert_eq!(s.state(id).await, "escalated");
    assert_eq!(nothing_decided(&s).await, (0, 0, 0));

    // Reloaded again: it shows the rebuilt preview, the approval is granted bound to it, runs.
    let shown = page(&http, &url).await;
    assert_eq!(hidden(&shown, "preview_sha256"), rebuilt);
    let (st, body) = post_decision(&http, &web.url, id, &shown, "approve").await;
    assert!((200..300).contains(&st), "{st}: {body}");
    s.wait_state(id, "succeeded", T).await;
    let bound: Option<String> = s
        .tdb
        .superuser()
        .await
        .query_one(
            "SELECT preview_sha256 FROM grants WHERE proposal_id = $1",
            &[&id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(bound.as_deref(), Some(rebuilt.as_str()));
    assert_eq!(refunds(&s), 1);
}

/// `on_stale: reapprove`: a refund whose payment changed between the preview and the run does
/// not run and does not end `stale`; it goes back to `escalated` with a fresh preview, its
/// grant (spent by that run) and its approval void, its agent told why. Approved again (by the
/// same person) on the fresh preview, it runs once: one refund is paid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_on_stale_reapprove_a_changed_refund_goes_back_to_the_approvers_and_runs_once() {
    let s = Stack::new("refund_changed_goes_back_to_approvers").await;
    let c = s.tdb.superuser().await;
    let source: String = c
        .query_one(
            "SELECT source FROM tenant_documents WHERE tenant_id = 'acme' ORDER BY version DESC LIMIT 1",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let reapprove = source.replace(
        "    max_amount: 100000\n",
        "    max_amount: 100000\n    on_stale: reapprove\n",
    );
    assert_ne!(reapprove, source);
    actiond_store::tenants::apply(&s.tdb.db, &reapprove, "test")
        .await
        .unwrap();
    let id = s.propose(&refund("pi_reapprove", 6000)).await;
    s.wait_state(id, "escalated", T).await;
    let (first, _, _) = stored_preview(&s, id).await;

    // Someone refunds 25.00 more elsewhere after the preview; alice approves what she saw.
    s.recv.set_amount_refunded(5000);
    s.approve_as_alice(id).await;
    let events = actiond_testkit::eventually(T, "proposal.reescalated", || async {
        let events = s.audit_kinds(id).await;
        events
            .iter()
            .any(|e| e.0 == "proposal.reescalated")
            .then_some(events)
    })
    .await;
    assert_eq!(s.state(id).await, "escalated");
    let (kind, detail) = events.last().unwrap();
    assert_eq!(kind, "proposal.reescalated");
    assert_eq!(detail["changes"][0]["field"], "amount_refunded", "{detail}");
    assert_eq!(detail["changes"][0]["before"], 2500);
    assert_eq!(detail["changes"][0]["now"], 5000);
    assert_eq!(detail["approval_round"], 1);
    assert!(
        !events.iter().any(|e| e.0 == "proposal.stale"),
        "{events:?}"
    );
    let (fresh, canonical, _) = stored_preview(&s, id).await;
    assert_ne!(fresh, first);
    assert_eq!(detail["fresh_preview_sha256"], fresh.as_str());
    assert!(
        canonical.contains("\"amount_refunded\":5000"),
        "{canonical}"
    );
    s.sentinel().await;
    assert_eq!(refunds(&s), 0, "nothing was paid");
    let grant = c
        .query_one(
            "SELECT used_at IS NOT NULL, voided_at IS NOT NULL, preview_sha256 FROM grants WHERE proposal_id = $1",
            &[&id],
        )
        .await
        .unwrap();
    assert_eq!(
        (grant.get::<_, bool>(0), grant.get::<_, bool>(1)),
        (true, true),
        "the grant was spent by the run that did not happen, and is void"
    );
    assert_eq!(
        grant.get::<_, Option<String>>(2).as_deref(),
        Some(first.as_str())
    );
    // The agent is told why, over REST and MCP.
    let (_, v) = s.get(&s.token, &id.to_string(), "").await;
    assert_eq!(v["state"], "escalated", "{v}");
    let reason = v["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("(amount_refunded)") && reason.contains("went back to the approvers"),
        "{v}"
    );
    assert!(!reason.contains("5000") && !reason.contains("50.00"), "{v}");
    let m = mcp_check(&s, id).await;
    assert_eq!(m["state"], "escalated", "{m}");
    assert!(
        m["message"]
            .as_str()
            .unwrap_or_default()
            .contains("went back to the approvers"),
        "{m}"
    );
    // The database moves the approval round only with a run sent back, even for its owner.
    let err = c
        .execute(
            "UPDATE proposals SET approval_round = approval_round + 1 WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap_err();
    assert!(
        format!("{err:?}").contains("moves only when a run goes back to the approvers"),
        "{err:?}"
    );

    // Approved again by the same person, on the fresh preview: it runs once.
    s.approve_as_alice(id).await;
    s.wait_state(id, "succeeded", T).await;
    s.sentinel().await;
    assert_eq!(refunds(&s), 1, "one refund was paid");
    let grants = c
        .query(
            "SELECT voided_at IS NULL, used_at IS NOT NULL, preview_sha256 FROM grants WHERE proposal_id = $1 ORDER BY created_at",
            &[&id],
        )
        .await
        .unwrap();
    assert_eq!(grants.len(), 2);
    assert!(grants[1].get::<_, bool>(0) && grants[1].get::<_, bool>(1));
    assert_eq!(
        grants[1].get::<_, Option<String>>(2).as_deref(),
        Some(fresh.as_str())
    );
    let events = s.audit_kinds(id).await;
    assert_eq!(
        events.iter().filter(|e| e.0 == "proposal.executed").count(),
        1,
        "{events:?}"
    );
    assert_eq!(
        s.approval_count(id).await,
        2,
        "both rounds' approvals are kept"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refund_larger_than_what_is_left_is_warned_in_its_preview() {
    let s = Stack::new("refund_larger_than_left_warns").await;
    let id = s.propose(&refund("pi_big", 13000)).await;
    s.wait_state(id, "escalated", T).await;
    let (_, _, warnings) = stored_preview(&s, id).await;
    assert_eq!(
        warnings,
        serde_json::json!([
            "this refund of 130.00 USD is larger than what is left to refund: 125.00 USD"
        ])
    );
}

/// Approves the escalated `id` as a writer of the tables would, with a grant signed by the
/// trusted break-glass key over `signed_preview`, stored with `stored_preview` in its column.
async fn approve_with_preview(
    s: &Stack,
    id: uuid::Uuid,
    signed_preview: &str,
    stored_preview: &str,
) {
    let c = s.tdb.superuser().await;
    let intent: String = s.row(id).await.get(3);
    let now_us: i64 = c
        .query_one("SELECT (extract(epoch FROM now()) * 1000000)::bigint", &[])
        .await
        .unwrap()
        .get(0);
    let claims = GrantClaims {
        version: GRANT_VERSION,
        id: uuid::Uuid::new_v4(),
        proposal_id: id,
        tenant_id: "acme".into(),
        intent_hash: intent.clone(),
        doc_version: 1,
        expires_at: now_us + 300_000_000,
        key_id: "breakglass-1".into(),
        preview_sha256: Some(signed_preview.to_owned()),
        doc_sha256: None,
    };
    let sig = s.keys.breakglass.sign(&claims).unwrap();
    c.execute(
        "INSERT INTO grants (id, proposal_id, tenant_id, intent_hash, doc_version, expires_at_us, key_id, sig, issued_by, preview_sha256)
         VALUES ($1, $2, 'acme', $3, 1, $4, 'breakglass-1', $5, 'alice', $6)",
        &[&claims.id, &id, &intent, &claims.expires_at, &sig, &stored_preview],
    )
    .await
    .unwrap();
    c.execute(
        "UPDATE proposals SET state = 'approved' WHERE id = $1",
        &[&id],
    )
    .await
    .unwrap();
}

/// A grant whose preview hash was altered after signing is refused at the signature check
/// (`blocked`, `bad_signature`); a stored preview altered after the grant signed its hash is
/// caught before the run (`stale`, `preview_mismatch`). Neither pays a refund.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_altered_preview_hash_or_preview_is_refused() {
    let s = Stack::new("altered_preview_hash_is_refused").await;
    let a = s.propose(&refund("pi_alt_hash", 6000)).await;
    let b = s.propose(&refund("pi_alt_doc", 6000)).await;
    for id in [a, b] {
        s.wait_state(id, "escalated", T).await;
    }
    let (sha_a, _, _) = stored_preview(&s, a).await;
    let (sha_b, canonical_b, _) = stored_preview(&s, b).await;

    // The grant signed the real preview; its column was changed to another hash.
    approve_with_preview(&s, a, &sha_a, &"0".repeat(64)).await;
    s.wait_state(a, "blocked", T).await;
    let events = s.audit_kinds(a).await;
    let last = events.last().unwrap();
    assert_eq!(last.0, "grant.rejected");
    assert_eq!(last.1["reason"], "bad_signature", "{last:?}");

    // The stored preview was rewritten (what the approver saw is no longer what is stored).
    let c = s.tdb.superuser().await;
    let forged = canonical_b.replace("\"amount_refunded\":2500", "\"amount_refunded\":2501");
    assert_ne!(forged, canonical_b);
    c.execute(
        "UPDATE proposal_previews SET canonical = $2 WHERE proposal_id = $1",
        &[&b, &forged],
    )
    .await
    .unwrap();
    approve_with_preview(&s, b, &sha_b, &sha_b).await;
    s.wait_state(b, "stale", T).await;
    let events = s.audit_kinds(b).await;
    let last = events.last().unwrap();
    assert_eq!(last.0, "proposal.stale");
    assert_eq!(last.1["check"], "preview_mismatch", "{last:?}");
    s.sentinel().await;
    assert_eq!(refunds(&s), 0, "no refund was paid");
}

/// The decision page shows the preview's warning as a banner and sends back the hash of the
/// preview it showed; the queue flags the row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_card_and_the_queue_show_the_preview_warning() {
    let mut s = Stack::new("card_shows_preview_warning").await;
    let id = s.propose(&refund("pi_card", 13000)).await;
    s.wait_state(id, "escalated", T).await;
    let (sha, _, _) = stored_preview(&s, id).await;
    let web = s.start_dev_web().await;
    let http = s.dev_sign_in(&web, "alice").await;
    let get = |path: String| {
        let http = http.clone();
        async move { http.get(path).send().await.unwrap().text().await.unwrap() }
    };
    let page = get(format!("{}/p/{id}", web.url)).await;
    assert!(page.contains("id=\"preview-banner\""), "{page}");
    assert!(
        page.contains(
            "this refund of 130.00 USD is larger than what is left to refund: 125.00 USD"
        ),
        "{page}"
    );
    assert!(
        page.contains(&format!("name=\"preview_sha256\" value=\"{sha}\"")),
        "the form sends back the preview it showed"
    );
    let queue = get(format!("{}/queue", web.url)).await;
    assert!(
        queue.contains("⚠ preview: this refund of 130.00 USD"),
        "{queue}"
    );
    // The operator CLI flags it in the same words: `approvals show` and a row of `list`.
    let warning =
        "⚠ preview: this refund of 130.00 USD is larger than what is left to refund: 125.00 USD";
    let env = s.cli_env().await;
    let (ok, out, err) = actiond_testkit::cli(&["approvals", "show", &id.to_string()], &env);
    assert!(ok, "{err}");
    assert!(out.contains(&format!("\nflag       {warning}\n")), "{out}");
    let (ok, out, err) = actiond_testkit::cli(&["approvals", "list", "-o", "json"], &env);
    assert!(ok, "{err}");
    let rows: serde_json::Value = serde_json::from_str(&out).unwrap();
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id.to_string())
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(row["flags"], serde_json::json!([warning]), "{out}");
    let (_, out, _) = actiond_testkit::cli(&["approvals", "list"], &env);
    assert!(out.contains(warning), "{out}");
}
