//! The pipelined submission (BEGIN, the tenant setting, the insert and COMMIT in one round
//! trip, validated against the document version the api saw last) under attack, over real api
//! processes on the `actiond_api` role: documents applied while submissions race in two api
//! processes, idempotency across processes, an insert that fails inside the pipeline, a client
//! that gives up mid-request, and the audit events of every path.

use crate::support::{Api, Options, REFUND_PATH_KINDS, Stack, TENANT, refund};
use actiond_testkit::eventually;
use serde_json::Value;
use std::time::{Duration, Instant};

/// A new refund proposal of `tenant`'s `agent` for payment `pi_<n>`, as the api would hand it
/// to the store (the hashes are random: these tests store proposals, they do not check them).
fn refund_proposal(
    tenant: &str,
    agent: uuid::Uuid,
    n: usize,
) -> actiond_store::proposals::NewProposal {
    let hex = || {
        format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        )
    };
    actiond_store::proposals::NewProposal {
        id: uuid::Uuid::new_v4(),
        tenant_id: tenant.into(),
        agent_id: agent,
        action: "billing.refund.issue".into(),
        target: format!("pi_{n}"),
        params_json: format!(r#"{{"amount":100,"currency":"USD","payment_id":"pi_{n}"}}"#),
        params_sha256: hex(),
        intent_hash: hex(),
        agent_reason: None,
        source_text: None,
        session_id: None,
        idempotency_key: None,
        request_sha256: hex(),
        on_behalf_of: None,
        facts: None,
    }
}

fn no_workers() -> Options {
    Options {
        api: false,
        policy: false,
        executor: false,
        ..Options::default()
    }
}

