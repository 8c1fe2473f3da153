//! The work queues stay index-driven as the table grows: the executor's claim, the policy
//! worker's claim, the oldest pending proposal and the submission's cap on an agent's open
//! escalations are read through their partial indexes, with
//! no sequential scan and no sort, and touch about as many buffers with 10,000 live rows as with
//! many times that (`ACTIOND_TEST_PLAN_ROWS`, default 200,000; set 1000000 for the full check).
//! The scrape's queue gauges read a bounded number of those indexes' entries, so a scrape
//! costs the same whatever the backlog.
//! Plans and buffer counts, not timings: the assertions hold on a loaded machine.
//!
//! A long-open snapshot keeps the index entries of rows that left a queue while it was open:
//! the claim then still uses the index (asserted) but walks those entries (reported, not
//! bounded: no index can skip what an open snapshot may still see).

use crate::support::acme_db;
use serde_json::Value;

/// The executor claim's row selection (`executor_queue::claim`).
const EXECUTOR_CLAIM: &str = "SELECT id FROM proposals
    WHERE state = 'approved' AND (lease_until IS NULL OR lease_until < now())
    ORDER BY updated_at LIMIT 16 FOR UPDATE SKIP LOCKED";
/// The policy worker's claim (`policy_queue::claim`).
const POLICY_CLAIM: &str = "SELECT id FROM proposals WHERE state = 'pending' ORDER BY created_at LIMIT 64 FOR UPDATE SKIP LOCKED";
/// The submission's per-agent cap on open escalations (`proposals::submit`), prepared as the
/// api prepares it (a generic plan, whatever the statistics).
const ESCALATION_CAP: &str = "SET plan_cache_mode = force_generic_plan;
    PREPARE escalation_cap(text, uuid) AS
    SELECT count(*) FROM proposals WHERE tenant_id = $1 AND agent_id = $2 AND state = 'escalated'";
/// The age of the oldest pending proposal.
const OLDEST_PENDING: &str =
    "SELECT now() - min(created_at) FROM proposals WHERE state = 'pending'";

/// Rows of the large size of the plan tests: `ACTIOND_TEST_PLAN_ROWS`, default 200,000.
pub(crate) fn plan_rows() -> i64 {
    std::env::var("ACTIOND_TEST_PLAN_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000)
}

/// Appends `n` rows (numbered from `from + 1`), a quarter each `pending`, `approved` (a few with a live lease),
/// `succeeded` and `expired`, written with triggers and foreign-key checks off (only this
/// test's own database), then analyses the table.
async fn grow(c: &tokio_postgres::Client, agent: uuid::Uuid, from: i64, n: i64) {
    grow_with(
        c,
        "INSERT INTO proposals (id, tenant_id, agent_id, action, target, params_json, params_sha256, intent_hash,
                                request_sha256, state, created_at, updated_at, lease_owner, lease_until)
         SELECT gen_random_uuid(), 'acme', $1, 'webhook.post', '', '{}', h, h, h,
                (ARRAY['pending','approved','succeeded','expired'])[1 + i % 4],
                now() - make_interval(secs => i), now() - make_interval(secs => i),
                CASE WHEN i % 40 = 1 THEN 'x' END,
                CASE WHEN i % 40 = 1 THEN now() + interval '1 hour' END
         FROM generate_series($3::bigint + 1, $3::bigint + $2::bigint) i,
              LATERAL (SELECT md5(i::text) || md5(i::text) AS h) hh",
        &[&agent, &n, &from],
        "proposals",
    )
    .await;
}

/// Runs `insert` (parameters `agent`, `n`, `from` as `$1`, `$2`, `$3`) with triggers and
/// foreign-key checks off (`session_replication_role = replica`, on this test's own database
/// only), then analyses `tables` (a comma-separated list): how the plan tests grow a table.
pub(crate) async fn grow_with(
    c: &tokio_postgres::Client,
    insert: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    tables: &str,
) {
    c.batch_execute("SET session_replication_role = replica")
        .await
        .unwrap();
    c.execute(insert, params).await.unwrap();
    c.batch_execute(&format!(
        "SET session_replication_role = origin; ANALYZE {tables}"
    ))
    .await
    .unwrap();
}

