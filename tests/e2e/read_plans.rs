//! Reads that must not grow with a tenant's history, checked on the generic plan of a prepared
//! statement (`plan_cache_mode = force_generic_plan`, as a pooled connection ends up running
//! them), as the role that runs them (row-level security included), at 10,000 and at
//! `ACTIOND_TEST_PLAN_ROWS` (default 200,000) proposals of one tenant:
//!
//! - the budget usage queries (`budgets::used_sql`, `budgets::use_ratio_sql`) read the window's
//!   reservations and look each proposal up by primary key, never a scan of `proposals`;
//! - the history page and its capped total (`queue_views::decided_sql`) read about a page of
//!   rows through `proposals_purge`, `proposals_approved` and `proposals_executing`, on the
//!   first page and deep in the history;
//! - the freeze page's count of an agent's open proposals reads its open rows only.
//!
//! Plans and buffer counts, not timings. The rows `grow` adds are older than the first ones, so
//! the budget window, the open proposals and a page's position stay the same as the table grows.

use crate::queue_plans::{grow_with, nodes, plan_db, plan_rows};
use actiond_testkit::TestDb;
use serde_json::Value;

/// The freeze page's statement (`agents::freeze_state`).
const FREEZE_STATE: &str = "SELECT (SELECT frozen_at IS NOT NULL FROM agents WHERE tenant_id = $1 AND id = $2),
    (SELECT count(*) FROM proposals WHERE tenant_id = $1 AND agent_id = $2 AND state IN ('pending', 'escalated'))";

/// Appends `n` proposals of `agent` numbered from `from + 1`, one a second into the past: the
/// 170 newest open (50 each `pending`, `escalated`, `approved`, 20 `executing`), the rest
/// decided, half of them escalated by policy; a budget reservation for every one policy did
/// not block (as the policy worker writes them). Triggers off (this test's database only).
async fn grow(c: &tokio_postgres::Client, agent: uuid::Uuid, from: i64, n: i64) {
    grow_with(
        c,
        "WITH ins AS (
           INSERT INTO proposals (id, tenant_id, agent_id, action, target, params_json, params_sha256,
                                  intent_hash, request_sha256, state, effect, created_at, updated_at)
           SELECT gen_random_uuid(), 'acme', $1, 'billing.refund.issue', '', '{\"amount\":100}', h, h, h,
                  CASE WHEN i <= 50 THEN 'pending' WHEN i <= 100 THEN 'escalated'
                       WHEN i <= 150 THEN 'approved' WHEN i <= 170 THEN 'executing'
                       ELSE (ARRAY['succeeded','expired','denied','blocked','failed'])[1 + i % 5] END,
                  CASE WHEN i > 50 THEN (ARRAY['allow','escalate'])[1 + (i / 5) % 2] END,
                  now() - make_interval(secs => i), now() - make_interval(secs => i)
           FROM generate_series($3::bigint + 1, $3::bigint + $2::bigint) i,
                LATERAL (SELECT md5(i::text) || md5(i::text) AS h) hh
           RETURNING id, tenant_id, agent_id, action, state, effect, created_at)
         INSERT INTO budget_reservations (proposal_id, tenant_id, agent_id, action, sum_of, amount, allowed, reserved_at)
         SELECT id, tenant_id, agent_id, action, 'amount', 100, effect = 'allow', created_at
         FROM ins WHERE state NOT IN ('pending', 'blocked')",
        &[&agent, &n, &from],
        "proposals, budget_reservations",
    )
    .await;
}

/// `EXPLAIN (ANALYZE, BUFFERS)` of `execute` on the generic plan of `prepare`, on a fresh
/// connection of `role` that sees tenant `acme`.
async fn generic_plan(tdb: &TestDb, role: &str, prepare: &str, execute: &str) -> Value {
    let c = tdb.as_role(role).await;
    c.batch_execute(&format!(
        "SELECT set_config('actiond.tenant_ids', 'acme', false);
         SET plan_cache_mode = force_generic_plan; {prepare}"
    ))
    .await
    .unwrap();
    let row = c
        .query_one(
            &format!("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {execute}"),
            &[],
        )
        .await
        .unwrap();
    let v: Value = row.get(0);
    v[0]["Plan"].clone()
}

/// Asserts that `proposals` and `budget_reservations` are read only through `indexes` (index
/// scans, or bitmap scans of them; no sequential scan) and returns the shared buffers touched.
fn by_indexes(what: &str, plan: &Value, indexes: &[&str]) -> i64 {
    let all = nodes(plan);
    for n in &all {
        let kind = n["Node Type"].as_str().unwrap_or_default();
        let rel = n["Relation Name"].as_str().unwrap_or_default();
        if rel == "proposals" || rel == "budget_reservations" {
            assert!(
                kind != "Seq Scan",
                "{what}: sequential scan of {rel}: {plan:#}"
            );
            if let Some(index) = n["Index Name"].as_str() {
                assert!(
                    indexes.contains(&index),
                    "{what}: {rel} read through {index}, expected {indexes:?}: {plan:#}"
                );
            }
        }
        if kind == "Bitmap Index Scan" {
            let index = n["Index Name"].as_str().unwrap_or_default();
            assert!(
                indexes.contains(&index) || !index.starts_with("proposals"),
                "{what}: bitmap scan of {index}, expected {indexes:?}: {plan:#}"
            );
        }
    }
    plan["Shared Hit Blocks"].as_i64().unwrap_or(0)
        + plan["Shared Read Blocks"].as_i64().unwrap_or(0)
}

