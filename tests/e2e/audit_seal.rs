//! The sealed audit chain over real processes and a real database: `actiond audit seal`,
//! `verify`, `export` and `purge` as the CLI runs them, each with its own Postgres role, and
//! tampering done as the database owner.

use actiond_testkit::{PgCluster, Service, TestDb, cli, eventually, log_dir};
use std::path::{Path, PathBuf};
use std::time::Duration;

struct Audit {
    tdb: TestDb,
    dir: PathBuf,
    pubkey: String,
    /// The private server of [`Audit::alone`], kept running for the test.
    _server: Option<PgCluster>,
}

impl Audit {
    async fn new() -> Self {
        Self::on(TestDb::new().await, None).await
    }

    /// On a private Postgres server, for tests that wait for the sealer: it seals an event only
    /// once every transaction that was running anywhere on the server when the event was
    /// written has ended, so on the shared test server another test's long transaction (a
    /// plan test inserting 200,000 rows) holds it back for as long as it runs.
    async fn alone() -> Self {
        let server = PgCluster::start();
        let tdb = TestDb::new_on(&server.admin_url()).await;
        Self::on(tdb, Some(server)).await
    }

    async fn on(tdb: TestDb, server: Option<PgCluster>) -> Self {
        let dir = std::env::temp_dir().join(format!("actiond-audit-{}", uuid::Uuid::new_v4()));
        let (ok, _, err) = cli(
            &["audit", "keygen", "--out-dir", dir.to_str().unwrap()],
            &[],
        );
        assert!(ok, "{err}");
        let pubkey = dir.join("sealer-1.pub").display().to_string();
        let su = tdb.superuser().await;
        su.batch_execute("INSERT INTO tenants (id) VALUES ('acme'), ('beta')")
            .await
            .unwrap();
        Self {
            tdb,
            dir,
            pubkey,
            _server: server,
        }
    }

    /// Inserts `n` events alternating between the two tenants; every third id is skipped (a
    /// rolled-back id), so ranges have gaps like production.
    async fn events(&self, n: i64) {
        let su = self.tdb.superuser().await;
        su.execute(
            "INSERT INTO audit_events (tenant_id, kind, actor, detail)
             SELECT CASE WHEN g % 2 = 0 THEN 'acme' ELSE 'beta' END, 'test.event', 'test',
                    jsonb_build_object('n', g, 'f', g / 7.0)
             FROM generate_series(1, $1::bigint) g",
            &[&n],
        )
        .await
        .unwrap();
        su.batch_execute("SELECT nextval('audit_events_id_seq')")
            .await
            .unwrap();
    }

    async fn env(&self, role: &str) -> Vec<(&'static str, String)> {
        vec![("DATABASE_URL", self.tdb.role_url(role).await)]
    }

    /// The sealer's state directory (outside the database) of every `seal --once` here.
    fn state(&self) -> PathBuf {
        self.dir.join("state")
    }

    /// The file the sealer appends every seal it writes to.
    fn sink(&self) -> PathBuf {
        self.dir.join("seals.jsonl")
    }

    /// `actiond audit seal --once` with the sealer's state directory and sink; with `stateless`
    /// without either (what the sealer did before it kept the head outside the database).
    async fn try_seal(&self, wait: &str, stateless: bool) -> (bool, String) {
        let (state, sink) = (self.state(), self.sink());
        let mut args = vec![
            "audit",
            "seal",
            "--once",
            "--wait",
            wait,
            "--credentials-dir",
            self.dir.to_str().unwrap(),
        ];
        if !stateless {
            args.extend([
                "--state-dir",
                state.to_str().unwrap(),
                "--sink",
                sink.to_str().unwrap(),
            ]);
        }
        let (ok, out, err) = cli(&args, &self.env("sealer").await);
        (ok, format!("{out}{err}"))
    }

    async fn seal_once(&self, wait: &str) -> String {
        let (ok, out) = self.try_seal(wait, false).await;
        assert!(ok, "seal failed: {out}");
        out
    }

    async fn verify(&self) -> (bool, String) {
        self.verify_with(&[]).await
    }

    /// `actiond audit verify` against the database with extra arguments (anchors).
    async fn verify_with(&self, extra: &[&str]) -> (bool, String) {
        let mut args = vec!["audit", "verify", "--public-key", &self.pubkey];
        args.extend_from_slice(extra);
        let (ok, out, err) = cli(&args, &self.env("auditor").await);
        (ok, format!("{out}{err}"))
    }