/// One api process of the test's stack, with `extra` environment.
async fn start_api(s: &Stack, name: &str, extra: &[(&'static str, String)]) -> Api {
    s.spawn_api(name, extra).await
}

/// `POST /v1/proposals` to `api` as `token`; (status, body).
async fn post(
    http: &reqwest::Client,
    api: &str,
    token: &str,
    body: &str,
    key: Option<&str>,
) -> (u16, Value) {
    let mut r = http
        .post(format!("{api}/v1/proposals"))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .body(body.to_owned());
    if let Some(k) = key {
        r = r.header("idempotency-key", k);
    }
    let resp = r.send().await.unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// `GET /v1/proposals/{id}` on `api` as `token`; the status.
async fn read(http: &reqwest::Client, api: &str, token: &str, id: &str) -> u16 {
    http.get(format!("{api}/v1/proposals/{id}"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// The stack's tenant document with `max_amount: 100000` replaced by `max_amount: <max>`.
fn doc_with_max(s: &Stack, max: i64) -> String {
    TENANT
        .replace("RECEIVER", &s.recv.url)
        .replace("WEBHOOK_PATH", "hook")
        .replace("max_amount: 100000", &format!("max_amount: {max}"))
}

/// Connections of the api role's login on this test's database that sit in an open
/// transaction (`idle in transaction`, aborted or not).
async fn idle_in_transaction(s: &Stack) -> i64 {
    let c = s.tdb.superuser().await;
    c.query_one(
        "SELECT count(*) FROM pg_stat_activity
         WHERE datname = current_database() AND usename = 'actiond_test_api'
           AND state LIKE 'idle in transaction%'",
        &[],
    )
    .await
    .unwrap()
    .get(0)
}

/// No api connection stays in an open transaction (sampled for half a second: one caught
/// between its statements and its COMMIT is not left open).
async fn no_transaction_left_open(s: &Stack) {
    for _ in 0..10 {
        if idle_in_transaction(s).await == 0 {
            return;
        }
        actiond_testkit::poll_pause(Duration::from_millis(50)).await;
    }
    let c = s.tdb.superuser().await;
    let rows = c
        .query(
            "SELECT state, query FROM pg_stat_activity
             WHERE datname = current_database() AND usename = 'actiond_test_api'",
            &[],
        )
        .await
        .unwrap();
    let seen: Vec<(String, String)> = rows
        .iter()
        .map(|r| (r.get::<_, Option<String>>(0).unwrap_or_default(), r.get(1)))
        .collect();
    panic!("an api connection stayed in an open transaction: {seen:?}");
}

/// Proposals, and `proposal.submitted` events, whose params name `payment`.
async fn stored_for(s: &Stack, payment: &str) -> (i64, i64) {
    let c = s.tdb.superuser().await;
    let like = format!("%\"{payment}\"%");
    let r = c
        .query_one(
            "SELECT (SELECT count(*) FROM proposals WHERE params_json LIKE $1),
                    (SELECT count(*) FROM audit_events e JOIN proposals p ON p.id = e.proposal_id
                     WHERE p.params_json LIKE $1 AND e.kind = 'proposal.submitted')",
            &[&like],
        )
        .await
        .unwrap();
    (r.get(0), r.get(1))
}

/// Every proposal has exactly one `proposal.submitted` event, and no such event is without
/// its proposal.
async fn one_submitted_event_per_proposal(s: &Stack) {
    let c = s.tdb.superuser().await;
    let bad: Vec<(Option<uuid::Uuid>, i64)> = c
        .query(
            "SELECT p.id, count(e.id) FROM proposals p
               LEFT JOIN audit_events e ON e.proposal_id = p.id AND e.kind = 'proposal.submitted'
             GROUP BY p.id HAVING count(e.id) <> 1
             UNION ALL
             SELECT e.proposal_id, 0 FROM audit_events e
             WHERE e.kind = 'proposal.submitted'
               AND NOT EXISTS (SELECT 1 FROM proposals p WHERE p.id = e.proposal_id)",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert!(
        bad.is_empty(),
        "proposals without exactly one event: {bad:?}"
    );
}

/// Two api processes take submissions from many clients at once while the tenant's
/// `max_amount` flips between refusing and allowing the submitted amount. Whatever each process
/// remembers, every submission sent after `tenant apply` returned is governed by the new
/// version (refused at once when it is stricter, accepted at once when it is looser), no
/// answer is anything but 202 or 400, and exactly the accepted submissions are stored, each
/// with one event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(
    clippy::disallowed_methods,
    reason = "staggers submissions around a document apply: their spread in time is the subject"
)]
async fn documents_applied_under_racing_submissions_govern_every_later_one_in_two_apis() {
    let s = Stack::with("submit_race_apply", no_workers()).await;
    let apis = [
        start_api(&s, "api-a", &[]).await,
        start_api(&s, "api-b", &[]).await,
    ];
    // Both processes have now seen version 1 (max_amount 100000: 50000 is accepted).
    for (i, api) in apis.iter().enumerate() {
        let (st, v) = post(
            &s.http,
            &api.url,
            &s.token,
            &refund(&format!("pi_warm_{i}"), 50000),
            None,
        )
        .await;
        assert_eq!(st, 202, "{v}");
    }
    let mut accepted = 2i64;
    for round in 0..8 {
        let strict = round % 2 == 0;
        let doc = doc_with_max(&s, if strict { 1000 } else { 200000 + round });
        let applied_at = std::sync::Arc::new(std::sync::Mutex::new(None::<Instant>));
        let db = s.tdb.db.clone();
        let at = applied_at.clone();
        let apply = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(40)).await;
            actiond_store::tenants::apply(&db, &doc, "test")
                .await
                .unwrap();
            *at.lock().unwrap() = Some(Instant::now());
        });
        let sends = (0..40).map(|i| {
            let api = apis[i % 2].url.clone();
            let (http, token) = (s.http.clone(), s.token.clone());
            let body = refund(&format!("pi_r{round}_{i}"), 50000);
            async move {
                // Over 400 ms, so that requests follow an apply that took longer than usual
                // (a clean clone's run once saw none follow it within 160 ms).
                tokio::time::sleep(Duration::from_millis(10 * i as u64)).await;
                let sent = Instant::now();
                let (st, v) = post(&http, &api, &token, &body, None).await;
                (i, sent, st, v)
            }
        });
        let results = futures_util::future::join_all(sends).await;
        apply.await.unwrap();
        let applied = applied_at.lock().unwrap().unwrap();
        let mut after = 0;
        for (i, sent, st, v) in &results {
            assert!(
                *st == 202 || *st == 400,
                "round {round}, request {i}: {st} {v}"
            );
            if *st == 202 {
                accepted += 1;
            }
            if *sent > applied {
                after += 1;
                let want = if strict { 400 } else { 202 };
                assert_eq!(
                    *st, want,
                    "round {round}, request {i} was sent after the apply returned and answered by an older version: {v}"
                );
            }
        }
        // The very next submission in each process, whatever it remembers.
        for (i, api) in apis.iter().enumerate() {
            let (st, v) = post(
                &s.http,
                &api.url,
                &s.token,
                &refund(&format!("pi_next_{round}_{i}"), 50000),
                None,
            )
            .await;
            assert_eq!(st, if strict { 400 } else { 202 }, "round {round}: {v}");
            if st == 202 {
                accepted += 1;
            }
        }
        assert!(
            after > 0,
            "round {round}: no request was sent after the apply"
        );
    }
    let c = s.tdb.superuser().await;
    let stored: i64 = c
        .query_one("SELECT count(*) FROM proposals", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        stored, accepted,
        "exactly the accepted submissions are stored"
    );
    one_submitted_event_per_proposal(&s).await;
    no_transaction_left_open(&s).await;
}

/// The same `Idempotency-Key` and body sent many times at once to two api processes, while a
/// document that changes nothing about the request is applied, files one proposal; the same key
/// with another body is a 422 in both; the same intent without a key is the open proposal,
/// `"replayed": true`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(
    clippy::disallowed_methods,
    reason = "staggers submissions around a document apply: their spread in time is the subject"
)]
async fn idempotency_holds_across_two_apis_while_a_document_is_applied() {
    let s = Stack::with("submit_idem_two_apis", no_workers()).await;
    let apis = [
        start_api(&s, "api-a", &[]).await,
        start_api(&s, "api-b", &[]).await,
    ];
    for (i, api) in apis.iter().enumerate() {
        let (st, v) = post(
            &s.http,
            &api.url,
            &s.token,
            &refund(&format!("pi_warm_{i}"), 100),
            None,
        )
        .await;
        assert_eq!(st, 202, "{v}");
    }
    let body = refund("pi_idem2", 12000);
    let db = s.tdb.db.clone();
    let doc = doc_with_max(&s, 150000);
    let apply = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        actiond_store::tenants::apply(&db, &doc, "test")
            .await
            .unwrap();
    });
    let sends = (0..60).map(|i| {
        let api = apis[i % 2].url.clone();
        let (http, token, body) = (s.http.clone(), s.token.clone(), body.clone());
        async move {
            tokio::time::sleep(Duration::from_millis(i as u64)).await;
            post(&http, &api, &token, &body, Some("same-key")).await
        }
    });
    let results = futures_util::future::join_all(sends).await;
    apply.await.unwrap();
    let mut ids = std::collections::HashSet::new();
    let mut fresh = 0;
    for (st, v) in &results {
        assert_eq!(*st, 202, "{v}");
        ids.insert(v["proposal_id"].as_str().unwrap().to_owned());
        if v["replayed"] != Value::Bool(true) {
            fresh += 1;
        }
    }
    assert_eq!(ids.len(), 1, "one proposal for one key: {ids:?}");
    assert_eq!(fresh, 1, "one answer created it, the others replayed it");
    let id = ids.into_iter().next().unwrap();
    // Another body under the same key, in both processes at once.
    let other = refund("pi_idem2", 12001);
    let sends = (0..20).map(|i| {
        let api = apis[i % 2].url.clone();
        let (http, token, body) = (s.http.clone(), s.token.clone(), other.clone());
        async move { post(&http, &api, &token, &body, Some("same-key")).await }
    });
    for (st, v) in futures_util::future::join_all(sends).await {
        assert_eq!(st, 422, "{v}");
    }
    // The same intent without a key: the open proposal.
    let sends = (0..20).map(|i| {
        let api = apis[i % 2].url.clone();
        let (http, token, body) = (s.http.clone(), s.token.clone(), body.clone());
        async move { post(&http, &api, &token, &body, None).await }
    });
    for (st, v) in futures_util::future::join_all(sends).await {
        assert_eq!(st, 202, "{v}");
        assert_eq!(v["proposal_id"], id.as_str(), "{v}");
        assert_eq!(v["replayed"], true, "{v}");
    }
    assert_eq!(stored_for(&s, "pi_idem2").await, (1, 1));
    one_submitted_event_per_proposal(&s).await;
    no_transaction_left_open(&s).await;
}

