//! Restarts as attacks: no proposal, decision or audit event is lost or duplicated when a
//! service is killed with -9 while proposals flow.

use crate::support::{ALLOW_PATH_KINDS, Stack, refund};
use std::time::Duration;

/// Generous: the machine running these tests may be loaded.
const T: Duration = Duration::from_secs(60);

/// Asserts that each of `ids` (paid with `pi_<tag><i>`) succeeded exactly once: one event of
/// each kind of the allow path and one provider call.
async fn assert_each_ran_once(s: &Stack, ids: &[(usize, uuid::Uuid)], tag: &str) {
    for &(_, id) in ids {
        s.wait_state(id, "succeeded", T).await;
    }
    // A later proposal has run, so any duplicate run of an earlier one has too; then count.
    s.sentinel().await;
    let calls = s.calls();
    for &(i, id) in ids {
        assert_eq!(
            s.audit_kind_names(id).await,
            ALLOW_PATH_KINDS,
            "proposal {i} ({id})"
        );
        let payment = format!("pi_{tag}{i}&");
        let n = calls
            .iter()
            .filter(|c| String::from_utf8_lossy(&c.body).contains(&payment))
            .count();
        assert_eq!(n, 1, "provider calls for proposal {i} ({id})");
    }
    assert_eq!(calls.len(), ids.len(), "no other provider call");
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
            ids.push((i, id));
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
    assert_each_ran_once(&s, &ids, "pk").await;
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
            tokio::time::sleep(Duration::from_millis(20)).await;
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
    // The api recovered on its own: a new connection replaces the terminated one.
    let id = s.propose(&refund("pi_bt2", 102)).await;
    s.wait_state(id, "succeeded", T).await;
}