    /// The anchors `verify` prints for each tenant's newest seal (`tenant:seq:head`).
    async fn heads(&self) -> Vec<String> {
        let (ok, out) = self.verify().await;
        assert!(ok, "{out}");
        let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        v["heads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h.as_str().unwrap().to_owned())
            .collect()
    }

    async fn seal_count(&self) -> i64 {
        let su = self.tdb.superuser().await;
        su.query_one("SELECT count(*) FROM audit_seals", &[])
            .await
            .unwrap()
            .get(0)
    }

    /// `n` events of one tenant.
    async fn events_of(&self, tenant: &str, n: i64) {
        let su = self.tdb.superuser().await;
        su.execute(
            "INSERT INTO audit_events (tenant_id, kind, actor, detail)
             SELECT $1, 'test.event', 'test', jsonb_build_object('n', g)
             FROM generate_series(1, $2::bigint) g",
            &[&tenant, &n],
        )
        .await
        .unwrap();
    }

    /// The database owner's hand: the append-only triggers off.
    async fn owner(&self) -> tokio_postgres::Client {
        let su = self.tdb.superuser().await;
        su.batch_execute(
            "ALTER TABLE audit_events DISABLE TRIGGER USER;
             ALTER TABLE audit_seals DISABLE TRIGGER USER;
             ALTER TABLE audit_event_hashes DISABLE TRIGGER USER",
        )
        .await
        .unwrap();
        su
    }

    /// Seals until every event is sealed. `seal --once` gives up ("waiting") while any
    /// transaction of the *cluster* that began before its checkpoint still runs (snapshots are
    /// cluster-wide), and the test server is shared with other tests' long transactions.
    async fn seal_all(&self) {
        for _ in 0..10 {
            self.seal_once("10s").await;
            if self.sealed_ids().await == self.all_ids().await {
                return;
            }
        }
        panic!("events still unsealed after ten `seal --once` runs");
    }

    async fn sealed_ids(&self) -> Vec<i64> {
        let su = self.tdb.superuser().await;
        su.query(
            "SELECT event_id FROM audit_event_hashes ORDER BY event_id",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
    }

    async fn all_ids(&self) -> Vec<i64> {
        let su = self.tdb.superuser().await;
        su.query("SELECT id FROM audit_events ORDER BY id", &[])
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect()
    }
}

impl Drop for Audit {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Every tampering kind, done as the database owner with the append-only triggers disabled:
/// verify exits non-zero and names what differs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_names_every_tampering() {
    let other = actiond_core::audit_chain::generate_seal_key().unwrap().0;
    let cases: Vec<(&str, String, &str)> = vec![
        ("edited", "UPDATE audit_events SET actor = 'mallory' WHERE id = 5".into(), "event 5 "),
        ("deleted", "DELETE FROM audit_events WHERE id = 6".into(), "event 6 "),
        (
            // It said "claims a seal that does not exist (seal deleted?)": no seal was.
            "moved to another tenant",
            "INSERT INTO tenants (id) VALUES ('gamma');
             UPDATE audit_events SET tenant_id = 'gamma' WHERE id = 5"
                .into(),
            "event 5 (tenant gamma) was sealed as an event of tenant beta in seal 1 of tenant beta: its tenant id was edited, and the chain of tenant beta breaks at event 5",
        ),
        (
            "swapped",
            "UPDATE audit_events a SET detail = b.detail, kind = b.kind FROM audit_events b
             WHERE (a.id, b.id) IN ((8, 10), (10, 8))"
                .into(),
            "event 8 ",
        ),
        (
            "inserted",
            // Id 21 was skipped by the sequence (a rolled-back id) inside a sealed range.
            "INSERT INTO audit_events (id, tenant_id, kind, actor) VALUES (21, 'beta', 'test.event', 'mallory')".into(),
            "event 21 ",
        ),
        (
            "forged seal",
            "UPDATE audit_seals SET head_hash = repeat('0', 64) WHERE tenant_id = 'acme' AND seq = 1".into(),
            "seal 1 of tenant acme",
        ),
        ("re-signed seal", String::new(), "seal 1 of tenant beta"),
        (
            "truncated tail",
            "DELETE FROM audit_events WHERE id > 30; DELETE FROM audit_event_hashes WHERE event_id > 30".into(),
            "truncated tail",
        ),
    ];
    for (name, sql, expect) in cases {
        let a = Audit::new().await;
        a.events(20).await;
        a.events(20).await;
        a.seal_all().await;
        let (ok, out) = a.verify().await;
        assert!(ok, "{name}: untampered chain must verify: {out}");
        let su = a.tdb.superuser().await;
        su.batch_execute(
            "ALTER TABLE audit_events DISABLE TRIGGER USER;
             ALTER TABLE audit_seals DISABLE TRIGGER USER;
             ALTER TABLE audit_event_hashes DISABLE TRIGGER USER",
        )
        .await
        .unwrap();
        if name == "re-signed seal" {
            let r = su
                .query_one(
                    &format!(
                        "SELECT {} FROM audit_seals WHERE tenant_id = 'beta' AND seq = 1",
                        actiond_store::seals::SEAL_COLUMNS
                    ),
                    &[],
                )
                .await
                .unwrap();
            let s = actiond_store::seals::seal_from_row(&r);
            let signer =
                actiond_core::audit_chain::SealSigner::from_pkcs8_b64("sealer-1", &other).unwrap();
            let forged = signer.sign(&s.payload).unwrap();
            su.execute(
                "UPDATE audit_seals SET sig = $1 WHERE tenant_id = 'beta' AND seq = 1",
                &[&forged.sig],
            )
            .await
            .unwrap();
        } else {
            su.batch_execute(&sql).await.unwrap();
        }
        let (ok, out) = a.verify().await;
        assert!(!ok, "{name}: tampering must fail verification");
        assert!(
            out.contains(expect),
            "{name}: expected {expect:?} in: {out}"
        );
    }
}

/// The database owner writes events with false times before the sealer reaches them (a month
/// back, a day ahead): the sealer seals them as they are and names them in its report (and its
/// log and counter), `verify` fails naming the first and counting the rest, and an honest
/// chain around them still verifies up to there. Before this check both verified silently.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_written_with_false_times_are_named_by_sealer_and_verify() {
    let a = Audit::new().await;
    a.events(6).await;
    a.seal_all().await;
    let su = a.tdb.superuser().await;
    let forged: Vec<i64> = su
        .query(
            "INSERT INTO audit_events (tenant_id, kind, actor, at)
             VALUES ('acme', 'approval.decided', 'mallory', now() - interval '30 days'),
                    ('beta', 'approval.decided', 'mallory', now() + interval '1 day')
             RETURNING id",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    a.events(4).await;
    let mut report = String::new();
    for _ in 0..10 {
        report.push_str(&a.seal_once("10s").await);
        if a.sealed_ids().await == a.all_ids().await {
            break;
        }
    }
    assert_eq!(a.sealed_ids().await, a.all_ids().await, "{report}");
    for (id, tenant, what) in [
        (forged[0], "acme", "back-dated before it was sealed"),
        (
            forged[1],
            "beta",
            "dated in the future before it was sealed",
        ),
    ] {
        let name = format!("event {id} (tenant {tenant}) is dated ");
        assert!(
            report.contains(&name) && report.contains(what),
            "{name}{what}: {report}"
        );
    }
    let (ok, out) = a.verify().await;
    assert!(!ok, "verify passed a chain with misdated events: {out}");
    assert!(
        out.contains(&format!("event {} (tenant acme) is dated ", forged[0]))
            && out.contains("back-dated")
            && out.contains("(and 1 more events or seals whose times do not hold)"),
        "{out}"
    );
}

/// A transaction holding an early id open while later ids commit: nothing at or after its id is
/// sealed until it commits; then everything is sealed in order, nothing skipped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_open_transaction_is_sealed_later_in_order() {
    let a = Audit::new().await;
    a.events(4).await;
    a.seal_all().await;
    let before = a.sealed_ids().await;
    assert_eq!(before.len(), 4);

    let mut holder = a.tdb.superuser().await;
    let tx = holder.transaction().await.unwrap();
    let held: i64 = tx
        .query_one(
            "INSERT INTO audit_events (tenant_id, kind, actor) VALUES ('acme', 'test.held', 'test') RETURNING id",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    a.events(6).await;
    let out = a.seal_once("1s").await;
    assert!(out.contains("waiting"), "{out}");
    let sealed = a.sealed_ids().await;
    assert!(
        sealed.iter().all(|id| *id < held),
        "sealed past the open transaction's id {held}: {sealed:?}"
    );
    tx.commit().await.unwrap();
    a.seal_all().await;
    let (ok, out) = a.verify().await;
    assert!(ok, "{out}");
}

/// Two sealers: one works, the other stands by. The worker is killed with SIGKILL mid-seal;
/// the other takes over and seals the rest with no gap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sealer_kill9_resumes_and_one_sealer_works() {
    let a = Audit::alone().await;
    a.events(40_000).await;
    let logs = log_dir("sealer_kill9");
    let dir = a.dir.to_str().unwrap().to_owned();
    let env = a.env("sealer").await;
    let args = [
        "seal",
        "--interval",
        "200ms",
        "--batch",
        "500",
        "--credentials-dir",
        &dir,
    ];
    let mut s1 = Service::spawn("audit", "sealer-1", &args, &env, &logs);
    eventually(Duration::from_secs(20), "first sealer works", || async {
        s1.log_text().contains("sealer working").then_some(())
    })
    .await;
    let s2 = Service::spawn("audit", "sealer-2", &args, &env, &logs);
    eventually(
        Duration::from_secs(20),
        "second sealer stands by",
        || async { s2.log_text().contains("standing by").then_some(()) },
    )
    .await;
    let su = a.tdb.superuser().await;
    eventually(Duration::from_secs(30), "sealing under way", || async {
        let n: i64 = su
            .query_one("SELECT count(*) FROM audit_event_hashes", &[])
            .await
            .unwrap()
            .get(0);
        (n > 0).then_some(())
    })
    .await;
    s1.kill9();
    a.events(10).await;
    let all = a.all_ids().await.len();
    eventually(
        Duration::from_secs(60),
        "the standby seals everything",
        || async { (a.sealed_ids().await.len() == all).then_some(()) },
    )
    .await;
    assert!(s2.log_text().contains("sealer working"));
    let (ok, out) = a.verify().await;
    assert!(ok, "{out}");
}

fn flip_byte(path: &Path, line_no: usize) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let l = &mut lines[line_no - 1];
    let at = l.find("\"actor\":\"test\"").unwrap() + "\"actor\":\"t".len();
    l.replace_range(at..at + 1, "E");
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

/// Export (both formats) → verify from the file alone passes; one flipped byte fails naming
/// the line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_verifies_offline_and_names_a_flipped_line() {
    let a = Audit::new().await;
    a.events(30).await;
    a.seal_all().await;
    a.events(30).await;
    a.seal_all().await;
    for format in ["jsonl", "cloudevents"] {
        let (ok, out, err) = cli(
            &[
                "audit",
                "export",
                "--since",
                "2000-01-01T00:00:00Z",
                "--format",
                format,
            ],
            &a.env("auditor").await,
        );
        assert!(ok, "{err}");
        let lines: Vec<&str> = out.lines().collect();
        // 60 events and 4 seals (2 tenants x 2 rounds).
        assert_eq!(lines.len(), 64, "{out}");
        let file = a.dir.join(format!("export.{format}"));
        std::fs::write(&file, &out).unwrap();
        let (ok, _, err) = cli(
            &[
                "audit",
                "verify",
                "--public-key",
                &a.pubkey,
                "--from-file",
                file.to_str().unwrap(),
            ],
            &[],
        );
        assert!(ok, "{format}: {err}");
        let target = lines.iter().position(|l| l.contains("\"id\":25,")).unwrap() + 1;
        flip_byte(&file, target);
        let (ok, _, err) = cli(
            &[
                "audit",
                "verify",
                "--public-key",
                &a.pubkey,
                "--from-file",
                file.to_str().unwrap(),
            ],
            &[],
        );
        assert!(!ok, "{format}: a flipped byte must fail");
        assert!(err.contains(&format!("line {target}:")), "{format}: {err}");
    }
    // One tenant from a later time on: starts at a seal boundary and verifies on its own.
    let (ok, out, err) = cli(
        &[
            "audit",
            "export",
            "--since",
            "2000-01-01T00:00:00Z",
            "--tenant",
            "acme",
        ],
        &a.env("auditor").await,
    );
    assert!(ok, "{err}");
    assert!(out.lines().all(|l| l.contains("\"tenant_id\":\"acme\"")));
}

