//! Restarts as attacks: no proposal, decision or audit event is lost or duplicated when a
//! service is killed with -9, a backend is terminated, or the whole Postgres server restarts
//! (on a private [`PgCluster`]) while proposals flow.

use crate::support::{ALLOW_PATH_KINDS, Options, REFUND_PATH_KINDS, Stack, refund};
use actiond_testkit::{PgCluster, Service, StopMode};
use std::sync::Arc;
use std::time::Duration;

/// Generous: the machine running these tests may be loaded.
const T: Duration = Duration::from_secs(60);

/// Asserts that each of `ids` succeeded exactly once: one event of each kind of the allow path,
/// and exactly one provider call whose body contains its marker (`pi_<tag><i>&` for a refund
/// paid with `pi_<tag><i>`, see [`refund_marker`]); and no other provider call.
async fn assert_each_ran_once(s: &Stack, ids: &[(String, uuid::Uuid)]) {
    for (_, id) in ids {
        s.wait_state(*id, "succeeded", T).await;
    }
    // A later proposal has run, so any duplicate run of an earlier one has too; then count.
    s.sentinel().await;
    let calls = s.calls();
    for (marker, id) in ids {
        // A refund's effect is read back (`proposal.effect`); a webhook ping has no read-back.
        let expected: &[&str] = if marker.contains("ping-") {
            &ALLOW_PATH_KINDS
        } else {
            &REFUND_PATH_KINDS
        };
        assert_eq!(
            s.audit_kind_names(*id).await,
            expected,
            "proposal {marker} ({id})"
        );
        let n = calls
            .iter()
            .filter(|c| String::from_utf8_lossy(&c.body).contains(marker.as_str()))
            .count();
        assert_eq!(n, 1, "provider calls for proposal {marker} ({id})");
    }
    assert_eq!(calls.len(), ids.len(), "no other provider call");
}

/// The part of the provider call's body that names the refund of `pi_<tag><i>`.
fn refund_marker(tag: &str, i: usize) -> String {
    format!("pi_{tag}{i}&")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_kill9_mid_flow_loses_and_duplicates_nothing() {
    let mut s = Stack::new("policy_kill9_mid_flow").await;
    let mut ids = Vec::new();
    for burst in 0..3 {
        for i in burst * 20..(burst + 1) * 20 {
            let id = s
                .propose(&refund(&format!("pi_pk{i}"), 100 + i as i64))
                .await;
            ids.push((refund_marker("pk", i), id));
        }
        if burst < 2 {
            // The policy worker is busy with the burst just submitted: kill it mid-flow.
            let idx = s.services.iter().rposition(|x| x.role == "policy").unwrap();
            s.services[idx].kill9();
            let c = s.tdb.db.client().await.unwrap();
            let pending: i64 = c
                .query_one(
                    "SELECT count(*) FROM proposals WHERE state = 'pending'",
                    &[],
                )
                .await
                .unwrap()
                .get(0);
            eprintln!("policy killed with {pending} proposals still pending");
            s.start_policy().await;
        }
    }
    assert_each_ran_once(&s, &ids).await;
}

/// A restart terminates the backends with statements in flight (`57P01`, admin shutdown): the
/// agent gets a 503 problem with `Retry-After` ("try again"), never a 500, nothing is stored,
/// and the next submission goes through on a new connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_terminated_mid_request_is_503_and_loses_nothing() {
    let s = Stack::new("backend_terminated_mid_request").await;
    s.propose(&refund("pi_bt0", 100)).await;
    // Hold the api's statement: its document lookup waits on this lock.
    let mut locker = s.tdb.superuser().await;
    let lock = locker.transaction().await.unwrap();
    lock.batch_execute("LOCK TABLE tenant_documents IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    let admin = s.tdb.superuser().await;
    let terminate = async {
        let deadline = tokio::time::Instant::now() + T;
        loop {
            // The api's backend of this test's database that waits on the lock, terminated as
            // a restart (`pg_ctl restart -m fast`) terminates it.
            let n: i64 = admin
                .query_one(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                     WHERE datname = current_database() AND usename = 'actiond_test_api'
                       AND wait_event_type = 'Lock'",
                    &[],
                )
                .await
                .unwrap()
                .get(0);
            if n > 0 {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the api never waited on the lock"
            );
            actiond_testkit::poll_pause(Duration::from_millis(20)).await;
        }
    };
    let body = refund("pi_bt1", 101);
    let ((status, headers, body), ()) =
        tokio::join!(s.post_with_headers(&s.token, &body, None), terminate);
    let retry = headers.get("retry-after");
    assert_eq!(status, 503, "{body}");
    assert!(retry.is_some(), "503 without Retry-After");
    assert!(
        body["type"]
            .as_str()
            .unwrap_or_default()
            .contains("unavailable"),
        "{body}"
    );
    lock.rollback().await.unwrap();
    let c = s.tdb.db.client().await.unwrap();
    let stored: i64 = c
        .query_one(
            "SELECT count(*) FROM proposals WHERE params_json LIKE '%pi_bt1%'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(stored, 0, "the refused submission was stored");
    // The api recovers on its own: the pool does not hand the terminated connection out again
    // (it checks its connections after such a failure), so the very next submission is stored.
    let (status, _, body) = s
        .post_with_headers(&s.token, &refund("pi_bt2", 102), None)
        .await;
    assert_eq!(
        status, 202,
        "the submission after the terminated one: {body}"
    );
    let id: uuid::Uuid = body["proposal_id"].as_str().unwrap().parse().unwrap();
    s.wait_state(id, "succeeded", T).await;
}

/// A TCP forwarder to `upstream` that passes bytes both ways unchanged but, when the server
/// closes its side, closes the client's side only `linger` later: the network between a
/// service and Postgres (a proxy, a NAT, a slow link) may show the client a backend's last
/// message well before its close. Returns the port it listens on.
#[expect(
    clippy::disallowed_methods,
    reason = "the proxy keeps each connection open a while after upstream closed: the linger is the fixture"
)]
async fn lingering_proxy(upstream: String, linger: Duration) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else {
                continue;
            };
            let (mut cr, mut cw) = client.into_split();
            let (mut sr, mut sw) = server.into_split();
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut cr, &mut sw).await;
            });
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut sr, &mut cw).await;
                tokio::time::sleep(linger).await;
                drop(cw);
            });
        }
    });
    port
}

