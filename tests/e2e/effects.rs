//! The effect, read back (issue 34): after a refund runs, the executor lists the payment's
//! refunds at the billing sink and records the one its grant made (`proposal.effect`); a
//! refund the provider holds otherwise ends `effect_mismatch`; and an executor killed between
//! the spend and the outcome leaves `outcome_unknown`, which another executor settles by
//! reading the provider back under the grant, never by a second run. DNS read-backs against a
//! real PowerDNS are in `handlers.rs`. The rows after a named statement, read back from a real
//! second database; the settler's next try kept in the database across an executor restart
//! and shared by replicas (a loopback ticket API).

use crate::handlers::{DOC, Hx, TicketApi, effect_of};
use crate::support::{Options, Stack, refund};
use actiond_testkit::providers::TargetDb;
use actiond_testkit::{Service, cli, eventually};
use serde_json::json;
use std::sync::atomic::Ordering;
use std::time::Duration;

const T: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refund_is_read_back_at_the_billing_sink_and_a_different_one_is_effect_mismatch() {
    let mut s = Stack::new("refund_read_back").await;
    let id = s.propose(&refund("pi_readback", 2500)).await;
    s.wait_state(id, "succeeded", T).await;
    let (e, _, _) = effect_of(&s, id).await;
    assert_eq!(e["verdict"], "matches", "{e}");
    assert_eq!(e["evidence"]["refund_id"], "re_1");
    assert_eq!(e["evidence"]["status"], "succeeded");
    let grant: uuid::Uuid = s
        .tdb
        .db
        .client()
        .await
        .unwrap()
        .query_one("SELECT id FROM grants WHERE proposal_id = $1", &[&id])
        .await
        .unwrap()
        .get(0);
    assert_eq!(e["evidence"]["grant_id"], grant.to_string());
    let (ok, out, err) = cli(&["approvals", "show", &id.to_string()], &s.cli_env().await);
    assert!(ok, "{out}{err}");
    assert!(
        out.contains("  approved Refund 25.00 USD on payment pi_readback"),
        "{out}"
    );
    assert!(
        out.contains("  after    Refund re_1 of 25.00 USD on payment pi_readback: succeeded at the provider (matches what was approved)"),
        "{out}"
    );

    // The provider answers 200 but holds a failed refund of 20.00: not what was approved.
    s.recv.hold_refunds_as("failed", Some(2000));
    let other = s.propose(&refund("pi_readback_2", 2500)).await;
    s.wait_state(other, "effect_mismatch", T).await;
    let (e, _, _) = effect_of(&s, other).await;
    assert_eq!(e["verdict"], "differs", "{e}");
    assert_eq!(
        e["reason"],
        "approved 25.00 USD, the provider holds 20.00 USD; its status is failed"
    );
    let (_, v) = s.get(&s.token, &other.to_string(), "").await;
    assert_eq!(v["state"], "effect_mismatch", "{v}");
    assert_eq!(v["outcome"], "effect_mismatch", "{v}");
    // Never re-run: one refund each.
    assert_eq!(s.calls().len(), 2);
    let metrics = s.services[2].url("admin").await;
    let text = reqwest::get(format!("{metrics}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        text.contains(
            r#"actiond_effect_read_backs_total{action="billing.refund.issue",verdict="differs"} 1"#
        ),
        "{text}"
    );
}

