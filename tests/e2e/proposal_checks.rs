//! V27: a proposal's recorded times never go backwards, and the checks on a proposal update
//! hold for every row of a batched statement. The per-rule messages are checked by `schema`,
//! `privileges`, `freeze` and `staged`; these tests check existing rows, a statement that breaks
//! a rule for one row of many, lease changes, and the order of `created_at`, `decided_at`,
//! `updated_at` and `finished_at`.

use crate::support::Scratch;
use tokio_postgres::Client;

/// The SQLSTATE and the text of a refusal.
fn refusal(e: tokio_postgres::Error) -> (String, String) {
    let code = e.code().map(|c| c.code().to_owned()).unwrap_or_default();
    (code, format!("{e:?}"))
}

/// V27 on a database holding a proposal in every state moves no row; afterwards a statement
/// that breaks a rule for one of the rows it changes (the services' writes are batches) changes
/// none of them, and a lease change passes, stays a HOT update and stamps nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v27_keeps_rows_and_refuses_a_statement_that_breaks_a_rule_for_one_row() {
    let mut s = Scratch::at(25).await;
    s.every_state().await;
    let before = s.rows().await;
    assert_eq!(before.len(), 10);
    s.db.migrate_to(27).await.unwrap();
    assert_eq!(before, s.rows().await, "V27 moves no row");

    // Two rows in one statement: approved → executing is legal, succeeded → executing is not.
    let e =
        s.c.batch_execute(
            "UPDATE proposals SET state = 'executing' WHERE state IN ('approved', 'succeeded')",
        )
        .await
        .unwrap_err();
    let (code, text) = refusal(e);
    assert_eq!(code, "23514");
    assert!(
        text.contains("illegal proposal state transition succeeded -> executing"),
        "{text}"
    );
    assert_eq!(before, s.rows().await, "the legal row did not move either");

    // A role's statement with one transition it may make and one it may not.
    let e = s
        .c
        .batch_execute(
            "SET ROLE actiond_policy;
             UPDATE proposals SET state = CASE state WHEN 'pending' THEN 'approved' ELSE 'executing' END
              WHERE state IN ('pending', 'approved')",
        )
        .await
        .unwrap_err();
    let (code, text) = refusal(e);
    assert_eq!(code, "42501", "{text}");
    assert!(
        text.contains("may not move a proposal approved -> executing"),
        "{text}"
    );
    s.c.batch_execute("RESET ROLE").await.unwrap();
    assert_eq!(before, s.rows().await);

    // A lease change (the executor's claim) passes, is HOT, and stamps nothing.
    let tx = s.c.transaction().await.unwrap();
    let hot = crate::support::lease_approved_rows(&tx).await;
    assert_eq!(hot, 1, "the claim's lease update is a HOT update");
    tx.commit().await.unwrap();
    let after: Vec<_> = s
        .rows()
        .await
        .into_iter()
        .map(|r| (r.0, r.1, r.2))
        .collect();
    assert_eq!(before, after, "a lease change does not stamp updated_at");
    s.drop_now().await;
}