/// 10,000 decided proposals among live ones, older than the tenant's retention: only decided
/// ones are purged, no purge transaction lasts a second, and the chain still verifies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_clears_only_decided_and_verify_passes() {
    let a = Audit::new().await;
    let su = a.tdb.superuser().await;
    su.batch_execute(
        "INSERT INTO tenant_documents (tenant_id, version, sha256, source, document, applied_by)
         VALUES ('acme', 1, repeat('c', 64), 'x', '{\"retention\":{\"decided_after\":\"30d\"}}', 'test');
         INSERT INTO agents (id, tenant_id, name, token_sha256)
         VALUES ('00000000-0000-4000-8000-000000000001', 'acme', 'bot', repeat('d', 64));
         INSERT INTO proposals (id, tenant_id, agent_id, action, target, params_json, params_sha256,
                                intent_hash, agent_reason, source_text, request_sha256)
         SELECT gen_random_uuid(), 'acme', '00000000-0000-4000-8000-000000000001', 'x.y', 't',
                '{\"secret\":' || g || '}', repeat('a', 64), md5(g::text) || md5(g::text), 'why', 'src', repeat('b', 64)
         FROM generate_series(1, 10200) g;
         UPDATE proposals SET state = 'blocked', decision_reason = 'rule'
         WHERE id IN (SELECT id FROM proposals ORDER BY id LIMIT 10000);
         UPDATE proposals SET updated_at = now() - interval '40 days';",
    )
    .await
    .unwrap();
    a.events(50).await;
    a.seal_all().await;

    let env = a.env("retention").await;
    let purge = tokio::task::spawn_blocking(move || {
        cli(
            &[
                "audit",
                "purge",
                "--decided-after",
                "365d",
                "--batch",
                "200",
            ],
            &env,
        )
    });
    // Sample the purge role's transactions while it runs.
    let mut longest = 0.0f64;
    while !purge.is_finished() {
        let r = su
            .query_one(
                "SELECT coalesce(max(extract(epoch FROM clock_timestamp() - xact_start)), 0)::float8
                 FROM pg_stat_activity WHERE usename = 'actiond_test_retention' AND xact_start IS NOT NULL",
                &[],
            )
            .await
            .unwrap();
        longest = longest.max(r.get(0));
        actiond_testkit::poll_pause(Duration::from_millis(20)).await;
    }
    let (ok, out, err) = purge.await.unwrap();
    assert!(ok, "{err}");
    assert!(longest < 1.0, "a purge transaction lasted {longest}s");
    let report: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(report["purged"], 10_000, "{out}");
    assert!(report["max_batch_ms"].as_u64().unwrap() < 1000, "{out}");
    let r = su
        .query_one(
            "SELECT count(*) FILTER (WHERE purged_at IS NOT NULL AND params_json = '{}' AND source_text IS NULL
                                     AND agent_reason IS NULL AND decision_reason IS NULL),
                    count(*) FILTER (WHERE state = 'pending' AND purged_at IS NULL AND params_json <> '{}'
                                     AND source_text = 'src'),
                    count(*) FILTER (WHERE state = 'pending' AND purged_at IS NOT NULL)
             FROM proposals",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(
        (r.get::<_, i64>(0), r.get::<_, i64>(1), r.get::<_, i64>(2)),
        (10_000, 200, 0)
    );
    a.seal_all().await;
    let (ok, out) = a.verify().await;
    assert!(ok, "{out}");
}

