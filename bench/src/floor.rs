//! The floor: the least durable, audited allow path Postgres can carry on this machine,
//! measured with `pgbench` in the same run as the gateway.
//!
//! `floor/min-schema.sql` is one wide proposal row written once, a narrow state change per
//! stage, a grant row and an append-only event per stage, three partial indexes, no triggers
//! and no RLS. `floor/lifecycle-min.sql` is one pgbench transaction script per proposal: submit;
//! claim + approve + grant; claim + spend; finish: four commits, one event each. It leaves out
//! signing, HTTP, RLS, the transition rules and everything else the gateway must do: a
//! physical lower bound on Postgres work per proposal, not a design.

use crate::cpu::{Meter, Postgres};
use anyhow::{Context, Result, bail};
use std::collections::BTreeMap;
use std::process::Stdio;

const MIN_SCHEMA: &str = include_str!("../floor/min-schema.sql");
const LIFECYCLE: &str = include_str!("../floor/lifecycle-min.sql");

/// One floor run's figures.
#[derive(Debug, Clone)]
pub struct Floor {
    /// pgbench's `tps` (without initial connection time): proposals per second.
    pub per_second: f64,
    /// Transactions (= proposals) pgbench completed.
    pub proposals: u64,
    /// pgbench clients (connections).
    pub clients: usize,
    /// Run length in seconds (`pgbench -T`).
    pub seconds: u64,
    /// CPU seconds per component over the run (`postgres`, `postgres-aux`, `bench client` =
    /// pgbench).
    pub cpu: BTreeMap<String, f64>,
}

/// libpq environment (`PGHOST`, `PGPORT`, `PGUSER`, `PGPASSWORD`, `PGSSLMODE`) for the server
/// of `server_url`, so pgbench reaches the same server as the gateway's tests.
fn libpq_env(server_url: &str) -> Result<Vec<(&'static str, String)>> {
    let u = url::Url::parse(server_url).context("ACTIOND_TEST_DATABASE_URL is not a URL")?;
    let mut env = vec![
        ("PGHOST", u.host_str().unwrap_or("127.0.0.1").to_owned()),
        ("PGPORT", u.port().unwrap_or(5432).to_string()),
        (
            "PGUSER",
            if u.username().is_empty() {
                "postgres".to_owned()
            } else {
                u.username().to_owned()
            },
        ),
        ("PGOPTIONS", "-c client_min_messages=warning".to_owned()),
    ];
    if let Some(p) = u.password() {
        env.push(("PGPASSWORD", p.to_owned()));
    }
    if let Some((_, m)) = u.query_pairs().find(|(k, _)| k == "sslmode") {
        env.push(("PGSSLMODE", m.into_owned()));
    }
    Ok(env)
}

fn parse_pgbench(out: &str) -> Result<(f64, u64)> {
    let after = |prefix: &str| {
        out.lines()
            .find_map(|l| l.trim().strip_prefix(prefix))
            .and_then(|r| r.split_whitespace().next())
            .map(str::to_owned)
    };
    let tps = after("tps = ").context("no `tps =` in pgbench output")?;
    let n = after("number of transactions actually processed:")
        .context("no transaction count in pgbench output")?;
    Ok((tps.parse()?, n.parse()?))
}

/// Runs the floor for `seconds` with `clients` pgbench connections on a scratch database of
/// the server at `server_url` (created and dropped here). `pg_backend_pid` attributes Postgres
/// CPU when the server runs on this machine.
pub async fn run(server_url: &str, seconds: u64, clients: usize) -> Result<Floor> {
    let name = format!("actiond_floor_{}", uuid::Uuid::new_v4().simple());
    let (admin, conn) = tokio_postgres::connect(server_url, tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await?;
    let result = run_in(server_url, &admin, &name, seconds, clients).await;
    let _ = admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .await;
    result
}

async fn run_in(
    server_url: &str,
    admin: &tokio_postgres::Client,
    name: &str,
    seconds: u64,
    clients: usize,
) -> Result<Floor> {
    let env = libpq_env(server_url)?;
    let db_url = {
        let mut u = url::Url::parse(server_url)?;
        u.set_path(name);
        u.to_string()
    };
    let (c, conn) = tokio_postgres::connect(&db_url, tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    c.batch_execute(&format!("SET client_min_messages = warning; {MIN_SCHEMA}"))
        .await?;
    drop(c);
    let script = std::env::temp_dir().join(format!("{name}.sql"));
    std::fs::write(&script, LIFECYCLE)?;
    let backend: i32 = admin
        .query_one("SELECT pg_backend_pid()", &[])
        .await?
        .get(0);
    let child = tokio::process::Command::new("pgbench")
        .args(["-n", "-M", "prepared", "-j", "2"])
        .arg("-c")
        .arg(clients.to_string())
        .arg("-T")
        .arg(seconds.to_string())
        .arg("-f")
        .arg(&script)
        .arg(name)
        .envs(env)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context(
            "cannot run pgbench (install the PostgreSQL client tools, or pass --floor-seconds 0)",
        )?;
    let pid = child.id().unwrap_or_default();
    let meter = Meter::start(
        vec![("bench client", pid)],
        Postgres::from_backend(backend, name),
    );
    let out = child.wait_with_output().await?;
    let cpu = meter.stop();
    let _ = std::fs::remove_file(&script);
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "pgbench failed: {}{}",
            stdout,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let (per_second, proposals) = parse_pgbench(&stdout)?;
    Ok(Floor {
        per_second,
        proposals,
        clients,
        seconds,
        cpu,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_pgbench_summary() {
        let out = "transaction type: /tmp/x.sql\nnumber of clients: 16\n\
                   number of transactions actually processed: 11846\n\
                   latency average = 20.2 ms\n\
                   initial connection time = 31.0 ms\n\
                   tps = 795.123 (without initial connection time)\n";
        let (tps, n) = parse_pgbench(out).unwrap();
        assert!((tps - 795.123).abs() < 1e-9);
        assert_eq!(n, 11846);
        assert!(parse_pgbench("pgbench: error").is_err());
    }

    #[test]
    fn libpq_env_from_url() {
        let env = libpq_env("postgres://bob:pw@db.local:6543/postgres?sslmode=require").unwrap();
        let get = |k: &str| env.iter().find(|(n, _)| *n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("PGHOST"), Some("db.local"));
        assert_eq!(get("PGPORT"), Some("6543"));
        assert_eq!(get("PGUSER"), Some("bob"));
        assert_eq!(get("PGPASSWORD"), Some("pw"));
        assert_eq!(get("PGSSLMODE"), Some("require"));
    }
}
