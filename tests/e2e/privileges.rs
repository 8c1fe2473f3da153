//! Least privilege and tenant isolation enforced by Postgres itself: each service role tries
//! what it must not do, directly in SQL.

use actiond_testkit::TestDb;
use tokio_postgres::error::SqlState;

const DOC: &str = r#"
tenant: TENANT
policy:
  default: escalate
handlers:
  billing.refund.issue:
    credential: payments
    max_amount: 100000
approvers:
  subjects: [alice]
"#;

/// Seeds two tenants with one pending proposal each (as the superuser, through the store).
async fn seed(t: &TestDb) -> (uuid::Uuid, uuid::Uuid) {
    let mut ids = Vec::new();
    for tenant in ["tena", "tenb"] {
        actiond_store::tenants::apply(&t.db, &DOC.replace("TENANT", tenant), "test")
            .await
            .unwrap();
        let (agent, _) = actiond_testkit::agent(&t.db, tenant, "bot", None).await;
        let id = uuid::Uuid::new_v4();
        let p = actiond_store::proposals::NewProposal {
            id,
            tenant_id: tenant.into(),
            agent_id: agent,
            action: "billing.refund.issue".into(),
            target: "pi_1".into(),
            params_json: r#"{"amount":100,"currency":"USD","payment_id":"pi_1"}"#.into(),
            params_sha256: "a".repeat(64),
            intent_hash: "b".repeat(64),
            agent_reason: None,
            source_text: None,
            session_id: None,
            idempotency_key: None,
            request_sha256: "c".repeat(64),
            on_behalf_of: None,
        };
        // Version 1: the document applied above.
        let stored = actiond_store::proposals::submit(&t.db, &p, 20, 1)
            .await
            .unwrap();
        assert_eq!(stored, actiond_store::proposals::Submitted::Created(id));
        ids.push(id);
    }
    (ids[0], ids[1])
}