/// `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)` of `sql` in a transaction that is rolled back.
async fn explain(c: &mut tokio_postgres::Client, sql: &str) -> Value {
    let tx = c.transaction().await.unwrap();
    let row = tx
        .query_one(
            &format!("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}"),
            &[],
        )
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    let v: Value = row.get(0);
    v[0]["Plan"].clone()
}

/// Every node of a plan, depth first.
pub(crate) fn nodes(plan: &Value) -> Vec<&Value> {
    let mut out = vec![plan];
    if let Some(children) = plan["Plans"].as_array() {
        for c in children {
            out.extend(nodes(c));
        }
    }
    out
}

/// Asserts the plan reads `proposals` only through `index` (no sequential scan of it, no sort)
/// and returns the shared buffers it touched.
fn index_driven(what: &str, plan: &Value, index: &str) -> i64 {
    let all = nodes(plan);
    for n in &all {
        let kind = n["Node Type"].as_str().unwrap_or_default();
        assert!(
            !(kind == "Seq Scan" || kind == "Sort" || kind == "Bitmap Heap Scan"),
            "{what}: {kind} in the plan, expected an ordered index scan of {index}: {plan:#}"
        );
    }
    assert!(
        all.iter().any(|n| n["Index Name"].as_str() == Some(index)),
        "{what}: {index} not used: {plan:#}"
    );
    plan["Shared Hit Blocks"].as_i64().unwrap_or(0)
        + plan["Shared Read Blocks"].as_i64().unwrap_or(0)
}

/// The queue gauges' statement (`metrics::QUEUE_GAUGES_SQL`), checked to carry its bound in
/// each of its three queue reads.
fn gauges_sql() -> String {
    use actiond_store::metrics::{QUEUE_GAUGE_ROWS, QUEUE_GAUGES_SQL};
    assert_eq!(
        QUEUE_GAUGES_SQL
            .matches(&format!("LIMIT {QUEUE_GAUGE_ROWS})"))
            .count(),
        3,
        "each queue read is bounded by QUEUE_GAUGE_ROWS"
    );
    QUEUE_GAUGES_SQL.to_string()
}

/// Asserts the plan reads `proposals` only through indexes, one of each group in `indexes`
/// used and no other (no sequential or bitmap scan of `proposals`; the small `tenants` table
/// may be scanned), and returns the shared buffers it touched.
fn proposals_by_index(what: &str, plan: &Value, indexes: &[&[&str]]) -> i64 {
    let all = nodes(plan);
    for n in &all {
        let kind = n["Node Type"].as_str().unwrap_or_default();
        if n["Relation Name"].as_str() == Some("proposals") {
            assert!(
                kind == "Index Scan" || kind == "Index Only Scan",
                "{what}: {kind} of proposals in the plan, expected index scans of {indexes:?}: {plan:#}"
            );
        }
        if let Some(index) = n["Index Name"].as_str() {
            assert!(
                indexes.iter().any(|g| g.contains(&index)),
                "{what}: {index} used, expected only {indexes:?}: {plan:#}"
            );
        }
    }
    for group in indexes {
        assert!(
            all.iter()
                .any(|n| n["Index Name"].as_str().is_some_and(|i| group.contains(&i))),
            "{what}: none of {group:?} used: {plan:#}"
        );
    }
    plan["Shared Hit Blocks"].as_i64().unwrap_or(0)
        + plan["Shared Read Blocks"].as_i64().unwrap_or(0)
}

