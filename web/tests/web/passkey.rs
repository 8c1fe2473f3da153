//! Passkey-signed approvals in Chromium: `web/e2e/passkey.test.mjs` registers a passkey on a
//! virtual authenticator, approves with it, and tries a replayed and a cross-intent assertion;
//! a person without a passkey gets the page that says how to register one. Afterwards the
//! database must show the two passkey-signed approvals, the refusals as audit events, and
//! `actiond_store::passkeys::verify_all` (what `actiond audit verify-passkeys` runs) must
//! accept the stored assertions — and name the one whose signature a database owner altered.
//!
//! The same run proves passkeys and staged approvals together, as the demo tenant combines
//! them: under a second document version a refund over 500.00 needs a team lead, then finance,
//! each signing with their own passkey. A real `actiond policy` process escalates it and opens
//! its stages; finance trying during stage 1 is refused (and cannot replay that assertion in
//! stage 2); the proposal ends `approved` with one grant naming both people and two stored
//! assertions that verify offline.

use crate::browser::{browser_available, e2e_dir, start_provider, start_web};
use crate::support::*;
use serde_json::json;
use std::time::Duration;
use tokio::process::{Child, Command};

/// acme with refunds above 500.00 needing a passkey.
fn passkey_doc(issuer: &str) -> String {
    format!(
        r#"tenant: acme
policy:
  default: escalate
handlers:
  billing.refund.issue:
    credential: payments
    max_amount: 1000000
    require_passkey: true
    passkey_over: 50000
approvers:
  issuer: "{issuer}"
  claim: groups
  values: [acme-approvers]
"#
    )
}

/// Version 2 of acme: refunds over 500.00 take two stages (team-leads, then finance) and a
/// passkey for each Approve, as the demo tenant's refunds do.
fn staged_passkey_doc(issuer: &str) -> String {
    passkey_doc(issuer)
        .replace(
            "policy:\n  default: escalate\n",
            "policy:\n  default: escalate\n  escalation_ttl: 24h\n",
        )
        .replace(
            "    require_passkey: true\n",
            "    approvals:\n      stages:\n        - {approvers: team-leads, required: 1, within: 30m, over: 50000}\n        - {approvers: finance, required: 1, within: 4h, over: 50000}\n      on_timeout: next\n    require_passkey: true\n",
        )
        .replace(
            "values: [acme-approvers]",
            "values: [acme-approvers, team-leads, finance]",
        )
}

/// The `actiond` binary of this workspace (built by `cargo build --workspace`).
fn actiond_bin() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/debug/actiond")
}

