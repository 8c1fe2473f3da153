//! An agent withdraws its own proposal before it is approved (MCP `tasks/cancel`), on the
//! `actiond_api` role: `pending | escalated → withdrawn` with a `proposal.withdrawn` event naming
//! the agent; never an approved proposal, never another agent's, never another tenant's, and
//! the api role may not make any other transition nor write the event in another agent's name.

use crate::support::acme_db;
use actiond_core::state::ProposalState;
use actiond_store::proposals::{self, Withdrawal};
use actiond_testkit::TestDb;

/// Inserts a proposal of `agent` in tenant `acme` in `state` (as the superuser); returns its id.
async fn proposal_in(tdb: &TestDb, agent: uuid::Uuid, state: &str) -> uuid::Uuid {
    let id = uuid::Uuid::new_v4();
    let hex = format!("{:064x}", id.as_u128());
    let su = tdb.superuser().await;
    su.execute(
        "INSERT INTO proposals (id, tenant_id, agent_id, action, target, params_json, params_sha256,
                                intent_hash, request_sha256)
         VALUES ($1, 'acme', $2, 'webhook.post', '', '{}', $3, $3, $3)",
        &[&id, &agent, &hex],
    )
    .await
    .unwrap();
    // Along the legal path, as the superuser (the role check lets it through).
    let path: &[&str] = match state {
        "pending" => &[],
        "escalated" => &["escalated"],
        "approved" => &["escalated", "approved"],
        "succeeded" => &["approved", "executing", "succeeded"],
        other => panic!("no path to {other}"),
    };
    for s in path {
        su.execute("UPDATE proposals SET state = $2 WHERE id = $1", &[&id, s])
            .await
            .unwrap();
    }
    id
}

async fn state_of(tdb: &TestDb, id: uuid::Uuid) -> String {
    tdb.superuser()
        .await
        .query_one("SELECT state FROM proposals WHERE id = $1", &[&id])
        .await
        .unwrap()
        .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_withdraw_only_their_own_unapproved_proposals() {
    let (tdb, agent) = acme_db("withdraw-bot").await;
    let (other, _) = actiond_testkit::agent(&tdb.db, "acme", "other-bot", None).await;
    let api = actiond_store::Db::connect(&tdb.role_url("api").await, 2).unwrap();

    // pending and escalated: withdrawn, with the event by the agent.
    for from in ["pending", "escalated"] {
        let id = proposal_in(&tdb, agent, from).await;
        let done = proposals::withdraw(&api, "acme", agent, id, "test")
            .await
            .unwrap();
        assert_eq!(
            done,
            Withdrawal::Withdrawn(ProposalState::parse(from).unwrap())
        );
        assert_eq!(state_of(&tdb, id).await, "withdrawn");
        let ev = tdb
            .superuser()
            .await
            .query_one(
                "SELECT actor, from_state, to_state, detail->>'via' FROM audit_events
                 WHERE proposal_id = $1 AND kind = 'proposal.withdrawn'",
                &[&id],
            )
            .await
            .unwrap();
        assert_eq!(ev.get::<_, String>(0), format!("agent:{agent}"));
        assert_eq!(ev.get::<_, String>(1), from);
        assert_eq!(ev.get::<_, String>(2), "withdrawn");
        assert_eq!(ev.get::<_, String>(3), "test");
        // Final: a second withdrawal is refused, naming the state.
        let again = proposals::withdraw(&api, "acme", agent, id, "test")
            .await
            .unwrap();
        assert_eq!(again, Withdrawal::Refused(ProposalState::Withdrawn));
    }

    // approved and succeeded: refused, unchanged, no event.
    for st in ["approved", "succeeded"] {
        let id = proposal_in(&tdb, agent, st).await;
        let done = proposals::withdraw(&api, "acme", agent, id, "test")
            .await
            .unwrap();
        assert_eq!(done, Withdrawal::Refused(ProposalState::parse(st).unwrap()));
        assert_eq!(state_of(&tdb, id).await, st);
    }

    // Another agent's proposal, and this agent's proposal asked for in another tenant: not
    // found, unchanged.
    let theirs = proposal_in(&tdb, other, "escalated").await;
    let done = proposals::withdraw(&api, "acme", agent, theirs, "test")
        .await
        .unwrap();
    assert_eq!(done, Withdrawal::NotFound);
    let mine = proposal_in(&tdb, agent, "pending").await;
    let done = proposals::withdraw(&api, "globex", agent, mine, "test")
        .await
        .unwrap();
    assert_eq!(done, Withdrawal::NotFound);
    assert_eq!(state_of(&tdb, theirs).await, "escalated");
    assert_eq!(state_of(&tdb, mine).await, "pending");

    // The database refuses the api anything else, whatever the code does.
    let mut c = tdb.as_role("api").await;
    let code = |e: tokio_postgres::Error| e.code().map(|c| c.code().to_owned());
    let approved = proposal_in(&tdb, agent, "approved").await;
    let attempts = [
        // An approved proposal is never withdrawn: the transition does not exist.
        (format!("UPDATE proposals SET state = 'withdrawn' WHERE id = '{approved}'"), "23514"),
        // The api decides nothing.
        (format!("UPDATE proposals SET state = 'approved' WHERE id = '{mine}'"), "42501"),
        (format!("UPDATE proposals SET state = 'denied' WHERE id = '{theirs}'"), "42501"),
        // Nor may it write a withdrawal in another agent's name.
        (
            format!(
                "INSERT INTO audit_events (tenant_id, proposal_id, kind, actor, from_state, to_state, detail)
                 VALUES ('acme', '{theirs}', 'proposal.withdrawn', 'agent:{agent}', 'escalated', 'withdrawn', '{{}}')"
            ),
            "42501",
        ),
        // Nor an event of a kind that is not its own.
        (
            format!(
                "INSERT INTO audit_events (tenant_id, proposal_id, kind, actor, from_state, to_state, detail)
                 VALUES ('acme', '{mine}', 'proposal.decided', 'agent:{agent}', 'pending', 'withdrawn', '{{}}')"
            ),
            "42501",
        ),
    ];
    for (sql, want) in attempts {
        let tx = c.transaction().await.unwrap();
        tx.execute("SELECT set_config('actiond.tenant_ids', 'acme', true)", &[])
            .await
            .unwrap();
        let got = tx.batch_execute(&sql).await.err().and_then(code);
        assert_eq!(got.as_deref(), Some(want), "{sql}");
        tx.rollback().await.unwrap();
    }
    assert_eq!(state_of(&tdb, approved).await, "approved");
    assert_eq!(state_of(&tdb, mine).await, "pending");
    assert_eq!(state_of(&tdb, theirs).await, "escalated");
}
