//! Staged approvals that re-route (issue #16, point 2), over real processes: `actiond api` and
//! `policy` escalate and write the stages, `actiond web` (dev login) decides, the policy sweep
//! moves timed-out stages on. Every time bound is the database clock's, and the database itself
//! refuses an approval outside its stage even from a web-role connection that skips the app.

use crate::approval_rules::{
    Person, Web, breakglass, grants, issued_by, paste, printed_commands, refusals, stack,
};
use crate::support::{Stack, refund};
use reqwest::StatusCode;
use std::time::Duration;

const T: Duration = Duration::from_secs(20);

/// The test tenant with two stages on refunds (`within` each, `on_timeout`), and the two
/// groups as approver values.
fn staged(within: &str, on_timeout: &str) -> impl Fn(String) -> String {
    let stages = format!(
        "    max_amount: 100000\n    approvals:\n      stages:\n        - {{approvers: team-leads, required: 1, within: {within}}}\n        - {{approvers: finance, required: 1, within: {within}}}\n      on_timeout: {on_timeout}\n"
    );
    move |d: String| {
        d.replace("    max_amount: 100000\n", &stages).replace(
            "  subjects: [alice, bob]",
            "  values: [team-leads, finance]\n  subjects: [alice, bob]",
        )
    }
}

/// (stage, opened, completed, timed out) of every stage of a proposal, by the database.
async fn stage_rows(s: &Stack, id: uuid::Uuid) -> Vec<(i32, bool, bool, bool)> {
    let c = s.tdb.db.client().await.unwrap();
    c.query(
        "SELECT stage, opened_at IS NOT NULL, completed_at IS NOT NULL, timed_out_at IS NOT NULL
         FROM approval_stages WHERE proposal_id = $1 ORDER BY stage",
        &[&id],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
    .collect()
}

/// The stage events of a proposal: (kind, detail.stage, detail.then).
async fn stage_events(s: &Stack, id: uuid::Uuid) -> Vec<(String, i64, String)> {
    s.audit_kinds(id)
        .await
        .into_iter()
        .filter(|(k, _)| k.starts_with("approval.stage_") || k == "proposal.expired")
        .map(|(k, d)| {
            (
                k,
                d["stage"].as_i64().unwrap_or_default(),
                d["then"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

async fn escalated(s: &Stack, payment: &str) -> uuid::Uuid {
    let id = s.propose(&refund(payment, 12000)).await;
    s.wait_state(id, "escalated", T).await;
    id
}

async fn login(s: &Stack, web: &Web, subject: &str, groups: &str) -> Person {
    web.login(s, subject, groups, None).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stages_complete_in_order_by_different_people() {
    let (s, web) = stack("staged_in_order", staged("30m", "next")).await;
    let id = escalated(&s, "pi_staged_order").await;
    assert_eq!(
        stage_rows(&s, id).await,
        [(1, true, false, false), (2, false, false, false)]
    );
    let tina = login(&s, &web, "tina", "team-leads,finance").await;
    let frank = login(&s, &web, "frank", "finance").await;
    // The page says which stage waits for whom, and who is next.
    let (_, page) = web.page(&frank, id).await;
    assert!(
        page.contains("stage 1 of 2: team-leads, 0 of 1 needed"),
        "{page}"
    );
    assert!(page.contains("next: finance"), "{page}");
    let queue = frank
        .http
        .get(format!("{}/queue", web.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        queue.contains("stage 1 of 2: team-leads, 0 of 1 needed")
            && queue.contains("next: finance"),
        "{queue}"
    );
    // A stage-2 approver acting during stage 1 is refused, with a page that says why.
    let (st, _, body) = web.decide(&frank, id, "approve", &[]).await;
    assert_eq!(st, StatusCode::CONFLICT, "{body}");
    assert!(
        body.contains("stage 1 of 2 waits for team-leads; you are not in team-leads"),
        "{body}"
    );
    // Break-glass cannot show a group: it cannot approve a staged proposal.
    let (ok, _, err) = breakglass(&s, id, "approve", "alice", &[]).await;
    assert!(!ok && err.contains("breakglass_stages"), "{err}");
    // Stage 1 by a team lead opens stage 2.
    let form = web.form(&tina, id, "approve").await;
    let (st, loc, _) = web.post(&tina, id, form.clone(), &[]).await;
    assert_eq!(
        (st, loc),
        (
            StatusCode::SEE_OTHER,
            format!("/p/{id}?result=stage-complete")
        )
    );
    assert_eq!(
        stage_rows(&s, id).await,
        [(1, true, true, false), (2, true, false, false)]
    );
    assert_eq!(s.state(id).await, "escalated");
    // The same person (also in finance) cannot approve stage 2 too, even with the form she had.
    let (st, _, body) = web.post(&tina, id, form, &[]).await;
    assert_eq!(st, StatusCode::CONFLICT, "{body}");
    assert!(body.contains("you already decided"), "{body}");
    assert_eq!(grants(&s, id).await, 0);
    let (_, page) = web.page(&tina, id).await;
    assert!(
        page.contains("it is waiting for stage 2 of 2: finance, 0 of 1 needed"),
        "{page}"
    );
    // Finance completes stage 2: the grant is issued for both people.
    let (_, page) = web.page(&frank, id).await;
    assert!(
        page.contains("stage 2 of 2: finance, 0 of 1 needed"),
        "{page}"
    );
    let (st, loc, _) = web.decide(&frank, id, "approve", &[]).await;
    assert_eq!(
        (st, loc),
        (StatusCode::SEE_OTHER, format!("/p/{id}?result=approved"))
    );
    assert_eq!(s.state(id).await, "approved");
    assert_eq!(issued_by(&s, id).await, "tina,frank");
    let ev = stage_events(&s, id).await;
    let kinds: Vec<(&str, i64)> = ev.iter().map(|(k, n, _)| (k.as_str(), *n)).collect();
    assert_eq!(
        kinds,
        [
            ("approval.stage_opened", 1),
            ("approval.stage_completed", 1),
            ("approval.stage_opened", 2),
            ("approval.stage_completed", 2),
        ]
    );
    assert_eq!(
        refusals(&s, id).await,
        ["stage_group", "breakglass_stages", "same_person"]
    );
}

/// Break-glass cannot approve a staged proposal: `approvals show` prints only the deny command
/// and says where it is approved; a break-glass Approve is refused for the stages first, before
/// the amount it did not type (`confirm: [amount]`) or after typing it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn break_glass_is_told_to_approve_a_staged_proposal_in_the_web_app() {
    let stages = staged("30m", "next");
    let (s, _web) = stack("staged_breakglass_hints", move |d| {
        stages(d).replace(
            "    approvals:\n",
            "    confirm: [amount]\n    approvals:\n",
        )
    })
    .await;
    let id = escalated(&s, "pi_staged_hints").await;
    let (approve, deny) = printed_commands(&s, id).await;
    assert_eq!(approve, None, "no approve command that cannot succeed");
    let (ok, out, err) =
        actiond_testkit::cli(&["approvals", "show", &id.to_string()], &s.cli_env().await);
    assert!(ok, "{err}");
    assert!(
        out.contains("deny with:\n")
            && out.contains(
                "approve in the approval web app, stage by stage: break-glass cannot approve a staged proposal"
            ),
        "{out}"
    );
    for typed in [&[][..], &["--confirm-amount", "120.00"][..]] {
        let (ok, _, err) = breakglass(&s, id, "approve", "alice", typed).await;
        assert!(
            !ok && err.contains("refused (breakglass_stages)"),
            "{typed:?}: {err}"
        );
    }
    // The deny command pastes as printed.
    let (ok, out, err) = paste(&s, &deny, "alice").await;
    assert!(ok && out.contains("denied"), "{out}{err}");
    assert_eq!(s.state(id).await, "denied");
    assert_eq!(grants(&s, id).await, 0);
    assert_eq!(
        refusals(&s, id).await,
        ["breakglass_stages", "breakglass_stages"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_stage_reroutes_and_the_last_one_expires() {
    let (mut s, _web) = stack("staged_reroute", staged("2s", "next")).await;
    // Two policy replicas sweep the same stages: each stage moves on exactly once.
    s.start_policy().await;
    let mut ids = Vec::new();
    for i in 0..4 {
        ids.push(escalated(&s, &format!("pi_staged_reroute_{i}")).await);
    }
    // Nobody decides: the policy sweep re-routes to finance, then the last stage expires it.
    for &id in &ids {
        s.wait_state(id, "expired", T).await;
        assert_eq!(
            stage_rows(&s, id).await,
            [(1, true, false, true), (2, true, false, true)]
        );
        assert_eq!(
            stage_events(&s, id).await,
            [
                ("approval.stage_opened".into(), 1, String::new()),
                ("approval.stage_timed_out".into(), 1, "rerouted".into()),
                ("approval.stage_opened".into(), 2, String::new()),
                ("approval.stage_timed_out".into(), 2, "expired".into()),
                ("proposal.expired".into(), 2, String::new()),
            ]
        );
    }
    let id = ids[0];
    let reason: String = s.row(id).await.get("decision_reason");
    assert_eq!(
        reason,
        "stage 2 of 2 (finance) did not decide within its time"
    );
    // Stage 2 opened when stage 1's time was over, by the database clock.
    let c = s.tdb.db.client().await.unwrap();
    let gap: f64 = c
        .query_one(
            "SELECT extract(epoch FROM max(opened_at) - min(opened_at))::float8 FROM approval_stages WHERE proposal_id = $1",
            &[&id],
        )
        .await
        .unwrap()
        .get(0);
    assert!(gap >= 2.0, "{gap}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_timeout_expire_expires_at_the_first_timeout() {
    let (s, _web) = stack("staged_expire", staged("2s", "expire")).await;
    let id = escalated(&s, "pi_staged_expire").await;
    s.wait_state(id, "expired", T).await;
    assert_eq!(
        stage_rows(&s, id).await,
        [(1, true, false, true), (2, false, false, false)]
    );
    let ev: Vec<(String, i64, String)> = stage_events(&s, id).await;
    assert_eq!(
        ev[1],
        ("approval.stage_timed_out".into(), 1, "expired".into())
    );
    assert_eq!(ev.len(), 3, "{ev:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(
    clippy::disallowed_methods,
    reason = "the stage's time must pass by the database clock (3 s): time is the subject"
)]
async fn the_database_refuses_what_the_web_app_would_refuse() {
    let (mut s, web) = stack("staged_database", staged("3s", "next")).await;
    let id = escalated(&s, "pi_staged_db").await;
    // Without the sweeper, nothing moves the stage on but a decision.
    for svc in s.services.iter_mut().filter(|x| x.role == "policy") {
        svc.terminate();
    }
    let web_sql = s.tdb.as_role("web").await;
    let intent: String = s.row(id).await.get("intent_hash");
    let insert = |stage: i32, subject: &'static str| {
        let (intent, web_sql) = (intent.clone(), &web_sql);
        async move {
            web_sql
                .batch_execute("BEGIN; SELECT set_config('actiond.tenant_ids', 'acme', true)")
                .await
                .unwrap();
            let r = web_sql
                .execute(
                    "INSERT INTO approvals (proposal_id, tenant_id, issuer, subject, decision, intent_hash, doc_version, channel, stage)
                     VALUES ($1, 'acme', 'https://x', $2, 'approve', $3, 1, 'web', $4)",
                    &[&id, &subject, &intent, &stage],
                )
                .await;
            web_sql.batch_execute("ROLLBACK").await.unwrap();
            r.map_err(|e| {
                e.as_db_error()
                    .map(|d| d.message().to_owned())
                    .unwrap_or_default()
            })
        }
    };
    // Stage 2 is not open; an approval without a stage does not count either.
    let e = insert(2, "mallory").await.unwrap_err();
    assert!(e.contains("must name its open stage (got 2)"), "{e}");
    // Skipping the stages: approving the proposal, completing a stage without approvals.
    web_sql
        .batch_execute("BEGIN; SELECT set_config('actiond.tenant_ids', 'acme', true)")
        .await
        .unwrap();
    let e = web_sql
        .execute(
            "UPDATE proposals SET state = 'approved' WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap_err();
    assert!(
        e.as_db_error()
            .unwrap()
            .message()
            .contains("approved only when its last stage completed"),
        "{e}"
    );
    web_sql
        .batch_execute("ROLLBACK; BEGIN; SELECT set_config('actiond.tenant_ids', 'acme', true)")
        .await
        .unwrap();
    let e = web_sql
        .execute(
            "UPDATE approval_stages SET completed_at = now() WHERE proposal_id = $1 AND stage = 1",
            &[&id],
        )
        .await
        .unwrap_err();
    assert!(
        e.as_db_error()
            .unwrap()
            .message()
            .contains("stage 1 needs 1 approvals of its own, has 0"),
        "{e}"
    );
    web_sql.batch_execute("ROLLBACK").await.unwrap();
    // In time, the open stage takes it (rolled back above); once its time is over by the
    // database clock, the database refuses it even from the web role.
    assert!(insert(1, "mallory").await.is_ok());
    tokio::time::sleep(Duration::from_millis(3200)).await;
    let e = insert(1, "mallory").await.unwrap_err();
    assert!(
        e.contains("stage 1 of proposal") && e.contains("the approval is refused"),
        "{e}"
    );
    // Stages are history: not even the owner deletes or truncates them.
    let owner = s.tdb.db.client().await.unwrap();
    for sql in [
        format!("DELETE FROM approval_stages WHERE proposal_id = '{id}'"),
        "TRUNCATE approval_stages".to_owned(),
    ] {
        let e = owner.batch_execute(&sql).await.unwrap_err();
        assert!(
            e.as_db_error()
                .is_some_and(|d| d.message().contains("never deleted")),
            "{sql}: {e}"
        );
    }
    // Through the app, the late decision moves the stage on itself and decides nothing.
    let tina = web.login(&s, "tina", "team-leads", None).await;
    let (st, _, body) = web.decide(&tina, id, "approve", &[]).await;
    assert_eq!(st, StatusCode::CONFLICT, "{body}");
    assert!(
        body.contains("stage 1 (team-leads) ran out of time before your decision; it went to stage 2 (finance)"),
        "{body}"
    );
    assert_eq!(
        stage_rows(&s, id).await,
        [(1, true, false, true), (2, true, false, false)]
    );
    assert_eq!(refusals(&s, id).await, ["stage_within"]);
    assert_eq!(s.state(id).await, "escalated");
    // The re-route is announced like an escalation: a notice of its own for stage 2 (this
    // tenant names no channel, so it is handled as `skipped`).
    let c = s.tdb.db.client().await.unwrap();
    actiond_testkit::eventually(T, "a notice for stage 2", || {
        let c = &c;
        async move {
            let stages: Vec<i32> = c
                .query(
                    "SELECT stage FROM web_notifications WHERE proposal_id = $1 AND status = 'skipped' ORDER BY stage",
                    &[&id],
                )
                .await
                .unwrap()
                .iter()
                .map(|r| r.get(0))
                .collect();
            (stages == [1, 2]).then_some(())
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stages_over_an_amount_leave_smaller_refunds_to_one_person() {
    // The demo tenant's shape: both stages only for refunds over 500.00.
    let (s, _web) = stack("staged_over", |d| {
        staged("30m", "next")(d).replace("within: 30m}", "within: 30m, over: 50000}")
    })
    .await;
    let small = escalated(&s, "pi_staged_small").await;
    assert_eq!(stage_rows(&s, small).await, []);
    let (ok, out, err) = breakglass(&s, small, "approve", "alice", &[]).await;
    assert!(ok && out.contains("approved"), "{out}{err}");
    let big = s.propose(&refund("pi_staged_big", 60000)).await;
    s.wait_state(big, "escalated", T).await;
    assert_eq!(
        stage_rows(&s, big).await,
        [(1, true, false, false), (2, false, false, false)]
    );
}

/// The stage's time runs out in the instant between the web app's own check and the insert of
/// the approval: the database's rule (V16, `approvals_in_stage`) refuses the insert, and the
/// person gets the same 409 page as the app's own check gives, not an error page. Nothing is
/// approved. The instant is made exact by a test-only trigger that fires just before V16's
/// (triggers fire by name) and moves the stage's `due_at` into the past, as time passing would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stage_closing_between_the_check_and_the_insert_is_the_same_409() {
    let (s, web) = stack("staged_insert_race", staged("30m", "next")).await;
    let id = escalated(&s, "pi_staged_race").await;
    let tina = login(&s, &web, "tina", "team-leads").await;
    let form = web.form(&tina, id, "approve").await;
    s.tdb
        .superuser()
        .await
        .batch_execute(
            "CREATE FUNCTION test_stage_runs_out() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
             BEGIN
                 PERFORM set_config('session_replication_role', 'replica', true);
                 UPDATE approval_stages SET due_at = now() - interval '1 second'
                  WHERE proposal_id = NEW.proposal_id AND stage = NEW.stage;
                 PERFORM set_config('session_replication_role', 'origin', true);
                 RETURN NEW;
             END $$;
             CREATE TRIGGER aaa_test_stage_runs_out BEFORE INSERT ON approvals
                 FOR EACH ROW EXECUTE FUNCTION test_stage_runs_out();",
        )
        .await
        .unwrap();
    let (st, _, body) = web.post(&tina, id, form, &[]).await;
    assert_eq!(st, StatusCode::CONFLICT, "{body}");
    assert!(
        body.contains("stage 1 (team-leads) ran out of time before your decision"),
        "{body}"
    );
    assert!(body.contains("Nothing was decided"), "{body}");
    assert_eq!(s.state(id).await, "escalated");
    assert_eq!(grants(&s, id).await, 0);
    let approvals = s.approval_count(id).await;
    assert_eq!(approvals, 0);
    assert!(
        refusals(&s, id).await.iter().any(|r| r == "stage_within"),
        "{:?}",
        refusals(&s, id).await
    );
}

/// Sequential scans of `approval_stages` so far in the transaction `tx`, by the database.
async fn stage_scans(tx: &actiond_store::Tx<'_>) -> i64 {
    tx.query_one(
        "SELECT COALESCE(sum(seq_scan), 0)::int8 FROM pg_stat_xact_user_tables WHERE relname = 'approval_stages'",
        &[],
    )
    .await
    .unwrap()
    .get(0)
}

/// The queue page reads the stages of all its staged proposals in one statement, not one per
/// proposal (counted by the database itself: sequential scans of `approval_stages` in the
/// reading transaction, with index scans switched off so each statement scans exactly once),
/// and each proposal gets its own stages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_page_reads_its_stages_in_one_statement() {
    let (s, web) = stack("staged_queue_one_read", staged("30m", "next")).await;
    let mut ids = Vec::new();
    for i in 0..4 {
        ids.push(escalated(&s, &format!("pi_staged_queue_{i}")).await);
    }
    let mut c = s.tdb.db.client().await.unwrap();
    let tx = c.transaction().await.unwrap();
    tx.batch_execute("SET LOCAL enable_indexscan = off; SET LOCAL enable_bitmapscan = off")
        .await
        .unwrap();
    let before = stage_scans(&tx).await;
    let stages = actiond_store::stages::of_proposals_in(&tx, &ids)
        .await
        .unwrap();
    assert_eq!(
        stage_scans(&tx).await - before,
        1,
        "one statement for the page"
    );
    assert_eq!(stages.len(), 4);
    for id in &ids {
        let mine = &stages[id];
        assert_eq!(
            mine.iter().map(|st| st.stage).collect::<Vec<_>>(),
            [1, 2],
            "{id}"
        );
    }
    tx.rollback().await.unwrap();
    // The page itself shows each one's open stage.
    let frank = login(&s, &web, "frank", "finance").await;
    let queue = frank
        .http
        .get(format!("{}/queue", web.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(
        queue
            .matches("stage 1 of 2: team-leads, 0 of 1 needed")
            .count(),
        4,
        "{queue}"
    );
    // The operator's `approvals show` says it too.
    let (ok, out, err) = actiond_testkit::cli(
        &["approvals", "show", &ids[0].to_string()],
        &s.cli_env().await,
    );
    assert!(ok, "{err}");
    assert!(
        out.contains("stage      1 of 2: team-leads, 0 of 1 needed, ")
            && out.contains("; next: finance"),
        "{out}"
    );
}
