//! Revoking an agent stops what it asked for, by the rule that stops a frozen agent (V34):
//! its open proposals are denied, nobody can approve them afterwards (web or break-glass), an
//! approved, unspent grant of it never runs, and the database moves none of its proposals
//! forward. The operator's `actiond agent freeze` denies like an approver's stop button.
//! Revocation works the same from the web: a tenant admin's Revoke button on `/admin/agents`
//! calls the store function the CLI calls; an approver who is not an admin is refused. A
//! revocation is final (V51): the service logins that may revoke cannot take one back.

use crate::support::{Options, Stack, refund};
use crate::web::hidden;
use actiond_testkit::cli;
use std::time::Duration;
use tokio_postgres::error::SqlState;

const T: Duration = Duration::from_secs(30);

/// `actiond agent revoke --tenant acme --name support-bot`; returns its output.
async fn revoke(s: &Stack) -> String {
    let (ok, out, err) = cli(
        &[
            "agent",
            "revoke",
            "--tenant",
            "acme",
            "--name",
            "support-bot",
        ],
        &s.cli_env().await,
    );
    assert!(ok, "{out}{err}");
    out
}

/// Grants of `id` (0 or 1) and how many of them were spent.
async fn grants(s: &Stack, id: uuid::Uuid) -> (i64, i64) {
    let c = s.tdb.db.client().await.unwrap();
    let r = c
        .query_one(
            "SELECT count(*), count(used_at) FROM grants WHERE proposal_id = $1",
            &[&id],
        )
        .await
        .unwrap();
    (r.get(0), r.get(1))
}

/// Proposes a small refund, which policy allows and the executor runs, as another live agent
/// of `acme`, and waits until it succeeded: once it has, anything proposed or approved before
/// it that was going to reach the receiver has (see `Stack::sentinel`; the stack's own agent
/// is revoked here). Its payment id starts like the stack's sentinels', so `calls()` leaves it
/// out.
async fn sentinel_of_another_agent(s: &Stack) {
    let (_, token) =
        actiond_testkit::agent(&s.tdb.db, "acme", "sentinel-bot", Some("owner-olivia")).await;
    let (st, v) = s
        .post_as(&token, &refund("pi_sentinel_other", 1), None)
        .await;
    assert_eq!(st, 202, "{v}");
    let id: uuid::Uuid = v["proposal_id"].as_str().unwrap().parse().unwrap();
    s.wait_state(id, "succeeded", T).await;
}

/// A signed-in web session of alice (dev login) on a web process of the stack: the client
/// (cookies kept) and the web app's base URL.
async fn alice_on_the_web(s: &mut Stack) -> (reqwest::Client, String) {
    let web = s.start_dev_web().await;
    (s.dev_sign_in(&web, "alice").await, web.url)
}