/// The running retention job (`audit purge --interval`) exports its counter at 0 for every
/// tenant on each scrape, also for a tenant applied after its last round. Before, a round added
/// only the tenants it went through, so until the first round ended (and for a tenant applied
/// since, until the next round an hour later) `actiond_retention_purged_rows_total` had no
/// series and its panel said "No data".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_purge_counts_every_tenant_from_zero() {
    let a = Audit::new().await;
    let su = a.tdb.superuser().await;
    let document = |tenant: &str| {
        format!(
            "INSERT INTO tenant_documents (tenant_id, version, sha256, source, document, applied_by)
             VALUES ('{tenant}', 1, repeat('c', 64), 'x', '{{}}', 'test')"
        )
    };
    su.batch_execute(&document("acme")).await.unwrap();
    let logs = log_dir("purge_metrics");
    let env = a.env("retention").await;
    let args = ["purge", "--interval", "1h", "--admin-listen", "127.0.0.1:0"];
    let mut s = Service::spawn("audit", "retention", &args, &env, &logs);
    let metrics = format!("http://{}/metrics", s.bound("admin").await);
    let scrape = || async { reqwest::get(&metrics).await.unwrap().text().await.unwrap() };
    let zero =
        |tenant: &str| format!("actiond_retention_purged_rows_total{{tenant=\"{tenant}\"}} 0");
    eventually(Duration::from_secs(30), "acme's series", || async {
        scrape().await.contains(&zero("acme")).then_some(())
    })
    .await;
    // The first round is over (it ran at start); beta's document comes after it.
    su.batch_execute(&document("beta")).await.unwrap();
    let text = scrape().await;
    assert!(text.contains(&zero("beta")), "{text}");
    assert!(text.contains(&zero("acme")), "{text}");
    assert!(s.child.try_wait().unwrap().is_none(), "{}", s.log_text());
    s.terminate();
}