/// A decision written by a transaction that began before the submission committed (policy's
/// claim sees rows committed after its transaction started) is stamped no earlier than the
/// proposal's `created_at`; the outcome no earlier than the move to `executing`. The audit
/// events those writes record (V30) carry the time they were written: each at or after
/// `created_at`, in the order of their ids.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proposals_times_never_go_backwards() {
    use actiond_store::executor_queue::FINISH_SQL;
    use actiond_store::policy_queue::DECIDE_SQL;
    // Today's decide and finish statements need today's columns (V42's grant preview hash,
    // V44's tenant moves, V49's grant document hash): the database is migrated to the latest
    // version, which includes V30.
    let s = Scratch::at(50).await;
    let url = {
        let server = actiond_testkit::server_url();
        let (base, _) = server.rsplit_once('/').unwrap();
        format!("{base}/{}", s.name)
    };
    let mut early = actiond_store::tls::connect(&url).await.unwrap();
    let tx = early.transaction().await.unwrap();
    tx.batch_execute("SET LOCAL ROLE actiond_policy")
        .await
        .unwrap();
    let started: std::time::SystemTime = tx.query_one("SELECT now()", &[]).await.unwrap().get(0);
    clock_past(&s.c, started).await;
    let id = s.submit().await;
    let none: Vec<String> = Vec::new();
    let n: i64 = tx
        .query_one(
            DECIDE_SQL.as_str(),
            &[
                &vec![id],
                &vec!["approved"],
                &vec!["allow"],
                &vec!["r"],
                &vec!["ok"],
                &vec![1i32],
                &vec!["d".repeat(64)],
                &vec!["pending"],
                &vec![serde_json::json!({})],
                &"policy",
                &Vec::<uuid::Uuid>::new(),
                &Vec::<uuid::Uuid>::new(),
                &none,
                &none,
                &Vec::<i32>::new(),
                &Vec::<i64>::new(),
                &none,
                &Vec::<Vec<u8>>::new(),
                &"policy",
                &Vec::<Option<String>>::new(),
                &Vec::<Option<String>>::new(),
            ],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 1);
    tx.commit().await.unwrap();
    let (created, decided, updated, _) = times(&s.c, id).await;
    assert!(started < created, "the deciding transaction began first");
    assert!(
        decided.unwrap() >= created,
        "decided_at {decided:?} < created_at {created:?}"
    );
    assert!(
        updated >= created,
        "updated_at {updated:?} < created_at {created:?}"
    );

    // The same for the outcome: a transaction older than the move to executing finishes it.
    let tx = early.transaction().await.unwrap();
    tx.batch_execute("SET LOCAL ROLE actiond_executor")
        .await
        .unwrap();
    let began: std::time::SystemTime = tx.query_one("SELECT now()", &[]).await.unwrap().get(0);
    clock_past(&s.c, began).await;
    s.c.batch_execute(&format!(
        "SET ROLE actiond_executor;
         UPDATE proposals SET lease_owner = 'e1', state = 'executing' WHERE id = '{id}';
         RESET ROLE"
    ))
    .await
    .unwrap();
    let (_, _, executing_at, _) = times(&s.c, id).await;
    let moved = tx
        .query(
            FINISH_SQL.as_str(),
            &[
                &vec![id],
                &vec!["succeeded"],
                &vec!["200"],
                &"e1",
                &vec!["executing"],
                &"executor:e1",
            ],
        )
        .await
        .unwrap();
    assert_eq!(moved.len(), 1);
    tx.commit().await.unwrap();
    let (_, _, updated, finished) = times(&s.c, id).await;
    assert!(
        finished.unwrap() >= executing_at,
        "finished_at {finished:?} < the move to executing {executing_at:?}"
    );
    assert!(updated >= executing_at);
    let events: Vec<(String, Stamp)> =
        s.c.query(
            "SELECT kind, at FROM audit_events WHERE proposal_id = $1 ORDER BY id",
            &[&id],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let kinds: Vec<&str> = events.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(kinds, ["proposal.decided", "proposal.executed"]);
    let (created, ..) = times(&s.c, id).await;
    let mut previous = created;
    for (kind, at) in &events {
        assert!(
            *at >= previous,
            "{kind} at {at:?} is before {previous:?} (created_at or the event before it)"
        );
        previous = *at;
    }
    drop(early);
    s.drop_now().await;
}

type Stamp = std::time::SystemTime;

/// `created_at`, `decided_at`, `updated_at`, `finished_at` of proposal `id`.
async fn times(c: &Client, id: uuid::Uuid) -> (Stamp, Option<Stamp>, Stamp, Option<Stamp>) {
    let r = c
        .query_one(
            "SELECT created_at, decided_at, updated_at, finished_at FROM proposals WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap();
    (r.get(0), r.get(1), r.get(2), r.get(3))
}

/// A scratch database at version `from` holding a proposal in every state
/// ([`Scratch::every_state`]), migrated to `to`; asserts the migration moved no row.
async fn every_state_migrated(from: i32, to: i32) -> Scratch {
    let s = Scratch::at(from).await;
    s.every_state().await;
    let before = s.rows().await;
    s.db.migrate_to(to).await.unwrap();
    assert_eq!(before, s.rows().await, "V{to} moves no row");
    s
}

/// V28 replaces the regular expressions of the hash checks (`proposals.params_sha256`,
/// `proposals.intent_hash`, `grants.intent_hash`) with a cheaper test of the same rule: on a
/// database holding a proposal in every state it moves no row, and afterwards each column
/// refuses, on INSERT and on UPDATE, exactly the values V1's `~ '^[0-9a-f]{64}$'` refuses
/// (upper case, one character short or long, a trailing newline, a letter past `f`, a digit of
/// another script, a space, the empty string) and accepts the values it accepts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v28_refuses_what_v1_refused() {
    let mut s = every_state_migrated(27, 28).await;
    hash_checks_agree_with(&mut s, "$1::text ~ '^[0-9a-f]{64}$'", "V1").await;
    s.drop_now().await;
}

