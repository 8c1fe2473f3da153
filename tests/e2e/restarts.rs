//! Restarts as attacks: no proposal, decision or audit event is lost or duplicated when a
//! service is killed with -9 while proposals flow.

use crate::support::{Stack, refund};
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
        let kinds: Vec<String> = s.audit_kinds(id).await.into_iter().map(|k| k.0).collect();
        assert_eq!(
            kinds,
            [
                "proposal.submitted",
                "proposal.decided",
                "grant.spent",
                "proposal.executed"
            ],
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