/// The sealer may read events and insert seals, nothing else; the auditor only reads; the
/// retention role cannot reach live proposals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_roles_are_least_privilege() {
    let a = Audit::new().await;
    a.events(4).await;
    a.seal_all().await;
    let sealer = a.tdb.as_role("sealer").await;
    assert!(
        sealer
            .query("SELECT id FROM audit_events", &[])
            .await
            .is_ok()
    );
    for sql in [
        "UPDATE audit_seals SET key_id = 'x'",
        "DELETE FROM audit_event_hashes",
        "INSERT INTO audit_events (tenant_id, kind, actor) VALUES ('acme', 'x', 'sealer')",
        "SELECT id FROM proposals",
        "SELECT id FROM tenants",
    ] {
        assert!(
            sealer.batch_execute(sql).await.is_err(),
            "sealer may not: {sql}"
        );
    }
    let auditor = a.tdb.as_role("auditor").await;
    assert!(
        auditor
            .query("SELECT * FROM audit_seals", &[])
            .await
            .is_ok()
    );
    for sql in [
        "INSERT INTO audit_event_hashes VALUES (999, 'acme', 1, repeat('a', 64))",
        "INSERT INTO audit_events (tenant_id, kind, actor) VALUES ('acme', 'x', 'auditor')",
        "SELECT params_json FROM proposals",
    ] {
        assert!(
            auditor.batch_execute(sql).await.is_err(),
            "auditor may not: {sql}"
        );
    }
    let retention = a.tdb.as_role("retention").await;
    for sql in [
        "SELECT params_json FROM proposals",
        "UPDATE proposals SET state = 'expired'",
        "INSERT INTO audit_events (tenant_id, kind, actor) VALUES ('acme', 'proposal.decided', 'x')",
    ] {
        assert!(
            retention.batch_execute(sql).await.is_err(),
            "retention may not: {sql}"
        );
    }
}