/// An operator revokes a compromised agent while its refund waits for a person. The revocation
/// denies the refund (with its reason, audited); alice, whose decision page was open from
/// before, then approves it on the web and on the break-glass CLI: both are refused, nothing is
/// approved, no grant exists and the receiver gets nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_an_agent_denies_its_escalated_refund_and_nobody_approves_it_after() {
    let mut s = Stack::new("revoke_escalated").await;
    let id = s.propose(&refund("pi_revoked", 12000)).await;
    s.wait_state(id, "escalated", T).await;
    let (http, web) = alice_on_the_web(&mut s).await;
    let page = http
        .get(format!("{web}/p/{id}"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let out = revoke(&s).await;
    assert!(out.contains("revoked; 1 open proposal(s) denied"), "{out}");
    assert_eq!(s.state(id).await, "denied");
    let reason: String = s.row(id).await.get("decision_reason");
    assert_eq!(reason, actiond_store::agents::REVOKED_REASON);
    let events = s.audit_kinds(id).await;
    assert!(
        events.iter().any(|(k, d)| k == "proposal.decided"
            && d["agent_revoked"] == true
            && d["reason"] == actiond_store::agents::REVOKED_REASON),
        "{events:?}"
    );
    // The web: the form shown before the revocation, posted after it.
    let r = http
        .post(format!("{web}/p/{id}/decide"))
        .header("origin", &web)
        .form(&[
            ("csrf", hidden(&page, "csrf").as_str()),
            ("intent_hash", hidden(&page, "intent_hash").as_str()),
            ("doc_version", hidden(&page, "doc_version").as_str()),
            ("shown", hidden(&page, "shown").as_str()),
            ("verdict", "approve"),
        ])
        .send()
        .await
        .unwrap();
    assert!(
        r.url()
            .query()
            .is_some_and(|q| q.contains("result=already")),
        "the web approval was not refused as already decided: {} {}",
        r.status(),
        r.url()
    );
    // The break-glass CLI.
    let (ok, out, err) = s.break_glass_approve(id).await;
    assert!(!ok, "break-glass approved a revoked agent's refund: {out}");
    assert!(err.contains("proposal is already denied"), "{err}");
    assert_eq!(s.state(id).await, "denied");
    assert_eq!(grants(&s, id).await, (0, 0), "a grant was issued");
    let approvals = s.approval_count(id).await;
    assert_eq!(approvals, 0, "an approval was recorded");
    sentinel_of_another_agent(&s).await;
    assert!(s.calls().is_empty(), "{:?}", s.calls());
}

/// A refund approved while no executor ran (its grant issued, unspent) and then its agent
/// revoked: when the executor starts it refuses the grant without spending it, the proposal
/// ends `blocked` with the revocation named (reason text, `grant.rejected` with
/// `agent_revoked`), and the receiver gets nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_unspent_grant_of_a_revoked_agent_never_runs() {
    let mut s = Stack::with(
        "revoke_approved",
        Options {
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let id = s.propose(&refund("pi_approved_revoked", 12000)).await;
    s.wait_state(id, "escalated", T).await;
    s.approve_as_alice(id).await;
    assert_eq!(s.state(id).await, "approved");
    let out = revoke(&s).await;
    assert!(out.contains("revoked; 0 open proposal(s) denied"), "{out}");
    assert_eq!(s.state(id).await, "approved");
    s.start_executor("exec-1").await;
    s.wait_state(id, "blocked", T).await;
    let reason: String = s.row(id).await.get("decision_reason");
    assert!(reason.starts_with("its agent was revoked"), "{reason}");
    assert_eq!(grants(&s, id).await, (1, 0), "the grant was spent");
    let events = s.audit_kinds(id).await;
    assert!(
        events.iter().any(|(k, d)| k == "grant.rejected"
            && d["reason"] == "agent_revoked"
            && d["agent_revoked"] == true),
        "{events:?}"
    );
    sentinel_of_another_agent(&s).await;
    assert!(s.calls().is_empty(), "{:?}", s.calls());
}

/// The rule holds in the database for every role: a revoked agent's pending proposal cannot be
/// allowed or escalated by policy, nor by the owner; its approved one cannot be started by the
/// executor. A proposal that a revocation did not see (committed beside it) is blocked by
/// policy with rule `agent-revoked`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_moves_no_revoked_agents_proposal_forward() {
    let mut s = Stack::with(
        "revoke_db_rule",
        Options {
            policy: false,
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let pending = s.propose(&refund("pi_db_pending", 100)).await;
    let approved = s.propose(&refund("pi_db_approved", 100)).await;
    let owner = s.tdb.superuser().await;
    owner
        .execute(
            "UPDATE proposals SET state = 'approved' WHERE id = $1",
            &[&approved],
        )
        .await
        .unwrap();
    // Revoked as a revocation racing both submissions would leave them.
    owner
        .execute(
            "UPDATE agents SET revoked_at = now() WHERE id = $1",
            &[&s.agent_id],
        )
        .await
        .unwrap();
    let policy = s.tdb.as_role("policy").await;
    for to in ["approved", "escalated"] {
        let e = policy
            .execute(
                "UPDATE proposals SET state = $2 WHERE id = $1",
                &[&pending, &to],
            )
            .await
            .expect_err("policy moved a revoked agent's proposal forward");
        let want = format!("is revoked: it may not move pending -> {to}");
        assert!(format!("{e:?}").contains(&want), "{e:?}");
    }
    let e = owner
        .execute(
            "UPDATE proposals SET state = 'approved' WHERE id = $1",
            &[&pending],
        )
        .await
        .expect_err("the owner moved a revoked agent's proposal forward");
    assert!(format!("{e:?}").contains("is revoked"), "{e:?}");
    let executor = s.tdb.as_role("executor").await;
    let e = executor
        .execute(
            "UPDATE proposals SET state = 'executing' WHERE id = $1",
            &[&approved],
        )
        .await
        .expect_err("the executor started a revoked agent's proposal");
    assert!(
        format!("{e:?}").contains("is revoked: it may not move approved -> executing"),
        "{e:?}"
    );
    // Policy ends the pending one without rules, naming the revocation.
    s.start_policy().await;
    s.wait_state(pending, "blocked", T).await;
    let row = s.row(pending).await;
    assert_eq!(
        row.get::<_, Option<String>>("rule_name").as_deref(),
        Some("agent-revoked")
    );
    let reason: String = row.get("decision_reason");
    assert!(reason.starts_with("its agent was revoked"), "{reason}");
    assert_eq!(grants(&s, pending).await, (0, 0));
}

/// A revocation is final (V51). The web app's and the operator CLI's logins hold UPDATE
/// (revoked_at) on `agents` so that they can revoke; taken over, each tries to bring the revoked
/// agent back (`revoked_at = NULL`) or to move its revocation in time, in the agent's tenant: the
/// database refuses every attempt (SQLSTATE 23514, naming the rule), so does the owner, the
/// revocation stays as it was, no audit event appears, and the agent's token is still refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_login_cannot_undo_a_revocation() {
    let s = Stack::with(
        "revoke_final",
        Options {
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let out = revoke(&s).await;
    assert!(out.contains("revoked; 0 open proposal(s) denied"), "{out}");
    let (st, v) = s.post(&refund("pi_revoked_before", 100), None).await;
    assert_eq!(st, 401, "{v}");
    let su = s.tdb.superuser().await;
    // The revocation's time and the number of audit events, before and after the attempts.
    let revocation_and_events = || async {
        let r = su
            .query_one(
                "SELECT revoked_at::text, (SELECT count(*) FROM audit_events) FROM agents WHERE id = $1",
                &[&s.agent_id],
            )
            .await
            .unwrap();
        (r.get::<_, String>(0), r.get::<_, i64>(1))
    };
    let before = revocation_and_events().await;
    let undo = [
        "UPDATE agents SET revoked_at = NULL WHERE id = $1",
        "UPDATE agents SET revoked_at = revoked_at + interval '100 years' WHERE id = $1",
        "UPDATE agents SET revoked_at = revoked_at - interval '1 second' WHERE id = $1",
    ];
    for role in ["web", "admin"] {
        let c = s.tdb.as_role(role).await;
        for sql in undo {
            c.batch_execute("BEGIN; SELECT set_config('actiond.tenant_ids', 'acme', true)")
                .await
                .unwrap();
            let e = c
                .execute(sql, &[&s.agent_id])
                .await
                .expect_err(&format!("{role} ran {sql}"));
            assert_eq!(e.code(), Some(&SqlState::CHECK_VIOLATION), "{role}: {e:?}");
            assert!(
                format!("{e:?}").contains("a revocation is not undone"),
                "{role}: {e:?}"
            );
            c.batch_execute("ROLLBACK").await.unwrap();
        }
    }
    let e = su
        .execute(undo[0], &[&s.agent_id])
        .await
        .expect_err("the owner undid a revocation");
    assert_eq!(e.code(), Some(&SqlState::CHECK_VIOLATION), "{e:?}");
    assert_eq!(revocation_and_events().await, before);
    // Freezing, the other update of a revoked agent's row, still works (the trigger fires only
    // when `revoked_at` changes).
    su.execute(
        "UPDATE agents SET frozen_at = now(), frozen_by = 'test' WHERE id = $1",
        &[&s.agent_id],
    )
    .await
    .unwrap();
    let (st, v) = s.post(&refund("pi_revoked_after", 100), None).await;
    assert_eq!(st, 401, "{v}");
}

/// `actiond agent freeze` denies the agent's open proposals as an approver's stop button does
/// (audited by `operator:cli`), its new ones are refused (403), and a second freeze is exit 3;
/// `unfreeze` lets it propose again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_cli_freezes_and_unfreezes_an_agent() {
    let s = Stack::with(
        "cli_freeze",
        Options {
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let id = s.propose(&refund("pi_cli_freeze", 12000)).await;
    s.wait_state(id, "escalated", T).await;
    let env = s.cli_env().await;
    let args = ["--tenant", "acme", "--name", "support-bot"];
    let run = |verb: &'static str| {
        let mut a = vec!["agent", verb];
        a.extend(args);
        cli(&a, &env)
    };
    let (ok, out, err) = run("freeze");
    assert!(ok, "{out}{err}");
    assert!(out.contains("frozen; 1 open proposal(s) denied"), "{out}");
    assert_eq!(s.state(id).await, "denied");
    let events = s.audit_kinds(id).await;
    assert!(
        events
            .iter()
            .any(|(k, d)| k == "proposal.decided" && d["agent_frozen"] == true),
        "{events:?}"
    );
    let (st, v) = s.post(&refund("pi_cli_frozen_new", 100), None).await;
    assert_eq!(st, 403, "{v}");
    let (ok, out, err) = run("freeze");
    assert!(!ok, "a second freeze succeeded: {out}");
    assert!(err.contains("is frozen already"), "{err}");
    let (ok, out, err) = run("unfreeze");
    assert!(ok, "{out}{err}");
    let (st, v) = s.post(&refund("pi_cli_unfrozen_new", 100), None).await;
    assert_eq!(st, 202, "{v}");
}

/// Revocation from the web admin page, by carol (a tenant admin): the agent's escalated refund
/// is denied (audited as carol, with the revocation's reason), and its approved refund whose
/// grant was issued but not spent is refused by the executor without spending it; the receiver
/// gets nothing. alice, an approver but not an admin, is refused (403) and changes nothing; a
/// form without the session's CSRF token changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_admin_revokes_an_agent_from_the_web_and_what_it_asked_for_stops() {
    let mut s = Stack::with(
        "revoke_web",
        Options {
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let doc = crate::support::TENANT
        .replace("RECEIVER", &s.recv.url)
        .replace("WEBHOOK_PATH", "hook")
        + "admins:\n  subjects: [carol]\n";
    actiond_store::tenants::apply(&s.tdb.db, &doc, "test")
        .await
        .unwrap();
    let approved = s.propose(&refund("pi_web_revoke_approved", 12000)).await;
    let open = s.propose(&refund("pi_web_revoke_open", 13000)).await;
    s.wait_state(approved, "escalated", T).await;
    s.wait_state(open, "escalated", T).await;
    s.approve_as_alice(approved).await;
    assert_eq!(s.state(approved).await, "approved");
    assert_eq!(grants(&s, approved).await, (1, 0));

    let web = s.start_dev_web().await;
    let revoke_url = format!("{}/admin/agents/{}/revoke", web.url, s.agent_id);
    // alice approves but does not administer acme: no page, no revocation.
    let alice = s.dev_sign_in(&web, "alice").await;
    let r = alice
        .get(format!("{}/admin/agents", web.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let alice_csrf = {
        let q = alice
            .get(format!("{}/queue", web.url))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        hidden(&q, "csrf")
    };
    let r = alice
        .post(&revoke_url)
        .header("origin", &web.url)
        .form(&[("csrf", alice_csrf.as_str()), ("tenant", "acme")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403, "{}", r.text().await.unwrap());

    let carol = s.dev_sign_in(&web, "carol").await;
    let page = carol
        .get(format!("{}/admin/agents?tenant=acme", web.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("support-bot"), "{page}");
    assert!(
        page.contains(&format!("action=\"/admin/agents/{}/revoke\"", s.agent_id)),
        "{page}"
    );
    // A forged form (no CSRF token of carol's session) does nothing.
    let r = carol
        .post(&revoke_url)
        .header("origin", &web.url)
        .form(&[("csrf", "forged"), ("tenant", "acme")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(
        (s.state(open).await, s.state(approved).await),
        ("escalated".into(), "approved".into())
    );

    let r = carol
        .post(&revoke_url)
        .header("origin", &web.url)
        .form(&[("csrf", hidden(&page, "csrf").as_str()), ("tenant", "acme")])
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    assert!(
        r.url()
            .query()
            .is_some_and(|q| q.contains("result=revoked")),
        "{}",
        r.url()
    );
    let after = r.text().await.unwrap();
    assert!(after.contains("badge bad\">revoked "), "{after}");
    // The open refund: denied with the revocation's reason, audited as carol.
    assert_eq!(s.state(open).await, "denied");
    let reason: String = s.row(open).await.get("decision_reason");
    assert_eq!(reason, actiond_store::agents::REVOKED_REASON);
    let events = s.audit_kinds(open).await;
    assert!(
        events
            .iter()
            .any(|(k, d)| k == "proposal.decided" && d["agent_revoked"] == true),
        "{events:?}"
    );
    let c = s.tdb.db.client().await.unwrap();
    let actor: String = c
        .query_one(
            "SELECT actor FROM audit_events WHERE kind = 'agent.revoked' AND tenant_id = 'acme'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(actor, "approver:carol");
    // A second revocation changes nothing.
    let r = carol
        .post(&revoke_url)
        .header("origin", &web.url)
        .form(&[("csrf", hidden(&page, "csrf").as_str()), ("tenant", "acme")])
        .send()
        .await
        .unwrap();
    assert!(
        r.url()
            .query()
            .is_some_and(|q| q.contains("result=already-revoked")),
        "{}",
        r.url()
    );
    // The approved, unspent grant never runs.
    s.start_executor("exec-1").await;
    s.wait_state(approved, "blocked", T).await;
    assert_eq!(grants(&s, approved).await, (1, 0), "the grant was spent");
    assert!(
        s.audit_kinds(approved)
            .await
            .iter()
            .any(|(k, d)| k == "grant.rejected" && d["reason"] == "agent_revoked"),
        "the executor did not name the revocation"
    );
    sentinel_of_another_agent(&s).await;
    assert!(s.calls().is_empty(), "{:?}", s.calls());
}
