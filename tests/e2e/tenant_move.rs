//! Moving a tenant between two real Postgres clusters (two private servers, each with its
//! own database, its own sealer and its own executor): `actiond tenant export` on the
//! source, `actiond tenant import` on the target. An approved, unspent grant runs exactly
//! once, on the target; the source refuses the tenant from the freeze on; the sealed chain
//! verifies on the target against an anchor taken on the source.

use crate::support::{Options, Stack, refund};
use actiond_testkit::{PgCluster, Service, TestDb, cli, eventually, poll_pause};
use std::path::Path;
use std::time::Duration;

/// `actiond audit verify` on `tdb` (its auditor login) with extra arguments.
async fn verify(tdb: &TestDb, pubkey: &str, extra: &[&str]) -> (bool, String) {
    let mut args = vec!["audit", "verify", "--public-key", pubkey];
    args.extend_from_slice(extra);
    let (ok, out, err) = cli(&args, &[("DATABASE_URL", tdb.role_url("auditor").await)]);
    (ok, format!("{out}{err}"))
}

/// `acme`'s newest seal on `tdb`, as `verify` prints it (`acme:seq:head`); `None` before the
/// sealer's first seal of `acme` (a loaded machine may not have run it yet).
async fn acme_head(tdb: &TestDb, pubkey: &str) -> Option<String> {
    let (ok, out) = verify(tdb, pubkey, &[]).await;
    assert!(ok, "{out}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    v["heads"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|h| h.as_str())
        .find(|h| h.starts_with("acme:"))
        .map(str::to_owned)
}

/// A fresh directory holding a sealer key (`actiond audit keygen`), and its public key's path.
fn sealer_key() -> (std::path::PathBuf, String) {
    let dir = std::env::temp_dir().join(format!("actiond-move-{}", uuid::Uuid::new_v4()));
    let (ok, _, err) = cli(
        &["audit", "keygen", "--out-dir", dir.to_str().unwrap()],
        &[],
    );
    assert!(ok, "{err}");
    let pubkey = dir.join("sealer-1.pub").display().to_string();
    (dir, pubkey)
}

/// A sealer on `tdb` with the key in `dir`.
async fn sealer(tdb: &TestDb, dir: &Path, logs: &Path, name: &str) -> Service {
    let dir = dir.to_str().unwrap().to_owned();
    let args = ["seal", "--interval", "200ms", "--credentials-dir", &dir];
    let env = [("DATABASE_URL", tdb.role_url("sealer").await)];
    Service::spawn("audit", name, &args, &env, logs)
}

/// `actiond tenant export acme --to cell-b` from `tdb` as its owner, into `file`.
fn export(tdb: &TestDb, file: &Path) {
    let (ok, out, err) = cli(
        &[
            "tenant",
            "export",
            "acme",
            "--to",
            "cell-b",
            "--out",
            file.to_str().unwrap(),
            "--as",
            "ops",
            "--wait",
            "30s",
        ],
        &[("DATABASE_URL", tdb.url.clone())],
    );
    assert!(ok, "export failed: {out}{err}");
}

/// `actiond tenant import FILE` into `tdb` as its owner.
fn import(tdb: &TestDb, file: &Path, pubkey: &str, anchor: &str) -> (bool, String) {
    let (ok, out, err) = cli(
        &[
            "tenant",
            "import",
            file.to_str().unwrap(),
            "--public-key",
            pubkey,
            "--anchor",
            anchor,
            "--as",
            "ops",
        ],
        &[("DATABASE_URL", tdb.url.clone())],
    );
    (ok, format!("{out}{err}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moved_tenant_runs_its_approved_grant_once_on_the_target_and_never_on_the_source() {
    let (cluster_a, cluster_b) = (PgCluster::start(), PgCluster::start());
    let mut a = Stack::with(
        "tenant_move",
        Options {
            executor: false,
            server: Some(cluster_a.admin_url()),
            ..Options::default()
        },
    )
    .await;
    let b = TestDb::new_on(&cluster_b.admin_url()).await;
    let (dir, pubkey) = sealer_key();
    let mut sealer_a = sealer(&a.tdb, &dir, &a.logs, "sealer-a").await;

    // On the source: one refund allowed by policy (approved, grant unspent: no executor runs
    // there yet) and one waiting for a person.
    let allowed = a.propose(&refund("pi_moved_1", 1200)).await;
    let escalated = a.propose(&refund("pi_moved_2", 9000)).await;
    a.wait_state(allowed, "approved", Duration::from_secs(20))
        .await;
    a.wait_state(escalated, "escalated", Duration::from_secs(20))
        .await;
    let anchor = eventually(
        Duration::from_secs(30),
        "the source's events sealed",
        || async {
            let h = acme_head(&a.tdb, &pubkey).await?;
            let su = a.tdb.superuser().await;
            let unsealed: i64 = su
                .query_one(
                    "SELECT count(*) FROM audit_events e WHERE tenant_id = 'acme'
                 AND NOT EXISTS (SELECT 1 FROM audit_event_hashes h WHERE h.event_id = e.id)",
                    &[],
                )
                .await
                .unwrap()
                .get(0);
            (unsealed == 0).then_some(h)
        },
    )
    .await;

    // Export: freezes the tenant on the source first.
    let file = dir.join("acme.jsonl");
    export(&a.tdb, &file);
    let text = std::fs::read_to_string(&file).unwrap();
    for secret in ["secret-payments", "PRIVATE KEY", &a.token] {
        assert!(!text.contains(secret), "the file holds {secret:?}");
    }

    // The source refuses the tenant: the api with a problem naming the move, the executor by
    // never spending the grant (started only now, it runs for a while), the database itself
    // when the executor's role tries the move directly.
    let (status, body) = a.post(&refund("pi_moved_3", 100), None).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["type"], "urn:actiond:problem:tenant_moved", "{body}");
    assert!(
        body["detail"].as_str().unwrap().contains("cell-b"),
        "{body}"
    );
    a.start_executor("exec-a").await;
    let exec = a.tdb.as_role("executor").await;
    let e = exec
        .execute(
            "UPDATE proposals SET state = 'executing' WHERE id = $1",
            &[&allowed],
        )
        .await
        .unwrap_err();
    assert!(format!("{e:?}").contains("moved to cell cell-b"), "{e:?}");

    // Import on the target: checked whole first.
    let mut tampered = text.replacen("\"amount\\\":1200", "\"amount\\\":1300", 1);
    if tampered == text {
        tampered = text.replacen("pi_moved_1", "pi_moved_X", 1);
    }
    assert_ne!(tampered, text);
    let bad = dir.join("tampered.jsonl");
    std::fs::write(&bad, &tampered).unwrap();
    let (ok, out) = import(&b, &bad, &pubkey, &anchor);
    assert!(!ok && out.contains("refused, nothing imported"), "{out}");
    let lines: Vec<&str> = text.lines().collect();
    std::fs::write(&bad, lines[..lines.len() - 3].join("\n")).unwrap();
    let (ok, out) = import(&b, &bad, &pubkey, &anchor);
    assert!(!ok && out.contains("truncated"), "{out}");
    std::fs::write(&bad, text.replacen("\"version\":1", "\"version\":9", 1)).unwrap();
    let (ok, out) = import(&b, &bad, &pubkey, &anchor);
    assert!(!ok && out.contains("version 9 is not supported"), "{out}");
    let su_b = b.superuser().await;
    let n: i64 = su_b
        .query_one("SELECT count(*) FROM tenants", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0, "a refused file wrote something");
    let (ok, out) = import(&b, &file, &pubkey, &anchor);
    assert!(ok, "import failed: {out}");
    let (ok, out) = import(&b, &file, &pubkey, &anchor);
    assert!(!ok && out.contains("already exists"), "{out}");

    // The target's executor runs the approved grant, once; the source's never did.
    let mut env = a.executor_env("exec-b").await;
    env[0].1 = b.role_url("executor").await;
    let exec_b = Service::spawn("executor", "exec-b", &[], &env, &a.logs);
    a.services.push(exec_b);
    eventually(
        Duration::from_secs(30),
        "the grant ran on the target",
        || async {
            let s: String = su_b
                .query_one("SELECT state FROM proposals WHERE id = $1", &[&allowed])
                .await
                .unwrap()
                .get(0);
            (s == "succeeded").then_some(())
        },
    )
    .await;
    poll_pause(Duration::from_secs(2)).await;
    let runs = a
        .calls()
        .iter()
        .filter(|c| String::from_utf8_lossy(&c.body).contains("pi_moved_1"))
        .count();
    assert_eq!(runs, 1, "the handler ran {runs} times");
    let src = a.tdb.superuser().await;
    let (state, used): (String, bool) = {
        let r = src
            .query_one(
                "SELECT p.state, g.used_at IS NOT NULL FROM proposals p JOIN grants g ON g.proposal_id = p.id WHERE p.id = $1",
                &[&allowed],
            )
            .await
            .unwrap();
        (r.get(0), r.get(1))
    };
    assert_eq!(
        (state.as_str(), used),
        ("approved", false),
        "the source moved it"
    );
    let s: String = su_b
        .query_one("SELECT state FROM proposals WHERE id = $1", &[&escalated])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        s, "escalated",
        "the open escalation continues on the target"
    );

    // The chain continues on the target and verifies against the source's anchor.
    let _sealer_b = sealer(&b, &dir, &a.logs, "sealer-b").await;
    eventually(
        Duration::from_secs(30),
        "the target sealed its new events",
        || async {
            let n: i64 = su_b
                .query_one(
                    "SELECT count(*) FROM audit_events e WHERE tenant_id = 'acme'
                 AND NOT EXISTS (SELECT 1 FROM audit_event_hashes h WHERE h.event_id = e.id)",
                    &[],
                )
                .await
                .unwrap()
                .get(0);
            (n == 0).then_some(())
        },
    )
    .await;
    let (ok, out) = verify(&b, &pubkey, &["--anchor", &anchor]).await;
    assert!(ok, "{out}");
    let head_b = acme_head(&b, &pubkey)
        .await
        .expect("the destination sealed acme's imported events");
    let seq = |h: &str| h.split(':').nth(1).unwrap().parse::<i64>().unwrap();
    assert!(
        seq(&head_b) > seq(&anchor),
        "{head_b} does not extend {anchor}"
    );
    let kinds: Vec<String> = su_b
        .query(
            "SELECT kind FROM audit_events WHERE tenant_id = 'acme' ORDER BY id",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        kinds.first().map(String::as_str),
        Some("tenant.imported"),
        "{kinds:?}"
    );
    assert!(kinds.iter().any(|k| k == "grant.spent"), "{kinds:?}");
    sealer_a.terminate();
}

/// The source database's owner dates a row after the export (a proposal "created tomorrow",
/// whose escalation would never expire on the target): the rows travel with the triggers off,
/// so the import judges every recorded time against the sealed export time and refuses the
/// file, naming the line, table and column, before anything is written. Before this check the
/// row was imported as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_import_refuses_a_row_dated_after_the_export() {
    let mut a = Stack::with(
        "tenant_move_times",
        Options {
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let b = TestDb::new().await;
    let (dir, pubkey) = sealer_key();
    let sealer_a = sealer(&a.tdb, &dir, &a.logs, "sealer-a").await;
    a.services.push(sealer_a);
    let escalated = a.propose(&refund("pi_moved_late", 9000)).await;
    a.wait_state(escalated, "escalated", Duration::from_secs(20))
        .await;
    a.tdb
        .superuser()
        .await
        .execute(
            "UPDATE proposals SET created_at = now() + interval '1 day' WHERE id = $1",
            &[&escalated],
        )
        .await
        .unwrap();
    let anchor = eventually(Duration::from_secs(30), "acme sealed", || async {
        acme_head(&a.tdb, &pubkey).await
    })
    .await;
    let file = dir.join("acme.jsonl");
    export(&a.tdb, &file);
    let (ok, out) = import(&b, &file, &pubkey, &anchor);
    assert!(!ok, "imported a row dated after the export: {out}");
    assert!(
        out.contains("proposals.created_at is ")
            && out.contains("after the export (")
            && out.contains("the source database's owner wrote"),
        "{out}"
    );
    let n: i64 = b
        .superuser()
        .await
        .query_one("SELECT count(*) FROM tenants", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0, "a refused file wrote something");
}