/// The scrape's queue gauges (`queue_oldest_age_seconds`, `queue_depth`) read at most
/// `QUEUE_GAUGE_ROWS` entries per queue through the queue indexes: the same buffers at 10,000
/// live rows as at `ACTIOND_TEST_PLAN_ROWS`, and still the exact age of the oldest pending row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_gauges_read_a_bounded_number_of_rows() {
    let big = plan_rows();
    let (tdb, agent_id) = acme_db("gauge-bot").await;
    let mut c = tdb.superuser().await;
    // Not `proposals_escalated_by_agent` (V21): it has no tenant order, so reading the escalated
    // queue through it would read every tenant's escalated rows for each tenant.
    let indexes: [&[&str]; 3] = [
        &["proposals_pending"],
        &["proposals_approved"],
        &["proposals_escalated"],
    ];
    grow(&c, agent_id, 0, 10_000).await;
    // An escalated backlog over the bound (grow() writes none), spread over many agents as a
    // tenant's would be (the cap on open escalations is per agent).
    c.batch_execute(
        "SET session_replication_role = replica;
         UPDATE proposals SET state = 'escalated', agent_id = gen_random_uuid()
         WHERE id IN (SELECT id FROM proposals WHERE state = 'expired' LIMIT 1500);
         SET session_replication_role = origin; ANALYZE proposals",
    )
    .await
    .unwrap();
    let at_10k = proposals_by_index("gauges", &explain(&mut c, &gauges_sql()).await, &indexes);
    grow(&c, agent_id, 10_000, big - 10_000).await;
    let buffers = proposals_by_index("gauges", &explain(&mut c, &gauges_sql()).await, &indexes);
    eprintln!("queue gauges: {at_10k} buffers at 10k rows, {buffers} at {big}");
    assert!(
        buffers <= at_10k * 2 + 8,
        "queue gauges: {buffers} buffers at {big} rows against {at_10k} at 10k"
    );
    // What the gauges say: the oldest pending row (created `big` seconds ago, give or take the
    // last few rows of the series) is read exactly; the count stops at the bound.
    let rows = actiond_store::metrics::queue_ages(&tdb.db).await.unwrap();
    let (_, _, age, count) = rows
        .iter()
        .find(|r| r.0 == "acme" && r.1 == "pending")
        .expect("a pending series for acme");
    assert!(
        *age >= (big - 4) as f64 && *age < (big + 600) as f64,
        "oldest pending age {age}, expected about {big} seconds"
    );
    assert_eq!(*count, actiond_store::metrics::QUEUE_GAUGE_ROWS);
}

/// The queue reads at 10k and at `ACTIOND_TEST_PLAN_ROWS` live rows (the two claims also as
/// the workers prepare them, generic plans with the limit a parameter), then with an open
/// snapshot holding dead entries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_reads_stay_index_driven_as_rows_grow() {
    let big = plan_rows();
    let (tdb, agent_id) = acme_db("plan-bot").await;
    let mut c = tdb.superuser().await;
    c.batch_execute(ESCALATION_CAP).await.unwrap();
    let cap = format!("EXECUTE escalation_cap('acme', '{agent_id}')");
    // The claims as the workers run them: prepared, the limit a parameter, planned generically
    // (`Db::connect_generic`), so the plan cannot know how few rows are wanted.
    c.batch_execute(&format!(
        "PREPARE executor_claim(int8) AS {};
         PREPARE policy_claim(int8) AS {}",
        EXECUTOR_CLAIM.replace("LIMIT 16", "LIMIT $1"),
        POLICY_CLAIM.replace("LIMIT 64", "LIMIT $1"),
    ))
    .await
    .unwrap();
    let queries = [
        ("executor claim", EXECUTOR_CLAIM, "proposals_approved"),
        ("policy claim", POLICY_CLAIM, "proposals_pending"),
        (
            "executor claim, generic plan",
            "EXECUTE executor_claim(16)",
            "proposals_approved",
        ),
        (
            "policy claim, generic plan",
            "EXECUTE policy_claim(64)",
            "proposals_pending",
        ),
        ("oldest pending", OLDEST_PENDING, "proposals_pending"),
        // Every row is this agent's: walking its history would read them all.
        (
            "escalation cap",
            cap.as_str(),
            "proposals_escalated_by_agent",
        ),
    ];
    let mut small = Vec::new();
    grow(&c, agent_id, 0, 10_000).await;
    for (what, sql, index) in queries {
        small.push(index_driven(what, &explain(&mut c, sql).await, index));
    }
    grow(&c, agent_id, 10_000, big - 10_000).await;
    for ((what, sql, index), at_10k) in queries.into_iter().zip(&small) {
        let buffers = index_driven(what, &explain(&mut c, sql).await, index);
        eprintln!("{what}: {at_10k} buffers at 10k rows, {buffers} at {big}");
        // Flat: a deeper btree adds a level or two, nothing proportional to the rows.
        assert!(
            buffers <= at_10k * 2 + 8,
            "{what}: {buffers} buffers at {big} rows against {at_10k} at 10k"
        );
    }
    // A long-open snapshot, then 1,000 approved rows leave the queue.
    let other = tdb.superuser().await;
    other
        .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM tenants")
        .await
        .unwrap();
    c.batch_execute(
        "UPDATE proposals SET state = 'executing', lease_owner = 'x', lease_until = now() + interval '1 hour'
         WHERE id IN (SELECT id FROM proposals WHERE state = 'approved' AND lease_until IS NULL
                      ORDER BY updated_at LIMIT 1000)",
    )
    .await
    .unwrap();
    c.batch_execute("VACUUM proposals").await.unwrap();
    let (what, sql, index) = queries[0];
    let buffers = index_driven(what, &explain(&mut c, sql).await, index);
    eprintln!("{what}: {buffers} buffers with 1,000 dead queue entries an open snapshot keeps");
    other.batch_execute("COMMIT").await.unwrap();
}