/// V48 makes the CHECK constraints that every write of a proposal or a grant evaluates cheaper
/// (the hash checks test `x !~ '[^0-9a-f]'` instead of `ltrim`, the state, effect and outcome
/// lists are one array constant): on a database holding a proposal in every state it moves no
/// row; afterwards the hash columns refuse and accept exactly what V28's `ltrim` rule did (the
/// cases of [`v28_refuses_what_v1_refused`], and `grants.preview_sha256` too), every known
/// state, effect and outcome is still accepted, and a near miss of each is refused, naming the
/// constraint, with SQLSTATE 23514.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v48_refuses_what_v47_refused() {
    let mut s = every_state_migrated(47, 48).await;
    hash_checks_agree_with(
        &mut s,
        "length($1::text) = 64 AND ltrim($1::text, '0123456789abcdef') = ''",
        "V28",
    )
    .await;
    lists_agree(&mut s).await;
    s.drop_now().await;
}

/// Every known state, effect and outcome is accepted by `proposals`, and a near miss of each
/// (upper case, a trailing space, a plural, the empty string) is refused with SQLSTATE 23514
/// naming the column's constraint.
async fn lists_agree(s: &mut Scratch) {
    let lists = [
        (
            "state",
            &[
                "pending",
                "escalated",
                "approved",
                "blocked",
                "denied",
                "expired",
                "executing",
                "succeeded",
                "failed",
                "outcome_unknown",
                "withdrawn",
                "amended",
                "stale",
                "effect_mismatch",
            ][..],
        ),
        ("effect", &["allow", "escalate", "block"][..]),
        (
            "outcome",
            &["succeeded", "failed", "outcome_unknown", "effect_mismatch"][..],
        ),
    ];
    for (column, known) in lists {
        let misses = [
            known[0].to_uppercase(),
            format!("{} ", known[0]),
            format!("{}s", known[0]),
            String::new(),
        ];
        let cases = known
            .iter()
            .map(|k| ((*k).to_owned(), true))
            .chain(misses.into_iter().map(|m| (m, false)));
        for (value, want_ok) in cases {
            // Written without the transition trigger, so only the CHECK constraint judges it.
            let tx = s.c.transaction().await.unwrap();
            tx.batch_execute("SET LOCAL session_replication_role = replica")
                .await
                .unwrap();
            let r = tx
                .execute(
                    &format!("UPDATE proposals SET {column} = $1 WHERE state = 'succeeded'"),
                    &[&value],
                )
                .await;
            drop(tx);
            check_judged(
                r,
                want_ok,
                &format!("proposals_{column}_check"),
                &format!("{column} = {value:?}"),
            );
        }
    }
}

/// V50 moves the CHECK rules of `proposals` and `grants` into one constraint per table calling
/// a PL/pgSQL function, read once per connection instead of once per statement: on a database
/// holding a proposal in every state it moves no row, and afterwards each rule refuses and
/// accepts what V49's constraints did, with their SQLSTATE (23514) and their names in the
/// message — the hash columns (the cases of [`v28_refuses_what_v1_refused`]), the lists of
/// [`v48_refuses_what_v47_refused`], and the rules no earlier test named (the action's length,
/// the amendment columns, the approval round, `grants.doc_sha256`, a grant voided unspent).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v50_refuses_what_v49_refused() {
    let mut s = every_state_migrated(49, 50).await;
    v49_rules_hold(&mut s).await;
    // And the function files, which the migrator applies after the migrations (the file is
    // the definition in force, V50's copy the one it validated the stored rows with).
    s.db.migrate().await.unwrap();
    v49_rules_hold(&mut s).await;
    s.drop_now().await;
}