/// A pooled connection whose backend was terminated mid-statement (`57P01`, as in a restart)
/// goes back to the pool before its client has seen the socket close; the pool must not hand
/// it out again: the next statement, on a pool of one, runs on a new connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminated_backend_is_not_handed_out_again() {
    let tdb = actiond_testkit::TestDb::new().await;
    let cfg: tokio_postgres::Config = tdb.url.parse().unwrap();
    let host = match &cfg.get_hosts()[0] {
        tokio_postgres::config::Host::Tcp(h) => h.clone(),
        other => panic!("the test server must be reached over TCP, not {other:?}"),
    };
    let port = lingering_proxy(
        format!("{host}:{}", cfg.get_ports()[0]),
        Duration::from_secs(2),
    )
    .await;
    let url = format!(
        "postgres://{}@127.0.0.1:{port}/{}?application_name=pool-under-test",
        cfg.get_user().unwrap(),
        tdb.name
    );
    let db = actiond_store::Db::connect(&url, 1).unwrap();
    let c = db.client().await.unwrap();
    let pid: i32 = c
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    let admin = tdb.superuser().await;
    let terminate = async {
        // Once the backend runs the query, not before: the kill must land inside it.
        actiond_testkit::wait_until(Duration::from_secs(10), "pg_sleep running", || async {
            admin
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND query LIKE '%pg_sleep(30)%' AND state = 'active'",
                    &[&pid],
                )
                .await
                .unwrap()
                .get::<_, i64>(0)
                == 1
        })
        .await;
        admin
            .execute("SELECT pg_terminate_backend($1)", &[&pid])
            .await
            .unwrap();
    };
    let (failed, ()) = tokio::join!(c.query_one("SELECT pg_sleep(30)", &[]), terminate);
    let e = actiond_store::StoreError::from(failed.unwrap_err());
    assert!(e.is_unavailable(), "{}", e.detail());
    drop(c);
    let started = std::time::Instant::now();
    let c = db.client().await.unwrap();
    let next: Result<i32, _> = c
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .map(|r| r.get(0));
    let next = next.unwrap_or_else(|e| {
        panic!(
            "the pool handed out the terminated connection again: {}",
            actiond_store::StoreError::from(e).detail()
        )
    });
    assert_ne!(next, pid);
    eprintln!("new connection after {:?}", started.elapsed());
}

