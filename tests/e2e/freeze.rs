//! A frozen agent's proposals never run, even those a freeze could not see: the races V18 left
//! (a submission committing beside the freeze, an approval committing while the freeze waited
//! for its row lock) end blocked, with nothing spent and nothing sent.

use crate::support::{Options, Stack, refund};
use std::time::Duration;

/// Freezes the stack's agent as an approver would: `agents::freeze` sets `frozen_at` and denies
/// the open proposals it sees, in one transaction.
async fn freeze(s: &Stack) {
    let denied = actiond_store::agents::freeze(
        &s.tdb.db,
        "acme",
        s.agent_id,
        "approver:bob",
        "agent frozen by bob: its open requests were denied.",
    )
    .await
    .unwrap();
    assert!(denied.is_some(), "the agent was already frozen");
}

/// The kinds of `id`'s audit events the query of docs/approvals.md finds: every event of a proposal a
/// freeze stopped carries `"agent_frozen": true` at the top of its detail.
async fn readme_frozen_query(s: &Stack, id: uuid::Uuid) -> Vec<String> {
    let c = s.tdb.db.client().await.unwrap();
    c.query(
        "SELECT kind FROM audit_events WHERE detail->>'agent_frozen' = 'true' AND proposal_id = $1",
        &[&id],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| r.get(0))
    .collect()
}

/// A proposal committed beside the freeze stays `pending` with its agent frozen (the freeze's
/// UPDATE never saw it). Policy must not decide it by the rules (they would allow this small
/// refund and the executor would pay it): it is blocked with the freeze's reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_blocks_a_pending_proposal_the_freeze_did_not_see() {
    let mut s = Stack::with(
        "freeze_pending_race",
        Options {
            policy: false,
            ..Options::default()
        },
    )
    .await;
    let id = s.propose(&refund("pi_race", 100)).await;
    // The outcome of the race, made exactly: the agent frozen, this proposal still pending.
    s.freeze_agent().await;
    s.start_policy().await;
    s.wait_state(id, "blocked", Duration::from_secs(30)).await;
    let row = s.row(id).await;
    assert_eq!(
        row.get::<_, Option<String>>("rule_name").as_deref(),
        Some("agent-frozen")
    );
    let reason: String = row.get("decision_reason");
    assert!(reason.starts_with("its agent is frozen"), "{reason}");
    let c = s.tdb.db.client().await.unwrap();
    let grants: i64 = c
        .query_one("SELECT count(*) FROM grants WHERE proposal_id = $1", &[&id])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        grants, 0,
        "a grant was issued for a frozen agent's proposal"
    );
    assert_eq!(
        readme_frozen_query(&s, id).await,
        ["proposal.decided"],
        "the agent_frozen query of docs/approvals.md misses policy's block"
    );
    // The agent reads why.
    let (st, v) = s.get(&s.token, &id.to_string(), "").await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["state"], "blocked", "{v}");
    assert!(s.calls().is_empty(), "{:?}", s.calls());
}

