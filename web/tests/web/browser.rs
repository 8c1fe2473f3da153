//! The browser test: a real OpenID provider (`oidc-provider`), a misbehaving one
//! (`fake-idp.mjs`), two instances of the app against them, and headless Chromium driven by
//! `playwright-core` through `web/e2e/e2e.test.mjs` (node's test runner). Afterwards the
//! database must show what the people did: one denial by alice, one approval by bob with a
//! grant signed by the web key, audit events with subject and email, and the attacked proposal
//! untouched.
//!
//! Needs `apt-get install -y chromium` and `npm ci --prefix web/e2e`. Skipped (loudly) only
//! with `ACTIOND_SKIP_BROWSER=1`.

use crate::support::*;
use actiond_web::AppState;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const CLIENT_ID: &str = "actiond-web-e2e";
const CLIENT_SECRET: &str = "e2e-client-secret-0123456789abcdef";

pub(crate) fn e2e_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e")
}

/// True when the browser test can run; panics with the install commands otherwise, unless
/// ACTIOND_SKIP_BROWSER=1.
pub(crate) fn browser_available() -> bool {
    let dir = e2e_dir();
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let missing: Vec<&str> = [
        (
            !dir.join("node_modules/playwright-core").exists(),
            "npm ci --prefix web/e2e",
        ),
        (
            !dir.join("node_modules/oidc-provider").exists(),
            "npm ci --prefix web/e2e",
        ),
        (
            !Path::new(&chromium).exists(),
            "apt-get install -y chromium",
        ),
    ]
    .into_iter()
    .filter_map(|(m, cmd)| m.then_some(cmd))
    .collect();
    if missing.is_empty() {
        return true;
    }
    if std::env::var("ACTIOND_SKIP_BROWSER").as_deref() == Ok("1") {
        eprintln!(
            "\n*** SKIPPED the browser test (ACTIOND_SKIP_BROWSER=1); missing: {} ***\n",
            missing.join(", ")
        );
        return false;
    }
    panic!(
        "the browser test needs: {} (or set ACTIOND_SKIP_BROWSER=1 to skip it)",
        missing.join(" and ")
    );
}

