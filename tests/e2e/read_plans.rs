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

use crate::queue_plans::{grow_with, nodes, plan_rows};
use crate::support::acme_db;
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
    let (tdb, agent_id) = acme_db("plan-bot").await;
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

/// Appends `n` audit events numbered from `from + 1`, every third of tenant `beta`, the others
/// of `acme`, stamped `start_secs_ago - i` seconds before now (so each batch, appended in time
/// order, is newer event after event), then vacuums the log as autovacuum does an insert-only
/// table (which summarizes its filled BRIN ranges).
async fn append_events(c: &tokio_postgres::Client, from: i64, n: i64, start_secs_ago: i64) {
    c.execute(
        "INSERT INTO audit_events (tenant_id, kind, actor, at)
         SELECT CASE WHEN i % 3 = 0 THEN 'beta' ELSE 'acme' END, 'proposal.submitted', 'agent:x',
                now() - make_interval(secs => $3::bigint - (i - $1::bigint))
         FROM generate_series($1::bigint + 1, $1::bigint + $2::bigint) i",
        &[&from, &n, &start_secs_ago],
    )
    .await
    .unwrap();
    c.batch_execute("VACUUM ANALYZE audit_events")
        .await
        .unwrap();
}

/// `actiond audit export --since` starts by finding each tenant's first event of the window
/// (`audit_export::START_SQL`). It reads the window through the BRIN index `audit_events_at`,
/// never the primary key from the oldest event nor the whole log: its buffers stay within the
/// pages that hold the window plus two block ranges (128 pages each), and far below the log's
/// size, once `plan_rows()` events of history older than the window follow the window's.
/// (At 10,000 events the whole log is one block range: a sequential read is the right plan.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_export_start_reads_the_window() {
    let (tdb, _) = acme_db("audit-bot").await;
    let c = tdb.superuser().await;
    c.batch_execute(&format!(
        "INSERT INTO tenants (id) VALUES ('beta') ON CONFLICT DO NOTHING;
         PREPARE export_start(text, text) AS {}",
        actiond_store::audit_export::START_SQL
    ))
    .await
    .unwrap();
    // 10,000 events, the newest now; the window is their last 600 seconds.
    append_events(&c, 0, 10_000, 10_000).await;
    let since: String = c
        .query_one("SELECT (now() - interval '600 seconds')::text", &[])
        .await
        .unwrap()
        .get(0);
    let measure = |tenant: Option<&'static str>| {
        let (c, since) = (&c, since.clone());
        async move {
            let tenant = tenant.map_or("NULL".to_string(), |t| format!("'{t}'"));
            let row = c
                .query_one(
                    &format!(
                        "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE export_start('{since}', {tenant})"
                    ),
                    &[],
                )
                .await
                .unwrap();
            let plan: Value = row.get::<_, Value>(0)[0]["Plan"].clone();
            for n in nodes(&plan) {
                if n["Relation Name"].as_str() == Some("audit_events") {
                    assert_eq!(
                        n["Node Type"].as_str(),
                        Some("Bitmap Heap Scan"),
                        "audit_events read other than through its BRIN index: {plan:#}"
                    );
                }
                if n["Node Type"].as_str() == Some("Bitmap Index Scan") {
                    assert_eq!(
                        n["Index Name"].as_str(),
                        Some("audit_events_at"),
                        "{plan:#}"
                    );
                }
            }
            plan["Shared Hit Blocks"].as_i64().unwrap_or(0)
                + plan["Shared Read Blocks"].as_i64().unwrap_or(0)
        }
    };
    let window_pages = || async {
        let r = c
            .query_one(
                "SELECT count(DISTINCT (ctid::text::point)[0])::bigint,
                        (SELECT relpages::bigint FROM pg_class WHERE relname = 'audit_events')
                 FROM audit_events WHERE at >= $1::text::timestamptz",
                &[&since],
            )
            .await
            .unwrap();
        (r.get::<_, i64>(0), r.get::<_, i64>(1))
    };
    // Every tenant's start must be found: acme's and beta's first event of the window.
    let starts: i64 = c
        .query_one(
            &format!(
                "SELECT count(*) FROM ({}) s",
                actiond_store::audit_export::START_SQL
            ),
            &[&since, &None::<String>],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(starts, 2);
    // Older history appended after them (a restored backlog, say): the window does not move.
    let big = plan_rows();
    append_events(&c, 10_000, big - 10_000, 20_000 + big).await;
    let (window, pages) = window_pages().await;
    for tenant in [None, Some("beta")] {
        let buffers = measure(tenant).await;
        eprintln!(
            "export start ({tenant:?}): {buffers} buffers at {big} events \
             ({pages} pages, the window on {window})"
        );
        assert!(
            buffers <= window + 2 * 128 + 16 && buffers * 4 < pages,
            "export start ({tenant:?}): {buffers} buffers for a window on {window} pages of {pages}"
        );
    }
}