/// Starts an executor whose billing base URL is the receiver's `/slow/` path (refunds are
/// answered after the stack's slow delay; the read-back's list is answered at once).
async fn slow_billing_executor(s: &mut Stack, id: &str, settle_after_ms: u64) -> usize {
    let mut env = s.executor_env(id).await;
    env.retain(|(k, _)| *k != "ACTIOND_BILLING_BASE_URL");
    env.push(("ACTIOND_BILLING_BASE_URL", format!("{}/slow/", s.recv.url)));
    env.push((
        "ACTIOND_EXECUTOR_SETTLE_AFTER_MS",
        settle_after_ms.to_string(),
    ));
    let svc = Service::spawn("executor", id, &[], &env, &s.logs);
    s.services.push(svc);
    s.services.len() - 1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executor_killed_after_the_spend_is_settled_by_reading_back_not_by_a_rerun() {
    let mut s = Stack::with(
        "settle_outcome_unknown",
        Options {
            slow_delay: Duration::from_secs(60),
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let victim = slow_billing_executor(&mut s, "victim", 600_000).await;
    let id = s.propose(&refund("pi_settle", 3000)).await;
    s.wait_state(id, "executing", T).await;
    eventually(T, "the refund at the billing sink", || {
        let n = s.recv.refunds().len();
        async move { (n == 1).then_some(()) }
    })
    .await;
    // Killed between the spend and the outcome: the refund was made, nobody recorded it.
    s.services[victim].kill9();
    slow_billing_executor(&mut s, "survivor", 500).await;
    // The lease runs out (outcome_unknown), then the survivor reads the provider back.
    s.wait_state(id, "succeeded", Duration::from_secs(60)).await;
    let kinds = s.audit_kind_names(id).await;
    assert_eq!(
        kinds[kinds.len() - 2..],
        ["proposal.outcome_unknown", "proposal.effect"],
        "{kinds:?}"
    );
    let (e, from, to) = effect_of(&s, id).await;
    assert_eq!(
        (from.as_deref(), to.as_deref()),
        (Some("outcome_unknown"), Some("succeeded"))
    );
    assert_eq!(e["verdict"], "matches", "{e}");
    assert_eq!(e["settled"], true);
    assert_eq!(e["evidence"]["refund_id"], "re_1");
    let detail: String = s
        .tdb
        .db
        .client()
        .await
        .unwrap()
        .query_one("SELECT outcome_detail FROM proposals WHERE id = $1", &[&id])
        .await
        .unwrap()
        .get(0);
    assert!(
        detail.starts_with("settled by reading the provider back under grant "),
        "{detail}"
    );
    // The handler ran once: one refund request at the sink, one refund held.
    assert_eq!(s.calls().len(), 1);
    assert_eq!(s.recv.refunds().len(), 1);
    let (_, v) = s.get(&s.token, &id.to_string(), "").await;
    assert_eq!(v["state"], "succeeded", "{v}");
}

/// The `hx` document with statements that declare a read-back (`hold_order`), one whose
/// read-back tries to lock the row (`hold_locked`: the read-back's transaction is read-only),
/// beside `cancel_order`, which declares none.
fn read_back_doc() -> String {
    DOC.replace(
        "    statements:\n",
        r#"    statements:
      hold_order:
        sql: "UPDATE orders SET status = $2 WHERE id = $1"
        params: [{name: order_id, type: bigint}, {name: status, type: text}]
        max_rows: 1
        read_back:
          sql: "SELECT id, status FROM orders WHERE id = $1"
          expect: {id: {param: order_id}, status: {param: status}}
      hold_locked:
        sql: "UPDATE orders SET status = 'held' WHERE id = $1"
        params: [{name: order_id, type: bigint}]
        max_rows: 1
        read_back:
          sql: "SELECT id, status FROM orders WHERE id = $1 FOR UPDATE"
          expect: {status: held}
"#,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rows_after_a_statement_are_read_back_and_a_row_not_as_approved_is_effect_mismatch() {
    // Customer `sticky`'s orders keep their status whatever an UPDATE says: the statement
    // reports one row, the row is not as approved.
    let target = TargetDb::create(
        "CREATE TABLE orders (id bigint PRIMARY KEY, customer text NOT NULL, status text NOT NULL);
         INSERT INTO orders VALUES (4, 'c2', 'open'), (5, 'sticky', 'open'), (6, 'c2', 'open'), (7, 'c2', 'open');
         CREATE FUNCTION keep_sticky() RETURNS trigger LANGUAGE plpgsql AS $$
           BEGIN IF NEW.customer = 'sticky' THEN NEW.status := OLD.status; END IF; RETURN NEW; END $$;
         CREATE TRIGGER keep_sticky BEFORE UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION keep_sticky();
         GRANT SELECT, UPDATE ON orders TO {role};",
    )
    .await;
    let hx = Hx::with_doc(
        "statement_read_back",
        &read_back_doc(),
        &[],
        &[("orders", &target.url)],
    )
    .await;
    let held = hx
        .propose(
            "db.statement.execute",
            json!({"statement": "hold_order", "values": {"order_id": 4, "status": "held"}}),
        )
        .await;
    hx.s.wait_state(held, "succeeded", T).await;
    let (e, _, _) = effect_of(&hx.s, held).await;
    assert_eq!(e["verdict"], "matches", "{e}");
    assert_eq!(e["evidence"]["rows_read"], 1, "{e}");
    assert_eq!(e["evidence"]["rows_reported"], 1, "{e}");
    assert_eq!(
        e["evidence"]["rows"],
        json!([{"id": 4, "status": "held"}]),
        "{e}"
    );
    assert_eq!(
        e["after"],
        r#"Statement hold_order: 1 row(s) read back, e.g. {"id":4,"status":"held"}"#
    );

    // One row reported, the row still open: effect_mismatch, with the row as evidence.
    let sticky = hx
        .propose(
            "db.statement.execute",
            json!({"statement": "hold_order", "values": {"order_id": 5, "status": "held"}}),
        )
        .await;
    hx.s.wait_state(sticky, "effect_mismatch", T).await;
    let (e, _, _) = effect_of(&hx.s, sticky).await;
    assert_eq!(e["verdict"], "absent", "{e}");
    assert_eq!(
        e["reason"],
        r#"1 of 1 row(s) do not hold the approved values: status = "open" (approved "held")"#
    );
    assert_eq!(e["evidence"]["rows_reported"], 1, "{e}");
    let (ok, out, err) = cli(
        &["approvals", "show", &sticky.to_string()],
        &hx.s.cli_env().await,
    );
    assert!(ok, "{out}{err}");
    assert!(
        out.contains(r#"(NOT what was approved: 1 of 1 row(s) do not hold the approved values: status = "open" (approved "held"))"#),
        "{out}"
    );

    // The read-back's transaction is read-only: a query that locks the row is refused there
    // (the same role updated it a moment before), so nothing is concluded: unread, and the
    // database's own answer stands.
    let locked = hx
        .propose(
            "db.statement.execute",
            json!({"statement": "hold_locked", "values": {"order_id": 7}}),
        )
        .await;
    hx.s.wait_state(locked, "succeeded", T).await;
    let (e, _, _) = effect_of(&hx.s, locked).await;
    assert_eq!(e["verdict"], "unread", "{e}");
    assert!(
        e["reason"]
            .as_str()
            .unwrap()
            .contains("read-only transaction"),
        "{e}"
    );

    // A statement without read_back: no event, and the card says why rather than nothing.
    let plain = hx
        .propose(
            "db.statement.execute",
            json!({"statement": "cancel_order", "values": {"order_id": 6}}),
        )
        .await;
    hx.s.wait_state(plain, "succeeded", T).await;
    assert!(
        !hx.s
            .audit_kind_names(plain)
            .await
            .contains(&"proposal.effect".to_owned())
    );
    let (ok, out, err) = cli(
        &["approvals", "show", &plain.to_string()],
        &hx.s.cli_env().await,
    );
    assert!(ok, "{out}{err}");
    assert!(
        out.contains("  after    not readable: statement cancel_order declares no read_back query, so only the rows it reported are known"),
        "{out}"
    );
}

/// Starts an executor named `id` for the ticket API: it settles `outcome_unknown` after
/// 200 ms, a settle round every 200 ms.
fn ticket_executor_env(api: &TicketApi) -> Vec<(&'static str, String)> {
    vec![
        ("ACTIOND_WEBHOOK_ALLOWED_HOSTS", api.host_port.clone()),
        ("ACTIOND_EXECUTOR_SETTLE_AFTER_MS", "200".into()),
        ("ACTIOND_EXECUTOR_SWEEP_MS", "200".into()),
    ]
}

async fn spawn_executor(hx: &mut Hx, id: &str, api: &TicketApi) {
    let mut env = hx.s.executor_env(id).await;
    env.extend(ticket_executor_env(api));
    let svc = Service::spawn("executor", id, &[], &env, &hx.s.logs);
    hx.s.services.push(svc);
}

/// The settler's try of `id`: (next try more than 30 s ahead, tries, last reason).
async fn try_of(hx: &Hx, id: uuid::Uuid) -> Option<(bool, i32, String)> {
    let c = hx.s.tdb.db.client().await.unwrap();
    c.query_opt(
        "SELECT next_try_at > now() + interval '30 seconds', tries, last_reason
         FROM effect_settle_tries WHERE proposal_id = $1",
        &[&id],
    )
    .await
    .unwrap()
    .map(|r| (r.get(0), r.get(1), r.get(2)))
}

/// Proposes a comment on `ticket`, approves it and waits until its post timed out
/// (`outcome_unknown`: the API stored it and never answered) and the settler asked the API,
/// which could not say (503), and noted it.
async fn unknown_comment(hx: &Hx, api: &TicketApi, ticket: &str) -> uuid::Uuid {
    let asked = api.lists_of(ticket);
    let id = hx
        .propose(
            "ticket.comment.add",
            json!({"ticket_id": ticket, "body": "Done."}),
        )
        .await;
    hx.s.wait_state(id, "escalated", T).await;
    hx.approve(id).await;
    hx.s.wait_state(id, "outcome_unknown", T).await;
    eventually(
        T,
        "the settler asked and noted why it could not settle",
        || async {
            let t = try_of(hx, id).await?;
            (api.lists_of(ticket) > asked && t.2.contains("HTTP 503")).then_some(())
        },
    )
    .await;
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_settler_s_next_try_survives_a_restart_and_replicas_ask_once() {
    let api = TicketApi::start().await;
    let doc = DOC.replace(
        "handlers:\n",
        &format!(
            "handlers:\n  ticket.comment.add:\n    credential: tickets\n    base_url: {}/api\n    timeout: 500ms\n",
            api.url
        ),
    );
    let mut hx = Hx::with_doc(
        "settler_next_try",
        &doc,
        &ticket_executor_env(&api),
        &[("tickets", "tok-ticket-1")],
    )
    .await;
    let first = hx.s.services.len() - 1;
    api.hang_posts.store(true, Ordering::SeqCst);
    api.readable.store(false, Ordering::SeqCst);
    let a = unknown_comment(&hx, &api, "T-100").await;
    let (later, tries, reason) = try_of(&hx, a).await.unwrap();
    assert!(later, "the next try is a minute ahead");
    assert_eq!(tries, 1);
    assert!(
        reason.starts_with("the ticket API answered HTTP 503"),
        "{reason}"
    );

    // Restarted: the new executor's settler runs (it settles B, which went outcome_unknown
    // after the restart), but does not ask about A again before A's next try.
    hx.s.services[first].kill9();
    spawn_executor(&mut hx, "exec-hx-2", &api).await;
    let b = unknown_comment(&hx, &api, "T-200").await;
    assert_eq!(api.lists_of("T-100"), 1, "A was asked again at once");
    assert_eq!(try_of(&hx, a).await.unwrap().1, 1);

    // Two replicas, the API readable again, both next tries due now: each proposal is asked
    // once, by one of them, and settled from the comment stored under its grant.
    spawn_executor(&mut hx, "exec-hx-3", &api).await;
    api.readable.store(true, Ordering::SeqCst);
    hx.s.tdb
        .db
        .client()
        .await
        .unwrap()
        .execute(
            "UPDATE effect_settle_tries SET next_try_at = now() WHERE proposal_id = ANY($1)",
            &[&vec![a, b]],
        )
        .await
        .unwrap();
    for id in [a, b] {
        hx.s.wait_state(id, "succeeded", T).await;
        let (e, from, to) = effect_of(&hx.s, id).await;
        assert_eq!(
            (from.as_deref(), to.as_deref()),
            (Some("outcome_unknown"), Some("succeeded"))
        );
        assert_eq!(e["verdict"], "matches", "{e}");
        assert_eq!(e["settled"], true, "{e}");
        assert_eq!(try_of(&hx, id).await, None, "settled: its try is gone");
    }
    assert_eq!(
        api.lists_of("T-100"),
        2,
        "one more ask for A, not one per replica"
    );
    assert_eq!(
        api.lists_of("T-200"),
        2,
        "one more ask for B, not one per replica"
    );
    // Never re-run: one comment each.
    assert_eq!(api.comments().len(), 2);
}

/// A loopback webhook receiver: `POST /hook` stores the body under its `Idempotency-Key`
/// (altered when `tamper` is on, as a receiver that got it wrong); `GET /received` answers
/// `{"body": …}` for the key it is sent, 404 for a key it never saw.
async fn webhook_receiver(
    tamper: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> (String, String) {
    use axum::http::{HeaderMap, StatusCode};
    let held: std::sync::Arc<std::sync::Mutex<Vec<(String, serde_json::Value)>>> =
        Default::default();
    let (store, read) = (held.clone(), held);
    let key = |h: &HeaderMap| {
        h.get("idempotency-key")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let app = axum::Router::new()
        .route(
            "/hook",
            axum::routing::post(
                move |h: HeaderMap, axum::Json(mut body): axum::Json<serde_json::Value>| {
                    let store = store.clone();
                    let tamper = tamper.clone();
                    async move {
                        if tamper.load(Ordering::SeqCst) {
                            body["amount"] = json!(999);
                        }
                        store.lock().unwrap().push((key(&h), body));
                        StatusCode::NO_CONTENT
                    }
                },
            ),
        )
        .route(
            "/received",
            axum::routing::get(move |h: HeaderMap| {
                let read = read.clone();
                async move {
                    let k = key(&h);
                    match read.lock().unwrap().iter().find(|(s, _)| *s == k) {
                        Some((_, b)) => (StatusCode::OK, axum::Json(json!({"body": b}))),
                        None => (StatusCode::NOT_FOUND, axum::Json(json!({}))),
                    }
                }
            }),
        );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host_port = l.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    (format!("http://{host_port}"), host_port)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_is_read_back_only_where_its_settings_declare_a_read_back_url() {
    let tamper = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (url, host_port) = webhook_receiver(tamper.clone()).await;
    let doc = DOC.replace(
        "handlers:\n",
        &format!(
            "handlers:\n  webhook.post:\n    url: {url}/hook\n    read_back_url: {url}/received\n"
        ),
    );
    let hx = Hx::with_doc(
        "webhook_read_back",
        &doc,
        &[("ACTIOND_WEBHOOK_ALLOWED_HOSTS", host_port)],
        &[],
    )
    .await;
    let post = |amount: i64| {
        let hx = &hx;
        async move {
            let id = hx
                .propose(
                    "webhook.post",
                    json!({"body": {"event": "refund", "amount": amount}}),
                )
                .await;
            hx.s.wait_state(id, "escalated", T).await;
            hx.approve(id).await;
            id
        }
    };
    let ok = post(25).await;
    hx.s.wait_state(ok, "succeeded", T).await;
    let (e, _, _) = effect_of(&hx.s, ok).await;
    assert_eq!(e["verdict"], "matches", "{e}");
    assert_eq!(
        e["after"],
        "the receiver holds a body with keys amount, event under this grant"
    );
    // The receiver answers 204 but holds another body: effect_mismatch.
    tamper.store(true, Ordering::SeqCst);
    let off = post(30).await;
    hx.s.wait_state(off, "effect_mismatch", T).await;
    let (e, _, _) = effect_of(&hx.s, off).await;
    assert_eq!(e["verdict"], "differs", "{e}");
    assert_eq!(
        e["reason"],
        "the body the receiver holds is not the approved body"
    );
    // Without read_back_url: no read-back, and the card says why.
    tamper.store(false, Ordering::SeqCst);
    let plain = doc.replace(&format!("    read_back_url: {url}/received\n"), "");
    assert_ne!(plain, doc);
    actiond_store::tenants::apply(&hx.s.tdb.db, &plain, "test")
        .await
        .unwrap();
    let unread = post(40).await;
    hx.s.wait_state(unread, "succeeded", T).await;
    assert!(
        !hx.s
            .audit_kind_names(unread)
            .await
            .contains(&"proposal.effect".to_owned())
    );
    let (okc, out, err) = cli(
        &["approvals", "show", &unread.to_string()],
        &hx.s.cli_env().await,
    );
    assert!(okc, "{out}{err}");
    assert!(
        out.contains("  after    not readable: this webhook's settings declare no read_back_url"),
        "{out}"
    );
}
