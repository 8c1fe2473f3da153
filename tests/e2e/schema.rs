//! The database's proposal lifecycle is the core's: the `proposal_transitions` table and what the
//! transition trigger actually lets through both equal `ProposalState::can_become`, and no
//! service role may make a transition that is not legal.

use crate::support::acme_db;
use actiond_core::state::ProposalState;
use actiond_testkit::TestDb;
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

/// Adds one pending proposal of `agent_id` (tenant `acme`, see [`acme_db`]) and freezes the
/// agent; returns the proposal's id.
async fn one_proposal(tdb: &TestDb, agent_id: uuid::Uuid) -> uuid::Uuid {
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
    // Frozen, so `pending → denied` (legal only for a frozen agent's proposal) is tried too.
    tdb.superuser()
        .await
        .execute(
            "UPDATE agents SET frozen_at = now(), frozen_by = 'test' WHERE id = $1",
            &[&agent_id],
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
    let (tdb, agent_id) = acme_db("schema-bot").await;
    let id = one_proposal(&tdb, agent_id).await;
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
            // `→ amended` needs the proposal amending it (V41): give it one.
            if to == ProposalState::Amended {
                tx.execute(
                    "INSERT INTO proposals (id, tenant_id, agent_id, action, target, params_json, params_sha256,
                        intent_hash, request_sha256, amended_from, amended_by, amendment_diff)
                     SELECT gen_random_uuid(), tenant_id, agent_id, action, target, params_json, params_sha256,
                        repeat('e', 64), request_sha256, id, 'approver:alice', '[]'::jsonb
                     FROM proposals WHERE id = $1",
                    &[&id],
                )
                .await
                .unwrap();
            }
            tx.batch_execute("SET LOCAL session_replication_role = origin")
                .await
                .unwrap();
            // The agent is frozen only for `pending → denied`, the one transition a freeze
            // needs; a frozen agent's proposal never moves forward (V20, tested in `freeze`).
            let frozen = from == ProposalState::Pending && to == ProposalState::Denied;
            tx.execute(
                "UPDATE agents SET frozen_at = CASE WHEN $2 THEN now() END
                 WHERE id = (SELECT agent_id FROM proposals WHERE id = $1)",
                &[&id, &frozen],
            )
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
                // Legal in the table; the rest of V45's rule is tested in
                // `a_run_goes_back_to_the_approvers_only_as_its_handler_says`.
                Err(e)
                    if from == ProposalState::Executing
                        && to == ProposalState::Escalated
                        && format!("{e:?}").contains("goes back to the approvers only") =>
                {
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

/// The legal transitions are written once, as rows of `proposal_transitions`: the trigger's
/// test (`proposal_transition_legal`, V29) is generated from them and follows every change of
/// the table, in the same transaction (and back with its rollback).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_transition_table_changes_the_trigger() {
    let (tdb, agent_id) = acme_db("schema-table-bot").await;
    let id = one_proposal(&tdb, agent_id).await;
    let mut c = tdb.superuser().await;
    async fn legal(c: &tokio_postgres::Transaction<'_>, from: &str, to: &str) -> bool {
        c.query_one("SELECT proposal_transition_legal($1, $2)", &[&from, &to])
            .await
            .unwrap()
            .get(0)
    }
    let tx = c.transaction().await.unwrap();
    assert!(legal(&tx, "pending", "approved").await);
    assert!(!legal(&tx, "failed", "succeeded").await);
    tx.batch_execute(
        "DELETE FROM proposal_transitions WHERE from_state = 'pending' AND to_state = 'approved';
         INSERT INTO proposal_transitions (from_state, to_state) VALUES ('pending', 'failed')",
    )
    .await
    .unwrap();
    assert!(!legal(&tx, "pending", "approved").await);
    assert!(legal(&tx, "pending", "failed").await);
    // The trigger follows: the removed transition is refused, the added one passes (the
    // superuser passes the role check, so only the legal-transition rule decides).
    tx.batch_execute("UPDATE agents SET frozen_at = NULL")
        .await
        .unwrap();
    tx.batch_execute("SAVEPOINT s").await.unwrap();
    let err = tx
        .execute(
            "UPDATE proposals SET state = 'approved' WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap_err();
    assert!(
        format!("{err:?}").contains("illegal proposal state transition pending -> approved"),
        "{err:?}"
    );
    tx.batch_execute("ROLLBACK TO SAVEPOINT s").await.unwrap();
    let moved = tx
        .execute(
            "UPDATE proposals SET state = 'failed' WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap();
    assert_eq!(moved, 1);
    tx.batch_execute("TRUNCATE proposal_transitions")
        .await
        .unwrap();
    assert!(
        !legal(&tx, "executing", "succeeded").await,
        "an empty table allows nothing"
    );
    tx.rollback().await.unwrap();
    // The rollback took the generated function back with the table.
    let tx = c.transaction().await.unwrap();
    assert!(legal(&tx, "pending", "approved").await);
    assert!(!legal(&tx, "pending", "failed").await);
    tx.rollback().await.unwrap();
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

/// V13 (cheaper proposal writes) on a database that already holds a proposal in every state:
/// the rows stay as they were, the same rules hold afterwards (legal transitions, roles,
/// immutable identity), and a lease change of an `approved` row is now a HOT update.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v13_keeps_rows_in_every_state_and_their_rules() {
    let mut s = crate::support::Scratch::at(12).await;
    s.every_state().await;
    let before = s.rows().await;
    assert_eq!(before.len(), 10);
    assert_eq!(s.db.migrate_to(13).await.unwrap(), vec![13]);
    let after = s.rows().await;
    let agent = s.agent;
    let c = &mut s.c;
    assert_eq!(before, after, "V13 moves no row");
    let code = |e: tokio_postgres::Error| e.code().map(|c| c.code().to_owned());
    // A lease change of an approved row (the executor's claim) is HOT now.
    let tx = c.transaction().await.unwrap();
    let hot = crate::support::lease_approved_rows(&tx).await;
    assert_eq!(hot, 1, "the claim's lease update is a HOT update");
    // The executor's own transition still passes, and still stamps updated_at.
    tx.batch_execute("UPDATE proposals SET state = 'executing' WHERE state = 'approved'")
        .await
        .unwrap();
    let stamped: bool = tx
        .query_one(
            "SELECT updated_at = now() FROM proposals WHERE lease_owner = 'e1'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(stamped);
    tx.rollback().await.unwrap();
    // A role outside its transitions, an illegal transition, a changed identity column, an
    // insert that does not start pending: refused with the same codes as before.
    let refused = [
        (
            "SET ROLE actiond_policy; UPDATE proposals SET state = 'executing' WHERE state = 'approved'",
            "42501",
        ),
        (
            "RESET ROLE; UPDATE proposals SET state = 'pending' WHERE state = 'succeeded'",
            "23514",
        ),
        (
            "RESET ROLE; UPDATE proposals SET target = 'elsewhere' WHERE state = 'approved'",
            "23514",
        ),
        (
            "RESET ROLE; UPDATE proposals SET purged_at = NULL WHERE false",
            "",
        ),
    ];
    for (sql, want) in refused {
        let got = c.batch_execute(sql).await.err().and_then(code);
        if want.is_empty() {
            assert_eq!(got, None, "{sql}");
        } else {
            assert_eq!(got.as_deref(), Some(want), "{sql}");
        }
    }
    let ins = c
        .batch_execute(&format!(
            "RESET ROLE; INSERT INTO proposals (id, tenant_id, agent_id, action, target, params_json, params_sha256,
                 intent_hash, request_sha256, state)
             VALUES (gen_random_uuid(), 'acme', '{agent}', 'x', '', '{{}}', repeat('b', 64), repeat('b', 64),
                     repeat('b', 64), 'approved')"
        ))
        .await
        .err()
        .and_then(code);
    assert_eq!(
        ins.as_deref(),
        Some("23514"),
        "a proposal starts as pending"
    );
    s.drop_now().await;
}

/// What `executing → escalated` needs (V45, `on_stale: reapprove`), each condition refused on
/// its own on a real row (as the superuser, whom the role check lets through; each attempt
/// rolled back): the approval round moves by one, no live grant is left, a preview was read in
/// the same transaction, and the document version that escalated it says `on_stale:
/// reapprove`. With all four it goes through. The round moves with no other transition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_goes_back_to_the_approvers_only_as_its_handler_says() {
    let (tdb, agent_id) = acme_db("schema-reapprove-bot").await;
    let id = one_proposal(&tdb, agent_id).await;
    let mut c = tdb.superuser().await;
    // (round moves, live grant left, preview read now, document says reapprove) → refusal
    let cases = [
        (
            (false, false, true, true),
            Some("only with its approvals void"),
        ),
        ((true, true, true, true), Some("only with its grant void")),
        (
            (true, false, false, true),
            Some("only with a preview read in this transaction"),
        ),
        (
            (true, false, true, false),
            Some("only when its handler says on_stale: reapprove"),
        ),
        ((true, false, true, true), None),
    ];
    for ((round, live_grant, fresh, reapprove), refusal) in cases {
        let tx = c.transaction().await.unwrap();
        tx.batch_execute("SET LOCAL session_replication_role = replica")
            .await
            .unwrap();
        tx.execute(
            "UPDATE proposals SET state = 'executing',
                    doc_version = (SELECT max(version) FROM tenant_documents WHERE tenant_id = 'acme')
             WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap();
        tx.execute(
            "INSERT INTO grants (id, proposal_id, tenant_id, intent_hash, doc_version, expires_at_us, key_id, sig, issued_by, used_at, voided_at)
             VALUES (gen_random_uuid(), $1, 'acme', repeat('0', 64), 1, 0, 'k', '\\x00', 'alice', now(),
                     CASE WHEN $2 THEN NULL ELSE now() END)",
            &[&id, &live_grant],
        )
        .await
        .unwrap();
        tx.execute(
            "INSERT INTO proposal_previews (proposal_id, tenant_id, ok, text, read_at)
             VALUES ($1, 'acme', true, 'fresh', CASE WHEN $2 THEN now() ELSE now() - interval '1 second' END)",
            &[&id, &fresh],
        )
        .await
        .unwrap();
        let on_stale = if reapprove {
            "\"reapprove\""
        } else {
            "\"end\""
        };
        tx.execute(
            "UPDATE tenant_documents SET document = jsonb_set(document, '{handlers,webhook.post,on_stale}', $1::text::jsonb)
             WHERE tenant_id = 'acme'",
            &[&on_stale],
        )
        .await
        .unwrap();
        tx.batch_execute("SET LOCAL session_replication_role = origin")
            .await
            .unwrap();
        let moved = tx
            .execute(
                "UPDATE proposals SET state = 'escalated',
                        approval_round = approval_round + CASE WHEN $2 THEN 1 ELSE 0 END
                 WHERE id = $1",
                &[&id, &round],
            )
            .await;
        match (refusal, moved) {
            (None, Ok(n)) => assert_eq!(n, 1),
            (Some(why), Err(e)) => assert!(format!("{e:?}").contains(why), "{why}: {e:?}"),
            (want, got) => panic!("{want:?}: {got:?}"),
        }
        tx.rollback().await.unwrap();
    }
    // The round moves with no other transition, nor without one.
    let mut tx = c.transaction().await.unwrap();
    tx.batch_execute("SET LOCAL session_replication_role = replica")
        .await
        .unwrap();
    tx.execute(
        "UPDATE proposals SET state = 'escalated' WHERE id = $1",
        &[&id],
    )
    .await
    .unwrap();
    tx.batch_execute("SET LOCAL session_replication_role = origin")
        .await
        .unwrap();
    for sql in [
        "UPDATE proposals SET approval_round = 1 WHERE id = $1",
        "UPDATE proposals SET state = 'expired', approval_round = 1 WHERE id = $1",
    ] {
        let sp = tx.savepoint("try").await.unwrap();
        let e = sp.execute(sql, &[&id]).await.unwrap_err();
        assert!(
            format!("{e:?}").contains("moves only when a run goes back to the approvers"),
            "{sql}: {e:?}"
        );
        sp.rollback().await.unwrap();
    }
    tx.rollback().await.unwrap();
}
