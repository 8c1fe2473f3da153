//! Approve with an edit (issue #34, point 1), over real processes: `actiond api`, `policy`,
//! `web` and `executor`, and the break-glass CLI. A person's edit becomes a new proposal
//! linked to the original, evaluated by policy like any other; the original ends `amended`;
//! the agent following the original is told over REST and MCP; the grant of the new proposal
//! runs the edited amount at the billing sink.

use crate::approval_rules::{breakglass, stack};
use crate::support::refund;
use serde_json::{Value, json};
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

/// `approvals amend ID --as SUBJECT --intent … --edits EDITS`.
async fn amend_cli(
    s: &crate::support::Stack,
    id: uuid::Uuid,
    subject: &str,
    edits: &str,
) -> (bool, String, String) {
    breakglass(s, id, "amend", subject, &["--edits", edits]).await
}

/// The proposal amending `id`, if any.
async fn amended_to(s: &crate::support::Stack, id: uuid::Uuid) -> Option<uuid::Uuid> {
    let c = s.tdb.db.client().await.unwrap();
    c.query_opt("SELECT id FROM proposals WHERE amended_from = $1", &[&id])
        .await
        .unwrap()
        .map(|r| r.get(0))
}

async fn approvals_of(s: &crate::support::Stack, id: uuid::Uuid) -> Vec<String> {
    let c = s.tdb.db.client().await.unwrap();
    c.query(
        "SELECT subject FROM approvals WHERE proposal_id = $1 AND decision = 'approve' ORDER BY decided_at",
        &[&id],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| r.get(0))
    .collect()
}