/// Moves `n` of the approved rows nobody leases to `executing` under lease owner `x`, so the
/// executing queue has a backlog like the others (triggers off, this test's database only).
async fn start_some(c: &tokio_postgres::Client, n: i64) {
    c.batch_execute(&format!(
        "SET session_replication_role = replica;
         UPDATE proposals SET state = 'executing', lease_owner = 'x', lease_until = now() + interval '1 hour'
         WHERE id IN (SELECT id FROM proposals WHERE state = 'approved' AND lease_owner IS NULL LIMIT {n});
         SET session_replication_role = origin; ANALYZE proposals"
    ))
    .await
    .unwrap();
}

/// Makes the statistics of `proposals` say its queues are empty while they hold their backlog,
/// as they do in production when the queues grew since the last (auto)analyse: the live rows
/// are set aside, the table is analysed, and the rows go back. Autovacuum is off for the
/// table (this test's database only) so the stale statistics stay.
async fn stale_statistics(c: &tokio_postgres::Client) {
    c.batch_execute(
        "ALTER TABLE proposals SET (autovacuum_enabled = false);
         SET session_replication_role = replica;
         CREATE TEMP TABLE live AS SELECT id, state FROM proposals WHERE state IN ('pending','approved','executing');
         UPDATE proposals SET state = 'succeeded' WHERE id IN (SELECT id FROM live);
         ANALYZE proposals;
         UPDATE proposals p SET state = l.state FROM live l WHERE p.id = l.id;
         DROP TABLE live;
         SET session_replication_role = origin",
    )
    .await
    .unwrap();
}

/// `ARRAY['…', …]::uuid[]` of the first `n` rows in `state` (leased to `x` when `leased`).
async fn ids_in(c: &tokio_postgres::Client, state: &str, leased: bool, n: i64) -> String {
    let rows = c
        .query(
            "SELECT id::text FROM proposals WHERE state = $1 AND (lease_owner = 'x') IS NOT DISTINCT FROM $2
             ORDER BY id LIMIT $3",
            &[&state, &(leased.then_some(true)), &n],
        )
        .await
        .unwrap();
    assert_eq!(rows.len() as i64, n, "{n} rows in {state}");
    let ids: Vec<String> = rows
        .iter()
        .map(|r| format!("'{}'", r.get::<_, String>(0)))
        .collect();
    format!("ARRAY[{}]::uuid[]", ids.join(","))
}