/// An insert that fails inside the pipelined transaction (here a trigger on `audit_events`
/// refusing one agent's `proposal.submitted` event: the proposal's row was already inserted by
/// the same statement) stores nothing at all, leaves no transaction open, and the api's only
/// pooled connection then serves other agents of two tenants with nothing of the failed
/// request or of another tenant visible.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_insert_failing_inside_the_pipeline_stores_nothing_and_the_connection_serves_on() {
    let s = Stack::with("submit_pipeline_failure", no_workers()).await;
    let globex = TENANT
        .replace("tenant: acme", "tenant: globex")
        .replace("RECEIVER", &s.recv.url)
        .replace("WEBHOOK_PATH", "hook");
    actiond_store::tenants::apply(&s.tdb.db, &globex, "test")
        .await
        .unwrap();
    let (_, globex_token) = actiond_testkit::agent(&s.tdb.db, "globex", "g-bot", None).await;
    let (doomed, doomed_token) =
        actiond_testkit::agent(&s.tdb.db, "acme", "doomed-bot", None).await;
    // One pooled connection: every request below runs on the one the failure used.
    let api = start_api(&s, "api-1", &[("ACTIOND_API_POOL_SIZE", "1".into())]).await;
    let (st, v) = post(&s.http, &api.url, &s.token, &refund("pi_before", 100), None).await;
    assert_eq!(st, 202, "{v}");
    let su = s.tdb.superuser().await;
    su.batch_execute(&format!(
        "CREATE FUNCTION test_refuse_event() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN RAISE EXCEPTION 'test: this event is refused'; END $$;
         CREATE TRIGGER test_refuse_event BEFORE INSERT ON audit_events FOR EACH ROW
           WHEN (NEW.actor = 'agent:{doomed}') EXECUTE FUNCTION test_refuse_event();"
    ))
    .await
    .unwrap();
    for i in 0..3 {
        let key = format!("doomed-{i}");
        let (st, v) = post(
            &s.http,
            &api.url,
            &doomed_token,
            &refund(&format!("pi_doomed_{i}"), 100),
            Some(&key),
        )
        .await;
        assert_eq!(st, 500, "{v}");
        no_transaction_left_open(&s).await;
        // The connection is usable at once, for another agent and another tenant.
        let (st, v) = post(
            &s.http,
            &api.url,
            &s.token,
            &refund(&format!("pi_acme_{i}"), 100),
            None,
        )
        .await;
        assert_eq!(st, 202, "{v}");
        let acme_id = v["proposal_id"].as_str().unwrap().to_owned();
        let (st, v) = post(
            &s.http,
            &api.url,
            &globex_token,
            &refund(&format!("pi_globex_{i}"), 100),
            None,
        )
        .await;
        assert_eq!(st, 202, "{v}");
        let globex_id = v["proposal_id"].as_str().unwrap().to_owned();
        assert_eq!(read(&s.http, &api.url, &globex_token, &acme_id).await, 404);
        assert_eq!(read(&s.http, &api.url, &s.token, &globex_id).await, 404);
        assert_eq!(read(&s.http, &api.url, &s.token, &acme_id).await, 200);
    }
    let n: i64 = su
        .query_one(
            "SELECT (SELECT count(*) FROM proposals WHERE agent_id = $1)
                  + (SELECT count(*) FROM audit_events WHERE actor = 'agent:' || $1::text)",
            &[&doomed],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0, "the failed submissions left rows behind");
    let tenants: Vec<(String, i64)> = su
        .query(
            "SELECT tenant_id, count(*) FROM proposals GROUP BY tenant_id ORDER BY tenant_id",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(tenants, [("acme".to_owned(), 4), ("globex".to_owned(), 3)]);
    // With the trigger gone, the same key files the proposal: nothing of the failed one was
    // kept under it.
    su.batch_execute("DROP TRIGGER test_refuse_event ON audit_events")
        .await
        .unwrap();
    let (st, v) = post(
        &s.http,
        &api.url,
        &doomed_token,
        &refund("pi_doomed_0", 100),
        Some("doomed-0"),
    )
    .await;
    assert_eq!(st, 202, "{v}");
    assert_ne!(v["replayed"], true, "{v}");
    assert_eq!(stored_for(&s, "pi_doomed_0").await, (1, 1));
    one_submitted_event_per_proposal(&s).await;
    no_transaction_left_open(&s).await;
}

/// A client that gives up while its submission's insert waits on a lock (a superuser holds the
/// agent's row, which the insert's foreign-key check must share) leaves no transaction open
/// once the lock is released, the api's only pooled connection serves the next request, and
/// the abandoned submission is stored whole (one event) or not at all: the same key then
/// answers it, or files it once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(
    clippy::disallowed_methods,
    reason = "a client gone mid-request: the server must see the disconnect before the lock is released, and nothing outside it shows when it has"
)]
async fn a_client_abandoning_a_submission_leaves_no_transaction_open() {
    let s = Stack::with("submit_abandoned", no_workers()).await;
    let api = start_api(&s, "api-1", &[("ACTIOND_API_POOL_SIZE", "1".into())]).await;
    let (st, v) = post(&s.http, &api.url, &s.token, &refund("pi_before", 100), None).await;
    assert_eq!(st, 202, "{v}");
    for round in 0..3 {
        let mut su = s.tdb.superuser().await;
        let tx = su.transaction().await.unwrap();
        tx.execute(
            "SELECT 1 FROM agents WHERE id = $1 FOR UPDATE",
            &[&s.agent_id],
        )
        .await
        .unwrap();
        let payment = format!("pi_abandoned_{round}");
        let key = format!("abandoned-{round}");
        let (http, url, token, body, k) = (
            s.http.clone(),
            api.url.clone(),
            s.token.clone(),
            refund(&payment, 100),
            key.clone(),
        );
        let request = tokio::spawn(async move { post(&http, &url, &token, &body, Some(&k)).await });
        // The insert is waiting for the agent's row.
        let watcher = s.tdb.superuser().await;
        let watcher = &watcher;
        eventually(
            Duration::from_secs(10),
            "the insert waiting on the lock",
            || {
                let w = watcher;
                async move {
                    let n: i64 = w
                        .query_one(
                            "SELECT count(*) FROM pg_stat_activity
                         WHERE datname = current_database() AND usename = 'actiond_test_api'
                           AND wait_event_type = 'Lock'",
                            &[],
                        )
                        .await
                        .ok()?
                        .get(0);
                    (n > 0).then_some(())
                }
            },
        )
        .await;
        // The client disconnects.
        request.abort();
        let _ = request.await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        tx.commit().await.unwrap();
        no_transaction_left_open(&s).await;
        let started = Instant::now();
        let (st, v) = post(
            &s.http,
            &api.url,
            &s.token,
            &refund(&format!("pi_after_{round}"), 100),
            None,
        )
        .await;
        assert_eq!(st, 202, "round {round}: {v}");
        assert!(started.elapsed() < Duration::from_secs(5));
        let (stored, events) = stored_for(&s, &payment).await;
        assert!(stored <= 1 && stored == events, "{stored} {events}");
        let (st, v) = post(
            &s.http,
            &api.url,
            &s.token,
            &refund(&payment, 100),
            Some(&key),
        )
        .await;
        assert_eq!(st, 202, "round {round}: {v}");
        assert_eq!(
            v["replayed"] == true,
            stored == 1,
            "round {round}: the key answers what was stored: {v}"
        );
        assert_eq!(stored_for(&s, &payment).await, (1, 1));
        no_transaction_left_open(&s).await;
    }
    one_submitted_event_per_proposal(&s).await;
}

