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
            facts: None,
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

/// `agent:<id>` of the agent that submitted `proposal`.
async fn agent_of(t: &TestDb, proposal: uuid::Uuid) -> String {
    let su = t.superuser().await;
    let id: uuid::Uuid = su
        .query_one("SELECT agent_id FROM proposals WHERE id = $1", &[&proposal])
        .await
        .unwrap()
        .get(0);
    format!("agent:{id}")
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
    let agent_actor = agent_of(&t, a).await;
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
        // An event of a kind the role produces (V33: each role writes only its own).
        let (kind, actor, to) = match role {
            "api" => ("proposal.submitted", agent_actor.as_str(), Some("pending")),
            "policy" => ("proposal.decided", "policy", None),
            "web" => ("approval.decided", "approver:alice", None),
            "executor" => ("grant.rejected", "executor:x", None),
            _ => ("agent.created", "operator", None),
        };
        let id: i64 = c
            .query_one(
                "INSERT INTO audit_events (tenant_id, proposal_id, kind, actor, to_state)
                 VALUES ('tena', $1, $2, $3, $4) RETURNING id",
                &[&a, &kind, &actor, &to],
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

/// The api (the agent-facing role) may write only submissions by the agent of the proposal,
/// in its own tenant: an approval, a grant or seal kind, another agent's name, another
/// tenant's proposal, an event about no proposal — each refused by Postgres (42501), one by
/// one and inside a batch, and nothing is written. Each other role is refused a kind it does
/// not produce.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_role_writes_only_its_own_audit_events() {
    let t = TestDb::new().await;
    let (a, b) = seed(&t).await;
    let me = agent_of(&t, a).await;
    let other_agent = agent_of(&t, b).await;
    let su = t.superuser().await;
    let count = || async {
        let n: i64 = su
            .query_one("SELECT count(*) FROM audit_events", &[])
            .await
            .unwrap()
            .get(0);
        n
    };
    let before = count().await;
    let api = t.as_role("api").await;
    let insert = "INSERT INTO audit_events (tenant_id, proposal_id, kind, actor, to_state)
                  SELECT * FROM unnest($1::text[], $2::uuid[], $3::text[], $4::text[], $5::text[])";
    let one = |tenant: &str, p: Option<uuid::Uuid>, kind: &str, actor: &str, to: &str| {
        (
            vec![tenant.to_owned()],
            vec![p],
            vec![kind.to_owned()],
            vec![actor.to_owned()],
            vec![to.to_owned()],
        )
    };
    let cases = vec![
        (
            "an approval",
            one(
                "tena",
                Some(a),
                "approval.decided",
                "approver:alice",
                "approved",
            ),
        ),
        (
            "a grant spend",
            one("tena", Some(a), "grant.spent", &me, "executing"),
        ),
        (
            "a seal kind",
            one("tena", Some(a), "audit.sealed", &me, "pending"),
        ),
        (
            "a break-glass approval by the agent",
            one("tena", Some(a), "approval.breakglass", &me, "pending"),
        ),
        (
            "another agent's name",
            one(
                "tena",
                Some(a),
                "proposal.submitted",
                &other_agent,
                "pending",
            ),
        ),
        (
            "an operator's name",
            one("tena", Some(a), "proposal.submitted", "operator", "pending"),
        ),
        (
            "no proposal",
            one("tena", None, "proposal.submitted", &me, "pending"),
        ),
        // tenb's proposal, as tenb's agent, from a transaction set to tena.
        (
            "another tenant",
            one(
                "tenb",
                Some(b),
                "proposal.submitted",
                &other_agent,
                "pending",
            ),
        ),
        // tenb's proposal filed under tena (the proposal is invisible to tena, and not tena's).
        (
            "another tenant's proposal",
            one(
                "tena",
                Some(b),
                "proposal.submitted",
                &other_agent,
                "pending",
            ),
        ),
        // A batch: the first event is the agent's own, the second names another agent.
        (
            "a batch with one forged event",
            (
                vec!["tena".into(), "tena".into()],
                vec![Some(a), Some(a)],
                vec!["proposal.submitted".into(), "proposal.submitted".into()],
                vec![me.clone(), other_agent.clone()],
                vec!["pending".into(), "pending".into()],
            ),
        ),
    ];
    for (what, (tenants, props, kinds, actors, to)) in cases {
        api.batch_execute("BEGIN; SELECT set_config('actiond.tenant_ids', 'tena', true)")
            .await
            .unwrap();
        let r = api
            .execute(insert, &[&tenants, &props, &kinds, &actors, &to])
            .await;
        let e = r.expect_err(what);
        assert_eq!(
            e.code(),
            Some(&SqlState::INSUFFICIENT_PRIVILEGE),
            "{what}: {e:?}"
        );
        api.batch_execute("ROLLBACK").await.unwrap();
    }
    // The agent's own submission event is accepted (then rolled back).
    api.batch_execute("BEGIN; SELECT set_config('actiond.tenant_ids', 'tena', true)")
        .await
        .unwrap();
    let (tenants, props, kinds, actors, to) =
        one("tena", Some(a), "proposal.submitted", &me, "pending");
    assert_eq!(
        api.execute(insert, &[&tenants, &props, &kinds, &actors, &to])
            .await
            .unwrap(),
        1
    );
    api.batch_execute("ROLLBACK").await.unwrap();
    // Each other role: a kind it does not produce.
    for (role, kind, actor) in [
        ("policy", "approval.decided", "approver:alice"),
        ("web", "grant.spent", "executor:x"),
        ("executor", "approval.breakglass", "operator"),
        ("admin", "grant.spent", "executor:x"),
        ("admin", "proposal.submitted", me.as_str()),
    ] {
        let c = t.as_role(role).await;
        c.batch_execute("BEGIN; SELECT set_config('actiond.tenant_ids', 'tena', true)")
            .await
            .unwrap();
        denied(
            c.execute(
                "INSERT INTO audit_events (tenant_id, proposal_id, kind, actor) VALUES ('tena', $1, $2, $3)",
                &[&a, &kind, &actor],
            )
            .await,
            &format!("{role} writes {kind}"),
        );
        c.batch_execute("ROLLBACK").await.unwrap();
    }
    assert_eq!(count().await, before, "an event was written");
}

/// V41: the web and admin roles may insert a proposal only as an amendment of an escalated
/// proposal of the same tenant, agent, action and target, once; `escalated → amended` needs
/// that amendment and belongs to them; the api cannot file an amendment at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_person_amends_and_only_an_escalated_proposal() {
    let t = TestDb::new().await;
    let (a, _b) = seed(&t).await;
    let insert = |target: &'static str, from: Option<uuid::Uuid>| {
        (
            "INSERT INTO proposals (id, tenant_id, agent_id, action, target, params_json, params_sha256, intent_hash, request_sha256, amended_from, amended_by, amendment_diff)
             SELECT gen_random_uuid(), tenant_id, agent_id, action, $2, '{}', repeat('a', 64), repeat('e', 64), 'r', $1, 'approver:alice', '[]'::jsonb
             FROM proposals WHERE id = $3",
            target,
            from,
        )
    };
    let web = t.as_role("web").await;
    // Not an amendment: the web role may not file a proposal (restrictive policy).
    let (sql, target, _) = insert("pi_1", None);
    let e = amend_row(&web, a, sql, target, None).await.unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::INSUFFICIENT_PRIVILEGE), "{e:?}");
    // The api may not write amended_from (no column privilege).
    let api = t.as_role("api").await;
    let e = amend_row(&api, a, sql, target, Some(a)).await.unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::INSUFFICIENT_PRIVILEGE), "{e:?}");
    // A pending original cannot be amended.
    let e = amend_row(&web, a, sql, target, Some(a)).await.unwrap_err();
    assert!(
        format!("{e:?}").contains("an amendment names an escalated proposal"),
        "{e:?}"
    );
    let su = t.superuser().await;
    su.execute(
        "UPDATE proposals SET state = 'escalated' WHERE id = $1",
        &[&a],
    )
    .await
    .unwrap();
    // Without its amendment the original does not become amended.
    web.batch_execute("BEGIN; SELECT set_config('actiond.tenant_ids', 'tena', true)")
        .await
        .unwrap();
    let e = web
        .execute(
            "UPDATE proposals SET state = 'amended' WHERE id = $1",
            &[&a],
        )
        .await
        .unwrap_err();
    assert!(
        format!("{e:?}").contains("only when the proposal amending it exists"),
        "{e:?}"
    );
    web.batch_execute("ROLLBACK").await.unwrap();
    // Another target is not an amendment of it.
    let (sql2, other, _) = insert("pi_other", None);
    let e = amend_row(&web, a, sql2, other, Some(a)).await.unwrap_err();
    assert!(
        format!("{e:?}").contains("an amendment names an escalated proposal"),
        "{e:?}"
    );
    // The policy role may not move it to amended.
    let policy = t.as_role("policy").await;
    amend_row(&web, a, sql, target, Some(a)).await.unwrap();
    let e = policy
        .execute(
            "UPDATE proposals SET state = 'amended' WHERE id = $1",
            &[&a],
        )
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::INSUFFICIENT_PRIVILEGE), "{e:?}");
    // One amendment per original.
    let e = amend_row(&web, a, sql, target, Some(a)).await.unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::UNIQUE_VIOLATION), "{e:?}");
    web.batch_execute("BEGIN; SELECT set_config('actiond.tenant_ids', 'tena', true)")
        .await
        .unwrap();
    web.execute(
        "UPDATE proposals SET state = 'amended' WHERE id = $1",
        &[&a],
    )
    .await
    .unwrap();
    web.batch_execute("COMMIT").await.unwrap();
}

/// Runs `sql` (an amendment insert of proposal `a`'s row with `target` and `from`) in its own
/// transaction for tenant `tena`; commits when it succeeds.
async fn amend_row(
    c: &tokio_postgres::Client,
    a: uuid::Uuid,
    sql: &str,
    target: &str,
    from: Option<uuid::Uuid>,
) -> Result<u64, tokio_postgres::Error> {
    c.batch_execute("BEGIN; SELECT set_config('actiond.tenant_ids', 'tena', true)")
        .await
        .unwrap();
    let r = c.execute(sql, &[&from, &target, &a]).await;
    c.batch_execute(if r.is_ok() { "COMMIT" } else { "ROLLBACK" })
        .await
        .unwrap();
    r
}
