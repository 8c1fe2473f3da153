//! The effect, read back (issue 34): after a refund runs, the executor lists the payment's
//! refunds at the billing sink and records the one its grant made (`proposal.effect`); a
//! refund the provider holds otherwise ends `effect_mismatch`; and an executor killed between
//! the spend and the outcome leaves `outcome_unknown`, which another executor settles by
//! reading the provider back under the grant, never by a second run. DNS read-backs against a
//! real PowerDNS are in `handlers.rs`.

use crate::handlers::effect_of;
use crate::support::{Options, Stack, refund};
use actiond_testkit::{Service, cli, eventually};
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