/// Submits a refund of 600.00 under the staged document and lets a real `actiond policy`
/// process (as the policy role) escalate it and open its stages; returns its id once stage 1
/// (team-leads) is open. The policy process is returned to be dropped (killed) by the caller.
async fn staged_by_policy(
    t: &TestDb,
    bot: uuid::Uuid,
    creds: &std::path::Path,
) -> (uuid::Uuid, Child) {
    let bin = actiond_bin();
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build --workspace --all-targets` first",
        bin.display()
    );
    let params = json!({"payment_id": "pi_5", "amount": 60_000, "currency": "USD"});
    let id = escalated(
        &t.db,
        "acme",
        bot,
        "billing.refund.issue",
        "pi_5",
        params,
        "Order 5 was never delivered.",
        None,
        (PENDING, ""),
    )
    .await;
    let policy = Command::new(bin)
        .args([
            "policy",
            "--admin-listen",
            "127.0.0.1:0",
            "--poll-ms",
            "100",
        ])
        .arg("--database-url")
        .arg(&t.policy_url)
        .arg("--credentials-dir")
        .arg(creds)
        .kill_on_drop(true)
        .spawn()
        .expect("actiond policy");
    let c = t.db.client().await.unwrap();
    for _ in 0..150 {
        let open: Option<String> = c
            .query_opt(
                "SELECT s.approvers FROM proposals p JOIN approval_stages s ON s.proposal_id = p.id
                 WHERE p.id = $1 AND p.state = 'escalated' AND s.stage = 1 AND s.opened_at IS NOT NULL",
                &[&id],
            )
            .await
            .unwrap()
            .map(|r| r.get(0));
        if let Some(group) = open {
            assert_eq!(group, "team-leads");
            return (id, policy);
        }
        actiond_testkit::poll_pause(Duration::from_millis(200)).await;
    }
    panic!("actiond policy did not escalate {id} with its stages within 30 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_passkey_signed_approvals() {
    if !browser_available() {
        return;
    }
    let t = fresh_db().await;
    let (creds, _) = credentials("http://127.0.0.1:9/unused");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    // WebAuthn needs a domain as RP ID: the browser uses localhost, the app listens on 127.0.0.1.
    let web = format!("http://localhost:{port}");
    let redirect = format!("{web}/oidc/callback");
    let (_provider, issuer) = start_provider(&redirect).await;
    actiond_store::tenants::apply(&t.db, &passkey_doc(&issuer), "test")
        .await
        .unwrap();
    let bot = agent(&t.db, "acme", "refund-bot", "dave").await;
    let refund = |n: u32, amount: i64| {
        let pi = format!("pi_{n}");
        let params = json!({"payment_id": pi, "amount": amount, "currency": "USD"});
        let db = t.db.clone();
        async move {
            escalated(
                &db,
                "acme",
                bot,
                "billing.refund.issue",
                &pi,
                params,
                "Refund.",
                None,
                ("", "default"),
            )
            .await
        }
    };
    let p_first = refund(1, 60_000).await;
    let p_second = refund(2, 70_000).await;
    let p_bob = refund(3, 80_000).await;
    let p_deny = refund(4, 90_000).await;
    // Version 2 adds the stages; the four above stay under version 1 (no stages).
    actiond_store::tenants::apply(&t.db, &staged_passkey_doc(&issuer), "test")
        .await
        .unwrap();
    let (p_staged, _policy) = staged_by_policy(&t, bot, &creds).await;
    start_web(
        &t.web_url,
        &creds,
        listener,
        &issuer,
        &["--public-url", &web],
    )
    .await;

    let artifacts = e2e_dir().join("artifacts");
    let scratch_dir = scratch("passkey");
    let ids = [
        ("P_FIRST", p_first.to_string()),
        ("P_SECOND", p_second.to_string()),
        ("P_BOB", p_bob.to_string()),
        ("P_DENY", p_deny.to_string()),
        ("P_STAGED", p_staged.to_string()),
    ];
    let status = tokio::time::timeout(
        Duration::from_secs(300),
        Command::new("node")
            .args(["--test", "--test-reporter=spec", "passkey.test.mjs"])
            .current_dir(e2e_dir())
            .env("WEB_URL", &web)
            .envs(ids.iter().map(|(k, v)| (*k, v.as_str())))
            .env("ARTIFACTS", &artifacts)
            .env("PROFILES", scratch_dir.join("profiles"))
            .env("HOME", &scratch_dir)
            .env("TMPDIR", &scratch_dir)
            .kill_on_drop(true)
            .status(),
    )
    .await
    .expect("the passkey browser test took over 5 minutes")
    .expect("node");
    assert!(
        status.success(),
        "the passkey browser tests failed (output above)"
    );
    check_staged(&t, p_staged, &issuer).await;
    check_database(&t, [p_first, p_second, p_bob, p_deny]).await;
}

/// The staged, passkey-signed refund: approved by tina (stage 1) then frank (stage 2), one
/// grant naming both, two stored assertions (one per stage), and finance's two refusals.
async fn check_staged(t: &TestDb, p: uuid::Uuid, issuer: &str) {
    let (state, approvals, grants) = proposal_facts(&t.db, p).await;
    assert_eq!(state, "approved");
    assert_eq!(
        approvals,
        [
            format!("approve:tina:tina@acme.test:{issuer}"),
            format!("approve:frank:frank@acme.test:{issuer}")
        ]
    );
    assert_eq!(grants, ["web-e2e"]);
    let c = t.db.client().await.unwrap();
    let issued_by: String = c
        .query_one("SELECT issued_by FROM grants WHERE proposal_id = $1", &[&p])
        .await
        .unwrap()
        .get(0);
    assert_eq!(issued_by, "tina,frank");
    let stored = text_pairs(
        t,
        "SELECT k.subject, a.stage::text FROM approval_passkeys k
         JOIN approvals a ON a.proposal_id = k.proposal_id AND a.subject = k.subject
         WHERE k.proposal_id = $1 ORDER BY a.stage",
        p,
    )
    .await;
    assert_eq!(stored, pairs(&[("tina", "1"), ("frank", "2")]));
    let refused = text_pairs(
        t,
        "SELECT detail->'approver'->>'subject', detail->>'rule' FROM audit_events
         WHERE kind = 'approval.refused' AND proposal_id = $1 ORDER BY id",
        p,
    )
    .await;
    assert_eq!(
        refused,
        pairs(&[("frank", "stage_group"), ("frank", "passkey_refused")])
    );
    let stages = text_pairs(
        t,
        "SELECT detail->>'stage', (detail->'subjects')::text FROM audit_events
         WHERE kind = 'approval.stage_completed' AND proposal_id = $1 ORDER BY id",
        p,
    )
    .await;
    assert_eq!(
        stages.first(),
        pairs(&[("1", r#"["tina"]"#)]).first(),
        "{stages:?}"
    );
}

/// The rows of a two-column text query about proposal `p` (its `$1`).
async fn text_pairs(t: &TestDb, sql: &str, p: uuid::Uuid) -> Vec<(String, String)> {
    let c = t.db.client().await.unwrap();
    c.query(sql, &[&p])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

/// What the browser run must have left, then the offline verification and a tampered row.
async fn check_database(t: &TestDb, [p_first, p_second, p_bob, p_deny]: [uuid::Uuid; 4]) {
    for (p, want) in [
        (p_first, "approved"),
        (p_second, "approved"),
        (p_bob, "escalated"),
        (p_deny, "denied"),
    ] {
        assert_eq!(proposal_facts(&t.db, p).await.0, want, "{p}");
    }
    let c = t.db.client().await.unwrap();
    let rules: Vec<String> = c
        .query(
            "SELECT detail->>'rule' FROM audit_events WHERE kind = 'approval.refused'
               AND proposal_id = ANY($1) ORDER BY id",
            &[&vec![p_first, p_second, p_bob, p_deny]],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        rules,
        ["passkey_required", "passkey_refused", "passkey_refused"]
    );
    let stored: i64 = c
        .query_one(
            "SELECT count(*) FROM approval_passkeys WHERE subject = 'alice'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        stored, 2,
        "one stored assertion per passkey-signed approval"
    );
    let vouched: Vec<(String, bool)> = c
        .query(
            "SELECT label, vouched_by IS NOT NULL FROM passkeys WHERE subject = 'alice' ORDER BY created_at",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(
        vouched,
        [
            ("virtual key".to_owned(), false),
            ("second key".to_owned(), true)
        ],
        "alice's second passkey was allowed by her first"
    );
    let (checked, findings) = actiond_store::passkeys::verify_all(&t.db).await.unwrap();
    assert_eq!(
        (checked, findings.len()),
        (4, 0),
        "alice's two, tina's and frank's: {findings:?}"
    );
    let cli = cli_verify(&t.url).await;
    if let Some((ok, out)) = &cli {
        assert!(
            *ok && out.contains(r#""passkey_approvals":4"#),
            "actiond audit verify-passkeys on the untouched rows (alice's two, tina's, frank's): {out}"
        );
    }
    let append_only = c
        .execute("UPDATE approval_passkeys SET sign_count = 0", &[])
        .await
        .unwrap_err();
    assert!(
        append_only.to_string().contains("append-only")
            || format!("{append_only:?}").contains("append-only")
    );
    // A database owner rewrites one signature byte behind the trigger's back.
    c.batch_execute(&format!(
        "ALTER TABLE approval_passkeys DISABLE TRIGGER approval_passkeys_no_update;
         UPDATE approval_passkeys SET signature = overlay(signature placing '\\x00'::bytea from 12 for 1)
           WHERE proposal_id = '{p_second}';
         ALTER TABLE approval_passkeys ENABLE TRIGGER approval_passkeys_no_update;"
    ))
    .await
    .unwrap();
    let (checked, findings) = actiond_store::passkeys::verify_all(&t.db).await.unwrap();
    assert_eq!(checked, 4);
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(findings[0].proposal_id, p_second);
    assert!(
        findings[0].problem.starts_with("signature:"),
        "{}",
        findings[0].problem
    );
    if cli.is_some() {
        let (ok, out) = cli_verify(&t.url).await.unwrap();
        assert!(!ok, "the CLI must fail on a tampered assertion");
        assert!(
            out.contains(&p_second.to_string()) && out.contains("signature:"),
            "{out}"
        );
    }
}

/// Runs `actiond audit verify-passkeys` when the binary is built; (succeeded, stdout+stderr).
async fn cli_verify(url: &str) -> Option<(bool, String)> {
    let bin = actiond_bin();
    if !bin.exists() {
        eprintln!("actiond is not built: skipping the CLI half of the passkey verification");
        return None;
    }
    let out = Command::new(bin)
        .args(["audit", "verify-passkeys", "--database-url", url])
        .output()
        .await
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some((out.status.success(), text))
}