/// Asserts the plan reads `proposals` only by primary-key probes (other tables as it likes)
/// and returns the shared buffers it touched.
fn by_primary_key(what: &str, plan: &Value) -> i64 {
    let all = nodes(plan);
    for n in all.iter().filter(|n| n["Relation Name"] == "proposals") {
        let kind = n["Node Type"].as_str().unwrap_or_default();
        assert!(
            kind == "ModifyTable" || (kind == "Index Scan" && n["Index Name"] == "proposals_pkey"),
            "{what}: {kind} of proposals ({}), expected proposals_pkey probes: {plan:#}",
            n["Index Name"]
        );
    }
    assert!(
        all.iter().any(|n| n["Index Name"] == "proposals_pkey"),
        "{what}: proposals_pkey not used: {plan:#}"
    );
    plan["Shared Hit Blocks"].as_i64().unwrap_or(0)
        + plan["Shared Read Blocks"].as_i64().unwrap_or(0)
}

/// The three batched writes of the allow path as the services prepare them (generic plans):
/// the policy worker's decision (`policy_queue::DECIDE_SQL`), the executor's spend
/// (`executor_queue::SPEND_AND_START_SQL`) and its outcomes (`executor_queue::FINISH_SQL`).
/// Each finds its 30 rows by primary key, never by reading a queue's partial index and
/// filtering it by id, even when the statistics say the queues are empty (they are always
/// stale for a queue), so a batch costs the same with a backlog of 2,500 rows per queue as with
/// 50,000 (at 200,000 rows).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_writes_find_their_rows_by_primary_key() {
    use actiond_store::executor_queue::{FINISH_SQL, SPEND_AND_START_SQL};
    use actiond_store::policy_queue::DECIDE_SQL;
    let big = plan_rows();
    let (tdb, agent_id) = acme_db("batch-bot").await;
    let mut c = tdb.superuser().await;
    let (decide_sql, spend_sql, finish_sql): (&str, &str, &str) =
        (&DECIDE_SQL, &SPEND_AND_START_SQL, &FINISH_SQL);
    c.batch_execute(&format!(
        "SET plan_cache_mode = force_generic_plan;
         PREPARE decide AS {decide_sql};
         PREPARE spend AS {spend_sql};
         PREPARE finish AS {finish_sql}"
    ))
    .await
    .unwrap();
    let thirty = |v: &str, t: &str| format!("array_fill({v}::{t}, ARRAY[30])");
    let mut at_10k = Vec::new();
    for (from, n) in [(0, 10_000), (10_000, big - 10_000)] {
        grow(&c, agent_id, from, n).await;
        start_some(&c, n / 20).await;
        stale_statistics(&c).await;
        let decide = format!(
            "EXECUTE decide({}, {}, {}, {}, {}, {}, {}, {}",
            ids_in(&c, "pending", false, 30).await,
            thirty("'approved'", "text"),
            thirty("'allow'", "text"),
            thirty("'r'", "text"),
            thirty("'x'", "text"),
            thirty("1", "int4"),
            thirty("repeat('a', 64)", "text"),
            thirty("'pending'", "text"),
        ) + ", array_fill('{}'::jsonb, ARRAY[30]), 'policy', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', 'policy', '{}', '{}')";
        let spend = format!(
            "EXECUTE spend({}, {}, {}, 'x', {}, {}, 'executor:x', {})",
            ids_in(&c, "approved", true, 30).await,
            thirty("gen_random_uuid()", "uuid"),
            thirty("60", "float8"),
            thirty("'approved'", "text"),
            thirty("'policy-1'", "text"),
            thirty("4102444800000000", "int8"),
        );
        let finish = format!(
            "EXECUTE finish({}, {}, {}, 'x', {}, 'executor:x')",
            ids_in(&c, "executing", true, 30).await,
            thirty("'succeeded'", "text"),
            thirty("'ok'", "text"),
            thirty("'executing'", "text"),
        );
        for (i, (what, sql)) in [("decide", decide), ("spend", spend), ("finish", finish)]
            .into_iter()
            .enumerate()
        {
            let plan = explain(&mut c, &sql).await;
            let buffers = by_primary_key(what, &plan);
            if from == 0 {
                at_10k.push(buffers);
            } else {
                eprintln!(
                    "{what}: {} buffers at 10k rows, {buffers} at {big}",
                    at_10k[i]
                );
                assert!(
                    buffers <= at_10k[i] * 2 + 8,
                    "{what}: {buffers} buffers at {big} rows against {} at 10k",
                    at_10k[i]
                );
            }
        }
    }
}

