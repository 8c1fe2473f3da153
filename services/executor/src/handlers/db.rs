//! `db.statement.execute`: the approved statement, with its values bound by type, run as the
//! tenant's role of the target database (the credential file holds the connection URL, with
//! libpq's `sslmode` meaning) in one transaction under `statement_timeout`. More rows touched
//! than the statement's `max_rows` rolls it back. Previews run the same transaction and always
//! roll it back.

use super::{Execution, Handler, Outcome, Read, credential};
use actiond_core::handlers::db_statement::{
    NamedStatement, SqlType, bigint_of, statement, statement_timeout,
};
use serde_json::Value;
use tokio_postgres::types::ToSql;

/// The executor's entry of `db.statement.execute`.
pub(super) static HANDLER: Handler = Handler {
    run: |ex| Box::pin(execute(ex)),
    preview: Some(|ex| Box::pin(preview(ex))),
    read_back: None,
};

/// How a run ended before commit.
pub(crate) enum Run {
    /// The statement touched this many rows (within the cap).
    Rows(u64),
    /// Over the cap: rolled back.
    OverCap { rows: u64, cap: u64 },
}

/// The typed values of `st` from `params.values` (validated at submission).
fn bind(st: &NamedStatement, params: &Value) -> Result<Vec<Box<dyn ToSql + Sync + Send>>, String> {
    let values = params.get("values");
    st.params
        .iter()
        .map(|(name, ty)| {
            let v = values
                .and_then(|m| m.get(name))
                .filter(|v| ty.accepts(v))
                .ok_or_else(|| format!("value {name} is missing or not of type {ty:?}"))?;
            let b: Box<dyn ToSql + Sync + Send> = match ty {
                SqlType::Text => Box::new(v.as_str().unwrap_or_default().to_owned()),
                SqlType::Bigint => Box::new(bigint_of(v).unwrap_or_default()),
                SqlType::Integer => Box::new(
                    v.as_i64()
                        .and_then(|n| i32::try_from(n).ok())
                        .unwrap_or_default(),
                ),
                SqlType::Boolean => Box::new(v.as_bool().unwrap_or_default()),
            };
            Ok(b)
        })
        .collect()
}

/// One database error as a clean line: SQLSTATE and message, never the URL.
fn db_error(what: &str, e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(d) if d.code().code() == "57014" => format!("{what}: canceled by statement_timeout"),
        Some(d) => format!("{what}: {} (SQLSTATE {})", d.message(), d.code().code()),
        None => format!("{what}: {e}"),
    }
}

/// Connects as the tenant's role and runs the statement in a transaction; commits only when
/// `commit` and within the cap. `Err(Outcome)` is the outcome to record.
pub(crate) async fn run(ex: &Execution<'_>, commit: bool) -> Result<Run, Outcome> {
    let Some(st) = statement(ex.params, ex.settings) else {
        return Err(Outcome::Failed(
            "the statement is missing from the approved settings".into(),
        ));
    };
    let url = match credential(ex)? {
        Some(u) => u,
        None => {
            return Err(Outcome::Failed(
                "db.statement.execute needs a credential".into(),
            ));
        }
    };
    let values = bind(&st, ex.params).map_err(Outcome::Failed)?;
    let mut client = actiond_store::tls::connect(&url)
        .await
        .map_err(|e| Outcome::Failed(format!("could not connect to the target database: {e}")))?;
    let tx = client
        .transaction()
        .await
        .map_err(|e| Outcome::Failed(db_error("BEGIN failed", &e)))?;
    let ms = statement_timeout(ex.settings).as_millis().to_string();
    tx.execute("SELECT set_config('statement_timeout', $1, true)", &[&ms])
        .await
        .map_err(|e| Outcome::Failed(db_error("setting statement_timeout failed", &e)))?;
    let refs: Vec<&(dyn ToSql + Sync)> = values
        .iter()
        .map(|b| b.as_ref() as &(dyn ToSql + Sync))
        .collect();
    let rows = tx
        .execute(st.sql.as_str(), &refs)
        .await
        .map_err(|e| Outcome::Failed(db_error("the statement failed and was rolled back", &e)))?;
    if rows > st.max_rows {
        // Dropping the transaction rolls it back; say so explicitly.
        let _ = tx.rollback().await;
        return Ok(Run::OverCap {
            rows,
            cap: st.max_rows,
        });
    }
    if !commit {
        let _ = tx.rollback().await;
        return Ok(Run::Rows(rows));
    }
    tx.commit().await.map_err(|e| {
        Outcome::Unknown(db_error(
            "COMMIT did not answer; the change may have been kept",
            &e,
        ))
    })?;
    Ok(Run::Rows(rows))
}

/// Runs the approved statement and commits it when within its cap.
pub(super) async fn execute(ex: &Execution<'_>) -> Outcome {
    match run(ex, true).await {
        Ok(Run::Rows(n)) => Outcome::Succeeded(format!("{n} row(s) affected")),
        Ok(Run::OverCap { rows, cap }) => {
            Outcome::Failed(format!("would touch {rows} rows, cap {cap}; rolled back"))
        }
        Err(o) => o,
    }
}
/// The rows the statement would touch now, counted in a transaction that is rolled back.
/// Binding: that count (the statement reports no keys of the rows it touches, so the count is
/// what binds). Warning: more rows than the statement's `max_rows`.
async fn preview(ex: &Execution<'_>) -> Result<Read, String> {
    let name = ex
        .params
        .get("statement")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match run(ex, false).await {
        Ok(Run::Rows(n)) => Ok(Read {
            text: format!(
                "Statement {name} would touch {n} row(s) now (counted in a transaction that was rolled back)"
            ),
            binding: serde_json::json!({"rows": n}),
            warnings: Vec::new(),
        }),
        Ok(Run::OverCap { rows, cap }) => Ok(Read {
            text: format!(
                "Statement {name} would touch {rows} rows now, over its cap of {cap}: it would fail and be rolled back"
            ),
            binding: serde_json::json!({"rows": rows}),
            warnings: vec![format!(
                "this statement touches {rows} rows now, more than its max_rows of {cap}"
            )],
        }),
        Err(o) => Err(o.detail().to_owned()),
    }
}
