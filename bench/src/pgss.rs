//! A per-statement profile of the measured database from `pg_stat_statements` (total
//! execution time by normalised statement), when the server preloads the extension
//! (`shared_preload_libraries = 'pg_stat_statements'`).

use anyhow::{Context, Result};
use serde_json::{Value, json};

/// One normalised statement's share of the run.
#[derive(Debug, Clone)]
pub struct Statement {
    /// Executions.
    pub calls: i64,
    /// Mean execution time in milliseconds.
    pub mean_ms: f64,
    /// Share of the database's total execution time over the run (0..=1).
    pub share: f64,
    /// The statement text, whitespace collapsed, cut to 160 characters.
    pub query: String,
}

impl Statement {
    /// `{"calls", "mean_ms", "share", "query"}`.
    pub fn json(&self) -> Value {
        json!({
            "calls": self.calls,
            "mean_ms": crate::stages::round(self.mean_ms, 3),
            "share": crate::stages::round(self.share, 4),
            "query": self.query,
        })
    }
}

/// The services' statements over the run: every statement of the measured database except the
/// bench's own (its superuser's polling and reads).
#[derive(Debug, Clone)]
pub struct Profile {
    /// The statements with the largest total execution time, largest first (every role's).
    pub top: Vec<Statement>,
    /// Executions of the services' statements (`BEGIN` and `COMMIT` included: each is a
    /// statement the server parses and answers).
    pub calls: i64,
    /// Their total execution time in milliseconds.
    pub total_ms: f64,
}

/// Creates the extension in the current database if needed and resets its counters for this
/// database only. Fails (with the server's reason) when the server does not preload it.
pub async fn reset(c: &tokio_postgres::Client) -> Result<()> {
    c.batch_execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        .await
        .context("CREATE EXTENSION pg_stat_statements")?;
    c.batch_execute(
        "SELECT pg_stat_statements_reset(0::oid, (SELECT oid FROM pg_database WHERE datname = current_database()), 0::bigint)",
    )
    .await
    .context("pg_stat_statements_reset (is pg_stat_statements in shared_preload_libraries?)")?;
    Ok(())
}

/// The `n` statements of the current database with the largest total execution time, and the
/// totals of the services' statements (every role but the current one).
pub async fn profile(c: &tokio_postgres::Client, n: i64) -> Result<Profile> {
    let totals = c
        .query_one(
            "SELECT COALESCE(sum(calls), 0)::int8, COALESCE(sum(total_exec_time), 0)::float8
             FROM pg_stat_statements
             WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
               AND userid <> (SELECT oid FROM pg_roles WHERE rolname = current_user)",
            &[],
        )
        .await
        .context("reading pg_stat_statements")?;
    Ok(Profile {
        top: top(c, n).await?,
        calls: totals.get(0),
        total_ms: totals.get(1),
    })
}

/// The `n` statements of the current database with the largest total execution time.
async fn top(c: &tokio_postgres::Client, n: i64) -> Result<Vec<Statement>> {
    let rows = c
        .query(
            "SELECT calls, mean_exec_time, total_exec_time / nullif(sum(total_exec_time) OVER (), 0), query
             FROM pg_stat_statements
             WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
             ORDER BY total_exec_time DESC LIMIT $1",
            &[&n],
        )
        .await
        .context("reading pg_stat_statements")?;
    Ok(rows
        .iter()
        .map(|r| {
            let q: String = r.get(3);
            let q = q.split_whitespace().collect::<Vec<_>>().join(" ");
            Statement {
                calls: r.get(0),
                mean_ms: r.get(1),
                share: r.get::<_, Option<f64>>(2).unwrap_or_default(),
                query: q.chars().take(160).collect(),
            }
        })
        .collect())
}
