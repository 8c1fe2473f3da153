//! The SQL layout: tables, indexes, policies and grants in forward-only migrations; functions and
//! their triggers one file each under `sql/functions/`, applied when their content changes; and
//! `sql/schema.sql`, the schema of a freshly migrated database, kept in step by these tests.
//!
//! Regenerate `sql/schema.sql` after a schema change with
//! `ACTIOND_BLESS=1 cargo test -p actiond-e2e --test e2e sql_layout::`.

use actiond_testkit::TestDb;
use std::collections::BTreeSet;
use std::path::PathBuf;

fn schema_sql_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../sql/schema.sql")
}

/// `pg_dump --schema-only` of `url`, without the lines that differ between runs or machines
/// (pg_dump's version line and the random key of `\restrict`).
fn schema_of(url: &str) -> String {
    let out = std::process::Command::new("pg_dump")
        .args([
            "--schema-only",
            "--no-owner",
            "--no-tablespaces",
            "--dbname",
            url,
        ])
        .output()
        .expect("pg_dump runs (Debian package postgresql-client)");
    assert!(
        out.status.success(),
        "pg_dump failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| {
            !l.starts_with("-- Dumped from database version")
                && !l.starts_with("-- Dumped by pg_dump version")
                && !l.starts_with("\\restrict")
                && !l.starts_with("\\unrestrict")
        })
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Fails with a diff hint when `schema` is not the committed `sql/schema.sql` (or writes it,
/// with `ACTIOND_BLESS=1`).
fn assert_committed_schema(schema: &str, what: &str) {
    let path = schema_sql_path();
    if std::env::var_os("ACTIOND_BLESS").is_some() {
        std::fs::write(&path, schema).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != schema {
        let got = std::env::temp_dir().join(format!("schema-{}.sql", uuid::Uuid::new_v4()));
        std::fs::write(&got, schema).unwrap();
        panic!(
            "{what} differs from sql/schema.sql: `diff -u sql/schema.sql {}`; if the change is \
             intended, regenerate it with `ACTIOND_BLESS=1 cargo test -p actiond-e2e --test e2e \
             sql_layout::` and commit it",
            got.display()
        );
    }
}

/// An empty database of its own on the test server, migrated to `version` only.
async fn empty_db_at(version: i32) -> (String, String, actiond_store::Db) {
    let admin_url = actiond_testkit::server_url();
    let admin = actiond_store::tls::connect(&admin_url).await.unwrap();
    let name = format!("t_{}", uuid::Uuid::new_v4().simple());
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap();
    let (base, _) = admin_url.rsplit_once('/').unwrap();
    let url = format!("{base}/{name}");
    let db = actiond_store::Db::connect(&url, 2).unwrap();
    assert_eq!(db.migrate_to(version).await.unwrap().last(), Some(&version));
    (name, url, db)
}

async fn drop_db(name: &str) {
    let admin = actiond_store::tls::connect(&actiond_testkit::server_url())
        .await
        .unwrap();
    let _ = admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_sql_is_the_schema_of_a_freshly_migrated_database() {
    let tdb = TestDb::new().await;
    assert_committed_schema(&schema_of(&tdb.url), "a freshly migrated database's schema");
}

/// A deployment that was at V1 reaches exactly the committed schema.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_at_v1_upgrades_in_place_to_the_committed_schema() {
    let (name, url, db) = empty_db_at(1).await;
    let applied = db.migrate().await.unwrap();
    assert!(applied.contains(&36), "{applied:?}");
    assert_committed_schema(&schema_of(&url), "a database migrated from V1");
    drop_db(&name).await;
}

/// A deployment of the last release before the function files (every migration up to V35,
/// functions as those migrations left them) reaches exactly the committed schema.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_from_before_the_function_files_upgrades_to_the_committed_schema() {
    let last_before = actiond_store::migration_versions()
        .into_iter()
        .filter(|v| *v < 36)
        .max()
        .unwrap();
    let (name, url, db) = empty_db_at(last_before).await;
    assert_eq!(db.migrate().await.unwrap().first(), Some(&36));
    assert_committed_schema(
        &schema_of(&url),
        "a database migrated from the last release",
    );
    drop_db(&name).await;
}

/// A function file is the one definition of its function: a body changed by hand (or by a
/// migration) is put back by the next `migrate` once its recorded hash no longer matches, and
/// an unchanged file is not applied again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_function_file_is_applied_when_its_content_changes() {
    let tdb = TestDb::new().await;
    let c = tdb.superuser().await;
    let original = current_tenants_def(&c).await;
    c.batch_execute(
        "CREATE OR REPLACE FUNCTION actiond_current_tenants() RETURNS text[] LANGUAGE sql STABLE
         AS $$ SELECT ARRAY['everyone'] $$",
    )
    .await
    .unwrap();
    // The recorded hash still matches the file: nothing is applied, the hand edit stays.
    assert_eq!(tdb.db.migrate().await.unwrap(), Vec::<i32>::new());
    assert_ne!(current_tenants_def(&c).await, original);
    // A file whose content differs from what was recorded (as after an upgrade) is applied.
    c.batch_execute(
        "UPDATE actiond_sql_objects SET sha256 = repeat('0', 64) WHERE name = 'actiond_current_tenants'",
    )
    .await
    .unwrap();
    tdb.db.migrate().await.unwrap();
    assert_eq!(current_tenants_def(&c).await, original);
}

async fn current_tenants_def(c: &tokio_postgres::Client) -> String {
    c.query_one(
        "SELECT pg_get_functiondef('actiond_current_tenants'::regproc)",
        &[],
    )
    .await
    .unwrap()
    .get(0)
}

/// Every function and trigger of a migrated database has its file under `sql/functions/`
/// (named after the function), except the one generated from `proposal_transitions`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_function_lives_in_its_own_file() {
    let tdb = TestDb::new().await;
    let c = tdb.superuser().await;
    let in_db: BTreeSet<String> = c
        .query(
            "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
             WHERE n.nspname = 'public' AND p.proname <> 'proposal_transition_legal'",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let files: BTreeSet<String> = actiond_store::sql_objects::FILES
        .iter()
        .map(|(n, _)| (*n).to_owned())
        .collect();
    assert_eq!(
        in_db, files,
        "functions in the database vs files in sql/functions/"
    );
    // Each function is defined in its own file and nowhere else among the files.
    for (name, sql) in actiond_store::sql_objects::FILES {
        // At the start of a line: a function that generates another holds the words in a string.
        let defs = sql
            .lines()
            .filter(|l| l.starts_with("CREATE OR REPLACE FUNCTION "))
            .count();
        assert_eq!(defs, 1, "sql/functions/{name}.sql defines {defs} functions");
        assert!(
            sql.contains(&format!("CREATE OR REPLACE FUNCTION {name}(")),
            "sql/functions/{name}.sql defines another function"
        );
    }
    // Every trigger of the database is in its function's file.
    let triggers = c
        .query(
            "SELECT t.tgname::text, p.proname::text FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
             WHERE NOT t.tgisinternal",
            &[],
        )
        .await
        .unwrap();
    for r in triggers {
        let (trigger, func): (String, String) = (r.get(0), r.get(1));
        let file = actiond_store::sql_objects::FILES
            .iter()
            .find(|(n, _)| *n == func)
            .map(|(_, s)| *s)
            .unwrap_or_default();
        assert!(
            file.contains(&format!("CREATE OR REPLACE TRIGGER {trigger} ")),
            "trigger {trigger} is not in sql/functions/{func}.sql"
        );
    }
}
