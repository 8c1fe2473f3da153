//! Shadow policies on live traffic: a candidate document stored with `actiond tenant shadow`
//! is evaluated beside the live one without changing any decision; `actiond policy
//! shadow-report` and the tenant-admin web page show what it would have flipped; `actiond
//! tenant promote` applies it through the versioned, audited apply path.

use crate::support::{Options, Stack, TENANT, refund};
use actiond_testkit::cli;
use std::time::Duration;

fn live_doc(s: &Stack) -> String {
    TENANT
        .replace("RECEIVER", &s.recv.url)
        .replace("WEBHOOK_PATH", "hook")
        + "admins:\n  subjects: [carol]\n"
}

/// The tenant-admin page: carol (listed under admins) sees the report; alice (an approver,
/// not an admin) is refused; another tenant's report is a 404.
async fn check_admin_page(s: &mut Stack, flipped: uuid::Uuid) {
    let web = s.start_dev_web().await;
    let web_url = web.url.clone();
    let carol = s.dev_sign_in(&web, "carol").await;
    let r = carol
        .get(format!("{web_url}/admin/shadow"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let page = r.text().await.unwrap();
    assert!(page.contains("<dd id=\"flipped\">1</dd>"), "{page}");
    assert!(page.contains("large-refund"), "{page}");
    assert!(page.contains(&flipped.to_string()), "{page}");
    let r = carol
        .get(format!("{web_url}/admin/shadow?tenant=other"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let alice = s.dev_sign_in(&web, "alice").await;
    let r = alice
        .get(format!("{web_url}/admin/shadow"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert!(r.text().await.unwrap().contains("admins"));
}

/// Promote: the candidate becomes version 3 through apply; new proposals follow it; every step
/// is audited; nothing is shadow-evaluated afterwards.
async fn promote_and_check(s: &Stack, env: &[(&'static str, String)]) {
    let (ok, out, err) = cli(&["tenant", "promote", "acme", "--as", "carol"], env);
    assert!(ok, "{err}");
    assert!(
        out.contains("shadow document 1 promoted: applied version 3"),
        "{out}"
    );
    let after = s.propose(&refund("pi_s4", 3000)).await;
    s.wait_state(after, "escalated", Duration::from_secs(20))
        .await;
    let (ok, _, err) = cli(&["tenant", "promote", "acme"], env);
    assert!(
        !ok && err.contains("has no shadow document to promote"),
        "{err}"
    );
    let (ok, out, err) = cli(&["policy", "shadow-report", "acme"], env);
    assert!(ok && out.contains("promoted to version 3"), "{out}{err}");
    let c = s.tdb.db.client().await.unwrap();
    let kinds: Vec<String> = c
        .query(
            "SELECT kind FROM audit_events WHERE tenant_id = 'acme' AND kind LIKE 'tenant.%' ORDER BY id",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        kinds,
        [
            "tenant.document_applied",
            "tenant.document_applied",
            "tenant.shadow_stored",
            "tenant.document_applied",
            "tenant.shadow_promoted"
        ]
    );
    // Nothing was shadow-evaluated after the promotion.
    let n: i64 = c
        .query_one("SELECT count(*) FROM shadow_decisions", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_document_is_reported_never_acted_on_then_promoted() {
    let mut s = Stack::with(
        "shadow_policy",
        Options {
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let env = s.cli_env().await;
    let live = s.keys.dir.join("live.yaml");
    std::fs::write(&live, live_doc(&s)).unwrap();
    let (ok, out, err) = cli(
        &["tenant", "apply", "-f", &live.display().to_string()],
        &env,
    );
    assert!(ok && out.contains("applied version 2"), "{out}{err}");
    // Candidate: automatic refunds only up to 20.00.
    let candidate = live_doc(&s)
        .replace("params.amount <= 5000", "params.amount <= 2000")
        .replace("params.amount > 5000", "params.amount > 2000");
    let file = s.keys.dir.join("candidate.yaml");
    std::fs::write(&file, &candidate).unwrap();
    let f = file.display().to_string();
    // A broken candidate is refused with the field named, and stores nothing.
    let broken = s.keys.dir.join("broken.yaml");
    std::fs::write(
        &broken,
        candidate.replace("effect: escalate", "effect: maybe"),
    )
    .unwrap();
    let (ok, _, err) = cli(
        &["tenant", "shadow", "-f", &broken.display().to_string()],
        &env,
    );
    assert!(
        !ok && err.contains("policy.rules[2].effect: must be one of"),
        "{err}"
    );
    let (ok, out, err) = cli(&["tenant", "shadow", "-f", &f, "--as", "carol"], &env);
    assert!(ok, "{err}");
    assert!(out.contains("shadow document 1 stored"), "{out}");

    let small = s.propose(&refund("pi_s1", 1000)).await;
    let flipped = s.propose(&refund("pi_s2", 3000)).await;
    let large = s.propose(&refund("pi_s3", 12000)).await;
    let shell = s
        .propose(r#"{"action":"shell.exec","params":{"cmd":"id"}}"#)
        .await;
    for (id, state) in [
        (small, "approved"),
        (flipped, "approved"), // the candidate would escalate it; the live document decides
        (large, "escalated"),
        (shell, "blocked"),
    ] {
        s.wait_state(id, state, Duration::from_secs(20)).await;
    }

    let (ok, out, err) = cli(&["policy", "shadow-report", "acme"], &env);
    assert!(ok, "{err}");
    assert!(out.contains("shadow document 1 (being evaluated"), "{out}");
    assert!(out.contains("evaluated  4"), "{out}");
    assert!(out.contains("agreed     3"), "{out}");
    assert!(out.contains("flipped    1"), "{out}");
    assert!(
        out.contains("stricter allow → escalate: 1 (shadow rule: large-refund)"),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "e.g. {flipped} billing.refund.issue (live rule: small-refund)"
        )),
        "{out}"
    );
    let (ok, out, err) = cli(&["policy", "shadow-report", "acme", "--json"], &env);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["evaluated"], 4);
    assert_eq!(v["flips"][0]["from"], "allow");
    assert_eq!(v["flips"][0]["direction"], "stricter");
    assert_eq!(
        v["flips"][0]["examples"][0]["proposal_id"],
        flipped.to_string()
    );

    check_admin_page(&mut s, flipped).await;
    promote_and_check(&s, &env).await;
}