/// The rules of V49's CHECK constraints on `proposals` and `grants`, as [`v50_refuses_what_v49_refused`]
/// states them.
async fn v49_rules_hold(s: &mut Scratch) {
    hash_checks_agree_with(
        s,
        "length($1::text) = 64 AND $1::text !~ '[^0-9a-f]'",
        "V48",
    )
    .await;
    lists_agree(s).await;
    let good = "0123456789abcdef".repeat(4);
    // (SET clause, accepted, constraint named by a refusal), each on the succeeded proposal,
    // written without the transition trigger so that only the CHECK rules judge it.
    let updates: &[(&str, bool, &str)] = &[
        ("action = repeat('a', 128)", true, ""),
        ("action = repeat('a', 129)", false, "proposals_action_check"),
        ("approval_round = 0", true, ""),
        (
            "approval_round = -1",
            false,
            "proposals_approval_round_check",
        ),
        (
            "amended_from = id, amended_by = 'ann@example.com', amendment_diff = '[]'",
            true,
            "",
        ),
        (
            "amended_from = id, amended_by = '', amendment_diff = '[]'",
            false,
            "proposals_amended_by_check",
        ),
        (
            "amended_from = id, amended_by = repeat('a', 301), amendment_diff = '[]'",
            false,
            "proposals_amended_by_check",
        ),
        (
            "amended_from = id, amended_by = repeat('a', 300), amendment_diff = '[]'",
            true,
            "",
        ),
        (
            "amended_from = id, amendment_diff = '[]'",
            false,
            "proposals_amendment_complete",
        ),
        (
            "amended_from = id, amended_by = 'ann@example.com', amendment_diff = '{}'",
            false,
            "proposals_amendment_diff_check",
        ),
        // Two rules broken at once: the first in name order is the one named, as before.
        (
            "action = repeat('a', 129), state = 'nope'",
            false,
            "proposals_action_check",
        ),
    ];
    for (set, want_ok, constraint) in updates {
        let tx = s.c.transaction().await.unwrap();
        tx.batch_execute("SET LOCAL session_replication_role = replica")
            .await
            .unwrap();
        let r = tx
            .execute(
                &format!("UPDATE proposals SET {set} WHERE state = 'succeeded'"),
                &[],
            )
            .await;
        drop(tx);
        check_judged(r, *want_ok, constraint, set);
    }
    // The grant rules V49 added or no test named: the document hash, and voided only once spent.
    let grants: &[(&str, bool, &str)] = &[
        ("NULL, NULL, NULL", true, ""),
        ("$1, now(), now()", true, ""),
        ("upper($1), NULL, NULL", false, "grants_doc_sha256_check"),
        ("left($1, 63), NULL, NULL", false, "grants_doc_sha256_check"),
        ("NULL, NULL, now()", false, "grants_voided_after_spent"),
    ];
    for (values, want_ok, constraint) in grants {
        let tx = s.c.transaction().await.unwrap();
        let r = tx
            .execute(
                &format!(
                    "INSERT INTO grants (id, proposal_id, tenant_id, intent_hash, doc_version, expires_at_us,
                                         key_id, sig, issued_by, doc_sha256, used_at, voided_at)
                     SELECT gen_random_uuid(), id, tenant_id, $1, 1, 0, 'policy-1', '\\x00', 'policy', {values}
                     FROM proposals WHERE state = 'approved'"
                ),
                &[&good],
            )
            .await;
        drop(tx);
        check_judged(r, *want_ok, constraint, values);
    }
    // The error is the constraint's: its constraint field names the old rule.
    let tx = s.c.transaction().await.unwrap();
    tx.batch_execute("SET LOCAL session_replication_role = replica")
        .await
        .unwrap();
    let e = tx
        .execute(
            "UPDATE proposals SET approval_round = -1 WHERE state = 'succeeded'",
            &[],
        )
        .await
        .unwrap_err();
    drop(tx);
    let db = e.as_db_error().expect("a database error");
    assert_eq!(db.constraint(), Some("proposals_approval_round_check"));
    assert_eq!(db.table(), Some("proposals"));
}