/// Submits `body` with Idempotency-Key `key` as docs/agents.md tells agents to: a 503 (Postgres
/// cannot serve now) is sent again with the same key after a pause. Returns the proposal id
/// and how many 503s it took.
async fn submit_retrying(s: &Stack, body: &str, key: &str) -> (uuid::Uuid, u32) {
    let deadline = tokio::time::Instant::now() + T;
    let mut unavailable = 0;
    loop {
        let resp = s
            .http
            .post(format!("{}/v1/proposals", s.api_url))
            .bearer_auth(&s.token)
            .header("content-type", "application/json")
            .header("idempotency-key", key)
            .body(body.to_owned())
            .timeout(Duration::from_secs(30))
            .send()
            .await
            .unwrap_or_else(|e| panic!("submission {key}: the api did not answer: {e}"));
        let status = resp.status().as_u16();
        let retry_after = resp.headers().contains_key("retry-after");
        let text = resp.text().await.unwrap();
        match status {
            202 => {
                let v: serde_json::Value = serde_json::from_str(&text).unwrap();
                return (
                    v["proposal_id"].as_str().unwrap().parse().unwrap(),
                    unavailable,
                );
            }
            503 => {
                assert!(retry_after, "503 without Retry-After: {text}");
                assert!(text.contains("unavailable"), "{text}");
                unavailable += 1;
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "submission {key} still 503 after {T:?}: {text}"
                );
                actiond_testkit::poll_pause(Duration::from_millis(100)).await;
            }
            _ => panic!("submission {key}: {status} {text}"),
        }
    }
}

/// The `/readyz` URL of each service, from the address its start line logs (`admin=…`).
async fn readyz_urls(s: &Stack) -> Vec<(String, String)> {
    let mut urls = Vec::new();
    for svc in &s.services {
        let addr = actiond_testkit::eventually(T, "admin address in the log", || {
            let log = svc.log_text();
            async move {
                let at = log.find(" admin=")? + " admin=".len();
                let addr = log[at..].split_whitespace().next()?.to_owned();
                Some(addr)
            }
        })
        .await;
        urls.push((svc.role.clone(), format!("http://{addr}/readyz")));
    }
    urls
}

/// How long the receiver takes to answer a webhook ping on the slow path.
const SLOW: Duration = Duration::from_millis(300);

/// Takes the private server down in the background: `pg_ctl restart -m <mode>` when `down_for`
/// is zero, else `pg_ctl stop -m <mode>`, `down_for`, `pg_ctl start`. Ends once it accepts
/// connections again.
#[expect(
    clippy::disallowed_methods,
    reason = "the outage's length is what the test varies"
)]
fn outage(pg: &Arc<PgCluster>, mode: StopMode, down_for: Duration) -> tokio::task::JoinHandle<()> {
    let pg = pg.clone();
    tokio::task::spawn_blocking(move || {
        let t = std::time::Instant::now();
        if down_for.is_zero() {
            pg.restart(mode);
        } else {
            pg.stop(mode);
            std::thread::sleep(down_for);
            pg.start_again();
        }
        eprintln!("Postgres down ({mode:?}) and up again in {:?}", t.elapsed());
    })
}

/// Submits a webhook ping to the slow path (the receiver answers after `slow_delay`) and waits
/// until its request is at the receiver: its handler is running. Returns its provider-call
/// marker and id.
async fn ping_in_flight(s: &Stack, n: usize) -> (String, uuid::Uuid) {
    let tag = format!("ping-{n}");
    let body = format!(
        r#"{{"action":"webhook.post","params":{{"body":{{"kind":"ping","seq":"{tag}"}}}}}}"#
    );
    let (id, _) = submit_retrying(s, &body, &tag).await;
    let marker = format!("\"{tag}\"");
    actiond_testkit::eventually(T, "the ping's request at the receiver", || {
        let seen = s
            .recv
            .requests()
            .iter()
            .any(|r| String::from_utf8_lossy(&r.body).contains(&marker));
        async move { seen.then_some(()) }
    })
    .await;
    (marker, id)
}

