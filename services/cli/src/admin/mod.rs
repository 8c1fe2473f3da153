//! Administration: migrations, keys, tenant documents, agents, and the break-glass approvals.
//!
//! One module per command group: `keys` (`actiond keygen` and secret files), `tenant`,
//! `agent`, `approvals` (break-glass) and `policy` (`actiond policy test`). This module holds
//! what they share: the database arguments and `actiond migrate`.

mod agent;
mod approvals;
mod effect_lines;
mod keys;
mod policy;
mod tenant;
mod tenant_move;

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

/// The tenant a command is about: `--tenant ID`, as everywhere; the positional form (`tenant
/// show acme`), the older spelling, is still read (hidden) for scripts that use it.
#[derive(Debug, Clone, clap::Args)]
pub struct TenantArg {
    /// Tenant id.
    #[arg(
        long = "tenant",
        value_name = "TENANT",
        required_unless_present = "tenant_positional"
    )]
    tenant: Option<String>,
    /// Tenant id, as a positional argument (the older spelling; use `--tenant`).
    #[arg(value_name = "TENANT", hide = true, conflicts_with = "tenant")]
    tenant_positional: Option<String>,
}

impl TenantArg {
    /// The tenant id given.
    pub fn id(&self) -> &str {
        self.tenant
            .as_deref()
            .or(self.tenant_positional.as_deref())
            .unwrap_or_default()
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

/// Longest `approvals approve|deny --comment`, in characters: a tenant rule's `reason` has the
/// same bound (the comment replaces the rule's reason in what the agent reads).
pub(crate) const MAX_COMMENT_CHARS: usize = 500;

/// `--comment`: 1 to [`MAX_COMMENT_CHARS`] characters, no control characters. It becomes the
/// proposal's reason, returned to the agent (REST, MCP) and shown to approvers; before, any
/// length and any byte were stored, where the web app's note keeps 200 characters without
/// control characters.
pub(crate) fn comment(value: &str) -> Result<String, String> {
    if value.trim().is_empty() {
        return Err("must not be empty".into());
    }
    let n = value.chars().count();
    if n > MAX_COMMENT_CHARS {
        return Err(format!(
            "must be at most {MAX_COMMENT_CHARS} characters (got {n})"
        ));
    }
    if let Some(c) = value.chars().find(|c| c.is_control()) {
        return Err(format!(
            "must not contain control characters (U+{:04X}); write one line of text",
            u32::from(c)
        ));
    }
    Ok(value.to_owned())
}

/// Longest `agent create --owner`, in characters: OpenID Connect bounds a `sub` at 255 ASCII
/// characters.
pub(crate) const MAX_OWNER_CHARS: usize = 255;

/// `--owner`: the owner's subject, 1 to [`MAX_OWNER_CHARS`] characters, without control,
/// bidi or invisible characters (a subject with a hidden character would never match the
/// owner's sign-in, so the owner could approve their own agent). Clap reports a refusal as a
/// usage error naming the flag (exit 2).
pub(crate) fn owner(value: &str) -> Result<String, String> {
    let value = non_empty(value)?;
    let n = value.chars().count();
    if n > MAX_OWNER_CHARS {
        return Err(format!(
            "must be at most {MAX_OWNER_CHARS} characters, an OIDC subject (got {n})"
        ));
    }
    if let Some(c) = value
        .chars()
        .find(|c| actiond_core::text::is_suspicious(*c))
    {
        return Err(format!(
            "must not contain control, bidi or invisible characters (U+{:04X} {}); give the owner's subject exactly",
            u32::from(c),
            actiond_core::text::char_name(c)
        ));
    }
    Ok(value)
}

/// A clap value parser for a name that must not be empty or only whitespace (`--as`): clap
/// reports the refusal as a usage error naming the flag (exit 2), before anything runs.
pub(crate) fn non_empty(value: &str) -> Result<String, String> {
    if value.trim().is_empty() {
        return Err("must not be empty".into());
    }
    Ok(value.to_owned())
}
