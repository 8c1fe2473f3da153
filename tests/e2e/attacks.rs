//! Security rules tested as attacks: replayed grant, expired grant, tampered params, reordered
//! keys, truncated signature, a grant from a key the executor does not trust.

use crate::support::{Options, Stack, refund};
use actiond_core::grant::{GRANT_VERSION, GrantClaims};
use actiond_testkit::cli;
use std::time::Duration;

const T: Duration = Duration::from_secs(20);

/// The database clock in microseconds since the epoch, as grant expiries are computed.
async fn db_now_us(c: &tokio_postgres::Client) -> i64 {
    c.query_one(
        &format!("SELECT {}", actiond_store::grants::NOW_US_SQL),
        &[],
    )
    .await
    .unwrap()
    .get(0)
}

/// Puts a finished proposal back to `approved` as a database superuser would (bypassing the
/// transition trigger), so the executor is shown its spent grant again.
async fn rewind_to_approved(s: &Stack, id: uuid::Uuid) {
    let c = s.tdb.superuser().await;
    c.batch_execute("SET session_replication_role = replica")
        .await
        .unwrap();
    c.execute(
        "UPDATE proposals SET state = 'approved', outcome = NULL, lease_owner = NULL, lease_until = NULL WHERE id = $1",
        &[&id],
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replayed_grant_is_refused() {
    let s = Stack::new("replayed_grant_is_refused").await;
    let id = s.propose(&refund("pi_r", 1000)).await;
    s.wait_state(id, "succeeded", T).await;
    assert_eq!(s.recv.count(), 1);
    rewind_to_approved(&s, id).await;
    s.wait_state(id, "blocked", T).await;
    s.sentinel().await;
    assert_eq!(s.calls().len(), 1, "the replay did not run");
    let row = s.row(id).await;
    assert_eq!(
        row.get::<_, Option<String>>(1).as_deref(),
        Some("this approval was already used; nothing ran")
    );
    let events = s.audit_kinds(id).await;
    let last = events.last().unwrap();
    assert_eq!(last.0, "grant.rejected");
    assert_eq!(last.1["reason"], "replayed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_grant_ends_expired_without_executing() {
    let s = Stack::new("expired_grant_ends_expired").await;
    let id = s.propose(&refund("pi_e", 12000)).await;
    s.wait_state(id, "escalated", T).await;
    // An approval whose grant expired a second ago (signed by a trusted key, so only the
    // expiry is wrong).
    let c = s.tdb.superuser().await;
    let row = s.row(id).await;
    let intent: String = row.get(3);
    let now_us = db_now_us(&c).await;
    let claims = GrantClaims {
        version: GRANT_VERSION,
        id: uuid::Uuid::new_v4(),
        proposal_id: id,
        tenant_id: "acme".into(),
        intent_hash: intent.clone(),
        doc_version: 1,
        expires_at: now_us - 1_000_000,
        key_id: "breakglass-1".into(),
        preview_sha256: None,
        doc_sha256: None,
    };
    let sig = s.keys.breakglass.sign(&claims).unwrap();
    c.execute(
        "INSERT INTO grants (id, proposal_id, tenant_id, intent_hash, doc_version, expires_at_us, key_id, sig, issued_by)
         VALUES ($1, $2, 'acme', $3, 1, $4::bigint, 'breakglass-1', $5, 'alice')",
        &[&claims.id, &id, &intent, &claims.expires_at, &sig],
    )
    .await
    .unwrap();
    c.execute(
        "UPDATE proposals SET state = 'approved' WHERE id = $1",
        &[&id],
    )
    .await
    .unwrap();
    s.wait_state(id, "expired", T).await;
    s.sentinel().await;
    assert_eq!(s.calls().len(), 0);
    let used: Option<String> = c
        .query_one("SELECT used_by FROM grants WHERE id = $1", &[&claims.id])
        .await
        .unwrap()
        .get(0);
    assert_eq!(used, None, "an expired grant is never spent");
    let (_, v) = s.get(&s.token, &id.to_string(), "").await;
    assert_eq!(v["state"], "expired");
}

/// Approves the escalated proposal `id` as a superuser would, with a grant signed by the
/// trusted break-glass key that expires at `expires_at_us` (microseconds since the epoch).
/// Returns the grant's id.
async fn approve_with_signed_grant(s: &Stack, id: uuid::Uuid, expires_at_us: i64) -> uuid::Uuid {
    let claims = breakglass_claims(s, id, expires_at_us).await;
    approve_with_claims(s, &claims).await;
    claims.id
}

/// The claims a break-glass approval of proposal `id` signs: its stored intent hash, version 1
/// of acme's document (no `doc_sha256`, no preview), expiring at `expires_at_us`.
async fn breakglass_claims(s: &Stack, id: uuid::Uuid, expires_at_us: i64) -> GrantClaims {
    GrantClaims {
        version: GRANT_VERSION,
        id: uuid::Uuid::new_v4(),
        proposal_id: id,
        tenant_id: "acme".into(),
        intent_hash: s.row(id).await.get(3),
        doc_version: 1,
        expires_at: expires_at_us,
        key_id: "breakglass-1".into(),
        preview_sha256: None,
        doc_sha256: None,
    }
}

/// Stores `claims`, signed by the trusted break-glass key, as the grant of their proposal and
/// moves it to `approved`, as the database's owner can.
async fn approve_with_claims(s: &Stack, claims: &GrantClaims) {
    let c = s.tdb.superuser().await;
    let sig = s.keys.breakglass.sign(claims).unwrap();
    c.execute(
        "INSERT INTO grants (id, proposal_id, tenant_id, intent_hash, doc_version, expires_at_us, key_id, sig, issued_by, doc_sha256)
         VALUES ($1, $2, 'acme', $3, $4, $5, 'breakglass-1', $6, 'alice', $7)",
        &[
            &claims.id,
            &claims.proposal_id,
            &claims.intent_hash,
            &claims.doc_version,
            &claims.expires_at,
            &sig,
            &claims.doc_sha256,
        ],
    )
    .await
    .unwrap();
    c.execute(
        "UPDATE proposals SET state = 'approved' WHERE id = $1",
        &[&claims.proposal_id],
    )
    .await
    .unwrap();
}

/// A writer of the grants table cannot revive an expired, never-spent grant. Its owner (the
/// strongest such writer: it may drop V34's generation and write `expires_at` by hand) pushes
/// the expiry column a day ahead; the spend compares the expiry inside the grant the executor
/// verified with the database clock, so the proposal ends `expired`, the grant unspent and the
/// receiver uncalled. Pushing the signed value itself (`expires_at_us`) breaks the signature:
/// `blocked`, `bad_signature`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expiry_pushed_ahead_in_the_table_does_not_revive_a_grant() {
    let mut s = Stack::with(
        "expiry_pushed_ahead",
        Options {
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let c = s.tdb.superuser().await;
    let now_us = db_now_us(&c).await;
    let column = s.propose(&refund("pi_column", 12000)).await;
    let signed = s.propose(&refund("pi_signed", 13000)).await;
    s.wait_state(signed, "escalated", T).await;
    let column_grant = approve_with_signed_grant(&s, column, now_us - 1_000_000).await;
    let signed_grant = approve_with_signed_grant(&s, signed, now_us - 1_000_000).await;
    // `expires_at` is generated from the signed value: not even the owner writes it as it is.
    let e = c
        .execute(
            "UPDATE grants SET expires_at = now() + interval '1 day' WHERE id = $1",
            &[&column_grant],
        )
        .await
        .expect_err("the generated expiry column was written");
    assert_eq!(
        e.code(),
        Some(&tokio_postgres::error::SqlState::GENERATED_ALWAYS),
        "{e:?}"
    );
    // The owner drops the generation and writes it anyway; and pushes the signed value of
    // the other grant.
    c.batch_execute("ALTER TABLE grants ALTER COLUMN expires_at DROP EXPRESSION")
        .await
        .unwrap();
    c.execute(
        "UPDATE grants SET expires_at = now() + interval '1 day' WHERE id = $1",
        &[&column_grant],
    )
    .await
    .unwrap();
    c.execute(
        "UPDATE grants SET expires_at_us = expires_at_us + 86400000000 WHERE id = $1",
        &[&signed_grant],
    )
    .await
    .unwrap();
    s.start_executor("exec-1").await;
    s.wait_state(column, "expired", T).await;
    s.wait_state(signed, "blocked", T).await;
    s.sentinel().await;
    assert!(s.calls().is_empty(), "{:?}", s.calls());
    for g in [column_grant, signed_grant] {
        let used: Option<String> = c
            .query_one("SELECT used_by FROM grants WHERE id = $1", &[&g])
            .await
            .unwrap()
            .get(0);
        assert_eq!(used, None, "a revived grant was spent");
    }
    let (kind, detail) = s.audit_kinds(signed).await.pop().unwrap();
    assert_eq!(
        (kind.as_str(), &detail["reason"]),
        ("grant.rejected", &serde_json::json!("bad_signature")),
        "{detail}"
    );
    // The sweeper (`grant.expired`) or the executor's spend (`grant.rejected`, `expired`)
    // ends it, whichever comes first.
    let (kind, detail) = s.audit_kinds(column).await.pop().unwrap();
    assert!(
        kind == "grant.expired" || (kind == "grant.rejected" && detail["reason"] == "expired"),
        "{kind} {detail}"
    );
    let (_, v) = s.get(&s.token, &column.to_string(), "").await;
    assert_eq!(v["state"], "expired", "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn params_tampered_after_approval_are_refused() {
    let mut s = Stack::with(
        "params_tampered_after_approval",
        Options {
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let id = s.propose(&refund("pi_t", 12000)).await;
    s.wait_state(id, "escalated", T).await;
    s.approve_as_alice(id).await;
    s.wait_state(id, "approved", T).await;
    // Someone with database access raises the amount after the approval.
    let c = s.tdb.superuser().await;
    let err = c
        .execute("UPDATE proposals SET params_json = '{\"amount\":99999,\"currency\":\"USD\",\"payment_id\":\"pi_t\"}' WHERE id = $1", &[&id])
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("immutable") || format!("{err:?}").contains("immutable"),
        "the trigger refuses it first: {err:?}"
    );
    c.batch_execute("SET session_replication_role = replica")
        .await
        .unwrap();
    c.execute("UPDATE proposals SET params_json = '{\"amount\":99999,\"currency\":\"USD\",\"payment_id\":\"pi_t\"}' WHERE id = $1", &[&id])
        .await
        .unwrap();
    s.start_executor("exec-late").await;
    s.wait_state(id, "blocked", T).await;
    let row = s.row(id).await;
    assert_eq!(
        row.get::<_, Option<String>>(1).as_deref(),
        Some("grant does not match this proposal")
    );
    s.sentinel().await;
    assert_eq!(s.calls().len(), 0);
}

/// `sig` (64 bytes, R ‖ S) with S + ℓ in place of S, ℓ the Ed25519 group order (RFC 8032
/// section 5.1): a signature that satisfies the same curve equation but that RFC 8032's
/// decoding refuses.
fn plus_ell(sig: &[u8]) -> Vec<u8> {
    const ELL: [u8; 32] = [
        0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde,
        0x14, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
    ];
    let mut out = sig.to_vec();
    let mut carry = 0u16;
    for (i, l) in ELL.iter().enumerate() {
        let sum = u16::from(out[32 + i]) + u16::from(*l) + carry;
        out[32 + i] = sum as u8;
        carry = sum >> 8;
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncated_or_foreign_signatures_are_refused_without_a_panic() {
    let mut s = Stack::with(
        "truncated_signatures",
        Options {
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let a = s.propose(&refund("pi_a", 1000)).await;
    let b = s.propose(&refund("pi_b", 1000)).await;
    let d = s.propose(&refund("pi_d", 1000)).await;
    let e = s.propose(&refund("pi_e", 1000)).await;
    let f = s.propose(&refund("pi_f", 1000)).await;
    let m = s.propose(&refund("pi_m", 1000)).await;
    // Two good grants, claimed in the same batch as the bad ones: the executor verifies a
    // batch's signatures together, and a bad one must cost only itself.
    let good = [
        s.propose(&refund("pi_g1", 1000)).await,
        s.propose(&refund("pi_g2", 1000)).await,
    ];
    for id in [a, b, d, e, f, m].into_iter().chain(good) {
        s.wait_state(id, "approved", T).await;
    }
    let c = s.tdb.superuser().await;
    c.execute(
        "UPDATE grants SET sig = substring(sig from 1 for 63) WHERE proposal_id = $1",
        &[&a],
    )
    .await
    .unwrap();
    c.execute(
        "UPDATE grants SET sig = ''::bytea WHERE proposal_id = $1",
        &[&b],
    )
    .await
    .unwrap();
    // A grant signed by a key the executor does not trust, for an intent it otherwise matches.
    c.execute(
        "UPDATE grants SET key_id = 'policy-9' WHERE proposal_id = $1",
        &[&d],
    )
    .await
    .unwrap();
    // A full-length signature with one bit of S flipped.
    c.execute(
        "UPDATE grants SET sig = set_byte(sig, 63, get_byte(sig, 63) # 1) WHERE proposal_id = $1",
        &[&e],
    )
    .await
    .unwrap();
    // An approved row without its grant, between rows with grants: each row must get its
    // own grant's answer.
    c.batch_execute("SET session_replication_role = replica")
        .await
        .unwrap();
    c.execute("DELETE FROM grants WHERE proposal_id = $1", &[&f])
        .await
        .unwrap();
    c.batch_execute("SET session_replication_role = DEFAULT")
        .await
        .unwrap();
    // S + ℓ: the same curve equation, a non-canonical S (signature malleability).
    let sig: Vec<u8> = c
        .query_one("SELECT sig FROM grants WHERE proposal_id = $1", &[&m])
        .await
        .unwrap()
        .get(0);
    c.execute(
        "UPDATE grants SET sig = $2 WHERE proposal_id = $1",
        &[&m, &plus_ell(&sig)],
    )
    .await
    .unwrap();
    let idx = s.start_executor("exec-sig").await;
    for id in good {
        s.wait_state(id, "succeeded", T).await;
    }
    for id in [a, b, d, e, m] {
        s.wait_state(id, "blocked", T).await;
        assert_eq!(
            s.row(id).await.get::<_, Option<String>>(1).as_deref(),
            Some("the grant for this proposal was refused")
        );
    }
    s.wait_state(f, "blocked", T).await;
    assert_eq!(
        s.row(f).await.get::<_, Option<String>>(1).as_deref(),
        Some("no grant exists for this proposal")
    );
    assert_eq!(s.recv.count(), 2, "only the two good grants ran");
    assert!(
        s.services[idx].child.try_wait().unwrap().is_none(),
        "the executor is still running"
    );
    // One claim took all eight (the executor's default batch is 16): the three grants that
    // reach the signature check (the two good ones and the flipped S) failed as a batch, so
    // each was verified on its own.
    assert_eq!(signatures_verified(&mut s, idx).await, (0, 0, 3));
    let reasons: Vec<String> =
        futures_util::future::join_all([a, b, d, e, m, f].map(|id| s.audit_kinds(id)))
            .await
            .into_iter()
            .map(|ev| ev.last().unwrap().1["reason"].as_str().unwrap().to_owned())
            .collect();
    assert_eq!(
        reasons,
        [
            "bad_signature",
            "bad_signature",
            "untrusted_key",
            "bad_signature",
            "bad_signature",
            "missing"
        ]
    );
}

/// `actiond_grant_signatures_verified_total` of executor `idx`: (batch, single, fallback).
async fn signatures_verified(s: &mut Stack, idx: usize) -> (u64, u64, u64) {
    let url = format!("{}/metrics", s.services[idx].url("admin").await);
    let text = s.http.get(&url).send().await.unwrap().text().await.unwrap();
    let count = |method: &str| {
        let prefix = format!("actiond_grant_signatures_verified_total{{method=\"{method}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .unwrap_or_else(|| panic!("no {prefix} in {text}"))
            .parse()
            .unwrap()
    };
    (count("batch"), count("single"), count("fallback"))
}

/// The batch path is taken: good grants claimed together are verified by one batch
/// verification, none on its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn good_grants_claimed_together_are_verified_as_one_batch() {
    let mut s = Stack::with(
        "signature_batch",
        Options {
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(s.propose(&refund(&format!("pi_batch{i}"), 1000)).await);
    }
    for id in &ids {
        s.wait_state(*id, "approved", T).await;
    }
    // The executor starts once all five are approved, so its first claim (its default batch
    // is 16) takes them together.
    let idx = s.start_executor("exec-batch").await;
    for id in &ids {
        s.wait_state(*id, "succeeded", T).await;
    }
    assert_eq!(signatures_verified(&mut s, idx).await, (5, 0, 0));
}

/// A small-order public key among the trusted keys (here 32 zero bytes: y = 0, a point of
/// order 4) would let anyone forge grants in a few tries: the executor refuses to start,
/// naming the file and the rule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_order_trusted_key_stops_the_executor_at_start() {
    use base64::Engine as _;
    let s = Stack::with(
        "weak_trusted_key",
        Options {
            executor: false,
            ..Options::default()
        },
    )
    .await;
    // Under the stack's key directory, which is removed when the stack drops, pass or fail.
    let dir = s.keys.dir.join("weak_trusted_keys");
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(s.keys.executor_dir.join("trusted_keys")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
    }
    let weak = base64::engine::general_purpose::STANDARD.encode([0u8; 32]);
    std::fs::write(dir.join("policy-weak.pub"), weak).unwrap();
    let mut env = s.executor_env("exec-weak").await;
    env.push((
        "ACTIOND_EXECUTOR_TRUSTED_KEYS_DIR",
        dir.display().to_string(),
    ));
    let mut child = std::process::Command::new(actiond_testkit::actiond_bin())
        .arg("executor")
        .env_remove("CREDENTIALS_DIRECTORY")
        .envs(env)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("the executor is still running with a small-order trusted key");
        }
        actiond_testkit::poll_pause(Duration::from_millis(100)).await;
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains("policy-weak.pub") && stderr.contains("prime-order subgroup"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_changed_since_approval_blocks() {
    let mut s = Stack::with(
        "policy_changed_since_approval",
        Options {
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let id = s.propose(&refund("pi_p", 12000)).await;
    s.wait_state(id, "escalated", T).await;
    s.approve_as_alice(id).await;
    s.wait_state(id, "approved", T).await;
    // The tenant now blocks large refunds outright.
    let doc = crate::support::TENANT
        .replace("RECEIVER", &s.recv.url)
        .replace("WEBHOOK_PATH", "hook")
        .replace(
            "effect: escalate\n      reason: Refunds over 50.00 need a person.",
            "effect: block\n      reason: Large refunds are frozen.",
        );
    actiond_store::tenants::apply(&s.tdb.db, &doc, "test")
        .await
        .unwrap();
    s.start_executor("exec-pc").await;
    s.wait_state(id, "blocked", T).await;
    assert_eq!(
        s.row(id).await.get::<_, Option<String>>(1).as_deref(),
        Some("policy changed since approval")
    );
    assert_eq!(s.recv.count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reordered_keys_give_the_same_intent() {
    let s = Stack::new("reordered_keys_give_the_same_intent").await;
    let a = r#"{"action":"dns.record.update","params":{"zone":"prod.example.com","ttl":300,"name":"www.prod.example.com","type":"A","records":["192.0.2.1"]}}"#;
    let b = r#"{"params":{"records":["192.0.2.1"],"type":"A","name":"www.prod.example.com","ttl":300,"zone":"prod.example.com"},"action":"dns.record.update"}"#;
    let (st1, v1) = s.post(a, None).await;
    let (st2, v2) = s.post(b, None).await;
    assert_eq!((st1, st2), (202, 202), "{v1} {v2}");
    assert_eq!(
        v1["proposal_id"], v2["proposal_id"],
        "the same open intent is returned"
    );
    let id: uuid::Uuid = v1["proposal_id"].as_str().unwrap().parse().unwrap();
    let row = s.row(id).await;
    let params: String = row.get(4);
    assert_eq!(
        params,
        r#"{"name":"www.prod.example.com","records":["192.0.2.1"],"ttl":300,"type":"A","zone":"prod.example.com"}"#
    );
    let c = s.tdb.db.client().await.unwrap();
    let n: i64 = c
        .query_one("SELECT count(*) FROM proposals", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn break_glass_supplies_at_most_one_of_n_approvals() {
    // `--as` is self-asserted, so one operator could otherwise claim two subjects.
    let s = Stack::with(
        "break_glass_one_of_n",
        Options {
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let doc = crate::support::TENANT
        .replace("RECEIVER", &s.recv.url)
        .replace("WEBHOOK_PATH", "hook")
        .replace(
            "    max_amount: 100000\n",
            "    max_amount: 100000\n    approvals_required: 2\n",
        );
    actiond_store::tenants::apply(&s.tdb.db, &doc, "test")
        .await
        .unwrap();
    let id = s.propose(&refund("pi_two", 12000)).await;
    s.wait_state(id, "escalated", T).await;
    let intent: String = s.row(id).await.get(3);
    let env = s.cli_env().await;
    let (ok, out, err) = cli(
        &[
            "approvals",
            "approve",
            &id.to_string(),
            "--as",
            "alice",
            "--intent",
            &intent[..16],
        ],
        &env,
    );
    assert!(ok && out.contains("1 of 2"), "{out}{err}");
    let (ok, _, err) = cli(
        &[
            "approvals",
            "approve",
            &id.to_string(),
            "--as",
            "bob",
            "--intent",
            &intent[..16],
        ],
        &env,
    );
    assert!(!ok, "a second break-glass approval must be refused");
    assert!(
        err.contains("break-glass can supply only one approval per proposal"),
        "{err}"
    );
    assert_eq!(s.state(id).await, "escalated");
    let c = s.tdb.db.client().await.unwrap();
    let grants: i64 = c
        .query_one("SELECT count(*) FROM grants WHERE proposal_id = $1", &[&id])
        .await
        .unwrap()
        .get(0);
    assert_eq!(grants, 0);
}

/// A stack without an executor and four refunds that policy approved, in submission order:
/// rows for a test to claim and spend itself.
async fn four_approved_refunds(name: &str, payment_prefix: &str) -> (Stack, Vec<uuid::Uuid>) {
    let s = Stack::with(
        name,
        Options {
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let mut ids = Vec::new();
    for i in 0..4 {
        let id = s
            .propose(&refund(&format!("{payment_prefix}_{i}"), 100))
            .await;
        s.wait_state(id, "approved", T).await;
        ids.push(id);
    }
    (s, ids)
}

/// The executor's claim locks its rows for its transaction and writes nothing: two executors
/// claiming at once get disjoint rows, the rows keep their row version (no lease UPDATE), and
/// an executor whose transaction ends without a spend (it died, or its checks failed) leaves
/// its rows to the next claim at once, still `approved` with their grants unspent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_lock_rows_without_writing_and_a_dead_claim_frees_them_at_once() {
    use actiond_store::executor_queue;
    let (s, ids) = four_approved_refunds("claim_locks", "pi_claim").await;
    let su = s.tdb.superuser().await;
    let versions = || async {
        su.query(
            "SELECT id, xmin::text FROM proposals WHERE id = ANY($1) ORDER BY id",
            &[&ids],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get::<_, uuid::Uuid>(0), r.get::<_, String>(1)))
        .collect::<Vec<_>>()
    };
    let before = versions().await;
    let db = actiond_store::Db::connect(&s.tdb.role_url("executor").await, 4).unwrap();
    let (mut c1, mut c2) = (db.client().await.unwrap(), db.client().await.unwrap());
    let t1 = c1.transaction().await.unwrap();
    let t2 = c2.transaction().await.unwrap();
    let a = executor_queue::claim(&t1, 3).await.unwrap();
    let b = executor_queue::claim(&t2, 10).await.unwrap();
    assert_eq!(a.len(), 3);
    assert_eq!(
        b.len(),
        1,
        "the second claim skips the rows the first one holds"
    );
    assert!(a.iter().all(|r| r.id != b[0].id));
    // The first executor's transaction ends without a spend (as when it dies: Postgres
    // ends the transaction of a lost connection).
    t1.rollback().await.unwrap();
    let again = executor_queue::claim(&t2, 10).await.unwrap();
    let mut got: Vec<_> = again.iter().map(|r| r.id).collect();
    got.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(
        got, want,
        "rows of an ended claim are claimable at once (with the one this claim already holds)"
    );
    t2.rollback().await.unwrap();
    assert_eq!(versions().await, before, "a claim writes no row version");
    let unspent: i64 = su
        .query_one(
            "SELECT count(*) FROM grants WHERE proposal_id = ANY($1) AND used_at IS NULL",
            &[&ids],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(unspent, 4);
}

/// One claim batch spent in one statement holds each row to the single-spend rules on its
/// own: of four proposals, the one still `approved` with a live unspent grant starts; one that
/// left `approved` after an earlier claim saw it, a spent grant (replay) and an expired grant
/// start nothing, spend nothing and write no event. Outcomes recorded together likewise move
/// only the rows this executor runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batched_spend_refuses_replay_expiry_and_moved_rows_row_by_row() {
    use actiond_core::state::ProposalState;
    use actiond_store::executor_queue::{self, Finish, Spend, StartRequest};
    let (s, ids) = four_approved_refunds("batched_spend", "pi_batch").await;
    let db = actiond_store::Db::connect(&s.tdb.role_url("executor").await, 2).unwrap();
    // An earlier claim sees all four and ends (its locks go with its transaction).
    let mut rows = {
        let mut c = db.client().await.unwrap();
        let tx = c.transaction().await.unwrap();
        let rows = executor_queue::claim(&tx, 10).await.unwrap();
        tx.commit().await.unwrap();
        rows
    };
    rows.sort_by_key(|r| ids.iter().position(|id| *id == r.id));
    assert_eq!(rows.iter().map(|r| r.id).collect::<Vec<_>>(), ids);
    let su = s.tdb.superuser().await;
    let (gone, replayed, expired) = (ids[1], ids[2], ids[3]);
    su.execute(
        "UPDATE proposals SET state = 'expired' WHERE id = $1",
        &[&gone],
    )
    .await
    .unwrap();
    su.execute(
        "UPDATE grants SET used_at = now(), used_by = 'exec-old' WHERE proposal_id = $1",
        &[&replayed],
    )
    .await
    .unwrap();
    // The expiry the spend compares is the one of the verified grant it is given: here one
    // that passed a second ago.
    let now_us = db_now_us(&su).await;
    let reqs: Vec<StartRequest<'_>> = rows
        .iter()
        .map(|r| {
            let g = r.grant.as_ref().unwrap();
            StartRequest {
                row: r,
                grant_id: g.claims.id,
                key_id: &g.claims.key_id,
                expires_at_us: if r.id == expired {
                    now_us - 1_000_000
                } else {
                    g.claims.expires_at
                },
                run_lease: Duration::from_secs(30),
            }
        })
        .collect();
    // This claim locks the three still approved; the spend names all four.
    let mut c = db.client().await.unwrap();
    let tx = c.transaction().await.unwrap();
    let locked = executor_queue::claim(&tx, 10).await.unwrap();
    assert_eq!(locked.len(), 3);
    let spends = executor_queue::spend_and_start_many(&tx, "exec-t", &reqs)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(
        spends,
        vec![
            Spend::Started,
            Spend::NoLongerApproved,
            Spend::Replayed {
                used_by: Some("exec-old".into())
            },
            Spend::Expired
        ]
    );
    let states = |ids: Vec<uuid::Uuid>| {
        let su = &su;
        async move {
            let mut out = Vec::new();
            for id in ids {
                let r = su
                    .query_one(
                        "SELECT p.state, g.used_by,
                                (SELECT count(*) FROM audit_events e WHERE e.proposal_id = p.id AND e.kind = 'grant.spent')
                         FROM proposals p JOIN grants g ON g.proposal_id = p.id WHERE p.id = $1",
                        &[&id],
                    )
                    .await
                    .unwrap();
                out.push((
                    r.get::<_, String>(0),
                    r.get::<_, Option<String>>(1),
                    r.get::<_, i64>(2),
                ));
            }
            out
        }
    };
    let s1 = states(ids.clone()).await;
    let want = |st: &str, by: Option<&str>, n: i64| (st.to_owned(), by.map(str::to_owned), n);
    assert_eq!(
        s1,
        vec![
            want("executing", Some("exec-t"), 1),
            want("expired", None, 0),
            want("approved", Some("exec-old"), 0),
            want("approved", None, 0),
        ]
    );
    let done = executor_queue::finish_many(
        &db,
        "exec-t",
        &[
            Finish {
                row: &rows[0],
                outcome: ProposalState::Succeeded,
                detail: "200",
            },
            Finish {
                row: &rows[1],
                outcome: ProposalState::Succeeded,
                detail: "200",
            },
        ],
    )
    .await
    .unwrap();
    assert_eq!(
        done,
        vec![true, false],
        "only the row this executor runs is recorded"
    );
    assert_eq!(s.state(ids[0]).await, "succeeded");
    assert_eq!(s.state(ids[1]).await, "expired");
}

/// An agent's params that make a rule slow (a quadratic comprehension over a list the agent
/// sends) cannot buy an `allow` by running the rules out of time, nor turn a `block` into an
/// `escalate` a person could approve, nor hold up the proposals decided beside it: policy
/// evaluates a batch on one blocking thread, each proposal within its budget; the slow one is
/// blocked (the tenant has a `block` rule, which the overrun cannot rule out: fail closed), and
/// the refunds claimed in the same batch before and after it are decided by their rules.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(
    clippy::disallowed_methods,
    reason = "measures the CPU policy spends in one second after deciding: the second is the measurement"
)]
async fn a_rule_made_slow_by_params_blocks_only_its_own_proposal() {
    let mut s = Stack::with(
        "slow_rule_escalates",
        Options {
            policy: false,
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let doc = crate::support::TENANT
        .replace("RECEIVER", &s.recv.url)
        .replace("WEBHOOK_PATH", "hook")
        .replace(
            "    - name: ping-webhook",
            "    - name: pairs-webhook
      when: 'action == \"webhook.post\" && has(params.body.items) && params.body.items.all(x, params.body.items.all(y, x + y >= 0))'
      effect: allow
      reason: Non-negative pairs are harmless.
    - name: ping-webhook",
        );
    actiond_store::tenants::apply(&s.tdb.db, &doc, "test")
        .await
        .unwrap();
    // About four million evaluations of `x + y >= 0`: far past the 100 ms budget.
    let items: Vec<u32> = (0..2000).collect();
    let slow_body =
        serde_json::json!({"action": "webhook.post", "params": {"body": {"items": items}}});
    let mut refunds = Vec::new();
    for i in 0..3 {
        refunds.push(s.propose(&refund(&format!("pi_sr{i}"), 100)).await);
    }
    let slow = s.propose(&slow_body.to_string()).await;
    for i in 3..6 {
        refunds.push(s.propose(&refund(&format!("pi_sr{i}"), 100)).await);
    }
    // All seven wait in `pending`, so one claim takes them as one batch.
    s.start_policy_with(vec![("ACTIOND_POLICY_EVAL_BUDGET_MS", "100".into())])
        .await;
    s.wait_state(slow, "blocked", T).await;
    let (_, v) = s.get(&s.token, &slow.to_string(), "").await;
    assert_eq!(
        v["reason"],
        "policy could not be evaluated in time, and a rule that blocks could not be ruled out",
        "{v}"
    );
    assert_eq!(
        s.row(slow).await.get::<_, Option<String>>(6).as_deref(),
        Some("evaluation-budget")
    );
    for id in refunds {
        s.wait_state(id, "approved", T).await;
    }
    // And the slow evaluation stopped at its deadline instead of running on, on a thread of
    // its own, for the seconds the whole list takes: an agent sending such params at a rate
    // would otherwise fill policy's cores with evaluations nobody waits for.
    let policy = s.services.iter().find(|p| p.role == "policy").unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = policy.cpu_time();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let used = policy.cpu_time() - before;
    assert!(
        used < Duration::from_millis(300),
        "policy used {used:?} of CPU in the second after deciding"
    );
}

/// The executor's re-check fails closed the same way: a person approved a webhook, then the
/// tenant applied a rule that this proposal's own params make slow. The re-check runs over its
/// 200 ms budget; the document has a `block` rule, so the overrun counts as `block` and the
/// person's grant is refused ("policy changed since approval"): nothing is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_whose_recheck_overruns_is_refused_and_nothing_runs() {
    let mut s = Stack::with(
        "recheck_overrun",
        Options {
            executor: false,
            ..Options::default()
        },
    )
    .await;
    // No rule matches this webhook: the tenant's default escalates it.
    let items: Vec<u32> = (0..3000).collect();
    let body = serde_json::json!({"action": "webhook.post", "params": {"body": {"items": items}}});
    let id = s.propose(&body.to_string()).await;
    s.wait_state(id, "escalated", T).await;
    s.approve_as_alice(id).await;
    s.wait_state(id, "approved", T).await;
    // About nine million evaluations for this proposal: far past the re-check's budget.
    let doc = crate::support::TENANT
        .replace("RECEIVER", &s.recv.url)
        .replace("WEBHOOK_PATH", "hook")
        .replace(
            "    - name: ping-webhook",
            "    - name: pairs-webhook
      when: 'action == \"webhook.post\" && has(params.body.items) && params.body.items.all(x, params.body.items.all(y, x + y >= 0))'
      effect: allow
      reason: Non-negative pairs are harmless.
    - name: ping-webhook",
        );
    actiond_store::tenants::apply(&s.tdb.db, &doc, "test")
        .await
        .unwrap();
    s.start_executor("exec-ro").await;
    s.wait_state(id, "blocked", T).await;
    assert_eq!(
        s.row(id).await.get::<_, Option<String>>(1).as_deref(),
        Some("policy changed since approval")
    );
    s.sentinel().await;
    assert!(s.calls().is_empty(), "nothing was sent");
}

/// The database owner rewrites the stored tenant document version an approved proposal's grant
/// names — its refund handler now takes another credential the executor holds — and keeps the
/// `sha256` column in step with the new source. The grant signed the hash of the source the
/// decision read, so the executor refuses it (`grant.rejected`, reason `document_changed`),
/// the proposal ends `blocked`, and nothing reaches the provider. Before V49 the grant named the
/// version alone and the refund ran with the rewritten settings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewritten_document_version_stops_the_grants_decided_under_it() {
    let mut s = Stack::with(
        "rewritten_document",
        Options {
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let id = s.propose(&refund("pi_doc", 1000)).await;
    s.wait_state(id, "approved", T).await;
    let c = s.tdb.superuser().await;
    let r = c
        .query_one(
            "SELECT d.version, d.source, d.sha256, g.doc_sha256 FROM grants g
             JOIN tenant_documents d ON d.tenant_id = g.tenant_id AND d.version = g.doc_version
             WHERE g.proposal_id = $1",
            &[&id],
        )
        .await
        .unwrap();
    let (version, source, stored): (i32, String, String) = (r.get(0), r.get(1), r.get(2));
    let signed: Option<String> = r.get(3);
    assert_eq!(
        signed.as_deref(),
        Some(stored.as_str()),
        "the grant signs the hash of the document it was decided under"
    );
    let rewritten = source.replace("credential: payments", "credential: hooks");
    assert_ne!(rewritten, source);
    let sha = actiond_core::canonical::sha256_hex(rewritten.as_bytes());
    c.execute(
        "UPDATE tenant_documents SET source = $1, sha256 = $2 WHERE tenant_id = 'acme' AND version = $3",
        &[&rewritten, &sha, &version],
    )
    .await
    .unwrap();

    s.start_executor("exec-doc").await;
    s.wait_state(id, "blocked", T).await;
    let events = s.audit_kinds(id).await;
    let last = events.last().unwrap();
    assert_eq!(last.0, "grant.rejected", "{events:?}");
    assert_eq!(last.1["reason"], "document_changed", "{events:?}");
    assert_eq!(last.1["detail"]["signed_doc_sha256"], stored.as_str());
    assert_eq!(last.1["detail"]["stored_doc_sha256"], sha.as_str());
    assert_eq!(
        s.row(id).await.get::<_, Option<String>>(1).as_deref(),
        Some("the approved policy document was changed after the approval; nothing ran")
    );
    assert!(!s.grant_spent(id).await, "the grant was not spent");
    assert!(s.calls().is_empty(), "{:?}", s.calls());
}

/// A holder of an approver's or break-glass key signs a grant for an escalated proposal that
/// names a later document version — one whose refund handler takes another credential the
/// executor holds — with that version's true hash, so `document_changed` does not fire. Every
/// issuer signs the version that decided the proposal (`proposals.doc_version`, which only
/// policy writes), so the executor refuses it: `grant.rejected`, reason `intent_mismatch`,
/// the proposal `blocked`, the grant unspent, nothing sent. Before, the refund ran with the
/// other version's settings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_naming_another_document_version_is_refused() {
    let s = Stack::new("grant_other_version").await;
    let id = s.propose(&refund("pi_other_version", 12000)).await;
    s.wait_state(id, "escalated", T).await;
    let c = s.tdb.superuser().await;
    let (decided, source): (Option<i32>, String) = {
        let r = c
            .query_one(
                "SELECT p.doc_version, d.source FROM proposals p
                 JOIN tenant_documents d ON d.tenant_id = p.tenant_id AND d.version = p.doc_version
                 WHERE p.id = $1",
                &[&id],
            )
            .await
            .unwrap();
        (r.get(0), r.get(1))
    };
    assert_eq!(decided, Some(1));
    let other = source.replace("credential: payments", "credential: hooks");
    assert_ne!(other, source);
    let other_sha = actiond_core::canonical::sha256_hex(other.as_bytes());
    c.execute(
        "INSERT INTO tenant_documents (tenant_id, version, sha256, source, document, applied_by)
         SELECT tenant_id, 2, $1, $2, document, 'test' FROM tenant_documents
          WHERE tenant_id = 'acme' AND version = 1",
        &[&other_sha, &other],
    )
    .await
    .unwrap();
    let mut claims = breakglass_claims(&s, id, db_now_us(&c).await + 60_000_000).await;
    claims.doc_version = 2;
    claims.doc_sha256 = Some(other_sha);
    approve_with_claims(&s, &claims).await;
    s.wait_state(id, "blocked", T).await;
    let events = s.audit_kinds(id).await;
    let last = events.last().unwrap();
    assert_eq!(last.0, "grant.rejected", "{events:?}");
    assert_eq!(last.1["reason"], "intent_mismatch", "{events:?}");
    assert_eq!(last.1["detail"]["grant_doc_version"], 2, "{events:?}");
    assert_eq!(last.1["detail"]["decided_doc_version"], 1, "{events:?}");
    assert_eq!(
        s.row(id).await.get::<_, Option<String>>(1).as_deref(),
        Some("grant does not match this proposal")
    );
    assert!(!s.grant_spent(id).await, "the grant was not spent");
    s.sentinel().await;
    assert!(s.calls().is_empty(), "{:?}", s.calls());
}

/// A grant signed by a trusted key whose expiry lies a day ahead — no issuer makes one (every
/// expiry is the database clock plus a handler's `grant_lifetime`, at most 15 minutes); a
/// stolen or misused key could mint grants that stay spendable for years. The executor does
/// not spend it: `grant.rejected` with reason `expiry_too_far`, the proposal `blocked`, nothing
/// run. One at the bound's near side (14 minutes ahead) is spent as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_expiring_beyond_any_grant_lifetime_is_refused() {
    let s = Stack::new("grant_expiry_too_far").await;
    let c = s.tdb.superuser().await;
    let far = s.propose(&refund("pi_far", 12000)).await;
    s.wait_state(far, "escalated", T).await;
    let day_ahead = db_now_us(&c).await + 86_400_000_000;
    approve_with_signed_grant(&s, far, day_ahead).await;
    s.wait_state(far, "blocked", T).await;
    let events = s.audit_kinds(far).await;
    let last = events.last().unwrap();
    assert_eq!(last.0, "grant.rejected", "{events:?}");
    assert_eq!(last.1["reason"], "expiry_too_far", "{events:?}");
    assert_eq!(last.1["detail"]["expires_at_us"], day_ahead);
    assert_eq!(
        s.row(far).await.get::<_, Option<String>>(1).as_deref(),
        Some("the grant for this proposal was refused")
    );
    assert!(
        !s.grant_spent(far).await,
        "a grant beyond the bound is never spent"
    );
    assert!(s.calls().is_empty(), "{:?}", s.calls());

    let near = s.propose(&refund("pi_near", 12000)).await;
    s.wait_state(near, "escalated", T).await;
    let ahead = db_now_us(&c).await + 14 * 60_000_000;
    approve_with_signed_grant(&s, near, ahead).await;
    s.wait_state(near, "succeeded", T).await;
}