/// The audit events of each path, after the change that writes them in the statements that
/// move the rows: an allowed and executed refund has exactly one event of each allow-path kind,
/// its `proposal.decided` and `grant.spent` details name the grant that was issued and spent
/// and its key, each event carries the proposal's transition and hashes; an escalated, a
/// blocked and a handlerless proposal have one submission and one decision, naming no grant; a
/// refused request has none; and the sealed chain verifies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_path_writes_exactly_its_events_and_the_sealed_chain_verifies() {
    let server = actiond_testkit::PgCluster::start();
    let s = Stack::with(
        "submit_audit_events",
        Options {
            server: Some(server.admin_url()),
            ..Options::default()
        },
    )
    .await;
    let allowed = s.propose(&refund("pi_small", 100)).await;
    s.wait_state(allowed, "succeeded", Duration::from_secs(30))
        .await;
    let escalated = s.propose(&refund("pi_large", 12000)).await;
    s.wait_state(escalated, "escalated", Duration::from_secs(30))
        .await;
    let blocked = s
        .propose(r#"{"action":"shell.exec","params":{"cmd":"id"}}"#)
        .await;
    s.wait_state(blocked, "blocked", Duration::from_secs(30))
        .await;
    let (st, v) = s.post(&refund("pi_too_large", 100001), None).await;
    assert_eq!(st, 400, "{v}");
    let c = s.tdb.superuser().await;
    let c = &c;
    let events = |id: uuid::Uuid| async move {
        c.query(
            "SELECT e.kind, e.from_state, e.to_state, e.detail,
                        e.intent_hash = p.intent_hash AND e.params_sha256 = p.params_sha256
                 FROM audit_events e JOIN proposals p ON p.id = e.proposal_id
                 WHERE e.proposal_id = $1 ORDER BY e.id",
            &[&id],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| {
            (
                r.get::<_, String>(0),
                r.get::<_, Option<String>>(1),
                r.get::<_, Option<String>>(2),
                r.get::<_, Value>(3),
                r.get::<_, bool>(4),
            )
        })
        .collect::<Vec<_>>()
    };
    let ev = events(allowed).await;
    let kinds: Vec<&str> = ev.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(kinds, REFUND_PATH_KINDS, "{ev:?}");
    let transitions: Vec<(Option<&str>, Option<&str>)> = ev
        .iter()
        .map(|e| (e.1.as_deref(), e.2.as_deref()))
        .collect();
    assert_eq!(
        transitions,
        [
            (None, Some("pending")),
            (Some("pending"), Some("approved")),
            (Some("approved"), Some("executing")),
            (Some("executing"), Some("succeeded")),
            (None, None),
        ]
    );
    assert!(ev.iter().all(|e| e.4), "hashes differ from the proposal's");
    let grant = c
        .query_one(
            "SELECT id, key_id, used_at IS NOT NULL FROM grants WHERE proposal_id = $1",
            &[&allowed],
        )
        .await
        .unwrap();
    let (grant_id, key_id, used): (uuid::Uuid, String, bool) =
        (grant.get(0), grant.get(1), grant.get(2));
    assert!(used, "the grant was spent");
    assert!(key_id.starts_with("policy-"), "{key_id}");
    for e in &ev[1..3] {
        assert_eq!(e.3["grant_id"], grant_id.to_string(), "{}: {}", e.0, e.3);
        assert_eq!(e.3["key_id"], key_id.as_str(), "{}: {}", e.0, e.3);
    }
    let decided = &ev[1].3;
    assert_eq!(decided["effect"], "allow", "{decided}");
    assert_eq!(decided["rule"], "small-refund", "{decided}");
    assert_eq!(decided["doc_version"], 1, "{decided}");
    for key in [
        "reason",
        "errors",
        "doc_sha256",
        "classifier",
        "agent_frozen",
    ] {
        assert!(decided.get(key).is_some(), "{key} missing from {decided}");
    }
    for (id, to, effect) in [
        (escalated, "escalated", "escalate"),
        (blocked, "blocked", "block"),
    ] {
        let ev = events(id).await;
        let kinds: Vec<&str> = ev.iter().map(|e| e.0.as_str()).collect();
        assert_eq!(kinds, ["proposal.submitted", "proposal.decided"], "{ev:?}");
        assert_eq!(ev[1].1.as_deref(), Some("pending"));
        assert_eq!(ev[1].2.as_deref(), Some(to));
        assert_eq!(ev[1].3["effect"], effect, "{}", ev[1].3);
        assert_eq!(ev[1].3["grant_id"], Value::Null, "{}", ev[1].3);
        assert_eq!(ev[1].3["key_id"], Value::Null, "{}", ev[1].3);
        assert!(ev.iter().all(|e| e.4));
    }
    let counts: (i64, i64, i64) = {
        let r = c
            .query_one(
                "SELECT (SELECT count(*) FROM proposals),
                        (SELECT count(*) FROM audit_events WHERE proposal_id IS NOT NULL),
                        (SELECT count(*) FROM grants)",
                &[],
            )
            .await
            .unwrap();
        (r.get(0), r.get(1), r.get(2))
    };
    // The refused request stored nothing; the sentinel-free total is 5 (the refund's four
    // transitions and its read-back) + 2 + 2 events.
    assert_eq!(counts, (3, 9, 1));
    // Seal everything and verify the chain.
    let dir = std::env::temp_dir().join(format!("actiond-audit-{}", uuid::Uuid::new_v4()));
    let (ok, _, err) = actiond_testkit::cli(
        &["audit", "keygen", "--out-dir", dir.to_str().unwrap()],
        &[],
    );
    assert!(ok, "{err}");
    let sealer = vec![("DATABASE_URL", s.tdb.role_url("sealer").await)];
    let total: i64 = c
        .query_one("SELECT count(*) FROM audit_events", &[])
        .await
        .unwrap()
        .get(0);
    let mut sealed = 0;
    for _ in 0..10 {
        let (ok, _, err) = actiond_testkit::cli(
            &[
                "audit",
                "seal",
                "--once",
                "--wait",
                "10s",
                "--credentials-dir",
                dir.to_str().unwrap(),
            ],
            &sealer,
        );
        assert!(ok, "seal failed: {err}");
        sealed = c
            .query_one("SELECT count(*) FROM audit_event_hashes", &[])
            .await
            .unwrap()
            .get(0);
        if sealed >= total {
            break;
        }
    }
    assert!(sealed >= total, "{sealed} of {total} events sealed");
    let pubkey = dir.join("sealer-1.pub").display().to_string();
    let (ok, out, err) = actiond_testkit::cli(
        &["audit", "verify", "--public-key", &pubkey],
        &[("DATABASE_URL", s.tdb.role_url("auditor").await)],
    );
    assert!(ok, "audit verify failed: {out}{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The audience the test issuer's tokens are for.
const AUDIENCE: &str = "https://actiond.test";
/// The user the delegating workload acts for.
const JANE: &str = "jane@customer.example";

/// A JWT issuer run by the test: one P-256 key, its JWK Set served at `{url}/jwks`.
struct Issuer {
    url: String,
    pkcs8: Vec<u8>,
}

impl Issuer {
    async fn start() -> Self {
        use base64::Engine as _;
        use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
        let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .unwrap()
            .as_ref()
            .to_vec();
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &pkcs8, &rng).unwrap();
        let point = pair.public_key().as_ref();
        let jwk = serde_json::json!({"kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256",
            "kid": "k-1", "x": b64(&point[1..33]), "y": b64(&point[33..65])});
        let app = axum::Router::new().route(
            "/jwks",
            axum::routing::get(move || {
                let jwk = jwk.clone();
                async move { axum::Json(serde_json::json!({ "keys": [jwk] })) }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { url, pkcs8 }
    }

    /// A token for `sub`; with `actor`, an RFC 8693 token of `actor` acting for `sub`.
    fn token(&self, sub: &str, actor: Option<&str>) -> String {
        let now = jsonwebtoken::get_current_timestamp();
        let mut claims = serde_json::json!({"iss": self.url, "sub": sub, "aud": AUDIENCE,
            "iat": now, "exp": now + 300});
        if let Some(a) = actor {
            claims["act"] = serde_json::json!({ "sub": a });
        }
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.kid = Some("k-1".into());
        jsonwebtoken::encode(
            &header,
            &claims,
            &jsonwebtoken::EncodingKey::from_ec_der(&self.pkcs8),
        )
        .unwrap()
    }
}

/// Delegated workload JWTs (`act`: an agent acting for a user) on two api processes, many at
/// once, while a document is applied: every proposal the delegating agent files has exactly one
/// `proposal_delegations` row naming the user (the insert's statement writes it), a replay by
/// `Idempotency-Key` or by open intent writes none, and an undelegated agent's proposals have
/// none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(
    clippy::disallowed_methods,
    reason = "staggers submissions around a document apply: their spread in time is the subject"
)]
async fn delegated_submissions_write_exactly_one_delegation_each() {
    let s = Stack::with("submit_delegations", no_workers()).await;
    let iss = Issuer::start().await;
    let file = s.logs.join("issuers.yaml");
    std::fs::write(
        &file,
        format!(
            "issuers:\n  - issuer: {u}\n    jwks_uri: {u}/jwks\n    audience: {AUDIENCE}\n    algorithms: [ES256]\n    max_token_lifetime: 10m\n",
            u = iss.url
        ),
    )
    .unwrap();
    for name in ["delegating-bot", "plain-bot"] {
        actiond_store::agents::create_workload(
            &s.tdb.db,
            "acme",
            name,
            None,
            &iss.url,
            &format!("spiffe://acme/{name}"),
        )
        .await
        .unwrap();
    }
    let env = [("ACTIOND_API_JWT_ISSUERS_FILE", file.display().to_string())];
    let apis = [
        start_api(&s, "api-a", &env).await,
        start_api(&s, "api-b", &env).await,
    ];
    let delegated = iss.token(JANE, Some("spiffe://acme/delegating-bot"));
    let plain = iss.token("spiffe://acme/plain-bot", None);
    for (i, api) in apis.iter().enumerate() {
        let (st, v) = post(
            &s.http,
            &api.url,
            &delegated,
            &refund(&format!("pi_warm_{i}"), 100),
            None,
        )
        .await;
        assert_eq!(st, 202, "{v}");
    }
    // Many at once in both processes, with a document applied meanwhile (the submissions that
    // meet it are validated again and inserted once).
    let db = s.tdb.db.clone();
    let doc = doc_with_max(&s, 150000);
    let apply = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        actiond_store::tenants::apply(&db, &doc, "test")
            .await
            .unwrap();
    });
    let sends = (0..30).map(|i| {
        let api = apis[i % 2].url.clone();
        let (http, token) = (s.http.clone(), delegated.clone());
        async move {
            tokio::time::sleep(Duration::from_millis(2 * i as u64)).await;
            post(
                &http,
                &api,
                &token,
                &refund(&format!("pi_for_jane_{i}"), 100),
                None,
            )
            .await
        }
    });
    for (st, v) in futures_util::future::join_all(sends).await {
        assert_eq!(st, 202, "{v}");
        assert_ne!(v["replayed"], true, "{v}");
    }
    apply.await.unwrap();
    // One key, one body, many times: one proposal, one delegation.
    let body = refund("pi_jane_key", 100);
    let sends = (0..20).map(|i| {
        let api = apis[i % 2].url.clone();
        let (http, token, body) = (s.http.clone(), delegated.clone(), body.clone());
        async move { post(&http, &api, &token, &body, Some("jane-key")).await }
    });
    let mut ids = std::collections::HashSet::new();
    for (st, v) in futures_util::future::join_all(sends).await {
        assert_eq!(st, 202, "{v}");
        ids.insert(v["proposal_id"].as_str().unwrap().to_owned());
    }
    assert_eq!(ids.len(), 1, "{ids:?}");
    // The same open intent again, without the key: the open proposal, nothing written.
    let (st, v) = post(&s.http, &apis[1].url, &delegated, &body, None).await;
    assert_eq!(st, 202, "{v}");
    assert_eq!(v["replayed"], true, "{v}");
    for i in 0..10 {
        let (st, v) = post(
            &s.http,
            &apis[i % 2].url,
            &plain,
            &refund(&format!("pi_plain_{i}"), 100),
            None,
        )
        .await;
        assert_eq!(st, 202, "{v}");
    }
    let c = s.tdb.superuser().await;
    let rows: Vec<(String, i64, i64, i64)> = c
        .query(
            "SELECT a.name, count(DISTINCT p.id),
                    count(d.proposal_id),
                    count(d.proposal_id) FILTER (WHERE d.on_behalf_of = $1 AND d.tenant_id = p.tenant_id)
             FROM proposals p JOIN agents a ON a.id = p.agent_id
               LEFT JOIN proposal_delegations d ON d.proposal_id = p.id
             GROUP BY a.name ORDER BY a.name",
            &[&JANE],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    assert_eq!(
        rows,
        [
            ("delegating-bot".to_owned(), 33, 33, 33),
            ("plain-bot".to_owned(), 10, 0, 0),
        ]
    );
    let total: i64 = c
        .query_one("SELECT count(*) FROM proposal_delegations", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(total, 33, "no delegation without its proposal");
    one_submitted_event_per_proposal(&s).await;
}

/// Postgres ending the api's backend while its pipelined submission waits inside the
/// transaction (the insert blocked on a lock) stores nothing: the answer is a 503, no row or
/// event of the request exists, and the api's only pool slot serves the next request on a new
/// connection; the same key then files the proposal once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_terminated_mid_pipeline_stores_nothing_and_the_pool_recovers() {
    let s = Stack::with("submit_terminated", no_workers()).await;
    let api = start_api(&s, "api-1", &[("ACTIOND_API_POOL_SIZE", "1".into())]).await;
    let (st, v) = post(&s.http, &api.url, &s.token, &refund("pi_before", 100), None).await;
    assert_eq!(st, 202, "{v}");
    let mut su = s.tdb.superuser().await;
    let tx = su.transaction().await.unwrap();
    tx.execute(
        "SELECT 1 FROM agents WHERE id = $1 FOR UPDATE",
        &[&s.agent_id],
    )
    .await
    .unwrap();
    let (http, url, token) = (s.http.clone(), api.url.clone(), s.token.clone());
    let request = tokio::spawn(async move {
        post(
            &http,
            &url,
            &token,
            &refund("pi_killed", 100),
            Some("killed"),
        )
        .await
    });
    let watcher = s.tdb.superuser().await;
    let watcher = &watcher;
    let pid: i32 = eventually(
        Duration::from_secs(10),
        "the insert waiting on the lock",
        || async move {
            watcher
                .query_opt(
                    "SELECT pid FROM pg_stat_activity
                     WHERE datname = current_database() AND usename = 'actiond_test_api'
                       AND wait_event_type = 'Lock'",
                    &[],
                )
                .await
                .ok()?
                .map(|r| r.get(0))
        },
    )
    .await;
    watcher
        .execute("SELECT pg_terminate_backend($1)", &[&pid])
        .await
        .unwrap();
    let (st, v) = request.await.unwrap();
    assert_eq!(st, 503, "{v}");
    tx.commit().await.unwrap();
    assert_eq!(stored_for(&s, "pi_killed").await, (0, 0));
    no_transaction_left_open(&s).await;
    let (st, v) = post(&s.http, &api.url, &s.token, &refund("pi_after", 100), None).await;
    assert_eq!(st, 202, "{v}");
    let (st, v) = post(
        &s.http,
        &api.url,
        &s.token,
        &refund("pi_killed", 100),
        Some("killed"),
    )
    .await;
    assert_eq!(st, 202, "{v}");
    assert_ne!(v["replayed"], true, "{v}");
    assert_eq!(stored_for(&s, "pi_killed").await, (1, 1));
    one_submitted_event_per_proposal(&s).await;
}

/// A retry with the same `Idempotency-Key` and body answers the stored proposal even when a
/// document applied in between makes that body invalid: a client that lost the first answer
/// (a 503 while committing) learns that its proposal exists and is pending, not a 400 saying
/// it was refused. Another body under that key is still a 422; the same body under a new key,
/// or under none, is refused by the new document and stores nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_a_stricter_document_answers_the_stored_proposal() {
    let s = Stack::with("submit_retry_stricter", no_workers()).await;
    let api = start_api(&s, "api-1", &[]).await;
    let body = refund("pi_retry", 50000);
    let (st, v) = post(&s.http, &api.url, &s.token, &body, Some("retry-1")).await;
    assert_eq!(st, 202, "{v}");
    let id = v["proposal_id"].as_str().unwrap().to_owned();
    actiond_store::tenants::apply(&s.tdb.db, &doc_with_max(&s, 1000), "test")
        .await
        .unwrap();
    for _ in 0..2 {
        let (st, v) = post(&s.http, &api.url, &s.token, &body, Some("retry-1")).await;
        assert_eq!(st, 202, "the retry must find its proposal: {v}");
        assert_eq!(v["proposal_id"], id.as_str(), "{v}");
        assert_eq!(v["replayed"], true, "{v}");
        assert_eq!(v["state"], "pending", "{v}");
    }
    let (st, v) = post(
        &s.http,
        &api.url,
        &s.token,
        &refund("pi_retry", 50001),
        Some("retry-1"),
    )
    .await;
    assert_eq!(st, 422, "{v}");
    let (st, v) = post(&s.http, &api.url, &s.token, &body, Some("retry-2")).await;
    assert_eq!(st, 400, "{v}");
    assert!(v.to_string().contains("params.amount"), "{v}");
    let (st, v) = post(&s.http, &api.url, &s.token, &body, None).await;
    assert_eq!(st, 400, "{v}");
    assert_eq!(stored_for(&s, "pi_retry").await, (1, 1));
}

