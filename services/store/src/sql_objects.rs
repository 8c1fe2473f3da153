//! Replaceable objects: the database functions, each with the triggers that call it, kept one
//! file each under `sql/functions/` and applied by the migrator when their content changes.
//!
//! Tables, columns, indexes, row-level security policies and grants are forward-only
//! migrations (`sql/migrations/`, refinery). A function is different: it can be replaced in
//! place (`CREATE OR REPLACE FUNCTION`, `CREATE OR REPLACE TRIGGER`), so copying its whole
//! previous body into every migration that changes one line only hides the rule. Each file
//! here holds the current definition, and a rule change is a one-file diff (the approach of
//! Lemmy's `replaceable_schema`, without dropping anything: tables' triggers and policies
//! depend on these functions).
//!
//! When they are applied: by [`crate::Db::migrate`], after the migrations and under the same
//! advisory lock, in one transaction — every file whose SHA-256 differs from the one recorded
//! in `actiond_sql_objects`, and every file when a migration was applied in the same run (a
//! migration may have redefined or dropped what a file defines; the file wins). Files are run
//! in name order with `check_function_bodies = off`, as `pg_dump` restores functions, so one
//! file may call a function another file defines. A file that fails rolls every file back,
//! and the migration run reports it.
//!
//! What a file may hold: `CREATE OR REPLACE FUNCTION`, `CREATE OR REPLACE TRIGGER` (Postgres
//! 14 or newer), `COMMENT ON`, `GRANT`/`REVOKE … ON FUNCTION` — statements that can run again
//! and again with the same result. `proposal_transition_legal` is not among them:
//! `actiond_compile_transitions()` generates it from the rows of `proposal_transitions`.

use crate::Result;

/// `(file stem, SQL)` for every `sql/functions/*.sql`, sorted by name (embedded at build time
/// by `build.rs`).
pub const FILES: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/sql_objects.rs"));

/// Applies the files that changed (all of them when `all`), in one transaction on `client`.
/// Returns the stems applied. Errors name the file.
pub(crate) async fn apply(client: &mut tokio_postgres::Client, all: bool) -> Result<Vec<String>> {
    let tx = client.transaction().await?;
    tx.batch_execute("SET LOCAL check_function_bodies = off")
        .await?;
    let recorded: std::collections::HashMap<String, String> = tx
        .query("SELECT name, sha256 FROM actiond_sql_objects", &[])
        .await?
        .into_iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let mut applied = Vec::new();
    for (name, sql) in FILES {
        let sha = actiond_core::canonical::sha256_hex(sql.as_bytes());
        if !all && recorded.get(*name) == Some(&sha) {
            continue;
        }
        tx.batch_execute(sql).await.map_err(|e| {
            crate::StoreError::Migration(format!(
                "sql/functions/{name}.sql: {}",
                crate::db_detail(&e)
            ))
        })?;
        tx.execute(
            "INSERT INTO actiond_sql_objects (name, sha256) VALUES ($1, $2)
             ON CONFLICT (name) DO UPDATE SET sha256 = EXCLUDED.sha256, applied_at = now()",
            &[name, &sha],
        )
        .await?;
        applied.push((*name).to_owned());
    }
    tx.commit().await?;
    Ok(applied)
}