/// Each 64-hex-digit column (`proposals.params_sha256` and `intent_hash` on INSERT,
/// `params_sha256` on UPDATE, `grants.intent_hash` and `preview_sha256` on INSERT) accepts and
/// refuses what `earlier` (an SQL test of `$1::text`, the rule of migration `name`) accepts and
/// refuses, for the values V28's test named; each refusal is SQLSTATE 23514 naming the
/// column's constraint.
async fn hash_checks_agree_with(s: &mut Scratch, earlier: &str, name: &str) {
    let good = "0123456789abcdef".repeat(4);
    let bad = [
        good.to_uppercase(),
        good[..63].to_owned(),
        format!("{good}0"),
        format!("{}\n", &good[..63]),
        format!("{}g", &good[..63]),
        format!("{}\u{0663}", &good[..63]),
        format!("{} ", &good[..63]),
        String::new(),
    ];
    let (agent, tenant) = (s.agent, "acme");
    let cases: Vec<(String, bool)> = bad
        .into_iter()
        .map(|b| (b, false))
        .chain([(good.clone(), true), ("f".repeat(64), true)])
        .collect();
    for (value, want_ok) in &cases {
        let (value, want_ok) = (value.as_str(), *want_ok);
        let old: bool =
            s.c.query_one(&format!("SELECT {earlier}"), &[&value])
                .await
                .unwrap()
                .get(0);
        assert_eq!(old, want_ok, "{name}'s rule for {value:?}");
        for column in ["params_sha256", "intent_hash"] {
            let (params, intent) = if column == "params_sha256" {
                (value, good.as_str())
            } else {
                (good.as_str(), value)
            };
            // Each in a transaction rolled back: two accepted inserts would share one open intent.
            let tx = s.c.transaction().await.unwrap();
            let r = tx
                .execute(
                    "INSERT INTO proposals (id, tenant_id, agent_id, action, target, params_json, params_sha256,
                                            intent_hash, request_sha256)
                     VALUES (gen_random_uuid(), $1, $2, 'webhook.post', '', '{}', $3, $4, $4)",
                    &[&tenant, &agent, &params, &intent],
                )
                .await;
            drop(tx);
            check_judged(
                r,
                want_ok,
                &format!("proposals_{column}_check"),
                &format!("INSERT {column} = {value:?}"),
            );
        }
        // An update re-checks params_sha256 (no trigger guards that column).
        let tx = s.c.transaction().await.unwrap();
        let r = tx
            .execute(
                "UPDATE proposals SET params_sha256 = $1 WHERE state = 'succeeded'",
                &[&value],
            )
            .await;
        assert_eq!(
            r.is_ok(),
            want_ok,
            "UPDATE params_sha256 = {value:?}: {r:?}"
        );
        drop(tx);
        // grants.preview_sha256 exists from V42 on.
        let has_preview: bool =
            s.c.query_one(
                "SELECT EXISTS (SELECT 1 FROM information_schema.columns
                                WHERE table_name = 'grants' AND column_name = 'preview_sha256')",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        let grant_columns: &[&str] = if has_preview {
            &["intent_hash", "preview_sha256"]
        } else {
            &["intent_hash"]
        };
        for column in grant_columns {
            let (intent, preview) = if *column == "intent_hash" {
                (value, None)
            } else {
                (good.as_str(), Some(value))
            };
            // Before V34 `expires_at` is a column of its own; from V34 on it is generated.
            let (more_cols, more_vals) = if has_preview {
                (", preview_sha256", ", $2")
            } else {
                (", expires_at", ", now()")
            };
            let tx = s.c.transaction().await.unwrap();
            let sql = format!(
                "INSERT INTO grants (id, proposal_id, tenant_id, intent_hash, doc_version, expires_at_us,
                                     key_id, sig, issued_by{more_cols})
                 SELECT gen_random_uuid(), id, tenant_id, $1, 1, 0, 'policy-1', '\\x00', 'policy'{more_vals}
                 FROM proposals WHERE state = 'approved'"
            );
            let r = if has_preview {
                tx.execute(&sql, &[&intent, &preview]).await
            } else {
                tx.execute(&sql, &[&intent]).await
            };
            check_judged(
                r,
                want_ok,
                &format!("grants_{column}_check"),
                &format!("INSERT grants.{column} = {value:?}"),
            );
            drop(tx);
        }
    }
}

/// Asserts a write was accepted exactly when `want_ok`, and that a refusal is SQLSTATE 23514
/// naming `constraint`; `what` names the write in the failure message.
fn check_judged(
    r: Result<u64, tokio_postgres::Error>,
    want_ok: bool,
    constraint: &str,
    what: &str,
) {
    assert_eq!(r.is_ok(), want_ok, "{what}: {r:?}");
    if let Err(e) = r {
        let (code, text) = refusal(e);
        assert_eq!(code, "23514", "{text}");
        assert!(text.contains(constraint), "{text}");
    }
}

/// Waits until the database clock has moved past `t` (a transaction's `now()`), so what is
/// written next is stamped later than that transaction began.
async fn clock_past(c: &tokio_postgres::Client, t: std::time::SystemTime) {
    actiond_testkit::wait_until(
        std::time::Duration::from_secs(5),
        "the database clock to move past the transaction's now()",
        || async move {
            c.query_one("SELECT clock_timestamp() > $1", &[&t])
                .await
                .unwrap()
                .get::<_, bool>(0)
        },
    )
    .await;
}
