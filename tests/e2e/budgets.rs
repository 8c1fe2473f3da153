//! Budgets that escalate: fifty refunds submitted at once against one tenant-wide daily budget,
//! decided by two policy processes with small batches and several claim loops each, so many
//! transactions reserve at the same moment. Exactly the refunds that fit are allowed; the rest
//! escalate with the budget's reason; the budget gauge shows the use.

use crate::support::{Options, Stack, TENANT, refund};
use actiond_testkit::{Service, cli, eventually};
use std::time::Duration;

/// The test tenant with a daily refund budget of 100.00 shared by the whole tenant, and room
/// for every escalation (the per-agent cap would otherwise refuse some of the fifty with 429).
pub fn budget_doc(s: &Stack, budget: &str) -> String {
    TENANT
        .replace("RECEIVER", &s.recv.url)
        .replace("WEBHOOK_PATH", "hook")
        .replace(
            "  escalation_ttl: 1h\n",
            "  escalation_ttl: 1h\n  max_open_escalations_per_agent: 1000\n",
        )
        + budget
}

const DAILY_TENANT_BUDGET: &str = "budgets:
  - action: billing.refund.issue
    sum_of: amount
    max: 10000
    per: 24h
    scope: tenant
    reason: over the daily refund budget
";

fn policy_env(url: String, creds: String) -> Vec<(&'static str, String)> {
    vec![
        ("DATABASE_URL", url),
        ("ACTIOND_POLICY_ADMIN_LISTEN", "127.0.0.1:0".into()),
        ("ACTIOND_POLICY_CREDENTIALS_DIR", creds),
        ("ACTIOND_POLICY_POLL_MS", "50".into()),
        ("ACTIOND_POLICY_BATCH", "3".into()),
        ("ACTIOND_POLICY_CONCURRENCY", "3".into()),
    ]
}

async fn count_by_state(s: &Stack) -> Vec<(String, String, Option<String>, i64, i64)> {
    let c = s.tdb.db.client().await.unwrap();
    c.query(
        "SELECT state, COALESCE(rule_name, ''), decision_reason, count(*),
                COALESCE(sum((params_json::jsonb ->> 'amount')::bigint), 0)::bigint
         FROM proposals WHERE tenant_id = 'acme' GROUP BY 1, 2, 3 ORDER BY 1, 2",
        &[],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4)))
    .collect()
}

/// Two policy processes, three claim loops each, three proposals per batch: up to six
/// transactions reserve against the same budget at once. Returns the first one's admin URL.
async fn start_two_policies(s: &mut Stack) -> String {
    let (url, creds) = (
        s.tdb.role_url("policy").await,
        s.keys.policy_dir.display().to_string(),
    );
    let first = s.services.len();
    for name in ["policy-a", "policy-b"] {
        let svc = Service::spawn(
            "policy",
            name,
            &[],
            &policy_env(url.clone(), creds.clone()),
            &s.logs,
        );
        s.services.push(svc);
    }
    s.services[first].url("admin").await
}