/// The operator's login (`actiond_admin`) may not read the seals: `export` and `verify` with
/// it end with one line naming the login they need, not a bare "permission denied for table
/// audit_seals".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_reads_as_the_operator_name_the_login_they_need() {
    let a = Audit::new().await;
    a.events(4).await;
    a.seal_all().await;
    let operator = a.env("admin").await;
    for args in [
        &["audit", "export", "--since", "2020-01-01T00:00:00Z"][..],
        &["audit", "verify", "--public-key", &a.pubkey],
    ] {
        let (ok, out, err) = cli(args, &operator);
        assert!(!ok, "{args:?} as the operator: {out}");
        assert!(
            err.contains(&format!(
                "actiond {} needs DATABASE_URL to be a login of role actiond_auditor",
                args[..2].join(" ")
            )),
            "{args:?}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
    let (ok, out, err) = cli(
        &["audit", "export", "--since", "2020-01-01T00:00:00Z"],
        &a.env("auditor").await,
    );
    assert!(ok && out.lines().count() >= 5, "{out}{err}");
}

/// `export --follow` writes events sealed after it started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_follow_streams_newly_sealed_events() {
    let a = Audit::new().await;
    a.events(4).await;
    a.seal_all().await;
    let out_path = a.dir.join("follow.jsonl");
    let mut child = std::process::Command::new(actiond_testkit::actiond_bin())
        .args([
            "audit",
            "export",
            "--since",
            "2000-01-01T00:00:00Z",
            "--follow",
        ])
        .env("DATABASE_URL", a.tdb.role_url("auditor").await)
        .env_remove("CREDENTIALS_DIRECTORY")
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let count = |p: &Path| {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("\"record\":\"event\""))
            .count()
    };
    eventually(Duration::from_secs(20), "the first 4 events", || async {
        (count(&out_path) == 4).then_some(())
    })
    .await;
    a.events(6).await;
    a.seal_all().await;
    eventually(Duration::from_secs(20), "the 6 new events", || async {
        (count(&out_path) == 10).then_some(())
    })
    .await;
    let _ = child.kill();
    let _ = child.wait();
    let (ok, _, err) = cli(
        &[
            "audit",
            "verify",
            "--public-key",
            &a.pubkey,
            "--from-file",
            out_path.to_str().unwrap(),
        ],
        &[],
    );
    assert!(ok, "{err}");
}

/// A sealer whose database connections are cut (Postgres restarted, its backend terminated)
/// keeps running: it takes the lock again and seals what came after, so `actiond dev` (which
/// stops when any child exits) and a deployment without a restart policy keep their audit
/// chain sealed. Before the fix the sealer exited with "database error: connection closed".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sealer_survives_its_connection_being_cut() {
    let a = Audit::alone().await;
    a.events(10).await;
    let logs = log_dir("sealer_connection_cut");
    let dir = a.dir.to_str().unwrap().to_owned();
    let env = a.env("sealer").await;
    let args = ["seal", "--interval", "200ms", "--credentials-dir", &dir];
    let mut s = Service::spawn("audit", "sealer", &args, &env, &logs);
    let all = a.all_ids().await.len();
    eventually(Duration::from_secs(30), "first events sealed", || async {
        (a.sealed_ids().await.len() == all).then_some(())
    })
    .await;
    let su = a.tdb.superuser().await;
    let cut: i64 = su
        .query_one(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(cut > 0, "no sealer connection to cut");
    a.events(10).await;
    let all = a.all_ids().await.len();
    eventually(
        Duration::from_secs(30),
        "events after the cut sealed",
        || async { (a.sealed_ids().await.len() == all).then_some(()) },
    )
    .await;
    assert!(
        s.child.try_wait().unwrap().is_none(),
        "the sealer exited after its connection was cut:\n{}",
        s.log_text()
    );
    let (ok, out) = a.verify().await;
    assert!(ok, "{out}");
    s.terminate();
}

/// The owner deletes a tenant's newest seal with its events and their recorded hashes: the
/// chain left verifies on its own. The sealer, which keeps the head outside the database,
/// refuses to extend it (exit 1, nothing sealed), and `verify --anchor` with the head
/// recorded before, or the sealer's sink, names the truncated tail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owner_truncating_the_tail_is_refused_and_named() {
    let a = Audit::new().await;
    for _ in 0..3 {
        a.events(10).await;
        a.seal_all().await;
    }
    let heads = a.heads().await;
    let acme = heads
        .iter()
        .find(|h| h.starts_with("acme:"))
        .unwrap()
        .clone();
    let su = a.owner().await;
    su.batch_execute(
        "DELETE FROM audit_events WHERE id IN (SELECT event_id FROM audit_event_hashes
             WHERE tenant_id = 'acme' AND seal_seq = (SELECT max(seq) FROM audit_seals WHERE tenant_id = 'acme'));
         DELETE FROM audit_event_hashes WHERE tenant_id = 'acme'
             AND seal_seq = (SELECT max(seq) FROM audit_seals WHERE tenant_id = 'acme');
         DELETE FROM audit_seals WHERE tenant_id = 'acme'
             AND seq = (SELECT max(seq) FROM audit_seals WHERE tenant_id = 'acme')",
    )
    .await
    .unwrap();
    // Without an anchor the shorter chain verifies: the hole this closes.
    let (ok, out) = a.verify().await;
    assert!(ok, "{out}");
    a.events(4).await;
    let before = a.seal_count().await;
    let (ok, out) = a.try_seal("10s", false).await;
    assert!(!ok, "the sealer extended a truncated chain: {out}");
    assert!(
        out.contains("refused to seal")
            && out.contains("tenant acme")
            && out.contains("truncated tail"),
        "{out}"
    );
    assert_eq!(a.seal_count().await, before, "a seal was written");
    let (ok, out) = a.verify_with(&["--anchor", &acme]).await;
    assert!(!ok, "{out}");
    assert!(
        out.contains(&format!("anchor {acme}")) && out.contains("truncated tail"),
        "{out}"
    );
    let sink = a.sink();
    let (ok, out) = a
        .verify_with(&["--anchors-from", sink.to_str().unwrap()])
        .await;
    assert!(!ok && out.contains("truncated tail"), "{out}");
}