/// A proposal approved while the freeze waited (the freeze denies pending and escalated rows,
/// not approved ones) must not run: the executor blocks it, its grant stays unspent and the
/// provider is never called.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executor_refuses_an_approved_proposal_of_a_frozen_agent() {
    let mut s = Stack::with(
        "freeze_approved_race",
        Options {
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let id = s.propose(&refund("pi_approved", 100)).await;
    s.wait_state(id, "approved", Duration::from_secs(30)).await;
    freeze(&s).await;
    assert_eq!(s.state(id).await, "approved");
    s.start_executor("exec-1").await;
    s.wait_state(id, "blocked", Duration::from_secs(30)).await;
    let reason: String = s.row(id).await.get("decision_reason");
    assert!(reason.starts_with("its agent was frozen"), "{reason}");
    assert!(
        !s.grant_spent(id).await,
        "the grant of a frozen agent's proposal was spent"
    );
    let events = s.audit_kinds(id).await;
    assert!(
        events
            .iter()
            .any(|(k, d)| k == "grant.rejected" && d["reason"] == "agent_frozen"),
        "{events:?}"
    );
    assert!(
        readme_frozen_query(&s, id)
            .await
            .contains(&"grant.rejected".to_string()),
        "the agent_frozen query of docs/approvals.md misses the executor's refusal: {events:?}"
    );
    assert!(s.calls().is_empty(), "{:?}", s.calls());
}

/// The rule holds in the database for every role, not only in the workers' queries: while the
/// agent is frozen, policy cannot allow or escalate its pending proposal, the executor cannot
/// start its approved one, and not even the owner can; unfrozen, the same statements pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_moves_no_frozen_agents_proposal_forward() {
    let s = Stack::with(
        "freeze_db_rule",
        Options {
            policy: false,
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let id = s.propose(&refund("pi_db", 100)).await;
    let owner = s.tdb.superuser().await;
    let set_frozen = |frozen: bool| {
        let owner = &owner;
        let agent = s.agent_id;
        async move {
            owner
                .execute(
                    "UPDATE agents SET frozen_at = CASE WHEN $2 THEN now() END WHERE id = $1",
                    &[&agent, &frozen],
                )
                .await
                .unwrap();
        }
    };
    set_frozen(true).await;
    let policy = s.tdb.as_role("policy").await;
    for to in ["approved", "escalated"] {
        let e = policy
            .execute("UPDATE proposals SET state = $2 WHERE id = $1", &[&id, &to])
            .await
            .expect_err("policy moved a frozen agent's proposal forward");
        let want = format!("is frozen: it may not move pending -> {to}");
        assert!(format!("{e:?}").contains(&want), "{e:?}");
    }
    let e = owner
        .execute(
            "UPDATE proposals SET state = 'approved' WHERE id = $1",
            &[&id],
        )
        .await
        .expect_err("the owner moved a frozen agent's proposal forward");
    assert!(format!("{e:?}").contains("is frozen"), "{e:?}");
    set_frozen(false).await;
    policy
        .execute(
            "UPDATE proposals SET state = 'approved' WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap();
    set_frozen(true).await;
    let executor = s.tdb.as_role("executor").await;
    let e = executor
        .execute(
            "UPDATE proposals SET state = 'executing' WHERE id = $1",
            &[&id],
        )
        .await
        .expect_err("the executor started a frozen agent's proposal");
    assert!(
        format!("{e:?}").contains("may not move approved -> executing"),
        "{e:?}"
    );
    // Refusing it stays possible: approved → blocked is the executor's.
    executor
        .execute(
            "UPDATE proposals SET state = 'blocked' WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap();
}

/// With a shadow document open, a frozen agent's proposal is blocked without the candidate
/// being asked (it could not move forward whatever the candidate said): it gets no
/// `shadow_decisions` row, while another agent's proposal in the same batch does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_agents_proposal_is_not_shadow_evaluated() {
    let mut s = Stack::with(
        "freeze_shadow",
        Options {
            policy: false,
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let env = s.cli_env().await;
    let candidate = crate::support::TENANT
        .replace("RECEIVER", &s.recv.url)
        .replace("WEBHOOK_PATH", "hook")
        .replace("params.amount <= 5000", "params.amount <= 2000")
        .replace("params.amount > 5000", "params.amount > 2000");
    let file = s.keys.dir.join("candidate.yaml");
    std::fs::write(&file, candidate).unwrap();
    let (ok, out, err) = actiond_testkit::cli(
        &["tenant", "shadow", "-f", &file.display().to_string()],
        &env,
    );
    assert!(ok && out.contains("shadow document 1 stored"), "{out}{err}");
    let (_, other_token) =
        actiond_testkit::agent(&s.tdb.db, "acme", "other-bot", Some("owner-olivia")).await;
    let frozen = s.propose(&refund("pi_frozen", 100)).await;
    let (st, v) = s.post_as(&other_token, &refund("pi_live", 100), None).await;
    assert_eq!(st, 202, "{v}");
    let live: uuid::Uuid = v["proposal_id"].as_str().unwrap().parse().unwrap();
    // The stack's agent is frozen while both proposals wait for policy.
    s.freeze_agent().await;
    s.start_policy().await;
    s.wait_state(frozen, "blocked", Duration::from_secs(30))
        .await;
    s.wait_state(live, "approved", Duration::from_secs(30))
        .await;
    let c = s.tdb.db.client().await.unwrap();
    let shadowed = |id: uuid::Uuid| {
        let c = &c;
        async move {
            let n: i64 = c
                .query_one(
                    "SELECT count(*) FROM shadow_decisions WHERE proposal_id = $1",
                    &[&id],
                )
                .await
                .unwrap()
                .get(0);
            n
        }
    };
    assert_eq!(
        shadowed(live).await,
        1,
        "the live agent's proposal was not shadow-evaluated"
    );
    assert_eq!(
        shadowed(frozen).await,
        0,
        "a frozen agent's proposal was shadow-evaluated and counted in the report"
    );
    let (ok, out, err) = actiond_testkit::cli(&["policy", "shadow-report", "acme"], &env);
    assert!(ok && out.contains("evaluated  1"), "{out}{err}");
}