/// An event that does not get written (here a trigger that silently drops it, as a database
/// owner could install) stops the change it belongs to: no event, no change. The submission
/// whose `proposal.submitted` is dropped stores no proposal, the spend whose `grant.spent` is
/// dropped spends no grant and runs no handler, and the outcome whose `proposal.executed` is
/// dropped is not recorded (the executor retries it); once the events can be written again,
/// the proposal ends `succeeded` with all four of its events and one handler call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(
    clippy::disallowed_methods,
    reason = "asserts a grant stays unspent while the executor keeps trying (every 200 ms): a negative over time"
)]
async fn a_change_whose_event_is_not_written_does_not_happen() {
    let s = Stack::new("submit_event_dropped").await;
    let (doomed, doomed_token) =
        actiond_testkit::agent(&s.tdb.db, "acme", "doomed-bot", None).await;
    let su = s.tdb.superuser().await;
    su.batch_execute(&format!(
        "CREATE FUNCTION test_drop_event() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN RETURN NULL; END $$;
         CREATE TRIGGER test_drop_submitted BEFORE INSERT ON audit_events FOR EACH ROW
           WHEN (NEW.kind = 'proposal.submitted' AND NEW.actor = 'agent:{doomed}')
           EXECUTE FUNCTION test_drop_event();
         CREATE TRIGGER test_drop_spent BEFORE INSERT ON audit_events FOR EACH ROW
           WHEN (NEW.kind = 'grant.spent') EXECUTE FUNCTION test_drop_event();"
    ))
    .await
    .unwrap();
    let answer = s
        .http
        .post(format!("{}/v1/proposals", s.api_url))
        .bearer_auth(&doomed_token)
        .header("content-type", "application/json")
        .body(refund("pi_no_event", 100))
        .send()
        .await;
    if let Ok(r) = answer {
        assert_ne!(r.status().as_u16(), 202, "accepted without its event");
    }
    let stored: i64 = su
        .query_one(
            "SELECT count(*) FROM proposals WHERE agent_id = $1",
            &[&doomed],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(stored, 0, "a proposal was stored without its event");
    // An allowed refund whose spend cannot write its event.
    let id = s.propose(&refund("pi_spend_no_event", 100)).await;
    let su = &su;
    eventually(
        Duration::from_secs(20),
        "the refund decided",
        || async move {
            let n: i64 = su
                .query_one("SELECT count(*) FROM grants WHERE proposal_id = $1", &[&id])
                .await
                .ok()?
                .get(0);
            (n == 1).then_some(())
        },
    )
    .await;
    // The executor polls every 200 ms: it has tried to spend it many times by now.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let r = su
        .query_one(
            "SELECT p.state, g.used_at IS NULL FROM proposals p JOIN grants g ON g.proposal_id = p.id
             WHERE p.id = $1",
            &[&id],
        )
        .await
        .unwrap();
    assert_eq!(
        (r.get::<_, String>(0), r.get::<_, bool>(1)),
        ("approved".to_owned(), true),
        "spent and started without its grant.spent event"
    );
    assert!(
        s.calls().is_empty(),
        "a handler ran without its grant.spent event"
    );
    // The spend may write its event now; the outcome may not.
    su.batch_execute(
        "CREATE TRIGGER test_drop_executed BEFORE INSERT ON audit_events FOR EACH ROW
           WHEN (NEW.kind = 'proposal.executed') EXECUTE FUNCTION test_drop_event();
         DROP TRIGGER test_drop_spent ON audit_events",
    )
    .await
    .unwrap();
    let calls = || async { (s.calls().len() == 1).then_some(()) };
    // A failed spend is tried again once its claim lease has run out.
    eventually(Duration::from_secs(60), "the handler ran", calls).await;
    // The executor retries recording its outcome (100 ms, doubling to 1 s) within its lease
    // (the handler's timeout plus a 5 s margin): each try fails whole.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        s.state(id).await,
        "executing",
        "an outcome was recorded without its proposal.executed event"
    );
    su.batch_execute("DROP TRIGGER test_drop_executed ON audit_events")
        .await
        .unwrap();
    s.wait_state(id, "succeeded", Duration::from_secs(60)).await;
    assert_eq!(s.audit_kind_names(id).await, REFUND_PATH_KINDS);
    assert_eq!(s.calls().len(), 1);
}