/// The owner deletes a whole tenant's chain (events, hashes, seals): the sealer refuses and
/// `verify --anchor` names the missing tenant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owner_deleting_a_tenant_chain_is_refused_and_named() {
    let a = Audit::new().await;
    a.events(10).await;
    a.seal_all().await;
    let heads = a.heads().await;
    let beta = heads
        .iter()
        .find(|h| h.starts_with("beta:"))
        .unwrap()
        .clone();
    let su = a.owner().await;
    su.batch_execute(
        "DELETE FROM audit_events WHERE tenant_id = 'beta';
         DELETE FROM audit_event_hashes WHERE tenant_id = 'beta';
         DELETE FROM audit_seals WHERE tenant_id = 'beta'",
    )
    .await
    .unwrap();
    let (ok, out) = a.verify().await;
    assert!(ok, "{out}");
    a.events_of("acme", 3).await;
    let before = a.seal_count().await;
    let (ok, out) = a.try_seal("10s", false).await;
    assert!(!ok, "{out}");
    assert!(
        out.contains("tenant beta") && out.contains("missing tenant"),
        "{out}"
    );
    assert_eq!(a.seal_count().await, before, "a seal was written");
    let (ok, out) = a.verify_with(&["--anchor", &beta]).await;
    assert!(!ok, "{out}");
    assert!(
        out.contains("tenant beta has no seal (missing tenant"),
        "{out}"
    );
}

/// The owner cuts seals from the middle and edits what follows. The sealer with its state
/// refuses; a sealer without one (as before) seals the edited rest with the real key and the
/// chain verifies on its own, but the anchor recorded at seal 2, the sink and the export taken
/// earlier each name the rewritten middle. Untampered, an earlier export is a prefix of
/// today's chain and passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owner_rewriting_the_middle_is_refused_and_named() {
    let a = Audit::new().await;
    a.events_of("acme", 5).await;
    a.seal_all().await;
    a.events_of("acme", 5).await;
    a.seal_all().await;
    let head: String = a
        .tdb
        .superuser()
        .await
        .query_one(
            "SELECT head_hash FROM audit_seals WHERE tenant_id = 'acme' AND seq = 2",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let at2 = format!("acme:2:{head}");
    let export = a.dir.join("export.jsonl");
    let (ok, out, err) = cli(
        &["audit", "export", "--since", "2000-01-01T00:00:00Z"],
        &a.env("auditor").await,
    );
    assert!(ok, "{err}");
    std::fs::write(&export, out).unwrap();
    a.events_of("acme", 5).await;
    a.seal_all().await;
    let export_arg = ["--anchors-from", export.to_str().unwrap()];
    let (ok, out) = a.verify_with(&export_arg).await;
    assert!(ok, "an earlier export is a prefix of today's chain: {out}");

    let su = a.owner().await;
    su.batch_execute(
        "DELETE FROM audit_seals WHERE tenant_id = 'acme' AND seq >= 2;
         DELETE FROM audit_event_hashes WHERE tenant_id = 'acme' AND seal_seq >= 2;
         UPDATE audit_events SET actor = 'mallory'
             WHERE id = (SELECT min(id) FROM audit_events
                         WHERE id > (SELECT last_event_id FROM audit_seals WHERE tenant_id = 'acme' AND seq = 1))",
    )
    .await
    .unwrap();
    let before = a.seal_count().await;
    let (ok, out) = a.try_seal("10s", false).await;
    assert!(!ok, "the sealer re-sealed a cut chain: {out}");
    assert!(
        out.contains("refused to seal") && out.contains("tenant acme"),
        "{out}"
    );
    assert_eq!(a.seal_count().await, before, "a seal was written");

    // What the sealer did before it kept the head: seal the edited rest.
    for _ in 0..10 {
        let (ok, out) = a.try_seal("10s", true).await;
        assert!(ok, "{out}");
        if a.sealed_ids().await == a.all_ids().await {
            break;
        }
    }
    let (ok, out) = a.verify().await;
    assert!(
        ok,
        "re-sealed with the real key, the chain verifies on its own: {out}"
    );
    let (ok, out) = a.verify_with(&["--anchor", &at2]).await;
    assert!(!ok, "{out}");
    assert!(
        out.contains(&format!("anchor {at2}")) && out.contains("rewritten middle"),
        "{out}"
    );
    let (ok, out) = a.verify_with(&export_arg).await;
    assert!(
        !ok && out.contains("seal 2 of tenant acme") && out.contains("rewritten middle"),
        "{out}"
    );
    let sink = a.sink();
    let (ok, out) = a
        .verify_with(&["--anchors-from", sink.to_str().unwrap()])
        .await;
    assert!(!ok && out.contains("rewritten middle"), "{out}");
    // The sealer with its state still refuses the re-sealed chain.
    a.events_of("acme", 1).await;
    let before = a.seal_count().await;
    let (ok, out) = a.try_seal("10s", false).await;
    assert!(!ok && out.contains("tenant acme"), "{out}");
    assert_eq!(a.seal_count().await, before);
}

