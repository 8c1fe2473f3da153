//! The database's proposal lifecycle is the core's: the `proposal_transitions` table and what the
//! transition trigger actually lets through both equal `ProposalState::can_become`, and no
//! service role may make a transition that is not legal.

use actiond_core::state::ProposalState;
use actiond_testkit::{TestDb, agent};
use std::collections::BTreeSet;

type Pairs = BTreeSet<(String, String)>;

/// Every (from, to) the core allows.
fn core_transitions() -> Pairs {
    let mut pairs = Pairs::new();
    for from in ProposalState::ALL {
        for to in ProposalState::ALL {
            if from.can_become(to) {
                pairs.insert((from.as_str().to_owned(), to.as_str().to_owned()));
            }
        }
    }
    pairs
}

/// A fresh database with one tenant, one agent and one pending proposal; returns its id.
async fn one_proposal(tdb: &TestDb) -> uuid::Uuid {
    let doc = crate::support::TENANT
        .replace("RECEIVER", "http://127.0.0.1:9")
        .replace("WEBHOOK_PATH", "hook");
    actiond_store::tenants::apply(&tdb.db, &doc, "test")
        .await
        .unwrap();
    let (agent_id, _) = agent(&tdb.db, "acme", "schema-bot", None).await;
    let id = uuid::Uuid::new_v4();
    let hex = "0".repeat(64);
    tdb.superuser()
        .await
        .execute(
            "INSERT INTO proposals (id, tenant_id, agent_id, action, target, params_json, params_sha256,
                                    intent_hash, request_sha256)
             VALUES ($1, 'acme', $2, 'webhook.post', '', '{}', $3, $3, $3)",
            &[&id, &agent_id, &hex],
        )
        .await
        .unwrap();
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transition_table_matches_core() {
    let tdb = TestDb::new().await;
    let c = tdb.superuser().await;
    let table: Pairs = c
        .query("SELECT from_state, to_state FROM proposal_transitions", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(
        table,
        core_transitions(),
        "sql proposal_transitions (left) and services/core/src/state.rs (right) disagree"
    );
}

/// Tries every (from, to) on a real row as the superuser (the role check lets a superuser
/// through, so only the legal-transition rule decides): the trigger must accept exactly the
/// core's transitions. Each attempt is rolled back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transition_trigger_enforces_exactly_the_core_table() {
    let tdb = TestDb::new().await;
    let id = one_proposal(&tdb).await;
    let mut c = tdb.superuser().await;
    let mut accepted = Pairs::new();
    for from in ProposalState::ALL {
        for to in ProposalState::ALL {
            if from == to {
                continue;
            }
            let tx = c.transaction().await.unwrap();
            // Put the row in `from` without the triggers, then ask them about `to`.
            tx.batch_execute("SET LOCAL session_replication_role = replica")
                .await
                .unwrap();
            tx.execute(
                "UPDATE proposals SET state = $2 WHERE id = $1",
                &[&id, &from.as_str()],
            )
            .await
            .unwrap();
            tx.batch_execute("SET LOCAL session_replication_role = origin")
                .await
                .unwrap();
            match tx
                .execute(
                    "UPDATE proposals SET state = $2 WHERE id = $1",
                    &[&id, &to.as_str()],
                )
                .await
            {
                Ok(_) => {
                    accepted.insert((from.as_str().to_owned(), to.as_str().to_owned()));
                }
                Err(e) => {
                    let msg = format!("{e:?}");
                    assert!(
                        msg.contains(&format!("illegal proposal state transition {from} -> {to}")),
                        "{from} -> {to} refused for another reason: {msg}"
                    );
                }
            }
            tx.rollback().await.unwrap();
        }
    }
    assert_eq!(
        accepted,
        core_transitions(),
        "transitions the database accepts (left) and services/core/src/state.rs (right) disagree"
    );
}

/// What each service role may do (`actiond_role_may`) is a subset of what is legal, and every
/// legal transition is some role's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn role_transitions_are_legal_transitions() {
    let tdb = TestDb::new().await;
    let mut c = tdb.superuser().await;
    let legal = core_transitions();
    let mut by_any_role = Pairs::new();
    for role in [
        "actiond_api",
        "actiond_policy",
        "actiond_web",
        "actiond_executor",
        "actiond_admin",
    ] {
        let tx = c.transaction().await.unwrap();
        tx.batch_execute(&format!("SET LOCAL ROLE {role}"))
            .await
            .unwrap();
        for from in ProposalState::ALL {
            for to in ProposalState::ALL {
                let may: bool = tx
                    .query_one(
                        "SELECT actiond_role_may($1, $2)",
                        &[&from.as_str(), &to.as_str()],
                    )
                    .await
                    .unwrap()
                    .get(0);
                if may {
                    let pair = (from.as_str().to_owned(), to.as_str().to_owned());
                    assert!(
                        legal.contains(&pair),
                        "{role} may make illegal {from} -> {to}"
                    );
                    by_any_role.insert(pair);
                }
            }
        }
        tx.rollback().await.unwrap();
    }
    assert_eq!(by_any_role, legal, "a legal transition no role may make");
}