/// Concurrent submissions stored in batches (`proposals::Submitter` with one worker, so while
/// its first submission is stored every other one queues and the next batches are large) get
/// exactly the answers one at a time gives, on the `actiond_api` role under row-level
/// security, across two tenants whose submissions wait together (each batch holds one
/// tenant's, so row-level security still separates them): new proposals are created, ten copies
/// of one idempotent request create one proposal and find it nine times, a version that is no
/// longer the tenant's latest is stale, a revoked agent is refused; every stored proposal has
/// its one `proposal.submitted` event, and several were stored by one transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_submissions_get_the_answers_of_one_at_a_time() {
    use actiond_store::proposals::{NewProposal, Submitted, Submitter};
    let t = actiond_testkit::TestDb::new().await;
    let doc = |tenant: &str, max: u32| {
        format!(
            "tenant: {tenant}\npolicy:\n  default: escalate\nhandlers:\n  billing.refund.issue:\n    credential: payments\n    max_amount: {max}\napprovers:\n  subjects: [alice]\n"
        )
    };
    // tenb's latest document is version 2.
    for (tenant, max) in [("tena", 100000), ("tenb", 100000), ("tenb", 90000)] {
        actiond_store::tenants::apply(&t.db, &doc(tenant, max), "test")
            .await
            .unwrap();
    }
    let (a, _) = actiond_testkit::agent(&t.db, "tena", "bot-a", None).await;
    let (b, _) = actiond_testkit::agent(&t.db, "tenb", "bot-b", None).await;
    let (gone, _) = actiond_testkit::agent(&t.db, "tena", "bot-gone", None).await;
    t.superuser()
        .await
        .execute(
            "UPDATE agents SET revoked_at = now() WHERE id = $1",
            &[&gone],
        )
        .await
        .unwrap();
    let proposal = refund_proposal;
    // (proposal, document version, what it is)
    let mut jobs = Vec::new();
    let same = NewProposal {
        idempotency_key: Some("same-key".into()),
        ..proposal("tena", a, 9999)
    };
    for n in 0..100 {
        jobs.push((proposal("tena", a, n), 1, "new"));
        if n < 50 {
            jobs.push((proposal("tenb", b, n), 2, "new"));
        }
        if n % 10 == 0 {
            jobs.push((proposal("tenb", b, 1000 + n), 1, "stale"));
            jobs.push((
                NewProposal {
                    id: uuid::Uuid::new_v4(),
                    ..same.clone()
                },
                1,
                "same",
            ));
        }
        if n % 20 == 0 {
            jobs.push((proposal("tena", gone, 2000 + n), 1, "revoked"));
        }
    }
    let db = actiond_store::Db::connect_generic(&t.role_url("api").await, 8).unwrap();
    let submitter = Submitter::spawn(db, 1);
    let answers = futures_util::future::join_all(jobs.iter().map(|(p, version, _)| {
        let submitter = submitter.clone();
        async move { submitter.submit(p, 20, *version).await.unwrap() }
    }))
    .await;
    let mut created_same = None;
    let mut found_same = Vec::new();
    for ((p, _, what), answer) in jobs.iter().zip(&answers) {
        match (*what, answer) {
            ("new", Submitted::Created(id)) => assert_eq!(*id, p.id),
            ("stale", Submitted::StaleDocument { latest }) => assert_eq!(*latest, Some(2)),
            ("revoked", Submitted::AgentNotLive) => {}
            ("same", Submitted::Created(id)) => {
                assert!(created_same.replace(*id).is_none(), "created twice");
            }
            ("same", Submitted::Existing { id, .. }) => found_same.push(*id),
            (what, answer) => panic!("{what}: {answer:?}"),
        }
    }
    let created_same = created_same.expect("one copy of the idempotent request created it");
    assert_eq!(found_same, vec![created_same; 9]);
    let su = t.superuser().await;
    let row = su
        .query_one(
            "SELECT (SELECT count(*) FROM proposals WHERE tenant_id = 'tena'),
                    (SELECT count(*) FROM proposals WHERE tenant_id = 'tenb'),
                    (SELECT count(*) FROM audit_events WHERE kind = 'proposal.submitted'),
                    (SELECT count(*) FROM proposals p WHERE (SELECT count(*) FROM audit_events e
                        WHERE e.proposal_id = p.id AND e.kind = 'proposal.submitted') <> 1),
                    (SELECT count(DISTINCT xmin::text) FROM proposals),
                    (SELECT count(*) FROM (SELECT xmin::text FROM proposals GROUP BY 1
                        HAVING count(DISTINCT tenant_id) > 1) AS mixed)",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), 101, "100 new and one idempotent");
    assert_eq!(row.get::<_, i64>(1), 50);
    assert_eq!(row.get::<_, i64>(2), 151, "one event per stored proposal");
    assert_eq!(
        row.get::<_, i64>(3),
        0,
        "every proposal has exactly one event"
    );
    let transactions = row.get::<_, i64>(4);
    eprintln!("{transactions} transactions stored 151 proposals");
    assert_eq!(
        row.get::<_, i64>(5),
        0,
        "a transaction wrote two tenants' proposals: a batch mixed tenants"
    );
    assert!(
        transactions < 151 / 4,
        "{transactions} transactions for 151 proposals: the submissions were not batched"
    );
    // One submission that makes the batch statement fail (a trigger refuses it) fails alone:
    // its batch's other submissions are stored one by one.
    su.batch_execute(
        "CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN IF NEW.target = 'pi_poison' THEN RAISE EXCEPTION 'poisoned'; END IF; RETURN NEW; END $$;
         CREATE TRIGGER poison BEFORE INSERT ON proposals FOR EACH ROW EXECUTE FUNCTION poison();",
    )
    .await
    .unwrap();
    let mut jobs: Vec<NewProposal> = (0..30).map(|n| proposal("tena", a, 3000 + n)).collect();
    jobs.push(NewProposal {
        target: "pi_poison".into(),
        ..proposal("tena", a, 4000)
    });
    let answers = futures_util::future::join_all(jobs.iter().map(|p| {
        let submitter = submitter.clone();
        async move { submitter.submit(p, 20, 1).await }
    }))
    .await;
    for (p, answer) in jobs.iter().zip(&answers) {
        if p.target == "pi_poison" {
            let e = format!("{:?}", answer.as_ref().unwrap_err());
            assert!(e.contains("poisoned"), "{e}");
        } else {
            assert_eq!(answer.as_ref().unwrap(), &Submitted::Created(p.id));
        }
    }
    let n: i64 = su
        .query_one(
            "SELECT count(*) FROM proposals WHERE target ~ '^pi_30[0-9][0-9]$'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 30);
}

/// A batch held up by a lock longer than its 5 s `statement_timeout` fails, and its
/// submissions are then stored one by one (each first looking for its own id), so every one is
/// created, once, with its event, once the lock goes. On a current-thread runtime every
/// submission is queued before the worker first runs, so each take is one batch of all that
/// were submitted together. A first batch, before the lock, prepares the batch statement on
/// the pool's one connection: preparing an INSERT takes the table's lock too, and that wait
/// has no timeout.
#[tokio::test]
#[expect(
    clippy::disallowed_methods,
    reason = "holds the lock for 7 s: the length of the wait is the subject"
)]
async fn a_batch_stuck_past_its_statement_timeout_is_stored_one_by_one() {
    use actiond_store::proposals::{NewProposal, Submitted, Submitter};
    let t = actiond_testkit::TestDb::new().await;
    actiond_store::tenants::apply(
        &t.db,
        "tenant: tena\npolicy:\n  default: escalate\nhandlers:\n  billing.refund.issue:\n    credential: payments\n    max_amount: 100000\napprovers:\n  subjects: [alice]\n",
        "test",
    )
    .await
    .unwrap();
    let (a, _) = actiond_testkit::agent(&t.db, "tena", "bot-a", None).await;
    let new = |n: usize| refund_proposal("tena", a, n);
    let db = actiond_store::Db::connect_generic(&t.role_url("api").await, 8).unwrap();
    let submitter = Submitter::spawn(db, 1);
    let warm: Vec<NewProposal> = (100..102).map(new).collect();
    futures_util::future::join_all(warm.iter().map(|p| submitter.submit(p, 20, 1))).await;
    let warm_ids: Vec<uuid::Uuid> = warm.iter().map(|p| p.id).collect();
    let su = t.superuser().await;
    let warm_transactions: i64 = su
        .query_one(
            "SELECT count(DISTINCT xmin::text) FROM proposals WHERE id = ANY($1)",
            &[&warm_ids],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(warm_transactions, 1, "the warm-up was not one batch");
    let jobs: Vec<NewProposal> = (0..12).map(new).collect();
    // Inserts into `proposals` wait for this lock; reads do not.
    let mut su = t.superuser().await;
    let lock = su.transaction().await.unwrap();
    lock.batch_execute("LOCK TABLE proposals IN EXCLUSIVE MODE")
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let submitting = futures_util::future::join_all(jobs.iter().map(|p| {
        let submitter = submitter.clone();
        async move { submitter.submit(p, 20, 1).await }
    }));
    let release = async {
        tokio::time::sleep(Duration::from_secs(7)).await;
        lock.commit().await.unwrap();
    };
    let (answers, ()) = tokio::join!(submitting, release);
    for (p, answer) in jobs.iter().zip(&answers) {
        assert_eq!(answer.as_ref().unwrap(), &Submitted::Created(p.id));
    }
    assert!(started.elapsed() >= Duration::from_secs(7));
    let check = t.superuser().await;
    let row = check
        .query_one(
            "SELECT count(*), count(DISTINCT xmin::text),
                    (SELECT count(*) FROM audit_events WHERE kind = 'proposal.submitted'
                     AND NOT proposal_id = ANY($1))
             FROM proposals WHERE NOT id = ANY($1)",
            &[&warm_ids],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), 12);
    assert_eq!(
        row.get::<_, i64>(1),
        12,
        "the batch waited for the lock instead of failing at its statement_timeout"
    );
    assert_eq!(row.get::<_, i64>(2), 12, "one event per proposal");
}