/// Starts a node script that prints `{"issuer": …}` on its first stdout line.
async fn start_idp(script: &str, envs: &[(&str, &str)]) -> (Child, String) {
    let mut cmd = Command::new("node");
    cmd.arg(script)
        .current_dir(e2e_dir())
        .envs(envs.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    let mut child = cmd.spawn().expect("node must be installed");
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .unwrap_or_else(|_| panic!("{script} did not start in 30 s"))
        .unwrap()
        .unwrap_or_else(|| panic!("{script} exited before printing its issuer"));
    let v: serde_json::Value = serde_json::from_str(&first).unwrap();
    // Keep draining stdout so the child never blocks or sees EPIPE.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, v["issuer"].as_str().unwrap().to_owned())
}

/// Starts the real provider (`provider.mjs`) for the test client redirecting to `redirect`.
pub(crate) async fn start_provider(redirect: &str) -> (Child, String) {
    start_idp(
        "provider.mjs",
        &[
            ("CLIENT_ID", CLIENT_ID),
            ("CLIENT_SECRET", CLIENT_SECRET),
            ("REDIRECT_URI", redirect),
        ],
    )
    .await
}

/// Starts the app on `listener` against `issuer`, with `extra` flags (e.g. `--public-url`).
pub(crate) async fn start_web(
    db_url: &str,
    creds: &Path,
    listener: tokio::net::TcpListener,
    issuer: &str,
    extra: &[&str],
) -> AppState {
    let addr = listener.local_addr().unwrap().to_string();
    let mut flags = vec![
        "--listen",
        &addr,
        "--database-url",
        db_url,
        "--credentials-dir",
        creds.to_str().unwrap(),
        "--oidc-issuer",
        issuer,
        "--oidc-client-id",
        CLIENT_ID,
        "--oidc-scopes",
        "email profile groups",
        "--grant-key-id",
        "web-e2e",
        "--notify-allow-private",
    ];
    flags.extend_from_slice(extra);
    let args = web_args(&flags);
    let state = AppState::build(&args).await.unwrap();
    tokio::spawn(actiond_web::serve_state(
        state.clone(),
        listener,
        std::future::pending(),
    ));
    state
}

/// A refund of 6,000.00 escalated under a second document version whose refunds over 5,000.00
/// take two stages of acme-approvers (two different people), with the stages as policy writes
/// them (stage 1 open, 2 h; stage 2 waiting).
async fn seed_staged(db: &actiond_store::Db, issuer: &str) -> uuid::Uuid {
    let doc = acme_doc(Some(issuer)).replace(
        "    max_amount: 1000000\n",
        "    max_amount: 1000000\n    approvals:\n      stages:\n        - {approvers: acme-approvers, within: 2h, over: 500000}\n        - {approvers: acme-approvers, within: 4h, over: 500000}\n",
    );
    actiond_store::tenants::apply(db, &doc, "test")
        .await
        .unwrap();
    let c = db.client().await.unwrap();
    let agent: uuid::Uuid = c
        .query_one(
            "SELECT id FROM agents WHERE tenant_id = 'acme' AND name = 'support-bot'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let params = serde_json::json!({"payment_id": "pi_big", "amount": 600000, "currency": "USD", "order_id": "77"});
    let id = escalated(
        db,
        "acme",
        agent,
        "billing.refund.issue",
        "pi_big",
        params,
        "Large refund.",
        None,
        ("", "default"),
    )
    .await;
    c.batch_execute(&format!(
        "UPDATE proposals SET doc_version = 2, doc_sha256 = (SELECT sha256 FROM tenant_documents WHERE tenant_id = 'acme' AND version = 2) WHERE id = '{id}';
         INSERT INTO approval_stages (proposal_id, tenant_id, stage, of_stages, approvers, required, within_secs, on_timeout)
         VALUES ('{id}', 'acme', 1, 2, 'acme-approvers', 1, 7200, 'next'), ('{id}', 'acme', 2, 2, 'acme-approvers', 1, 14400, 'next')"
    ))
    .await
    .unwrap();
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_sso_decisions_and_attacks() {
    if !browser_available() {
        return;
    }
    let t = fresh_db().await;
    let (_cap, hook_url, _relay) = capture_servers().await;
    let (creds, _) = credentials(&hook_url);
    let l1 = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let l2 = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let web1 = format!("http://{}", l1.local_addr().unwrap());
    let web2 = format!("http://{}", l2.local_addr().unwrap());
    let redirect1 = format!("{web1}/oidc/callback");
    let (_provider, issuer) = start_provider(&redirect1).await;
    let (_fake, fake_issuer) = start_idp("fake-idp.mjs", &[]).await;
    let seeded = seed(&t.db, Some(&issuer)).await;
    let layouts = seed_layouts(&t.db).await;
    let p_staged = seed_staged(&t.db, &issuer).await;
    start_web(&t.web_url, &creds, l1, &issuer, &[]).await;
    start_web(&t.web_url, &creds, l2, &fake_issuer, &[]).await;

    let artifacts = e2e_dir().join("artifacts");
    let scratch_dir = scratch("browser");
    let ids = [
        ("P_DENY", seeded.p_deny.to_string()),
        ("P_APPROVE", seeded.p_approve.to_string()),
        ("P_OTHER", seeded.p_other.to_string()),
        ("P_GLOBEX", seeded.p_globex.to_string()),
        ("P_DNS", layouts.p_dns.to_string()),
        ("P_EMAIL", layouts.p_email.to_string()),
        ("P_SQL", layouts.p_sql.to_string()),
        ("P_HOOK30", layouts.p_hook30.to_string()),
        ("P_DNS_LONG", layouts.p_dns_long.to_string()),
        ("P_STAGED", p_staged.to_string()),
        ("P_HOOK_SAYS", layouts.p_hook_says.to_string()),
        ("P_HOOK_LONG", layouts.p_hook_long.to_string()),
    ];
    let status = Command::new("node")
        .args(["--test", "--test-reporter=spec", "e2e.test.mjs"])
        .current_dir(e2e_dir())
        .env("WEB_URL", &web1)
        .env("WEB2_URL", &web2)
        .env("FAKE_IDP", &fake_issuer)
        .envs(ids.iter().map(|(k, v)| (*k, v.as_str())))
        .env("ARTIFACTS", &artifacts)
        .env("PROFILES", scratch_dir.join("profiles"))
        .env("HOME", &scratch_dir)
        .env("TMPDIR", &scratch_dir)
        .kill_on_drop(true)
        .status()
        .await
        .expect("node");
    assert!(
        status.success(),
        "the browser tests failed (output above); screenshots in {}",
        artifacts.display()
    );

    // The database shows exactly what the people did.
    let (state, approvals, _) = proposal_facts(&t.db, p_staged).await;
    assert_eq!(
        (state.as_str(), approvals),
        (
            "denied",
            vec![format!("deny:alice:alice@acme.test:{issuer}")]
        )
    );
    let (state, approvals, grants) = proposal_facts(&t.db, seeded.p_deny).await;
    assert_eq!(state, "denied");
    assert_eq!(
        approvals,
        vec![format!("deny:alice:alice@acme.test:{issuer}")]
    );
    assert!(grants.is_empty());
    let who = audit_approver(&t.db, "acme", seeded.p_deny).await.unwrap();
    assert_eq!(
        (who["subject"].as_str(), who["email"].as_str()),
        (Some("alice"), Some("alice@acme.test"))
    );

    let (state, approvals, grants) = proposal_facts(&t.db, seeded.p_approve).await;
    assert_eq!(state, "approved");
    assert_eq!(
        approvals,
        vec![format!("approve:bob:bob@acme.test:{issuer}")]
    );
    assert_eq!(grants, vec!["web-e2e".to_owned()]);
    let who = audit_approver(&t.db, "acme", seeded.p_approve)
        .await
        .unwrap();
    assert_eq!(
        (who["subject"].as_str(), who["email"].as_str()),
        (Some("bob"), Some("bob@acme.test"))
    );

    let (state, approvals, grants) = proposal_facts(&t.db, seeded.p_other).await;
    assert_eq!(
        (state.as_str(), approvals.len(), grants.len()),
        ("escalated", 0, 0),
        "attacks changed nothing"
    );
    assert_eq!(proposal_facts(&t.db, seeded.p_globex).await.0, "escalated");
    // No session was ever created for the fake IdP's bad tokens: only its one good control
    // login (and its replay attempt's first use).
    let c = t.db.client().await.unwrap();
    let eve: i64 = c
        .query_one(
            "SELECT count(*) FROM web_sessions WHERE subject = 'eve'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        eve, 2,
        "the good control login and the first use of the replayed callback"
    );
}