/// One statement measured: what it is, the role that runs it, its `PREPARE`, its `EXECUTE`
/// and the indexes it may read.
struct Measured {
    what: &'static str,
    role: &'static str,
    prepare: String,
    execute: String,
    indexes: Vec<&'static str>,
}

/// The statements measured.
fn statements(agent: uuid::Uuid, deep: (String, uuid::Uuid)) -> Vec<Measured> {
    let (page, count) = actiond_store::queue_views::decided_sql();
    let history = vec![
        "proposals_purge",
        "proposals_approved",
        "proposals_executing",
    ];
    let budget = vec!["proposals_pkey", "budget_reservations_window"];
    let used = format!(
        "PREPARE used(text, text, text, float8, uuid, uuid) AS {}",
        actiond_store::budgets::used_sql()
    );
    let ratio = format!(
        "PREPARE ratio(text, text, text, float8, bool) AS {}",
        actiond_store::budgets::use_ratio_sql()
    );
    let page = format!("PREPARE page(text[], text, text, timestamptz, uuid, bigint) AS {page}");
    let b = "'acme', 'billing.refund.issue', 'amount', 600";
    vec![
        Measured {
            what: "budget used (tenant)",
            role: "policy",
            prepare: used.clone(),
            execute: format!("EXECUTE used({b}, NULL, NULL)"),
            indexes: budget.clone(),
        },
        Measured {
            what: "budget used (agent, one left out)",
            role: "policy",
            prepare: used,
            execute: format!("EXECUTE used({b}, '{agent}', gen_random_uuid())"),
            indexes: budget.clone(),
        },
        Measured {
            what: "budget use ratio",
            role: "policy",
            prepare: ratio,
            execute: format!("EXECUTE ratio({b}, true)"),
            indexes: budget,
        },
        Measured {
            what: "history first page",
            role: "web",
            prepare: page.clone(),
            execute: "EXECUTE page('{acme}', NULL, NULL, '9999-12-31 23:59:59Z', 'ffffffff-ffff-ffff-ffff-ffffffffffff', 101)".into(),
            indexes: history.clone(),
        },
        Measured {
            what: "history page 30",
            role: "web",
            prepare: page,
            execute: format!("EXECUTE page('{{acme}}', NULL, NULL, '{}', '{}', 101)", deep.0, deep.1),
            indexes: history.clone(),
        },
        Measured {
            what: "history total",
            role: "web",
            prepare: format!("PREPARE total(text[], text, text) AS {count}"),
            execute: "EXECUTE total('{acme}', NULL, NULL)".into(),
            indexes: history,
        },
        Measured {
            what: "freeze page's open count",
            role: "web",
            prepare: format!("PREPARE open(text, uuid) AS {FREEZE_STATE}"),
            execute: format!("EXECUTE open('acme', '{agent}')"),
            indexes: vec![
                "proposals_open_intent",
                "proposals_escalated_by_agent",
                "proposals_pending",
            ],
        },
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budget_history_and_freeze_reads_stay_flat_as_history_grows() {
    let big = plan_rows();
    let (tdb, agent_id) = plan_db("plan-bot").await;
    let c = tdb.superuser().await;
    grow(&c, agent_id, 0, 10_000).await;
    // Where page 30 of the history starts (100 rows a page); the same rows at every size.
    let history_order = "SELECT updated_at, id FROM proposals WHERE effect = 'escalate'
        AND state NOT IN ('pending', 'escalated') ORDER BY updated_at DESC, id DESC";
    let r = c
        .query_one(
            &format!("SELECT updated_at::text, id FROM ({history_order} OFFSET 2899 LIMIT 1) d"),
            &[],
        )
        .await
        .unwrap();
    let deep = (r.get::<_, String>(0), r.get::<_, uuid::Uuid>(1));
    let statements = statements(agent_id, deep);
    let mut small = Vec::new();
    for m in &statements {
        let plan = generic_plan(&tdb, m.role, &m.prepare, &m.execute).await;
        small.push(by_indexes(m.what, &plan, &m.indexes));
    }
    grow(&c, agent_id, 10_000, big - 10_000).await;
    for (m, at_10k) in statements.iter().zip(&small) {
        let what = m.what;
        let plan = generic_plan(&tdb, m.role, &m.prepare, &m.execute).await;
        let buffers = by_indexes(what, &plan, &m.indexes);
        eprintln!("{what}: {at_10k} buffers at 10k rows, {buffers} at {big}");
        assert!(
            buffers <= at_10k * 2 + 8,
            "{what}: {buffers} buffers at {big} rows against {at_10k} at 10k: {plan:#}"
        );
    }
    // What the history says through the store, as the web role: the same rows as the plain
    // query, page after page, and a total stopped at the cap.
    let web = actiond_store::Db::connect(&tdb.role_url("web").await, 2).unwrap();
    let tenants = vec!["acme".to_string()];
    let want: Vec<uuid::Uuid> = c
        .query(&format!("{history_order} LIMIT 300"), &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(1))
        .collect();
    let mut got = Vec::new();
    let mut after = None;
    for _ in 0..3 {
        let page = actiond_store::queue_views::decided_page(
            &web,
            &tenants,
            actiond_store::queue_views::Filter::default(),
            after,
            100,
        )
        .await
        .unwrap();
        assert!(page.more);
        assert_eq!(
            page.total,
            actiond_store::queue_views::HISTORY_COUNT_CAP + 1
        );
        let last = page.rows.last().unwrap();
        after = Some(actiond_store::queue_views::HistoryAfter {
            updated_at: last.updated_at,
            id: last.id,
        });
        got.extend(page.rows.iter().map(|r| r.id));
    }
    assert_eq!(got, want, "the history's first three pages");
}