/// A spend (`used_at`, `used_by`: no index covers them) is a HOT update: the new row version
/// stays on its page (V22 leaves 30% of each grants page free), so a spend writes no index
/// entry. Counted with the transaction's own statistics, not a timing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spends_are_hot_updates() {
    let (tdb, agent_id) = acme_db("spend-bot").await;
    let mut c = tdb.superuser().await;
    grow(&c, agent_id, 0, 2_000).await;
    c.batch_execute(
        "SET session_replication_role = replica;
         INSERT INTO grants (id, proposal_id, tenant_id, intent_hash, doc_version, expires_at_us,
                             key_id, sig, issued_by)
         SELECT gen_random_uuid(), id, tenant_id, intent_hash, 1,
                (extract(epoch FROM now() + interval '1 hour') * 1000000)::bigint,
                'policy-1', decode(repeat('ab', 64), 'hex'), 'policy'
         FROM proposals WHERE state = 'approved';
         SET session_replication_role = origin",
    )
    .await
    .unwrap();
    // Spent in batches of 30 in the order they were issued, as executors spend them. Each
    // batch's update is counted by the backend's not yet reported counters
    // (`pg_stat_get_xact_*`), read just before and after it.
    const COUNTS: &str = "SELECT pg_stat_get_xact_tuples_updated('grants'::regclass),
                                 pg_stat_get_xact_tuples_hot_updated('grants'::regclass)";
    let (mut updated, mut hot) = (0i64, 0i64);
    for _ in 0..(500 / 30 + 1) {
        let tx = c.transaction().await.unwrap();
        let before = tx.query_one(COUNTS, &[]).await.unwrap();
        tx.execute(
            "UPDATE grants SET used_at = now(), used_by = 'executor-1'
             WHERE id IN (SELECT id FROM grants WHERE used_at IS NULL ORDER BY ctid LIMIT 30)",
            &[],
        )
        .await
        .unwrap();
        let after = tx.query_one(COUNTS, &[]).await.unwrap();
        tx.commit().await.unwrap();
        updated += after.get::<_, i64>(0) - before.get::<_, i64>(0);
        hot += after.get::<_, i64>(1) - before.get::<_, i64>(1);
    }
    eprintln!("grants: {hot} of {updated} spends HOT");
    assert_eq!(updated, 500);
    assert_eq!(hot, updated, "{hot} of {updated} spends were HOT");
}

/// The executor's claim (`executor_queue::CLAIM_SQL`, prepared generically as the executor
/// prepares it) reads the tenant's latest document version once per tenant of the batch, not
/// once per claimed proposal: a subquery per row made `tenant_documents` the one table
/// sequentially scanned for every proposal of a bench run (issue #36). Counted from the plan's
/// loops, so it holds on a loaded machine; the claimed rows still come from the partial index.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claim_reads_each_tenants_document_once_per_batch() {
    use actiond_store::executor_queue::CLAIM_SQL;
    let (tdb, agent_id) = acme_db("doc-bot").await;
    let mut c = tdb.superuser().await;
    grow(&c, agent_id, 0, 2_000).await;
    let claim_sql: &str = &CLAIM_SQL;
    c.batch_execute(&format!(
        "SET plan_cache_mode = force_generic_plan; PREPARE claim(int8) AS {claim_sql}"
    ))
    .await
    .unwrap();
    let plan = explain(&mut c, "EXECUTE claim(64)").await;
    let rows = plan["Actual Rows"].as_i64().unwrap_or(0);
    assert!(
        rows >= 60,
        "the claim found {rows} rows, expected 64 of the approved rows nobody leases"
    );
    let loops: i64 = nodes(&plan)
        .into_iter()
        .filter(|n| n["Relation Name"] == "tenant_documents")
        .map(|n| n["Actual Loops"].as_i64().unwrap_or(0))
        .sum();
    assert_eq!(
        loops, 1,
        "tenant_documents read {loops} times for one tenant's batch of {rows}: {plan:#}"
    );
    assert!(
        nodes(&plan)
            .iter()
            .any(|n| n["Index Name"] == "proposals_approved"),
        "the claim no longer reads proposals_approved: {plan:#}"
    );
}

