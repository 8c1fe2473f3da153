//! `db.statement.execute`: the approved statement, with its values bound by type, run as the
//! tenant's role of the target database (the credential file holds the connection URL, with
//! libpq's `sslmode` meaning) in one transaction under `statement_timeout`. More rows touched
//! than the statement's `max_rows` rolls it back. Previews run the same transaction and always
//! roll it back. A statement that declares a `read_back` query has its effect read back: the
//! query runs after the statement, in a read-only transaction under the same credential with
//! the same typed values, and the rows it returns are compared with what was approved.

use super::{Execution, Handler, Outcome, Read, credential};
use actiond_core::effect::{EffectRecord, Verdict};
use actiond_core::handlers::db_statement::{
    NamedStatement, SqlType, bigint_of, same_value, statement, statement_timeout,
};
use serde_json::{Value, json};
use tokio_postgres::types::{ToSql, Type};

/// The executor's entry of `db.statement.execute`.
pub(super) static HANDLER: Handler = Handler {
    run: |ex| Box::pin(execute(ex)),
    preview: Some(|ex| Box::pin(preview(ex))),
    read_back: Some(|ex| Box::pin(read_back(ex))),
};

/// Most rows a read-back keeps as evidence (it counts them all).
const EVIDENCE_ROWS: usize = 20;

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

/// The Postgres type a statement param binds as.
fn pg_type(ty: SqlType) -> Type {
    match ty {
        SqlType::Text => Type::TEXT,
        SqlType::Bigint => Type::INT8,
        SqlType::Integer => Type::INT4,
        SqlType::Boolean => Type::BOOL,
    }
}

/// An unread record: nothing concluded, `reason` says why.
fn unread(reason: String) -> EffectRecord {
    EffectRecord {
        verdict: Verdict::Unread,
        after: String::new(),
        reason,
        evidence: Value::Null,
        settled: false,
    }
}

/// The rows after the statement: its `read_back` query, run in a read-only transaction as
/// the tenant's role with the approved values, each row as `to_jsonb` gives it. A statement
/// without `read_back` is [`Verdict::Unread`] ("declares no read_back").
async fn read_back(ex: &Execution<'_>) -> EffectRecord {
    let Some(st) = statement(ex.params, ex.settings) else {
        return unread("the statement is missing from the approved settings".into());
    };
    let name = ex
        .params
        .get("statement")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let Some(rb) = st.read_back.clone() else {
        return unread(format!(
            "statement {name} declares no read_back query: its rows are not read after the run"
        ));
    };
    match read_rows(ex, &st, &rb.sql).await {
        Ok(rows) => compare(name, &st, ex.params, rows, reported_rows(ex.reported)),
        Err(reason) => unread(reason),
    }
}

/// The row count a run reported (`{n} row(s) affected`), when this read-back follows a run.
fn reported_rows(reported: Option<&str>) -> Option<u64> {
    reported?.strip_suffix(" row(s) affected")?.parse().ok()
}

/// Runs `sql` (one SELECT) as a subquery in a read-only transaction under the statement's
/// timeout, with the statement's values bound by their declared types.
async fn read_rows(
    ex: &Execution<'_>,
    st: &NamedStatement,
    sql: &str,
) -> Result<Vec<Value>, String> {
    let url = credential(ex)
        .map_err(|o| o.detail().to_owned())?
        .ok_or("db.statement.execute needs a credential")?;
    let values = bind(st, ex.params)?;
    let mut client = actiond_store::tls::connect(&url)
        .await
        .map_err(|e| format!("could not connect to the target database: {e}"))?;
    let tx = client
        .build_transaction()
        .read_only(true)
        .start()
        .await
        .map_err(|e| db_error("BEGIN READ ONLY failed", &e))?;
    let ms = statement_timeout(ex.settings).as_millis().to_string();
    tx.execute("SELECT set_config('statement_timeout', $1, true)", &[&ms])
        .await
        .map_err(|e| db_error("setting statement_timeout failed", &e))?;
    let types: Vec<Type> = st.params.iter().map(|(_, t)| pg_type(*t)).collect();
    let stmt = tx
        .prepare_typed(&format!("SELECT to_jsonb(r) FROM ({sql}) r"), &types)
        .await
        .map_err(|e| db_error("the read_back query was refused", &e))?;
    let refs: Vec<&(dyn ToSql + Sync)> = values
        .iter()
        .map(|b| b.as_ref() as &(dyn ToSql + Sync))
        .collect();
    let rows = tx
        .query(&stmt, &refs)
        .await
        .map_err(|e| db_error("the read_back query failed", &e))?;
    let _ = tx.rollback().await;
    Ok(rows.iter().map(|r| r.get::<_, Value>(0)).collect())
}