/// `check_proposal` over `/mcp` with the stack's agent token.
pub(crate) async fn mcp_check(s: &crate::support::Stack, id: uuid::Uuid) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "check_proposal", "arguments": {"proposal_id": id}}});
    let r = s
        .http
        .post(format!("{}/mcp", s.api_url))
        .bearer_auth(&s.token)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    v["result"]["structuredContent"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_amended_refund_runs_the_edited_amount_and_the_agent_is_told() {
    let (mut s, _web) = stack("amend_runs_edited_amount", |d| d).await;
    s.start_executor("exec-1").await;
    let id = s.propose(&refund("pi_amend", 12000)).await;
    s.wait_state(id, "escalated", T).await;
    let (ok, out, err) = amend_cli(&s, id, "alice", r#"{"amount": 8000}"#).await;
    assert!(ok, "{out}{err}");
    assert!(out.contains("amount 12000 → 8000"), "{out}");
    let new = amended_to(&s, id).await.expect("a new proposal");
    assert_eq!(s.state(id).await, "amended");
    // Policy escalated the new intent (8000 > 5000); alice's edit is her approval of it.
    s.wait_state(new, "succeeded", T).await;
    assert_eq!(approvals_of(&s, new).await, ["alice"]);
    assert!(
        approvals_of(&s, id).await.is_empty(),
        "the original got no approval"
    );
    s.sentinel().await;
    let calls = s.calls();
    assert_eq!(calls.len(), 1, "one provider call");
    let body = String::from_utf8_lossy(&calls[0].body).to_string();
    assert!(body.contains("amount=8000"), "{body}");
    assert!(!body.contains("12000"), "{body}");
    // The new proposal has its own canonical params and intent hash.
    let (orig, edited) = (s.row(id).await, s.row(new).await);
    let (h1, h2): (String, String) = (orig.get("intent_hash"), edited.get("intent_hash"));
    assert_ne!(h1, h2);
    // The agent following the original is told plainly, over REST and MCP.
    let (st, v) = s.get(&s.token, &id.to_string(), "").await;
    assert_eq!(st, 200);
    assert_eq!(v["state"], "amended");
    assert_eq!(v["amended_to"]["proposal_id"], new.to_string());
    assert_eq!(v["amended_to"]["state"], "succeeded");
    assert_eq!(
        v["amended_to"]["changes"],
        json!([{"field": "amount", "from": 12000, "to": 8000}])
    );
    let (_, v2) = s.get(&s.token, &new.to_string(), "").await;
    assert_eq!(v2["amended_from"], id.to_string());
    let m = mcp_check(&s, id).await;
    assert_eq!(m["state"], "amended");
    assert_eq!(m["amended_to"]["proposal_id"], new.to_string());
    let msg = m["message"].as_str().unwrap();
    assert!(
        msg.contains("approved it with an edit") && msg.contains(&new.to_string()),
        "{msg}"
    );
    // Audit: the original's amendment and the new proposal's submission by the person.
    let kinds = s.audit_kinds(id).await;
    let amended = kinds
        .iter()
        .find(|(k, _)| k == "proposal.amended")
        .expect("proposal.amended");
    assert_eq!(amended.1["amended_to"], new.to_string());
    let new_kinds = s.audit_kind_names(new).await;
    assert_eq!(
        new_kinds.first().map(String::as_str),
        Some("proposal.submitted")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amendments_that_break_a_rule_are_refused_and_change_nothing() {
    let (s, _web) = stack("amend_refusals", |d| d).await;
    let id = s.propose(&refund("pi_refuse", 12000)).await;
    s.wait_state(id, "escalated", T).await;
    for (edits, field) in [
        (r#"{"amount": 200000}"#, "params.amount"),
        (r#"{"state": "approved"}"#, "params.state"),
        (
            r#"{"amount": 8000, "payment_id": "pi_other"}"#,
            "params.payment_id",
        ),
        (r#"{"amount": 8000, "extra": 1}"#, "params.extra"),
        (r#"{"amount": 8000, "amount": 9000}"#, "amount"),
    ] {
        let (ok, out, err) = amend_cli(&s, id, "alice", edits).await;
        assert!(!ok, "{edits} was accepted: {out}");
        assert!(err.contains(field), "{edits}: {err}");
    }
    // Not an approver of the tenant.
    let (ok, _, err) = amend_cli(&s, id, "mallory", r#"{"amount": 8000}"#).await;
    assert!(!ok);
    assert!(err.contains("not listed in approvers.subjects"), "{err}");
    assert_eq!(s.state(id).await, "escalated");
    assert!(amended_to(&s, id).await.is_none());
    // Amended once; a second amendment (or approval) of the decided original is refused.
    let (ok, out, err) = amend_cli(&s, id, "alice", r#"{"amount": 8000}"#).await;
    assert!(ok, "{out}{err}");
    let (ok, _, err) = amend_cli(&s, id, "bob", r#"{"amount": 7000}"#).await;
    assert!(!ok);
    assert!(err.contains("already amended"), "{err}");
    let (ok, _, err) = breakglass(&s, id, "approve", "bob", &[]).await;
    assert!(!ok);
    assert!(err.contains("already amended"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_amendment_policy_blocks_is_blocked_without_the_persons_approval() {
    let (s, _web) = stack("amend_blocked", |d| {
        d.replace(
            "    - name: small-refund",
            "    - name: odd-amount\n      when: 'action == \"billing.refund.issue\" && params.amount == 6666'\n      effect: block\n      reason: Never 66.66.\n    - name: small-refund",
        )
    })
    .await;
    let id = s.propose(&refund("pi_block", 12000)).await;
    s.wait_state(id, "escalated", T).await;
    let (ok, out, err) = amend_cli(&s, id, "alice", r#"{"amount": 6666}"#).await;
    assert!(ok, "{out}{err}");
    let new = amended_to(&s, id).await.unwrap();
    s.wait_state(new, "blocked", T).await;
    assert!(
        approvals_of(&s, new).await.is_empty(),
        "no approval of a blocked intent"
    );
    assert_eq!(s.state(id).await, "amended");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_two_approvers_required_the_amender_counts_once() {
    let (s, web) = stack("amend_two_of_m", |d| {
        d.replace(
            "    credential: payments\n",
            "    credential: payments\n    approvals_required: 2\n",
        )
    })
    .await;
    let id = s.propose(&refund("pi_two", 12000)).await;
    s.wait_state(id, "escalated", T).await;
    let (ok, out, err) = amend_cli(&s, id, "alice", r#"{"amount": 8000}"#).await;
    assert!(ok, "{out}{err}");
    assert!(out.contains("1 of 2"), "{out}");
    let new = amended_to(&s, id).await.unwrap();
    assert_eq!(s.state(new).await, "escalated");
    assert_eq!(approvals_of(&s, new).await, ["alice"]);
    // Alice again, on the web: the same person counts once.
    let alice = web.login(&s, "alice", "", None).await;
    let (_, _, body) = web.decide(&alice, new, "approve", &[]).await;
    assert_eq!(s.state(new).await, "escalated", "{body}");
    // Bob is the second person.
    let bob = web.login(&s, "bob", "", None).await;
    let (st, loc, body) = web.decide(&bob, new, "approve", &[]).await;
    assert_eq!(st, 303, "{body}");
    assert!(loc.contains("result=approved"), "{loc}");
    assert_eq!(s.state(new).await, "approved");
    assert_eq!(approvals_of(&s, new).await, ["alice", "bob"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_edit_creates_the_new_proposal_and_refuses_bad_edits() {
    let (s, web) = stack("amend_web", |d| d).await;
    let id = s.propose(&refund("pi_web", 12000)).await;
    s.wait_state(id, "escalated", T).await;
    let alice = web.login(&s, "alice", "", None).await;
    let (st, page) = web.page(&alice, id).await;
    assert_eq!(st, 200);
    assert!(
        page.contains("name=\"edit.amount\"") && page.contains("value=\"120.00\""),
        "{page}"
    );
    // Out of limits: 400 naming the field; a non-editable param: 400 naming it.
    let form = web.form(&alice, id, "amend").await;
    let (st, _, body) = web
        .post(&alice, id, form, &[("edit.amount", "2000.00")])
        .await;
    assert_eq!(st, 400, "{body}");
    assert!(body.contains("params.amount"), "{body}");
    let form = web.form(&alice, id, "amend").await;
    let (st, _, body) = web
        .post(&alice, id, form, &[("edit.payment_id", "pi_x")])
        .await;
    assert_eq!(st, 400, "{body}");
    assert!(body.contains("params.payment_id"), "{body}");
    // Without the CSRF token: refused before anything is read.
    let mut form = web.form(&alice, id, "amend").await;
    form.retain(|(k, _)| k != "csrf");
    let (st, _, _) = web
        .post(&alice, id, form, &[("edit.amount", "80.00")])
        .await;
    assert_eq!(st, 403);
    // Someone who may not approve for this tenant, with a valid session and CSRF token of
    // their own: refused, nothing filed.
    let mallory = web.login(&s, "mallory", "", None).await;
    let queue = mallory
        .http
        .get(format!("{}/queue", web.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let mut form = web.form(&alice, id, "amend").await;
    for (k, v) in &mut form {
        if k == "csrf" {
            *v = crate::web::hidden(&queue, "csrf");
        }
    }
    let (st, _, body) = web
        .post(&mallory, id, form, &[("edit.amount", "80.00")])
        .await;
    assert!(st == 403 || st == 404, "{st} {body}");
    assert_eq!(s.state(id).await, "escalated");
    // Bob reads the page now and submits an edit after alice's: 409.
    let bob = web.login(&s, "bob", "", None).await;
    let bob_form = web.form(&bob, id, "amend").await;
    // The edit.
    let form = web.form(&alice, id, "amend").await;
    let (st, loc, body) = web
        .post(&alice, id, form, &[("edit.amount", "80.00")])
        .await;
    assert_eq!(st, 303, "{body}");
    let new = amended_to(&s, id).await.unwrap();
    assert_eq!(loc, format!("/p/{new}?result=amended"));
    assert_eq!(s.state(id).await, "amended");
    assert_eq!(
        s.state(new).await,
        "approved",
        "alice's edit approved the escalated new intent"
    );
    let (_, page) = web.page(&alice, new).await;
    assert!(
        page.contains("id=\"amended-from\"") && page.contains("amount 12000 → 8000"),
        "{page}"
    );
    let (_, page) = web.page(&alice, id).await;
    assert!(
        page.contains("id=\"amended-to\"") && page.contains(&format!("/p/{new}")),
        "{page}"
    );
    let (st, _, body) = web
        .post(&bob, id, bob_form, &[("edit.amount", "70.00")])
        .await;
    assert_eq!(st, 409, "{body}");
}

/// Signs `subject` in on `web`'s dev login and returns the session cookie it set
/// (`name=value`), for a browser to carry.
async fn session_cookie(
    s: &crate::support::Stack,
    web: &crate::approval_rules::Web,
    subject: &str,
) -> String {
    let http = reqwest::Client::builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let page = http
        .get(format!("{}/login?again=1", web.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let code = web.code(s).await;
    let r = http
        .post(format!("{}/dev-login", web.url))
        .header("origin", &web.url)
        .form(&[
            ("prelogin", crate::web::hidden(&page, "prelogin").as_str()),
            ("next", "/queue"),
            ("code", code.as_str()),
            ("subject", subject),
            ("email", &format!("{subject}@acme.test")),
            ("groups", ""),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303, "dev login of {subject}");
    let cookie = r
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| v.split(';').next())
        .find(|v| v.starts_with("actiond_session="))
        .expect("a session cookie")
        .to_owned();
    actiond_testkit::eventually(T, "a fresh one-time code", || {
        let c = web.code(s);
        let used = code.clone();
        async move { Some(c.await).filter(|c| *c != used) }
    })
    .await;
    cookie
}

/// The amend flow in Chromium (`web/e2e/amend.test.mjs`, playwright-core and Debian
/// chromium): alice edits a refund of 120.00 to 80.00 on the decision page; with two approvers
/// required, her edit counts as one and bob approves the amended proposal. At 1280×900 and
/// 390×844 the diff and both buttons are inside the first screen. Screenshots go to
/// `tests/e2e/artifacts/amend_browser/` (not committed). Needs `apt-get install -y chromium`
/// and `web/e2e/node_modules` (`npm ci --prefix web/e2e`); skipped, loudly, only with
/// `ACTIOND_SKIP_BROWSER=1`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_chromium_a_person_amends_and_another_approves_the_amended_proposal() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf();
    let e2e = root.join("web/e2e");
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let ready = e2e.join("node_modules/playwright-core").exists()
        && std::path::Path::new(&chromium).exists();
    if !ready {
        assert_eq!(
            std::env::var("ACTIOND_SKIP_BROWSER").as_deref(),
            Ok("1"),
            "needs apt-get install -y chromium and npm ci --prefix web/e2e (or ACTIOND_SKIP_BROWSER=1)"
        );
        eprintln!("\n*** SKIPPED the amend browser test (ACTIOND_SKIP_BROWSER=1) ***\n");
        return;
    }
    let (s, web) = stack("amend_browser", |d| {
        d.replace(
            "    credential: payments\n",
            "    credential: payments\n    approvals_required: 2\n",
        )
    })
    .await;
    let id = s.propose(&refund("pi_browser", 12000)).await;
    s.wait_state(id, "escalated", T).await;
    let alice = session_cookie(&s, &web, "alice").await;
    let bob = session_cookie(&s, &web, "bob").await;
    let artifacts = root.join("tests/e2e/artifacts/amend_browser");
    // Under the system temp dir, not the logs: Chromium's singleton socket path must stay
    // within the 108 bytes of a Unix socket address, and a clone's path can be long.
    let scratch = actiond_testkit::Scratch::new("actiond-amend");
    let out = tokio::process::Command::new("node")
        .args(["--test", "--test-reporter=spec", "amend.test.mjs"])
        .current_dir(&e2e)
        .env("WEB_URL", &web.url)
        .env("P_AMEND", id.to_string())
        .env("ALICE_SESSION", &alice)
        .env("BOB_SESSION", &bob)
        .env("ARTIFACTS", &artifacts)
        .env("CHROMIUM", &chromium)
        .env("HOME", &*scratch)
        .env("TMPDIR", &*scratch)
        .kill_on_drop(true)
        .output()
        .await
        .expect("node");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{said}");
    assert!(
        out.status.success(),
        "the browser test failed (output above); screenshots in {}",
        artifacts.display()
    );
    // The database shows what the people did: the original amended, the new proposal
    // approved by alice (her edit) and bob, and its grant issued.
    assert_eq!(s.state(id).await, "amended");
    let new = amended_to(&s, id).await.expect("a new proposal");
    assert!(said.contains(&format!("amended: {new}")), "{said}");
    assert_eq!(s.state(new).await, "approved");
    assert_eq!(approvals_of(&s, new).await, ["alice", "bob"]);
    let edited = s.row(new).await;
    let params: String = edited.get("params_json");
    assert!(params.contains("\"amount\":8000"), "{params}");
    for shot in [
        "amend-02-first-screen-bob-1280x900.png",
        "amend-02-first-screen-bob-390x844.png",
    ] {
        assert!(artifacts.join(shot).exists(), "{shot}");
    }
}
