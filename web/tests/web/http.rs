//! Plain-HTTP tests with the dev login: the dev-login rules, sessions, CSRF and origin checks,
//! stale decisions, the owner rule, tenant isolation, security headers, a grant issued with the
//! web key and audited with the approver's subject and email, and escalation notices (webhook
//! and SMTP) with agent text escaped for the channel.

use crate::support::*;
use actiond_web::AppState;
use reqwest::StatusCode;
use reqwest::header::{HeaderMap, LOCATION, SET_COOKIE};
use std::time::Duration;

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

fn set_cookies(h: &HeaderMap) -> Vec<String> {
    h.get_all(SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap().split(';').next().unwrap().to_owned())
        .collect()
}

pub(crate) fn hidden(html: &str, name: &str) -> String {
    let pat = format!("name=\"{name}\" value=\"");
    let start = html
        .find(&pat)
        .unwrap_or_else(|| panic!("no hidden {name} in {html}"))
        + pat.len();
    html[start..].split('"').next().unwrap().to_owned()
}

pub(crate) struct Dev {
    pub(crate) base: String,
    pub(crate) state: AppState,
    pub(crate) http: reqwest::Client,
}

impl Dev {
    pub(crate) async fn login(&self, subject: &str, email: &str, groups: &str) -> String {
        let r = self
            .http
            .get(format!("{}/login", self.base))
            .send()
            .await
            .unwrap();
        let pre = set_cookies(r.headers())
            .into_iter()
            .find(|c| c.starts_with("actiond_prelogin="))
            .unwrap();
        let html = r.text().await.unwrap();
        let form = [
            ("prelogin", hidden(&html, "prelogin")),
            ("next", "/queue".into()),
            ("code", self.state.dev_login_code().unwrap()),
            ("subject", subject.into()),
            ("email", email.into()),
            ("groups", groups.into()),
        ];
        let r = self
            .http
            .post(format!("{}/dev-login", self.base))
            .header("cookie", &pre)
            .form(&form)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::SEE_OTHER, "{:?}", r.text().await);
        set_cookies(r.headers())
            .into_iter()
            .find(|c| c.starts_with("actiond_session="))
            .unwrap()
    }

    pub(crate) async fn page(&self, cookie: &str, path: &str) -> (StatusCode, HeaderMap, String) {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .header("cookie", cookie)
            .send()
            .await
            .unwrap();
        (r.status(), r.headers().clone(), r.text().await.unwrap())
    }

    pub(crate) async fn post(
        &self,
        cookie: &str,
        path: &str,
        form: &[(&str, &str)],
        origin: Option<&str>,
    ) -> (StatusCode, String, String) {
        let mut req = self
            .http
            .post(format!("{}{path}", self.base))
            .header("cookie", cookie)
            .form(form);
        if let Some(o) = origin {
            req = req.header("origin", o);
        }
        let r = req.send().await.unwrap();
        let loc = r
            .headers()
            .get(LOCATION)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        (r.status(), loc, r.text().await.unwrap())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_login_is_refused_off_loopback() {
    let t = fresh_db().await;
    let (creds, _) = credentials("http://127.0.0.1:9/hook");
    let args = web_args(&[
        "--listen",
        "0.0.0.0:0",
        "--public-url",
        "https://approvals.example",
        "--database-url",
        &t.web_url,
        "--credentials-dir",
        creds.to_str().unwrap(),
        "--dev-login",
    ]);
    let err = AppState::build(&args).await.err().expect("must be refused");
    assert!(err.to_string().contains("loopback"), "{err}");
    // Plain http is refused off loopback too (cookies must be Secure).
    let args = web_args(&[
        "--public-url",
        "http://approvals.example",
        "--database-url",
        &t.web_url,
        "--credentials-dir",
        creds.to_str().unwrap(),
        "--dev-login",
    ]);
    assert!(AppState::build(&args).await.is_err());
    // HMAC and `none` can never be configured as ID-token algorithms.
    for algs in ["none", "HS256", "RS256,HS256"] {
        let args = web_args(&[
            "--database-url",
            &t.web_url,
            "--credentials-dir",
            creds.to_str().unwrap(),
            "--oidc-issuer",
            "https://idp.example",
            "--oidc-client-id",
            "x",
            "--oidc-algs",
            algs,
        ]);
        let err = AppState::build(&args).await.err().expect("refused alg");
        assert!(err.to_string().contains("refused"), "{algs}: {err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_login_decisions_csrf_isolation_and_notifications() {
    let t = fresh_db().await;
    let seeded = seed(&t.db, None).await;
    // support-bot filed p_deny with a delegated workload JWT (RFC 8693 `act`) for jane.
    t.db.client()
        .await
        .unwrap()
        .execute(
            "INSERT INTO proposal_delegations (proposal_id, tenant_id, on_behalf_of) VALUES ($1, 'acme', 'jane@customer.example')",
            &[&seeded.p_deny],
        )
        .await
        .unwrap();
    let (cap, hook_url, relay) = capture_servers().await;
    let (creds, _public) = credentials(&hook_url);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let args = web_args(&[
        "--listen",
        &listener.local_addr().unwrap().to_string(),
        "--database-url",
        &t.web_url,
        "--credentials-dir",
        creds.to_str().unwrap(),
        "--dev-login",
        "--grant-key-id",
        "web-test",
        "--smtp-relay",
        &relay,
        "--notify-interval",
        "1s",
        "--notify-allow-private",
    ]);
    let state = AppState::build(&args).await.unwrap();
    tokio::spawn(actiond_web::serve_state(
        state.clone(),
        listener,
        std::future::pending(),
    ));
    let dev = Dev {
        base: base.clone(),
        state,
        http: client(),
    };

    // Escalation notices go out first (checked at the end).
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let n = cap.webhooks.lock().unwrap().len();
        let m = cap.mails.lock().unwrap().len();
        if n >= 3 && m >= 3 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "notices: {n} webhooks, {m} mails"
        );
        actiond_testkit::poll_pause(Duration::from_millis(200)).await;
    }
    // Sentinel instead of "wait, then the count is unchanged": once every escalation's notice
    // row is settled (sent, or skipped for globex), none is claimed again, so no more notices.
    let c = t.db.client().await.unwrap();
    actiond_testkit::eventually(
        Duration::from_secs(20),
        "all four notices settled",
        || async {
            let settled: i64 = c
                .query_one(
                    "SELECT count(*) FROM web_notifications WHERE status IN ('sent', 'skipped')",
                    &[],
                )
                .await
                .unwrap()
                .get(0);
            (settled == 4).then_some(())
        },
    )
    .await;
    drop(c);

    // Anonymous: redirected to the sign-in page, never shown data.
    let r = dev.http.get(format!("{base}/queue")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()[LOCATION], "/login?next=%2Fqueue");
    // Without OIDC the sign-in page does not talk of a single sign-on it has no button for:
    // it says the dev login is the way in, where the code is, and who may approve.
    let login = dev
        .http
        .get(format!("{base}/login?next=%2Fqueue"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(login.contains("id=\"dev-only\""), "{login}");
    assert!(
        !login.contains("sign in with the company's single sign-on"),
        "{login}"
    );
    assert!(login.contains("dev login one-time code"), "{login}");
    assert!(login.contains("<code>dev-operator</code>"), "{login}");
    let r = dev
        .http
        .get(format!("{base}/p/{}", seeded.p_deny))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);

    // A wrong code is refused; a used code does not work twice.
    let r = dev.http.get(format!("{base}/login")).send().await.unwrap();
    let pre = set_cookies(r.headers())
        .into_iter()
        .find(|c| c.starts_with("actiond_prelogin="))
        .unwrap();
    let html = r.text().await.unwrap();
    let bad = [
        ("prelogin", hidden(&html, "prelogin")),
        ("code", "AAAA-BBBB-CCCC".into()),
        ("subject", "x".into()),
    ];
    let r = dev
        .http
        .post(format!("{base}/dev-login"))
        .header("cookie", &pre)
        .form(&bad)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    // No code at all is named as a missing field, not as a wrong one.
    let r = dev
        .http
        .post(format!("{base}/dev-login"))
        .header("cookie", &pre)
        .form(&[
            ("prelogin", hidden(&html, "prelogin")),
            ("subject", "x".into()),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(
        r.text()
            .await
            .unwrap()
            .contains("code: the one-time code is required"),
        "a missing code"
    );
    let old_code = dev.state.dev_login_code().unwrap();
    let approver = dev
        .login("approver-1", "a1@acme.test", "acme-approvers, staff")
        .await;
    assert_ne!(
        dev.state.dev_login_code().unwrap(),
        old_code,
        "the code is one-time"
    );
    let reuse = [
        ("prelogin", hidden(&html, "prelogin")),
        ("code", old_code),
        ("subject", "y".into()),
    ];
    let r = dev
        .http
        .post(format!("{base}/dev-login"))
        .header("cookie", &pre)
        .form(&reuse)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);

    // The decision page: headers, escaping, the hidden fields of what is shown.
    let (st, h, html) = dev
        .page(&approver, &format!("/p/{}", seeded.p_approve))
        .await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(h["x-frame-options"], "DENY");
    assert!(
        h["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("frame-ancestors 'none'")
    );
    assert!(
        !h["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("unsafe-inline")
    );
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert_eq!(h["referrer-policy"], "same-origin");
    assert_eq!(h["cache-control"], "no-store");
    assert!(!html.contains("<script"), "no script on any page");
    assert!(html.contains("Refund 120.00 USD on payment pi_1234 (order 1234)"));
    let csrf = hidden(&html, "csrf");
    let intent = hidden(&html, "intent_hash");
    let (_, _, deny_html) = dev.page(&approver, &format!("/p/{}", seeded.p_deny)).await;
    assert!(
        deny_html.contains("&#60;script&#62;alert(1)&#60;/script&#62;"),
        "{}",
        &deny_html[deny_html.find("source-text").unwrap_or(0)..]
    );
    // Params show hidden characters as markers; the source text as named red chips, counted
    // in a warning at the top, under a banner naming the injected phrases.
    assert!(deny_html.contains("⟨U+202E⟩"));
    assert!(deny_html.contains(r#"<span class="chip">U+200B ZERO WIDTH SPACE</span>"#));
    assert!(deny_html.contains(r#"<span class="chip">U+202E RIGHT-TO-LEFT OVERRIDE</span>"#));
    let banner = &deny_html[deny_html.find("injection-banner").unwrap_or(0)..];
    assert!(
        deny_html.contains("Possible prompt injection: the agent's text gives orders."),
        "{}",
        &banner[..banner.len().min(600)]
    );
    assert!(deny_html.contains("4 hidden or direction-changing characters"));
    assert!(html.contains("Approve refund of 120.00 USD"));
    let (_, _, other_html) = dev.page(&approver, &format!("/p/{}", seeded.p_other)).await;
    assert!(deny_html.contains(
        r#"<span class="mono">support-bot</span>, acting for jane@customer.example · owner"#
    ));
    assert!(!other_html.contains("acting for"));
    assert!(other_html.contains("&#60;!channel&#62;"));

    let p = format!("/p/{}/decide", seeded.p_approve);
    // No CSRF token, a token of nobody, a foreign Origin: 403, nothing changes.
    let base_form = [
        ("verdict", "approve"),
        ("intent_hash", intent.as_str()),
        ("doc_version", "1"),
    ];
    let (st, _, _) = dev.post(&approver, &p, &base_form, None).await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    let mut with_bad = base_form.to_vec();
    with_bad.push(("csrf", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"));
    assert_eq!(
        dev.post(&approver, &p, &with_bad, None).await.0,
        StatusCode::FORBIDDEN
    );
    let shown = hidden(&html, "shown");
    let mut good = base_form.to_vec();
    good.push(("csrf", csrf.as_str()));
    good.push(("shown", shown.as_str()));
    assert_eq!(
        dev.post(&approver, &p, &good, Some("https://evil.example"))
            .await
            .0,
        StatusCode::FORBIDDEN
    );
    // No session at all: 401, not a redirect.
    assert_eq!(
        dev.post("actiond_session=nothing", &p, &good, None).await.0,
        StatusCode::UNAUTHORIZED
    );
    // What was shown must be what is decided.
    let mut stale = good.clone();
    stale[1] = ("intent_hash", "deadbeefdeadbeef");
    let (st, _, body) = dev.post(&approver, &p, &stale, None).await;
    assert_eq!(st, StatusCode::CONFLICT, "{body}");
    let mut stale_doc = good.clone();
    stale_doc[2] = ("doc_version", "2");
    assert_eq!(
        dev.post(&approver, &p, &stale_doc, None).await.0,
        StatusCode::CONFLICT
    );
    assert_eq!(proposal_facts(&t.db, seeded.p_approve).await.0, "escalated");
    // The signed render stamp is part of the form: without it or forged, a script could
    // approve without its time on page being counted (400 naming `shown`). A field sent twice
    // (`verdict=approve&verdict=deny`) is a 400 naming it. Nothing is decided.
    let without: Vec<(&str, &str)> = good
        .iter()
        .filter(|(k, _)| *k != "shown")
        .copied()
        .collect();
    let forged_stamp = format!("1.{}", "0".repeat(64));
    let mut forged = without.clone();
    forged.push(("shown", forged_stamp.as_str()));
    let mut twice = good.clone();
    twice.push(("verdict", "deny"));
    // A Deny note longer than the page allows is refused, not cut (it was stored as its first
    // 200 characters).
    let long = "x".repeat(5000);
    let mut long_note = good.clone();
    long_note[0] = ("verdict", "deny");
    long_note.push(("note", long.as_str()));
    for (name, form, says) in [
        ("missing stamp", &without, "signed render time is missing"),
        ("forged stamp", &forged, "signed render time is missing"),
        ("verdict twice", &twice, "verdict: given more than once"),
        (
            "deny note too long",
            &long_note,
            "note: at most 200 characters, this one has 5000",
        ),
    ] {
        let (st, _, body) = dev.post(&approver, &p, form, None).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{name}: {body}");
        assert!(body.contains(says), "{name}: {body}");
    }
    // `doc_version=x` is not an integer (it was told the field is required), and a client
    // asking for problem details gets `errors` naming the field, as the API writes it.
    let mut not_a_number = good.clone();
    not_a_number[2] = ("doc_version", "x");
    let r = dev
        .http
        .post(format!("{}{p}", dev.base))
        .header("cookie", &approver)
        .header("accept", "application/problem+json")
        .form(&not_a_number)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let problem: serde_json::Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
    assert_eq!(problem["errors"][0]["field"], "doc_version", "{problem}");
    let rule = problem["errors"][0]["rule"].as_str().unwrap_or_default();
    assert!(rule.starts_with("must be an integer"), "{problem}");
    assert_eq!(proposal_facts(&t.db, seeded.p_approve).await.0, "escalated");

    // One click approves; the grant carries the web key id; the audit has subject and email.
    let (st, loc, _) = dev.post(&approver, &p, &good, Some(&base)).await;
    assert_eq!(st, StatusCode::SEE_OTHER);
    assert_eq!(loc, format!("/p/{}?result=approved", seeded.p_approve));
    let (state, approvals, grants) = proposal_facts(&t.db, seeded.p_approve).await;
    assert_eq!(state, "approved");
    assert_eq!(
        approvals,
        vec![format!(
            "approve:approver-1:a1@acme.test:{}",
            actiond_web::DEV_ISSUER
        )]
    );
    // Time on page: stored with the approval (from the signed render stamp) and counted in
    // the histogram by tenant and verdict only.
    let secs: Option<f64> =
        t.db.client()
            .await
            .unwrap()
            .query_one(
                "SELECT seconds_on_page FROM approvals WHERE proposal_id = $1",
                &[&seeded.p_approve],
            )
            .await
            .unwrap()
            .get(0);
    assert!(secs.is_some_and(|s| (0.0..60.0).contains(&s)), "{secs:?}");
    let m = dev.state.metrics_text();
    assert!(
        m.contains(
            r#"actiond_web_decision_seconds_count{service="web",tenant="acme",verdict="approve"} 1"#
        ) || m
            .lines()
            .any(|l| l.starts_with("actiond_web_decision_seconds_count{")
                && l.contains(r#"tenant="acme""#)
                && l.contains(r#"verdict="approve""#)
                && l.ends_with(" 1")),
        "{m}"
    );
    assert_eq!(grants, vec!["web-test".to_owned()]);
    let who = audit_approver(&t.db, "acme", seeded.p_approve)
        .await
        .unwrap();
    assert_eq!(who["subject"], "approver-1");
    assert_eq!(who["email"], "a1@acme.test");
    // A second decision learns who decided and when.
    let (st, loc, _) = dev.post(&approver, &p, &good, None).await;
    assert_eq!(
        (st, loc.as_str()),
        (
            StatusCode::SEE_OTHER,
            format!("/p/{}?result=already", seeded.p_approve).as_str()
        )
    );
    let (_, _, html) = dev.page(&approver, &loc).await;
    assert!(html.contains("already decided"));
    assert!(html.contains("by <span class=\"mono\">approver-1</span>"));

    // The owner of an agent cannot approve its proposals.
    let alice = dev
        .login("alice", "alice@acme.test", "acme-approvers")
        .await;
    let (_, _, html) = dev.page(&alice, &format!("/p/{}", seeded.p_other)).await;
    assert!(!html.contains("id=\"approve\""));
    let form = [
        ("csrf", hidden(&html, "csrf")),
        ("verdict", "approve".into()),
        ("intent_hash", hidden(&html, "intent_hash")),
        ("doc_version", "1".into()),
        ("shown", hidden(&html, "shown")),
    ];
    let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (st, _, body) = dev
        .post(
            &alice,
            &format!("/p/{}/decide", seeded.p_other),
            &form,
            None,
        )
        .await;
    assert_eq!(st, StatusCode::CONFLICT);
    assert!(body.contains("you own the agent"), "{body}");
    assert_eq!(proposal_facts(&t.db, seeded.p_other).await.0, "escalated");

    // Tenant isolation: a globex approver gets 404 on an acme proposal, GET and POST.
    let carol = dev
        .login("carol", "carol@globex.test", "globex-approvers")
        .await;
    let (st, _, _) = dev.page(&carol, &format!("/p/{}", seeded.p_other)).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (_, _, q) = dev.page(&carol, "/queue").await;
    assert!(q.contains("pi_globex") && !q.contains("pi_777"));
    let carol_form = [
        ("csrf", hidden(&q, "csrf")),
        ("verdict", "approve".into()),
        ("intent_hash", hidden(&html, "intent_hash")),
        ("doc_version", "1".into()),
    ];
    let carol_form: Vec<(&str, &str)> = carol_form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (st, _, _) = dev
        .post(
            &carol,
            &format!("/p/{}/decide", seeded.p_other),
            &carol_form,
            None,
        )
        .await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    assert_eq!(proposal_facts(&t.db, seeded.p_other).await.1.len(), 0);

    // Sign out ends the session server-side: the old cookie is worthless.
    let (_, _, q) = dev.page(&carol, "/queue").await;
    let (st, loc, _) = dev
        .post(
            &carol,
            "/logout",
            &[("csrf", hidden(&q, "csrf").as_str())],
            None,
        )
        .await;
    assert_eq!(
        (st, loc.as_str()),
        (StatusCode::SEE_OTHER, "/login?logged_out=1")
    );
    assert_eq!(dev.page(&carol, "/queue").await.0, StatusCode::SEE_OTHER);

    // Notices: every acme escalation reached the chat webhook once, escaped, with a link;
    // globex has no notify section. Email went through the SMTP relay.
    // (Waited for at the start, before any decision.)
    let hooks = cap.webhooks.lock().unwrap().clone();
    assert_eq!(hooks.len(), 3, "one notice per escalation: {hooks:?}");
    let texts: Vec<String> = hooks
        .iter()
        .map(|h| h["text"].as_str().unwrap().to_owned())
        .collect();
    let other = texts.iter().find(|t| t.contains("pi_777")).unwrap();
    assert!(
        other.contains("&lt;!channel&gt; &lt;https://evil.example|invoice&gt;"),
        "{other}"
    );
    assert!(
        other.contains(&format!(
            "<{base}/p/{}|open the decision page>",
            seeded.p_other
        )),
        "{other}"
    );
    assert_eq!(
        other.matches('<').count(),
        1,
        "only our own link is markup: {other}"
    );
    let exfil = texts.iter().find(|t| t.contains("webhook")).unwrap();
    assert!(
        exfil.contains("Send a webhook with fields customer_emails, note"),
        "{exfil}"
    );
    assert!(
        texts
            .iter()
            .all(|t| t.contains("nothing is approved from this message"))
    );
    assert!(
        !texts.iter().any(|t| t.contains("/decide")),
        "never approve-by-link"
    );
    let mails = cap.mails.lock().unwrap().clone();
    assert!(mails.iter().all(|m| m.contains("approvers@acme.test")));
    assert!(
        mails
            .iter()
            .any(|m| m.contains(&format!("{base}/p/{}", seeded.p_deny)))
    );
    let c = t.db.client().await.unwrap();
    let sent: i64 = c
        .query_one(
            "SELECT count(*) FROM web_notifications WHERE status = 'sent' AND tenant_id = 'acme'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(sent, 3);
}

pub(crate) async fn dev_server(t: &TestDb, extra: &[&str]) -> Dev {
    let (creds, _) = credentials("http://127.0.0.1:9/hook");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let mut flags = vec![
        "--listen",
        &addr,
        "--database-url",
        &t.web_url,
        "--credentials-dir",
        creds.to_str().unwrap(),
        "--dev-login",
    ];
    flags.extend_from_slice(extra);
    let state = AppState::build(&web_args(&flags)).await.unwrap();
    tokio::spawn(actiond_web::serve_state(
        state.clone(),
        listener,
        std::future::pending(),
    ));
    Dev {
        base: format!("http://{addr}"),
        state,
        http: client(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_survive_restarts_and_time_out() {
    let t = fresh_db().await;
    seed(&t.db, None).await;
    // A session made by one replica works on another (or after a restart): it lives in Postgres.
    let a = dev_server(&t, &[]).await;
    let cookie = a
        .login("approver-1", "a1@acme.test", "acme-approvers")
        .await;
    let b = dev_server(&t, &[]).await;
    let (st, _, html) = b.page(&cookie, "/queue").await;
    assert_eq!(st, StatusCode::OK);
    assert!(html.contains("approver for: acme"));

    // Idle timeout: the session clock is moved forward instead of waiting.
    let idle = dev_server(&t, &["--session-idle", "10m"]).await;
    let cookie = idle
        .login("approver-2", "a2@acme.test", "acme-approvers")
        .await;
    assert_eq!(idle.page(&cookie, "/queue").await.0, StatusCode::OK);
    idle.state
        .session_clock()
        .advance(Duration::from_secs(9 * 60));
    assert_eq!(idle.page(&cookie, "/queue").await.0, StatusCode::OK);
    idle.state
        .session_clock()
        .advance(Duration::from_secs(11 * 60));
    assert_eq!(idle.page(&cookie, "/queue").await.0, StatusCode::SEE_OTHER);

    // Absolute timeout, even when used all the time.
    let abs = dev_server(&t, &["--session-idle", "30m", "--session-max", "1h"]).await;
    let cookie = abs
        .login("approver-3", "a3@acme.test", "acme-approvers")
        .await;
    for _ in 0..2 {
        abs.state
            .session_clock()
            .advance(Duration::from_secs(20 * 60));
        assert_eq!(abs.page(&cookie, "/queue").await.0, StatusCode::OK);
    }
    abs.state
        .session_clock()
        .advance(Duration::from_secs(25 * 60));
    assert_eq!(abs.page(&cookie, "/queue").await.0, StatusCode::SEE_OTHER);

    // A tenant document change applies at once: drop the group and the queue is empty.
    let cookie = a
        .login("approver-4", "a4@acme.test", "acme-approvers")
        .await;
    assert!(
        a.page(&cookie, "/queue")
            .await
            .2
            .contains("approver for: acme")
    );
    let changed = acme_doc(None).replace("values: [acme-approvers]", "values: [acme-leads]");
    actiond_store::tenants::apply(&t.db, &changed, "test")
        .await
        .unwrap();
    // The document cache follows a NOTIFY, so "at once" means within moments, not this
    // very request: poll rather than race the listener on a loaded machine (5 s was once
    // too short with a Chromium suite beside it; 30 s bounds a lost notice, not a slow one).
    let mut last = (StatusCode::OK, HeaderMap::new(), String::new());
    for _ in 0..300 {
        last = a.page(&cookie, "/queue").await;
        if last.2.contains("no tenant lists you") {
            break;
        }
        actiond_testkit::poll_pause(Duration::from_millis(100)).await;
    }
    let (status, headers, html) = last;
    assert!(
        html.contains("no tenant lists you"),
        "{status} {headers:?} {html}"
    );
}

/// A client that asks for problem details gets them (RFC 9457) for every refusal; a browser,
/// asking for HTML, still gets the page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_problem_json_when_asked() {
    let t = fresh_db().await;
    seed(&t.db, None).await;
    let dev = dev_server(&t, &[]).await;
    let cases: &[(&str, &str, &str, u16, &str)] = &[
        // (method, path, Accept, status, content type)
        (
            "GET",
            "/nope",
            "application/problem+json",
            404,
            "application/problem+json",
        ),
        (
            "GET",
            "/nope",
            "application/json",
            404,
            "application/problem+json",
        ),
        (
            "POST",
            "/logout",
            "application/problem+json",
            401,
            "application/problem+json",
        ),
        (
            "PUT",
            "/queue",
            "application/problem+json",
            405,
            "application/problem+json",
        ),
        ("GET", "/nope", "text/html", 404, "text/html; charset=utf-8"),
    ];
    for (method, path, accept, status, ct) in cases {
        let r = dev
            .http
            .request(
                reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
                format!("{}{path}", dev.base),
            )
            .header("accept", *accept)
            .send()
            .await
            .unwrap();
        let case = format!("{method} {path} ({accept})");
        assert_eq!(r.status().as_u16(), *status, "{case}");
        let got = r.headers()["content-type"].to_str().unwrap().to_owned();
        let text = r.text().await.unwrap();
        assert_eq!(got, *ct, "{case}: {text}");
        if ct.starts_with("application/problem+json") {
            let body: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(body["status"], *status, "{case}: {body}");
            assert!(
                body["detail"].as_str().is_some_and(|d| !d.is_empty()),
                "{case}: {body}"
            );
        }
    }
}

/// Freezing an agent from one of its proposals denies its open escalations with one reason
/// (audited), shows on the page, marks it frozen for the api, and only its owner (or a tenant
/// admin) may unfreeze it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn freeze_an_agent_from_its_proposal() {
    let t = fresh_db().await;
    let seeded = seed(&t.db, None).await;
    let dev = dev_server(&t, &["--grant-key-id", "web-test"]).await;
    let base = dev.base.clone();
    let bob = dev.login("bob", "bob@acme.test", "acme-approvers").await;
    // refund-bot (owner alice) has two open escalations: p_approve and p_other.
    let (_, _, html) = dev.page(&bob, &format!("/p/{}", seeded.p_other)).await;
    assert!(
        html.contains("deny its 2 open requests and refuse new ones"),
        "{html}"
    );
    let csrf = hidden(&html, "csrf");
    let agent = {
        let pat = "action=\"/agents/";
        let i = html.find(pat).unwrap() + pat.len();
        html[i..i + 36].to_owned()
    };
    let from = seeded.p_other.to_string();
    let form = [("csrf", csrf.as_str()), ("from", from.as_str())];
    // A third proposal of refund-bot that policy has not seen yet (still pending).
    let agent_id = uuid::Uuid::parse_str(&agent).unwrap();
    let pending = escalated(
        &t.db,
        "acme",
        agent_id,
        "billing.refund.issue",
        "pi_9",
        serde_json::json!({"payment_id": "pi_9", "amount": 900, "currency": "USD"}),
        "Refund requested.",
        None,
        (PENDING, ""),
    )
    .await;
    // Attack: the web role denies a pending proposal of an agent that is not frozen (skipping
    // policy). The database refuses it.
    {
        let mut wc = dev.state.db().client().await.unwrap();
        let tx = wc.transaction().await.unwrap();
        actiond_store::set_tenant(&tx, "acme").await.unwrap();
        let err = tx
            .execute(
                "UPDATE proposals SET state = 'denied' WHERE id = $1",
                &[&pending],
            )
            .await
            .unwrap_err();
        assert_eq!(
            err.as_db_error().map(|e| e.message()),
            Some("a pending proposal is denied only when its agent is frozen or revoked")
        );
    }
    let (_, _, html) = dev.page(&bob, &format!("/p/{}", seeded.p_other)).await;
    assert!(
        html.contains("deny its 3 open requests and refuse new ones"),
        "pending ones count too: {html}"
    );
    // Another agent's proposal as `from`: 404, nothing frozen.
    let wrong = seeded.p_deny.to_string();
    let (st, _, _) = dev
        .post(
            &bob,
            &format!("/agents/{agent}/freeze"),
            &[("csrf", csrf.as_str()), ("from", wrong.as_str())],
            Some(&base),
        )
        .await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (st, loc, _) = dev
        .post(&bob, &format!("/agents/{agent}/freeze"), &form, Some(&base))
        .await;
    assert_eq!(st, StatusCode::SEE_OTHER);
    assert_eq!(loc, format!("/p/{}?result=frozen", seeded.p_other));
    assert_eq!(proposal_facts(&t.db, seeded.p_other).await.0, "denied");
    assert_eq!(proposal_facts(&t.db, seeded.p_approve).await.0, "denied");
    assert_eq!(proposal_facts(&t.db, seeded.p_deny).await.0, "escalated");
    assert_eq!(
        proposal_facts(&t.db, pending).await.0,
        "denied",
        "the pending one too"
    );
    let c = t.db.client().await.unwrap();
    let audited: Vec<(String, String, String)> = c
        .query(
            "SELECT from_state, to_state, decision_reason FROM audit_events e
               JOIN proposals p ON p.id = e.proposal_id
             WHERE e.proposal_id = ANY($1) AND e.kind = 'proposal.decided' ORDER BY from_state",
            &[&vec![pending, seeded.p_other]],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(audited.len(), 2, "{audited:?}");
    assert_eq!(
        (audited[0].0.as_str(), audited[1].0.as_str()),
        ("escalated", "pending")
    );
    assert!(
        audited
            .iter()
            .all(|a| a.1 == "denied" && a.2 == audited[0].2 && a.2.contains("agent frozen by bob")),
        "one reason for all: {audited:?}"
    );
    let frozen: bool = c
        .query_one(
            "SELECT frozen_at IS NOT NULL FROM agents WHERE id::text = $1",
            &[&agent],
        )
        .await
        .unwrap()
        .get(0);
    assert!(frozen);
    let events: i64 = c
        .query_one(
            "SELECT count(*) FROM audit_events WHERE kind = 'agent.frozen' AND actor = 'approver:bob'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(events, 1);
    let (_, _, html) = dev.page(&bob, &format!("/p/{}", seeded.p_other)).await;
    assert!(html.contains("<span class=\"badge bad\">frozen</span>"));
    assert!(
        !html.contains("id=\"unfreeze\""),
        "bob is neither owner nor admin"
    );
    let (st, _, _) = dev
        .post(
            &bob,
            &format!("/agents/{agent}/unfreeze"),
            &form,
            Some(&base),
        )
        .await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    // The owner unfreezes it.
    let alice = dev
        .login("alice", "alice@acme.test", "acme-approvers")
        .await;
    let (_, _, html) = dev.page(&alice, &format!("/p/{}", seeded.p_other)).await;
    assert!(html.contains("id=\"unfreeze\""));
    let csrf = hidden(&html, "csrf");
    let (st, loc, _) = dev
        .post(
            &alice,
            &format!("/agents/{agent}/unfreeze"),
            &[("csrf", csrf.as_str()), ("from", from.as_str())],
            Some(&base),
        )
        .await;
    assert_eq!(
        (st, loc.as_str()),
        (
            StatusCode::SEE_OTHER,
            format!("/p/{}?result=unfrozen", seeded.p_other).as_str()
        )
    );
    let frozen: bool = c
        .query_one(
            "SELECT frozen_at IS NOT NULL FROM agents WHERE id::text = $1",
            &[&agent],
        )
        .await
        .unwrap()
        .get(0);
    assert!(!frozen);
}

/// The tenant filter shows the truth (`?tenant=acme` lists acme's waiting items; a tenant the
/// person does not approve for says so instead of "nothing waits"), a 404 keeps the navigation
/// (signed in: the whole header; anonymous: queue and history links), and only tenant admins
/// see the Approvers link and page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenant_filter_not_found_navigation_and_admin_links() {
    let t = fresh_db().await;
    seed(&t.db, None).await;
    let dev = dev_server(&t, &[]).await;
    let bob = dev.login("bob", "bob@acme.test", "acme-approvers").await;
    let (st, _, all) = dev.page(&bob, "/queue").await;
    assert_eq!(st, StatusCode::OK);
    assert!(all.contains("3 waiting for a decision"), "{all}");
    for q in [
        "?tenant=acme",
        "?tenant=acme&agent=&action=",
        "?tenant=+acme+",
    ] {
        let (st, _, html) = dev.page(&bob, &format!("/queue{q}")).await;
        assert_eq!(st, StatusCode::OK);
        assert!(
            html.contains("3 waiting for a decision") && html.contains("pi_1234"),
            "{q}: {html}"
        );
        assert!(!html.contains("Nothing is waiting"), "{q}");
    }
    let (_, _, html) = dev.page(&bob, "/queue?tenant=acme&agent=refund-bot").await;
    assert!(html.contains("2 waiting for a decision"), "{html}");
    let (st, _, html) = dev.page(&bob, "/queue?tenant=globex").await;
    assert_eq!(st, StatusCode::OK);
    assert!(
        html.contains("You do not approve for “globex” (or no such tenant exists); showing all your tenants instead")
            && html.contains("3 waiting for a decision")
            && !html.contains("Nothing is waiting"),
        "{html}"
    );
    assert!(
        !html.contains("pi_globex"),
        "another tenant's items stay hidden"
    );

    // 404s keep the navigation.
    for path in [
        "/no-such-page".to_owned(),
        format!("/p/{}", uuid::Uuid::new_v4()),
    ] {
        let (st, _, html) = dev.page(&bob, &path).await;
        assert_eq!(st, StatusCode::NOT_FOUND, "{path}");
        assert!(
            html.contains(r#"<nav aria-label="Main">"#)
                && html.contains(r#"href="/history""#)
                && html.contains("Signed in as")
                && html.contains(r#"action="/logout""#),
            "{path}: {html}"
        );
    }
    let r = dev
        .http
        .get(format!("{}/no-such-page", dev.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let html = r.text().await.unwrap();
    assert!(html.contains(r#"<nav aria-label="Main">"#) && html.contains(r#"href="/queue""#));
    assert!(!html.contains("Signed in as"));
    // Asked for problem details, a 404 is still one.
    let r = dev
        .http
        .get(format!("{}/no-such-page", dev.base))
        .header("cookie", &bob)
        .header("accept", "application/problem+json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert_eq!(r.headers()["content-type"], "application/problem+json");
    // A malformed proposal id is the client's mistake: a 400 naming it, not "not found".
    let r = dev
        .http
        .get(format!("{}/p/not-a-uuid", dev.base))
        .header("cookie", &bob)
        .header("accept", "application/problem+json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let v: serde_json::Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
    assert_eq!(v["detail"], "proposal id: must be a UUID", "{v}");

    // Admin pages: linked and served to tenant admins only.
    assert!(!all.contains("/admin/approvers"), "bob is no admin");
    assert_eq!(
        dev.page(&bob, "/admin/approvers").await.0,
        StatusCode::FORBIDDEN
    );
    let dana = dev
        .login("dana", "dana@acme.test", "acme-approvers,acme-admins")
        .await;
    let (_, _, html) = dev.page(&dana, "/queue").await;
    assert!(html.contains(r#"<a href="/admin/approvers" id="nav-approvers">Approvers</a>"#));
    let (st, _, html) = dev.page(&dana, "/admin/approvers").await;
    assert_eq!(st, StatusCode::OK);
    assert!(html.contains("Approvers of acme, last 30 days"), "{html}");
}

/// The proposal ids a queue page links, in page order.
fn linked_ids(html: &str) -> Vec<uuid::Uuid> {
    html.split(r#"<a class="sentence" href="/p/"#)
        .skip(1)
        .map(|s| s[..36].parse().unwrap())
        .collect()
}

/// The Next link of a queue page (HTML-unescaped), if any.
fn next_link(html: &str) -> Option<String> {
    let start = html.find(r#"id="next-page""#)?;
    let before = &html[..start];
    let href = before.rsplit(r#"href=""#).next().unwrap();
    Some(
        href.split('"')
            .next()
            .unwrap()
            .replace("&#38;", "&")
            .replace("&amp;", "&"),
    )
}

/// Follows the Next links from `first`; returns each page's ids.
async fn walk(dev: &Dev, cookie: &str, first: &str) -> Vec<Vec<uuid::Uuid>> {
    let mut pages = Vec::new();
    let mut path = Some(first.to_owned());
    while let Some(p) = path {
        let (st, _, html) = dev.page(cookie, &p).await;
        assert_eq!(st, StatusCode::OK, "{p}: {html}");
        pages.push(linked_ids(&html));
        path = next_link(&html);
        assert!(
            pages.len() < 10,
            "the Next links never end: {path:?} {:?}",
            pages.iter().map(Vec::len).collect::<Vec<_>>()
        );
    }
    pages
}

/// Escalated ids of `tenants` in the queue's order (`created_at`, `id`), by the database.
async fn queue_order(t: &TestDb, tenants: &[&str]) -> Vec<uuid::Uuid> {
    let c = t.db.client().await.unwrap();
    c.query(
        "SELECT id FROM proposals WHERE state = 'escalated' AND tenant_id = ANY($1) ORDER BY created_at, id",
        &[&tenants],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| r.get(0))
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_pages_with_a_stable_keyset_and_keeps_the_tenant_filter() {
    let t = fresh_db().await;
    seed(&t.db, None).await;
    // 240 more acme rows (three agents, under the open-escalation cap) and 5 more globex ones.
    let rule = ("", "No rule matched; the default is escalate.");
    for a in 0..3 {
        let agent_id = agent(&t.db, "acme", &format!("bulk-{a}"), "olga").await;
        for i in 0..80 {
            let pay = format!("pi_bulk_{a}_{i}");
            let params =
                serde_json::json!({"payment_id": pay, "amount": 100 + i, "currency": "USD"});
            escalated(
                &t.db,
                "acme",
                agent_id,
                "billing.refund.issue",
                &pay,
                params,
                "bulk",
                None,
                rule,
            )
            .await;
        }
    }
    let g = agent(&t.db, "globex", "globex-bulk", "gina").await;
    for i in 0..5 {
        let pay = format!("pi_gbulk_{i}");
        let params = serde_json::json!({"payment_id": pay, "amount": 100, "currency": "EUR"});
        escalated(
            &t.db,
            "globex",
            g,
            "billing.refund.issue",
            &pay,
            params,
            "bulk",
            None,
            rule,
        )
        .await;
    }
    let dev = dev_server(&t, &[]).await;
    let erin = dev
        .login("erin", "erin@acme.test", "acme-approvers,globex-approvers")
        .await;

    // All tenants: 249 rows in pages of 100, each page the next 100 by (created_at, id).
    let order = queue_order(&t, &["acme", "globex"]).await;
    assert_eq!(order.len(), 249);
    let (_, _, first) = dev.page(&erin, "/queue").await;
    assert!(first.contains("249 waiting for a decision"), "{first}");
    assert!(
        first.contains("Showing 100 of 249: pages of 100"),
        "{first}"
    );
    assert!(first.contains("<title>(249) Queue"), "{first}");
    // A row proposed while the person pages goes to the end: no page repeats or skips a row.
    let late = escalated(
        &t.db,
        "globex",
        g,
        "billing.refund.issue",
        "pi_late",
        serde_json::json!({"payment_id": "pi_late", "amount": 100, "currency": "EUR"}),
        "late",
        None,
        rule,
    )
    .await;
    let mut pages = vec![linked_ids(&first)];
    pages.extend(walk(&dev, &erin, &next_link(&first).unwrap()).await);
    let sizes: Vec<usize> = pages.iter().map(Vec::len).collect();
    assert_eq!(sizes, [100, 100, 50]);
    let mut expected = order.clone();
    expected.push(late);
    for (page, chunk) in pages.iter().zip(expected.chunks(100)) {
        let (mut a, mut b) = (page.clone(), chunk.to_vec());
        a.sort();
        b.sort();
        assert_eq!(
            a, b,
            "each page holds the next 100 in (created_at, id) order"
        );
    }
    // The last page offers the first, not a next.
    let last_path = {
        let (_, _, p2) = dev.page(&erin, &next_link(&first).unwrap()).await;
        next_link(&p2).unwrap()
    };
    let (_, _, last) = dev.page(&erin, &last_path).await;
    assert!(
        next_link(&last).is_none() && last.contains(r#"<a href="/queue" id="first-page">"#),
        "{last}"
    );

    // The tenant filter holds on every page: the Next link carries it.
    let acme = queue_order(&t, &["acme"]).await;
    let pages = walk(&dev, &erin, "/queue?tenant=acme").await;
    assert_eq!(
        pages.iter().map(Vec::len).collect::<Vec<_>>(),
        [100, 100, 43]
    );
    let mut seen: Vec<uuid::Uuid> = pages.concat();
    seen.sort();
    let mut want = acme.clone();
    want.sort();
    assert_eq!(seen, want, "every acme row once, and only acme rows");
    let (_, _, p1) = dev.page(&erin, "/queue?tenant=acme").await;
    assert!(
        next_link(&p1)
            .unwrap()
            .starts_with("/queue?tenant=acme&after="),
        "{p1}"
    );
    let (_, _, globex) = dev.page(&erin, "/queue?tenant=globex").await;
    assert!(
        globex.contains("7 waiting for a decision") && next_link(&globex).is_none(),
        "{globex}"
    );
    assert!(!globex.contains("Showing"), "one page needs no pager");

    // A cursor that is not one is refused, naming the field.
    for bad in ["nonsense", "123", "x.y", "1764600000000000.not-a-uuid"] {
        let (st, _, body) = dev.page(&erin, &format!("/queue?after={bad}")).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{bad}");
        assert!(
            body.contains("after: must be the cursor of the queue"),
            "{bad}: {body}"
        );
    }
}

/// Decided ids of `tenants` in the history's order (`updated_at`, `id`, newest first), by the
/// database.
async fn history_order(t: &TestDb, tenants: &[&str]) -> Vec<uuid::Uuid> {
    let c = t.db.client().await.unwrap();
    c.query(
        "SELECT id FROM proposals WHERE effect = 'escalate' AND tenant_id = ANY($1)
           AND state NOT IN ('pending', 'escalated') ORDER BY updated_at DESC, id DESC",
        &[&tenants],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| r.get(0))
    .collect()
}

/// The history pages like the queue: 100 rows a page, newest first by `(updated_at, id)`, the
/// Next links walking every decided row exactly once (rows decided in one statement share
/// their `updated_at`: the id breaks the tie), the filters kept, a bad cursor a 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_history_pages_newest_first_with_a_stable_keyset() {
    let t = fresh_db().await;
    seed(&t.db, None).await;
    let rule = ("", "No rule matched; the default is escalate.");
    let mut bulk = Vec::new();
    for a in 0..3 {
        let agent_id = agent(&t.db, "acme", &format!("past-{a}"), "olga").await;
        for i in 0..80 {
            let pay = format!("pi_past_{a}_{i}");
            let params =
                serde_json::json!({"payment_id": pay, "amount": 100 + i, "currency": "USD"});
            let id = escalated(
                &t.db,
                "acme",
                agent_id,
                "billing.refund.issue",
                &pay,
                params,
                "past",
                None,
                rule,
            )
            .await;
            bulk.push(id);
        }
    }
    // Two batches expire, each in one statement: ties inside a batch, none across.
    let c = t.db.client().await.unwrap();
    for part in [&bulk[..150], &bulk[150..]] {
        c.execute(
            "UPDATE proposals SET state = 'expired' WHERE id = ANY($1)",
            &[&part],
        )
        .await
        .unwrap();
    }
    let order = history_order(&t, &["acme", "globex"]).await;
    assert_eq!(order.len(), 240);
    let dev = dev_server(&t, &[]).await;
    let erin = dev
        .login("erin", "erin@acme.test", "acme-approvers,globex-approvers")
        .await;
    let (_, _, first) = dev.page(&erin, "/history").await;
    assert!(
        first.contains("Showing 100 of 240: pages of 100"),
        "{first}"
    );
    let pages = walk(&dev, &erin, "/history").await;
    assert_eq!(
        pages.iter().map(Vec::len).collect::<Vec<_>>(),
        [100, 100, 40]
    );
    assert_eq!(
        pages.concat(),
        order,
        "every decided row once, newest first"
    );
    let last_path = {
        let (_, _, p2) = dev.page(&erin, &next_link(&first).unwrap()).await;
        next_link(&p2).unwrap()
    };
    let (_, _, last) = dev.page(&erin, &last_path).await;
    assert!(
        next_link(&last).is_none() && last.contains(r#"<a href="/history" id="first-page">"#),
        "{last}"
    );
    // The filters ride along on every Next link.
    let (_, _, p1) = dev.page(&erin, "/history?tenant=acme&agent=past-1").await;
    assert!(
        p1.contains("Decided proposals") && next_link(&p1).is_none(),
        "{p1}"
    );
    assert_eq!(linked_ids(&p1).len(), 80, "one agent's 80 rows on one page");
    let (_, _, p1) = dev.page(&erin, "/history?tenant=acme").await;
    assert!(
        next_link(&p1)
            .unwrap()
            .starts_with("/history?tenant=acme&after="),
        "{p1}"
    );
    let (_, _, globex) = dev.page(&erin, "/history?tenant=globex").await;
    assert!(!globex.contains("Showing"), "one page needs no pager");
    // A cursor that is not one is refused, naming the field.
    for bad in ["nonsense", "1764600000000000.not-a-uuid"] {
        let (st, _, body) = dev.page(&erin, &format!("/history?after={bad}")).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{bad}");
        assert!(
            body.contains("after: must be the cursor of the history"),
            "{bad}: {body}"
        );
    }
}

/// `/queue` and `/history` take only their filters (tenant, agent, action, after): a typo
/// like `?stat=denied` is a 400 page naming the parameter and the ones they take, never the
/// unfiltered list; a filter given twice is refused too; the filters themselves still work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_and_history_refuse_parameters_they_do_not_take() {
    let t = fresh_db().await;
    seed(&t.db, None).await;
    let dev = dev_server(&t, &[]).await;
    let erin = dev
        .login("erin", "erin@acme.test", "acme-approvers,globex-approvers")
        .await;
    for page in ["/queue", "/history"] {
        for (query, name) in [
            ("stat=denied", "stat"),
            ("tenant=acme&agnet=support-bot", "agnet"),
            ("Tenant=acme", "Tenant"),
        ] {
            let (st, _, body) = dev.page(&erin, &format!("{page}?{query}")).await;
            assert_eq!(st, StatusCode::BAD_REQUEST, "{page}?{query}: {body}");
            assert!(
                body.contains(&format!(
                    "{name}: is not a parameter of this page (it takes tenant, agent, action, after)"
                )),
                "{page}?{query}: {body}"
            );
            assert!(
                body.contains("role=\"alert\""),
                "a readable error page: {body}"
            );
            assert!(
                !body.contains("pi_1234"),
                "{page}?{query}: no list behind the error"
            );
        }
        let (st, _, body) = dev.page(&erin, &format!("{page}?agent=a&agent=b")).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{body}");
        assert!(body.contains("agent: must be given at most once"), "{body}");
        let (st, _, body) = dev
            .page(&erin, &format!("{page}?tenant=acme&agent=&action="))
            .await;
        assert_eq!(st, StatusCode::OK, "{page}: {body}");
    }
    let (_, _, queue) = dev.page(&erin, "/queue?tenant=acme").await;
    assert!(
        queue.contains("pi_1234"),
        "the filters still apply: {queue}"
    );
}

/// Postgres stopped under a logged-in approver: the queue page is a 503 with `Retry-After`
/// that says nothing was decided (not a login redirect, not a 500), a client asking for
/// problem details gets one, and the same session works again once the server is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_is_503_while_postgres_is_down_and_comes_back() {
    use actiond_testkit::{PgCluster, StopMode};
    let pg = PgCluster::start();
    let t = fresh_db_on(&pg.admin_url()).await;
    seed(&t.db, None).await;
    let dev = dev_server(&t, &[]).await;
    let cookie = dev.login("bob", "bob@acme.test", "acme-approvers").await;
    let (st, _, html) = dev.page(&cookie, "/queue").await;
    assert_eq!(st, StatusCode::OK, "{html}");
    pg.stop(StopMode::Fast);
    let (st, headers, html) = dev.page(&cookie, "/queue").await;
    assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE, "{headers:?} {html}");
    assert_eq!(
        headers.get("retry-after").map(|v| v.to_str().unwrap()),
        Some("2")
    );
    assert!(html.contains("Temporarily unavailable"), "{html}");
    assert!(html.contains("nothing was decided"), "{html}");
    let r = dev
        .http
        .get(format!("{}/queue", dev.base))
        .header("cookie", &cookie)
        .header("accept", "application/problem+json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["status"], 503, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("nothing was decided")),
        "{body}"
    );
    pg.start_again();
    // The pool reconnects on its own: the session (stored in Postgres) is still valid.
    let mut last = (StatusCode::OK, HeaderMap::new(), String::new());
    for _ in 0..100 {
        last = dev.page(&cookie, "/queue").await;
        if last.0 == StatusCode::OK {
            break;
        }
        actiond_testkit::poll_pause(Duration::from_millis(100)).await;
    }
    let (st, headers, html) = last;
    assert_eq!(st, StatusCode::OK, "{headers:?} {html}");
    assert!(html.contains("approver for: acme"), "{html}");
}

/// The decision page takes only `result` (once): any other parameter is a 400 page naming it,
/// as on the lists. A Deny whose `reason` is not one of the offered picks (a forged form) is a
/// 400 naming `reason` and the allowed values, and nothing is decided; an offered pick denies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_decision_page_refuses_unknown_parameters_and_forged_deny_reasons() {
    let t = fresh_db().await;
    let seeded = seed(&t.db, None).await;
    let dev = dev_server(&t, &[]).await;
    let approver = dev
        .login("approver-1", "a1@acme.test", "acme-approvers")
        .await;
    let page = format!("/p/{}", seeded.p_deny);
    for (query, says) in [
        (
            "reslt=denied",
            "reslt: is not a parameter of this page (it takes result)",
        ),
        (
            "result=denied&tenant=acme",
            "tenant: is not a parameter of this page (it takes result)",
        ),
        (
            "result=denied&result=approved",
            "result: must be given at most once",
        ),
    ] {
        let (st, _, body) = dev.page(&approver, &format!("{page}?{query}")).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{query}: {body}");
        assert!(body.contains(says), "{query}: {body}");
        assert!(body.contains("role=\"alert\""), "a readable page: {body}");
    }
    let (st, _, _) = dev.page(&approver, &format!("{page}?result=denied")).await;
    assert_eq!(st, StatusCode::OK);
    let (st, _, html) = dev.page(&approver, &page).await;
    assert_eq!(st, StatusCode::OK);
    let (csrf, intent, shown) = (
        hidden(&html, "csrf"),
        hidden(&html, "intent_hash"),
        hidden(&html, "shown"),
    );
    let decide = format!("{page}/decide");
    let form = |reason: &'static str| {
        vec![
            ("verdict", "deny"),
            ("intent_hash", intent.clone().leak() as &str),
            ("doc_version", "1"),
            ("csrf", csrf.clone().leak() as &str),
            ("shown", shown.clone().leak() as &str),
            ("reason", reason),
        ]
    };
    let (st, _, body) = dev
        .post(&approver, &decide, &form("approved by the CEO"), None)
        .await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body.contains("reason: &#34;approved by the CEO&#34; is not one of the reasons offered")
            || body.contains(
                "reason: &quot;approved by the CEO&quot; is not one of the reasons offered"
            ),
        "{body}"
    );
    assert!(body.contains("looks injected, wrong amount"), "{body}");
    assert_eq!(proposal_facts(&t.db, seeded.p_deny).await.0, "escalated");
    let (st, loc, body) = dev
        .post(&approver, &decide, &form("looks injected"), None)
        .await;
    assert_eq!(st, StatusCode::SEE_OTHER, "{body}");
    assert_eq!(loc, format!("{page}?result=denied"));
    assert_eq!(proposal_facts(&t.db, seeded.p_deny).await.0, "denied");
}

/// Every page that takes a redirect target (`next`) judges it with the login's one check: a
/// tab or newline (which browsers drop, turning `/<TAB>/evil` into `//evil`), `//host`, an
/// absolute URL and any backslash form are refused on the login and on the passkeys page
/// alike; a local path is kept by both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_redirect_target_passes_the_logins_check() {
    let t = fresh_db().await;
    seed(&t.db, None).await;
    let dev = dev_server(&t, &[]).await;
    let cookie = dev
        .login("approver-1", "a1@acme.test", "acme-approvers")
        .await;
    let next = |n: &str| {
        url::form_urlencoded::Serializer::new(String::new())
            .append_pair("next", n)
            .finish()
    };
    for evil in [
        "/\t/evil.example",
        "/\n/evil.example",
        "/\r\n/evil.example",
        "/p/\t",
        "//evil.example",
        "https://evil.example",
        "/\\evil.example",
        "\\/evil.example",
        "/\\/evil.example",
        "/p/x\\y",
    ] {
        let q = next(evil);
        let (st, h, _) = dev.page(&cookie, &format!("/login?{q}")).await;
        assert_eq!(st, StatusCode::SEE_OTHER, "{evil:?}");
        assert_eq!(h[LOCATION], "/queue", "login next {evil:?}");
        let (st, _, html) = dev.page(&cookie, &format!("/passkeys?{q}")).await;
        assert_eq!(st, StatusCode::OK, "{evil:?}");
        assert_eq!(hidden(&html, "next"), "", "passkeys next {evil:?}");
        assert!(!html.contains("id=\"back\""), "passkeys back link {evil:?}");
        assert!(!html.contains("evil.example"), "{evil:?}: {html}");
    }
    // The control: a local path is a target on both.
    let local = format!("/p/{}", uuid::Uuid::new_v4());
    let (st, h, _) = dev.page(&cookie, &format!("/login?{}", next(&local))).await;
    assert_eq!(
        (st, h[LOCATION].to_str().unwrap()),
        (StatusCode::SEE_OTHER, local.as_str())
    );
    let (_, _, html) = dev
        .page(&cookie, &format!("/passkeys?{}", next(&local)))
        .await;
    assert_eq!(hidden(&html, "next"), local);
    assert!(
        html.contains(&format!("<a href=\"{local}\" id=\"back\">")),
        "{html}"
    );
}