/// The running sealer with a state directory: while the database's chain does not continue
/// its head it seals nothing, keeps running and exports `actiond_audit_seal_refused 1`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(
    clippy::disallowed_methods,
    reason = "asserts the refusing sealer writes no seal over two of its rounds: a negative over time"
)]
async fn running_sealer_refuses_and_raises_the_metric() {
    let a = Audit::alone().await;
    a.events(6).await;
    let logs = log_dir("sealer_refuses");
    let (dir, state, sink) = (
        a.dir.to_str().unwrap().to_owned(),
        a.state().display().to_string(),
        a.sink().display().to_string(),
    );
    let env = a.env("sealer").await;
    let args = [
        "seal",
        "--interval",
        "200ms",
        "--credentials-dir",
        &dir,
        "--state-dir",
        &state,
        "--sink",
        &sink,
        "--admin-listen",
        "127.0.0.1:0",
    ];
    let mut s = Service::spawn("audit", "sealer", &args, &env, &logs);
    let metrics = format!("http://{}/metrics", s.bound("admin").await);
    let all = a.all_ids().await.len();
    eventually(Duration::from_secs(30), "events sealed", || async {
        (a.sealed_ids().await.len() == all).then_some(())
    })
    .await;
    let scrape = || async { reqwest::get(&metrics).await.unwrap().text().await.unwrap() };
    assert!(scrape().await.contains("actiond_audit_seal_refused 0"));
    let sunk = std::fs::read_to_string(a.sink()).unwrap();
    assert_eq!(sunk.lines().count() as i64, a.seal_count().await, "{sunk}");
    let su = a.owner().await;
    su.batch_execute(
        "DELETE FROM audit_events WHERE tenant_id = 'beta';
         DELETE FROM audit_event_hashes WHERE tenant_id = 'beta';
         DELETE FROM audit_seals WHERE tenant_id = 'beta'",
    )
    .await
    .unwrap();
    eventually(Duration::from_secs(30), "refusal metric", || async {
        scrape()
            .await
            .contains("actiond_audit_seal_refused 1")
            .then_some(())
    })
    .await;
    let before = a.seal_count().await;
    a.events_of("acme", 3).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(a.seal_count().await, before, "a seal was written");
    assert!(s.child.try_wait().unwrap().is_none(), "{}", s.log_text());
    assert!(s.log_text().contains("missing tenant"), "{}", s.log_text());
    s.terminate();
}

/// A state directory without state on a database that holds seals is refused (the sealer
/// cannot tell a truncated chain from a new state); `--adopt-heads` checks every chain from
/// seal 1 with the sealer's key and keeps its heads, and sealing goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_state_on_a_sealed_database_needs_adopt_heads() {
    let a = Audit::new().await;
    a.events(6).await;
    a.seal_all().await;
    std::fs::remove_dir_all(a.state()).unwrap();
    a.events(2).await;
    let before = a.seal_count().await;
    let (ok, out) = a.try_seal("10s", false).await;
    assert!(!ok && out.contains("--adopt-heads"), "{out}");
    assert_eq!(a.seal_count().await, before, "a seal was written");
    let (state, dir) = (a.state(), a.dir.clone());
    let (ok, out, err) = cli(
        &[
            "audit",
            "seal",
            "--once",
            "--wait",
            "10s",
            "--adopt-heads",
            "--credentials-dir",
            dir.to_str().unwrap(),
            "--state-dir",
            state.to_str().unwrap(),
        ],
        &a.env("sealer").await,
    );
    assert!(ok, "{out}{err}");
    let kept = std::fs::read_to_string(state.join("heads.json")).unwrap();
    assert!(
        kept.contains("\"acme\"") && kept.contains("\"beta\""),
        "{kept}"
    );
    a.seal_all().await;
    let (ok, out) = a.verify().await;
    assert!(ok, "{out}");
}