fn denied(r: Result<u64, tokio_postgres::Error>, what: &str) {
    let e = r.expect_err(what);
    assert_eq!(
        e.code(),
        Some(&SqlState::INSUFFICIENT_PRIVILEGE),
        "{what}: {e:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_role_is_refused_what_it_must_not_do() {
    let t = TestDb::new().await;
    let (a, _b) = seed(&t).await;
    let api = t.as_role("api").await;
    api.batch_execute("BEGIN; SELECT set_config('actiond.tenant_ids', 'tena', true)")
        .await
        .unwrap();
    denied(
        api.execute(
            "UPDATE proposals SET state = 'approved' WHERE id = $1",
            &[&a],
        )
        .await,
        "api UPDATE state",
    );
    api.batch_execute("ROLLBACK").await.unwrap();
    denied(
        api.execute(
            "INSERT INTO grants (id, proposal_id, tenant_id, intent_hash, doc_version, expires_at_us, key_id, sig, issued_by)
             VALUES (gen_random_uuid(), $1, 'tena', repeat('b', 64), 1, 0, 'policy-1', '', 'x')",
            &[&a],
        )
        .await,
        "api INSERT grants",
    );
    denied(
        api.execute("SELECT 1 FROM grants", &[]).await,
        "api reads grants",
    );
    denied(
        api.execute(
            "INSERT INTO proposals (id, tenant_id, agent_id, action, target, params_json, params_sha256, intent_hash, request_sha256, state)
             SELECT gen_random_uuid(), tenant_id, agent_id, action, target, params_json, params_sha256, repeat('d', 64), request_sha256, 'approved'
             FROM proposals WHERE id = $1",
            &[&a],
        )
        .await,
        "api INSERT with state",
    );
    let exec = t.as_role("executor").await;
    denied(
        exec.execute(
            "INSERT INTO grants (id, proposal_id, tenant_id, intent_hash, doc_version, expires_at_us, key_id, sig, issued_by)
             VALUES (gen_random_uuid(), $1, 'tena', repeat('b', 64), 1, 0, 'policy-1', '', 'x')",
            &[&a],
        )
        .await,
        "executor INSERT grants",
    );
    denied(
        exec.execute(
            "UPDATE grants SET expires_at_us = expires_at_us + 86400000000",
            &[],
        )
        .await,
        "executor extends a grant",
    );
    // The policy role may decide pending rows, but not approve an escalated one like a person.
    let policy = t.as_role("policy").await;
    policy
        .execute(
            "UPDATE proposals SET state = 'escalated' WHERE id = $1",
            &[&a],
        )
        .await
        .unwrap();
    denied(
        policy
            .execute(
                "UPDATE proposals SET state = 'approved' WHERE id = $1",
                &[&a],
            )
            .await,
        "policy approves an escalation",
    );
    // No role may change or remove audit events.
    for role in ["api", "policy", "web", "executor", "admin"] {
        let c = t.as_role(role).await;
        c.batch_execute("BEGIN; SELECT set_config('actiond.tenant_ids', 'tena', true)")
            .await
            .unwrap();
        denied(
            c.execute("UPDATE audit_events SET kind = 'x'", &[]).await,
            &format!("{role} UPDATE audit"),
        );
        c.batch_execute("ROLLBACK; BEGIN; SELECT set_config('actiond.tenant_ids', 'tena', true)")
            .await
            .unwrap();
        denied(
            c.execute("DELETE FROM audit_events", &[]).await,
            &format!("{role} DELETE audit"),
        );
        // Nor choose where an event sits in the sealed order, or when it happened (V22: the
        // id and the time are the database's; INSERT is granted on the other columns only).
        c.batch_execute("ROLLBACK; BEGIN; SELECT set_config('actiond.tenant_ids', 'tena', true)")
            .await
            .unwrap();
        denied(
            c.execute(
                "INSERT INTO audit_events (id, tenant_id, kind, actor) VALUES (1, 'tena', 'forged', 'mallory')",
                &[],
            )
            .await,
            &format!("{role} INSERT audit with its own id"),
        );
        c.batch_execute("ROLLBACK; BEGIN; SELECT set_config('actiond.tenant_ids', 'tena', true)")
            .await
            .unwrap();
        denied(
            c.execute(
                "INSERT INTO audit_events (at, tenant_id, kind, actor) VALUES (now() - interval '1 year', 'tena', 'forged', 'mallory')",
                &[],
            )
            .await,
            &format!("{role} INSERT audit with its own time"),
        );
        c.batch_execute("ROLLBACK; BEGIN; SELECT set_config('actiond.tenant_ids', 'tena', true)")
            .await
            .unwrap();
        let before: i64 = c
            .query_one("SELECT coalesce(max(id), 0) FROM audit_events", &[])
            .await
            .unwrap()
            .get(0);
        let id: i64 = c
            .query_one(
                "INSERT INTO audit_events (tenant_id, kind, actor) VALUES ('tena', 'test.event', 'test')
                 RETURNING id",
                &[],
            )
            .await
            .unwrap_or_else(|e| panic!("{role} writes an event: {e:?}"))
            .get(0);
        assert!(id > before, "{role}: event id {id} after {before}");
        c.batch_execute("ROLLBACK").await.unwrap();
    }
    // Not even the owner: the trigger refuses.
    let su = t.superuser().await;
    let e = su
        .execute("DELETE FROM audit_events", &[])
        .await
        .unwrap_err();
    assert!(format!("{e:?}").contains("append-only"), "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn illegal_transitions_fail_whoever_tries() {
    let t = TestDb::new().await;
    let (a, _) = seed(&t).await;
    let su = t.superuser().await;
    let e = su
        .execute(
            "UPDATE proposals SET state = 'succeeded' WHERE id = $1",
            &[&a],
        )
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::CHECK_VIOLATION), "{e:?}");
    assert!(format!("{e:?}").contains("illegal proposal state transition pending -> succeeded"));
    su.execute(
        "UPDATE proposals SET state = 'escalated' WHERE id = $1",
        &[&a],
    )
    .await
    .unwrap();
    su.execute("UPDATE proposals SET state = 'denied' WHERE id = $1", &[&a])
        .await
        .unwrap();
    let e = su
        .execute(
            "UPDATE proposals SET state = 'approved' WHERE id = $1",
            &[&a],
        )
        .await
        .unwrap_err();
    assert!(format!("{e:?}").contains("denied -> approved"), "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rls_scopes_every_transaction_and_nothing_leaks_on_a_pooled_connection() {
    let t = TestDb::new().await;
    let (a, b) = seed(&t).await;
    // One connection, reused by "two requests" for different tenants, like a pool does.
    let api = t.as_role("api").await;
    let ids = |rows: Vec<tokio_postgres::Row>| {
        rows.iter()
            .map(|r| r.get::<_, uuid::Uuid>(0))
            .collect::<Vec<_>>()
    };
    api.batch_execute("BEGIN").await.unwrap();
    api.execute("SELECT set_config('actiond.tenant_ids', 'tena', true)", &[])
        .await
        .unwrap();
    assert_eq!(
        ids(api.query("SELECT id FROM proposals", &[]).await.unwrap()),
        vec![a]
    );
    api.batch_execute("COMMIT").await.unwrap();
    api.batch_execute("BEGIN").await.unwrap();
    api.execute("SELECT set_config('actiond.tenant_ids', 'tenb', true)", &[])
        .await
        .unwrap();
    assert_eq!(
        ids(api.query("SELECT id FROM proposals", &[]).await.unwrap()),
        vec![b],
        "the second request sees none of the first tenant's rows"
    );
    api.batch_execute("COMMIT").await.unwrap();
    // After the transaction nothing is set: no rows at all.
    assert!(
        api.query("SELECT id FROM proposals", &[])
            .await
            .unwrap()
            .is_empty()
    );
    // The api role cannot write into another tenant than the one set.
    api.batch_execute("BEGIN").await.unwrap();
    api.execute("SELECT set_config('actiond.tenant_ids', 'tena', true)", &[])
        .await
        .unwrap();
    let e = api
        .execute(
            "INSERT INTO proposals (id, tenant_id, agent_id, action, target, params_json, params_sha256, intent_hash, request_sha256)
             VALUES (gen_random_uuid(), 'tenb', (SELECT agent_id FROM proposals LIMIT 1), 'x', '', '{}', repeat('a',64), repeat('e',64), 'r')",
            &[],
        )
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::INSUFFICIENT_PRIVILEGE), "{e:?}");
    api.batch_execute("ROLLBACK").await.unwrap();
    // '*' is not a wildcard for the api role.
    api.batch_execute("BEGIN").await.unwrap();
    api.execute("SELECT set_config('actiond.tenant_ids', '*', true)", &[])
        .await
        .unwrap();
    assert!(
        api.query("SELECT id FROM proposals", &[])
            .await
            .unwrap()
            .is_empty()
    );
    api.batch_execute("ROLLBACK").await.unwrap();
    // The web role sees only the approver's tenants.
    let web = t.as_role("web").await;
    web.batch_execute("BEGIN").await.unwrap();
    web.execute("SELECT set_config('actiond.tenant_ids', 'tenb', true)", &[])
        .await
        .unwrap();
    assert_eq!(
        ids(web.query("SELECT id FROM proposals", &[]).await.unwrap()),
        vec![b]
    );
    web.batch_execute("ROLLBACK").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whom_an_agent_acts_for_is_tenant_scoped_and_write_once() {
    let t = TestDb::new().await;
    let (a, b) = seed(&t).await;
    let insert = "INSERT INTO proposal_delegations (proposal_id, tenant_id, on_behalf_of) VALUES ($1, $2, $3)";
    t.superuser()
        .await
        .execute(insert, &[&b, &"tenb", &"bob@tenb.example"])
        .await
        .unwrap();
    let api = t.as_role("api").await;
    api.batch_execute("BEGIN; SELECT set_config('actiond.tenant_ids', 'tena', true)")
        .await
        .unwrap();
    api.execute(insert, &[&a, &"tena", &"jane@customer.example"])
        .await
        .unwrap();
    // Tenant a's api cannot record a delegation for tenant b, nor read b's.
    let e = api
        .execute(insert, &[&a, &"tenb", &"mallory@evil.example"])
        .await
        .expect_err("a delegation in another tenant");
    let message = e.as_db_error().map(|d| d.message()).unwrap_or_default();
    assert!(message.contains("row-level security"), "{e:?}");
    api.batch_execute("ROLLBACK; BEGIN; SELECT set_config('actiond.tenant_ids', 'tena', true)")
        .await
        .unwrap();
    api.execute(insert, &[&a, &"tena", &"jane@customer.example"])
        .await
        .unwrap();
    let seen: Vec<String> = api
        .query("SELECT on_behalf_of FROM proposal_delegations", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(seen, ["jane@customer.example"]);
    // Recorded once, at submission: the api may not rewrite or remove it.
    denied(
        api.execute("UPDATE proposal_delegations SET on_behalf_of = 'x'", &[])
            .await,
        "api updates a delegation",
    );
    api.batch_execute("ROLLBACK").await.unwrap();
    api.batch_execute("BEGIN").await.unwrap();
    denied(
        api.execute("DELETE FROM proposal_delegations", &[]).await,
        "api deletes a delegation",
    );
    api.batch_execute("ROLLBACK").await.unwrap();
}