/// The gauge (use ÷ max of the tenant's refund budget: exactly 1) and the escalation counter.
async fn assert_budget_metrics(s: &Stack, admin: &str) {
    let metrics_url = format!("{admin}/metrics");
    let http = s.http.clone();
    let ours = |l: &str, name: &str| {
        l.starts_with(&format!("{name}{{"))
            && l.contains("tenant=\"acme\"")
            && l.contains("action=\"billing.refund.issue\"")
    };
    eventually(Duration::from_secs(20), "budget gauge", || {
        let (h, u) = (http.clone(), metrics_url.clone());
        async move {
            let text = h.get(&u).send().await.ok()?.text().await.ok()?;
            text.lines()
                .any(|l| ours(l, "actiond_budget_use_ratio") && l.ends_with("} 1"))
                .then_some(())
        }
    })
    .await;
    let text = http
        .get(&metrics_url)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        text.lines()
            .any(|l| ours(l, "actiond_policy_budget_escalations_total") && !l.ends_with("} 0")),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_parallel_submits_cannot_jointly_overrun_a_budget() {
    let mut s = Stack::with(
        "budget_fifty_parallel",
        Options {
            policy: false,
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let doc = budget_doc(&s, DAILY_TENANT_BUDGET);
    let file = s.keys.dir.join("budget.yaml");
    std::fs::write(&file, &doc).unwrap();
    let env = s.cli_env().await;
    let (ok, out, err) = cli(
        &["tenant", "apply", "-f", &file.display().to_string()],
        &env,
    );
    assert!(ok && out.contains("applied version 2"), "{out}{err}");

    // Fifty 10.00 refunds at once: each alone is allowed by the rules (small-refund); together
    // they are five times the budget.
    let submits = (0..50).map(|i| {
        let body = refund(&format!("pi_budget_{i}"), 1000);
        let s = &s;
        async move { s.propose(&body).await }
    });
    let ids = futures_util::future::join_all(submits).await;
    assert_eq!(ids.len(), 50);
    let admin = start_two_policies(&mut s).await;
    for id in &ids {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while s.state(*id).await == "pending" {
            assert!(tokio::time::Instant::now() < deadline, "{id} still pending");
            actiond_testkit::poll_pause(Duration::from_millis(50)).await;
        }
    }
    let rows = count_by_state(&s).await;
    assert_eq!(
        rows,
        vec![
            (
                "approved".into(),
                "small-refund".into(),
                Some("Refunds up to 50.00 are automatic.".into()),
                10,
                10_000
            ),
            (
                "escalated".into(),
                "budget".into(),
                Some("over the daily refund budget".into()),
                40,
                40_000
            ),
        ],
        "exactly the budget is allowed; the rest escalates with the budget's reason"
    );
    // Every allowed refund holds a reservation; the budget's use is exactly its max.
    let c = s.tdb.db.client().await.unwrap();
    let r = c
        .query_one(
            "SELECT count(*) FILTER (WHERE allowed), COALESCE(sum(amount) FILTER (WHERE allowed), 0)::bigint, count(*)
             FROM budget_reservations WHERE tenant_id = 'acme'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(
        (r.get::<_, i64>(0), r.get::<_, i64>(1), r.get::<_, i64>(2)),
        (10, 10_000, 50)
    );
    // The decided event says why.
    let escalated: uuid::Uuid = c
        .query_one(
            "SELECT id FROM proposals WHERE tenant_id = 'acme' AND rule_name = 'budget' LIMIT 1",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let events = s.audit_kinds(escalated).await;
    let decided = events
        .iter()
        .find(|(k, _)| k == "proposal.decided")
        .unwrap();
    assert_eq!(decided.1["rule"], "budget");
    assert_eq!(decided.1["reason"], "over the daily refund budget");
    assert_budget_metrics(&s, &admin).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_agent_budgets_are_separate_and_only_live_spending_counts() {
    let s = Stack::with(
        "budget_per_agent",
        Options {
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let doc = budget_doc(
        &s,
        "budgets:\n  - {action: billing.refund.issue, sum_of: amount, max: 5000, per: 1h, scope: agent}\n",
    );
    actiond_store::tenants::apply(&s.tdb.db, &doc, "test")
        .await
        .unwrap();
    let (_, other) = actiond_testkit::agent(&s.tdb.db, "acme", "other-bot", None).await;
    // 40.00 allowed; the next 20.00 would make 60.00: escalated with the default reason.
    let a = s.propose(&refund("pi_a1", 4000)).await;
    s.wait_state(a, "approved", Duration::from_secs(20)).await;
    let b = s.propose(&refund("pi_a2", 2000)).await;
    s.wait_state(b, "escalated", Duration::from_secs(20)).await;
    let row = s.row(b).await;
    assert_eq!(
        row.get::<_, Option<String>>(1).as_deref(),
        Some("over the hourly billing.refund.issue budget")
    );
    // Another agent has its own budget.
    let (st, v) = s.post_as(&other, &refund("pi_b1", 4500), None).await;
    assert_eq!(st, 202, "{v}");
    let other_id: uuid::Uuid = v["proposal_id"].as_str().unwrap().parse().unwrap();
    s.wait_state(other_id, "approved", Duration::from_secs(20))
        .await;
    // The escalated one never counted (nobody approved it); an allowed one that ends blocked
    // (here: expired unspent) gives its amount back.
    let c = s.tdb.db.client().await.unwrap();
    c.execute(
        "UPDATE proposals SET state = 'expired' WHERE id = $1",
        &[&a],
    )
    .await
    .unwrap();
    let d = s.propose(&refund("pi_a3", 5000)).await;
    s.wait_state(d, "approved", Duration::from_secs(20)).await;
    // Blocks stay blocks: a budget never lowers a decision.
    let e = s
        .propose(r#"{"action":"shell.exec","params":{"cmd":"id"}}"#)
        .await;
    s.wait_state(e, "blocked", Duration::from_secs(20)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_budget_is_refused_naming_the_field() {
    let s = Stack::with(
        "budget_validation",
        Options {
            api: false,
            policy: false,
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let doc = budget_doc(
        &s,
        "budgets:\n  - {action: billing.refund.issue, sum_of: currency, max: 0, per: 24h, scope: team}\n",
    );
    let file = s.keys.dir.join("bad-budget.yaml");
    std::fs::write(&file, &doc).unwrap();
    let env = s.cli_env().await;
    let (ok, out, err) = cli(
        &["tenant", "apply", "-f", &file.display().to_string()],
        &env,
    );
    assert!(!ok, "{out}");
    assert_eq!(err.lines().count(), 1, "one readable line: {err}");
    for field in [
        "budgets[0].sum_of: must be an integer param of billing.refund.issue (amount)",
        "budgets[0].max: must be a positive integer",
        "budgets[0].scope: must be agent or tenant (got \"team\")",
    ] {
        assert!(err.contains(field), "{field} missing from: {err}");
    }
}