/// Both workers' claims (`executor_queue::CLAIM_SQL`, `policy_queue::CLAIM_SQL`, prepared
/// generically as the workers prepare them) read each claimed row's agent, and the executor's
/// its live grant, by key — also when the statistics were taken while the queues held a
/// backlog and the database holds thousands of agents. There a plain join planned a hash of
/// the whole `agents` table (a generic `LIMIT $1` is estimated at a tenth of the queue): one
/// sequential scan of every agent per claim, 3.1 million agent rows read in one
/// 20,000-proposal bench run (issue #36). Checked from the plan's nodes, so it holds on a
/// loaded machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_probe_agents_and_grants_by_key() {
    let (tdb, agent_id) = acme_db("probe-bot").await;
    let mut c = tdb.superuser().await;
    // 2,000 agents of another tenant, then 20,000 rows of the bench agent (a quarter each
    // pending, approved, succeeded, expired: a backlog of 5,000 in each queue), every row with a
    // grant, and every table analysed, the empty `tenant_moves` too (as the bench's set-up or
    // an operator's `vacuumdb --analyze` leaves them; never analysed, its estimate of 610 rows
    // made the planner expect a one-row batch).
    c.batch_execute(
        "INSERT INTO tenants (id) VALUES ('other');
         INSERT INTO agents (id, tenant_id, name, token_sha256)
         SELECT gen_random_uuid(), 'other', 'other-' || i, md5('t' || i) || md5('u' || i)
         FROM generate_series(1, 2000) i;
         ANALYZE agents",
    )
    .await
    .unwrap();
    grow(&c, agent_id, 0, 20_000).await;
    c.batch_execute(
        "SET session_replication_role = replica;
         INSERT INTO grants (id, proposal_id, tenant_id, intent_hash, doc_version, expires_at_us, key_id, sig, issued_by)
         SELECT gen_random_uuid(), id, tenant_id, intent_hash, 1, 0, 'policy-1', '\\x00', 'policy' FROM proposals;
         SET session_replication_role = origin;
         ANALYZE",
    )
    .await
    .unwrap();
    let executor_claim: &str = &actiond_store::executor_queue::CLAIM_SQL;
    let policy_claim: &str = &actiond_store::policy_queue::CLAIM_SQL;
    c.batch_execute(&format!(
        "SET plan_cache_mode = force_generic_plan;
         PREPARE executor_claim(int8) AS {executor_claim};
         PREPARE policy_claim(int8) AS {policy_claim}"
    ))
    .await
    .unwrap();
    for (what, sql) in [
        ("executor claim", "EXECUTE executor_claim(32)"),
        ("policy claim", "EXECUTE policy_claim(32)"),
    ] {
        let plan = explain(&mut c, sql).await;
        let rows = plan["Actual Rows"].as_i64().unwrap_or(0);
        assert!(
            rows >= 30,
            "{what} found {rows} rows, expected 32: {plan:#}"
        );
        for table in ["agents", "grants"] {
            for n in nodes(&plan) {
                if n["Relation Name"] == table {
                    assert_ne!(
                        n["Node Type"], "Seq Scan",
                        "{what} scans all of {table} for a batch of {rows}: {plan:#}"
                    );
                }
            }
        }
        assert!(
            nodes(&plan)
                .iter()
                .any(|n| n["Relation Name"] == "agents" && n["Index Name"] == "agents_pkey"),
            "{what} does not probe agents by key: {plan:#}"
        );
    }
}