/// Compares the rows read back with what was approved. It matches when at least one row came
/// back, no more than the run reported (or, settling, than `max_rows`), and every row holds
/// the expected values; no row, or rows without the approved values, is
/// [`Verdict::Absent`] (the statement's effect is not visible: settling reads it as `failed`);
/// more rows than reported is [`Verdict::Differs`].
fn compare(
    name: &str,
    st: &NamedStatement,
    params: &Value,
    rows: Vec<Value>,
    reported: Option<u64>,
) -> EffectRecord {
    let values = params.get("values");
    let expect: Vec<(String, Value)> = st
        .read_back
        .iter()
        .flat_map(|rb| rb.expect.iter())
        .map(|(col, e)| (col.clone(), e.value(values).cloned().unwrap_or(Value::Null)))
        .collect();
    let off: Vec<String> = rows
        .iter()
        .filter_map(|row| {
            let wrong: Vec<String> = expect
                .iter()
                .filter(|(col, want)| !row.get(col).is_some_and(|got| same_value(got, want)))
                .map(|(col, want)| {
                    format!(
                        "{col} = {} (approved {want})",
                        row.get(col).unwrap_or(&Value::Null)
                    )
                })
                .collect();
            (!wrong.is_empty()).then(|| wrong.join(", "))
        })
        .collect();
    let n = rows.len() as u64;
    let cap = reported.unwrap_or(st.max_rows);
    let want: Vec<String> = expect.iter().map(|(c, v)| format!("{c} = {v}")).collect();
    let after = format!(
        "Statement {name}: {n} row(s) read back{}",
        rows.first()
            .map(|r| format!(
                ", e.g. {}",
                r.to_string().chars().take(200).collect::<String>()
            ))
            .unwrap_or_default()
    );
    let (verdict, reason) = if n == 0 {
        (
            Verdict::Absent,
            "the read_back query returned no row".to_owned(),
        )
    } else if !off.is_empty() {
        (
            Verdict::Absent,
            format!(
                "{} of {n} row(s) do not hold the approved values: {}",
                off.len(),
                off.first().cloned().unwrap_or_default()
            ),
        )
    } else if n > cap {
        let of = match reported {
            Some(r) => format!("the statement reported {r}"),
            None => format!("its max_rows is {}", st.max_rows),
        };
        (Verdict::Differs, format!("{n} row(s) read back, but {of}"))
    } else {
        (Verdict::Matches, String::new())
    };
    EffectRecord {
        verdict,
        after,
        reason,
        evidence: json!({
            "statement": name,
            "rows_read": n,
            "rows_reported": reported,
            "expected": want,
            "rows": rows.iter().take(EVIDENCE_ROWS).collect::<Vec<_>>(),
        }),
        settled: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st() -> NamedStatement {
        let settings = json!({"statements": {"set_status": {
            "sql": "UPDATE orders SET status = $2 WHERE id = $1",
            "params": [{"name": "order_id", "type": "bigint"}, {"name": "status", "type": "text"}],
            "max_rows": 1,
            "read_back": {"sql": "SELECT id, status FROM orders WHERE id = $1",
                          "expect": {"status": {"param": "status"}, "id": {"param": "order_id"}}}}}});
        statement(&json!({"statement": "set_status"}), &settings).unwrap()
    }

    #[test]
    fn rows_are_compared_with_the_approved_values_and_the_reported_count() {
        let p = json!({"statement": "set_status", "values": {"order_id": "9007199254740993", "status": "held"}});
        let row = json!({"id": 9_007_199_254_740_993_i64, "status": "held"});
        let ok = compare("set_status", &st(), &p, vec![row.clone()], Some(1));
        assert_eq!(ok.verdict, Verdict::Matches, "{ok:?}");
        let other = json!({"id": 9_007_199_254_740_993_i64, "status": "open"});
        let no = compare("set_status", &st(), &p, vec![other], Some(1));
        assert_eq!(no.verdict, Verdict::Absent);
        assert_eq!(
            no.reason,
            "1 of 1 row(s) do not hold the approved values: status = \"open\" (approved \"held\")"
        );
        let none = compare("set_status", &st(), &p, vec![], None);
        assert_eq!(none.verdict, Verdict::Absent);
        let more = compare("set_status", &st(), &p, vec![row.clone(), row], Some(1));
        assert_eq!(more.verdict, Verdict::Differs);
        assert_eq!(
            more.reason,
            "2 row(s) read back, but the statement reported 1"
        );
        assert_eq!(reported_rows(Some("3 row(s) affected")), Some(3));
        assert_eq!(reported_rows(None), None);
    }
}
