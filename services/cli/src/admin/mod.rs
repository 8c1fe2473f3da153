//! Administration: migrations, keys, tenant documents, agents, and the break-glass approvals.
//!
//! One module per command group: `keys` (`actiond keygen` and secret files), `tenant`,
//! `agent`, `approvals` (break-glass) and `policy` (`actiond policy test`). This module holds
//! what they share: the database arguments and `actiond migrate`.

mod agent;
mod approvals;
mod keys;
mod policy;
mod tenant;

pub use agent::{AgentCmd, agent, create_agent};
pub use approvals::{ApprovalsCmd, approvals};
pub use keys::{KeygenArgs, keygen, write_secret};
pub use policy::{PolicySub, policy};
pub use tenant::{TenantCmd, tenant};

use actiond_runtime::say;
use actiond_store::Db;
use anyhow::Context;
use std::path::Path;

/// Database connection arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct DbArgs {
    /// Postgres URL.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: String,
}

impl DbArgs {
    fn connect(&self) -> anyhow::Result<Db> {
        Ok(Db::connect(&self.database_url, 2)?)
    }
}

/// Fails with exit code 3 (`tenant "x" does not exist`) when no tenant `tenant` exists: a
/// misspelt tenant is not an empty list.
async fn tenant_must_exist(db: &Db, tenant: &str) -> anyhow::Result<()> {
    let c = db.client().await?;
    if c.query_opt("SELECT 1 FROM tenants WHERE id = $1", &[&tenant])
        .await?
        .is_none()
    {
        return Err(crate::exit::not_found(format!(
            "tenant {tenant:?} does not exist"
        )));
    }
    Ok(())
}

/// `actiond migrate`.
pub async fn migrate(a: DbArgs) -> anyhow::Result<()> {
    let db = a.connect()?;
    let applied = db.migrate().await?;
    if applied.is_empty() {
        say("migrations: already up to date");
    } else {
        say(&format!("migrations: applied {applied:?}"));
    }
    Ok(())
}

/// Reads a document named on the command line (`-f FILE`).
fn read_source(file: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))
}

/// A clap value parser for a name that must not be empty or only whitespace (`--as`): clap
/// reports the refusal as a usage error naming the flag (exit 2), before anything runs.
pub(crate) fn non_empty(value: &str) -> Result<String, String> {
    if value.trim().is_empty() {
        return Err("must not be empty".into());
    }
    Ok(value.to_owned())
}