/// A whole Postgres restart under the running api, policy and executor, twice, while an agent
/// submits a steady stream of allow-path refunds and retries 503s with the same
/// Idempotency-Key: `pg_ctl restart -m fast` with a webhook's handler running, then
/// `-m immediate` (crash recovery) with the server kept down until that handler has returned,
/// and longer than the executor's lease margin, so its outcome is recorded only after the
/// server is back. Every accepted proposal succeeds
/// exactly once with the four allow-path events in order, no service exits, and every
/// service's `/readyz` answers 200 again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(
    clippy::disallowed_methods,
    reason = "paces submissions across the outage: their spread in time is the subject"
)]
async fn postgres_restart_under_load_loses_nothing() {
    let pg = Arc::new(PgCluster::start());
    let mut s = Stack::with(
        "postgres_restart_under_load",
        Options {
            server: Some(pg.admin_url()),
            webhook_path: "slow-hook",
            slow_delay: SLOW,
            ..Options::default()
        },
    )
    .await;
    let readyz = readyz_urls(&s).await;
    let (mut ids, mut unavailable) = (Vec::new(), 0);
    let mut restarting: Option<tokio::task::JoinHandle<()>> = None;
    for i in 0..60usize {
        if i == 15 || i == 40 {
            if let Some(r) = restarting.take() {
                r.await.unwrap();
            }
            ids.push(ping_in_flight(&s, i).await);
            restarting = Some(if i == 15 {
                outage(&pg, StopMode::Fast, Duration::ZERO)
            } else {
                // Down past the handler's return, and for longer than the lease margin (1 s in
                // these tests) though well within its lease (the webhook's 4 s timeout + 1 s).
                outage(&pg, StopMode::Immediate, SLOW + Duration::from_millis(1500))
            });
        }
        let body = refund(&format!("pi_pr{i}"), 100 + i as i64);
        let (id, n) = submit_retrying(&s, &body, &format!("restart-{i}")).await;
        unavailable += n;
        ids.push((refund_marker("pr", i), id));
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    restarting.take().unwrap().await.unwrap();
    eprintln!(
        "{} proposals accepted, {unavailable} answers were 503",
        ids.len()
    );
    assert_each_ran_once(&s, &ids).await;
    for svc in &mut s.services {
        let exited = svc.child.try_wait().unwrap();
        assert!(
            exited.is_none(),
            "{} exited ({exited:?}):\n{}",
            svc.role,
            svc.log_text()
        );
    }
    for (role, url) in &readyz {
        actiond_testkit::eventually(T, &format!("{role} /readyz 200"), || {
            let (h, u) = (s.http.clone(), url.clone());
            async move {
                let r = h.get(&u).send().await.ok()?;
                (r.status() == 200).then_some(())
            }
        })
        .await;
    }
}

/// Small pools as an attack on the executor's one-transaction claim batch: a batch holds its
/// pooled connection from the claim to the commit, while the next batch, the outcome writer,
/// the preview worker and the sweeper wait for one. With a pool of one connection, then of
/// two, and a small batch so that many batches queue for the connection, each proposal of a
/// burst still runs exactly once and none is left behind: no deadlock, and no pool timeout
/// turned into a lost or repeated run. Each executor logs no claim or recording failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executors_with_pools_of_one_and_two_connections_run_each_proposal_once() {
    let mut s = Stack::with(
        "small_pools",
        Options {
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let mut ids = Vec::new();
    for (round, pool) in ["1", "2"].into_iter().enumerate() {
        // The burst waits in `approved` before the executor starts, so its first claims are
        // full batches back to back.
        for i in round * 30..(round + 1) * 30 {
            let id = s
                .propose(&refund(&format!("pi_sp{i}"), 100 + i as i64))
                .await;
            ids.push((refund_marker("sp", i), id));
        }
        for (_, id) in &ids[round * 30..] {
            s.wait_state(*id, "approved", T).await;
        }
        let name = format!("exec-pool{pool}");
        let mut env = s.executor_env(&name).await;
        env.push(("ACTIOND_EXECUTOR_POOL_SIZE", pool.into()));
        env.push(("ACTIOND_EXECUTOR_BATCH", "3".into()));
        env.push(("ACTIOND_EXECUTOR_CONCURRENCY", "12".into()));
        let mut exec = Service::spawn("executor", &name, &[], &env, &s.logs);
        for (_, id) in &ids[round * 30..] {
            s.wait_state(*id, "succeeded", T).await;
        }
        exec.terminate();
        let log = exec.log_text();
        for failure in [
            "claim failed",
            "claim batch failed",
            "checking failed",
            "spending failed",
            "recording failed",
        ] {
            assert!(
                !log.contains(failure),
                "pool of {pool}: the executor logged {failure:?}:\n{log}"
            );
        }
    }
    s.start_executor("exec-sentinel").await;
    assert_each_ran_once(&s, &ids).await;
}
