//! `actiond agent …`: create agents (printing their token once), list, freeze, unfreeze and
//! revoke them.

use super::DbArgs;
use super::keys::open_secret;
use actiond_runtime::say;
use actiond_store::{Db, agents};
use base64::Engine as _;
use std::path::PathBuf;

/// `actiond agent …`.
#[derive(Debug, clap::Subcommand)]
pub enum AgentCmd {
    /// Create an agent and print its token (shown once; only its SHA-256 is stored), or, with
    /// --jwt-issuer and --jwt-subject, an agent that authenticates with a workload JWT only
    /// (no token is created or printed).
    Create {
        /// Tenant id.
        #[arg(long)]
        tenant: String,
        /// Agent name (unique in the tenant).
        #[arg(long)]
        name: String,
        /// Owner subject: this person can never approve the agent's proposals. An empty one
        /// is a usage error naming `--owner` (exit 2): it made an agent nobody owns; so is
        /// one longer than 255 characters or with a control, bidi or invisible character.
        /// Required: an agent without an owner is one that any approver may approve.
        #[arg(long, value_parser = super::owner)]
        owner: String,
        /// Token lifetime, e.g. 90d (no expiry when absent).
        #[arg(long)]
        expires_in: Option<String>,
        /// Write the token to this file (mode 0600) instead of printing it.
        #[arg(long)]
        token_file: Option<PathBuf>,
        /// The `iss` of the agent's workload JWTs: one of the api's trusted issuers
        /// (exactly as the tokens carry it). Needs --jwt-subject.
        #[arg(long, requires = "jwt_subject", conflicts_with_all = ["expires_in", "token_file"])]
        jwt_issuer: Option<String>,
        /// The `sub` of the agent's workload JWTs (e.g.
        /// `system:serviceaccount:support:support-bot`). Needs --jwt-issuer.
        #[arg(long, requires = "jwt_issuer")]
        jwt_subject: Option<String>,
        #[command(flatten)]
        db: DbArgs,
    },
    /// List a tenant's agents.
    List {
        /// Tenant id.
        #[arg(long)]
        tenant: String,
        #[command(flatten)]
        out: crate::output::Output,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Freeze an agent, as an approver's stop button does: its pending and escalated proposals
    /// are denied, an approved one is refused by the executor without running, and its new
    /// proposals are refused until it is unfrozen (audited as `agent.frozen`, by
    /// `operator:cli`).
    Freeze {
        /// Tenant id.
        #[arg(long)]
        tenant: String,
        /// Agent name.
        #[arg(long)]
        name: String,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Unfreeze an agent an approver froze, so its new proposals are accepted again (the
    /// operator's way out when its owner is not an approver; audited as `agent.unfrozen`).
    Unfreeze {
        /// Tenant id.
        #[arg(long)]
        tenant: String,
        /// Agent name.
        #[arg(long)]
        name: String,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Revoke an agent for good: its token and workload identity stop authenticating, its
    /// pending and escalated proposals are denied, and an approved one is refused by the
    /// executor without running (audited as `agent.revoked`).
    Revoke {
        /// Tenant id.
        #[arg(long)]
        tenant: String,
        /// Agent name.
        #[arg(long)]
        name: String,
        #[command(flatten)]
        db: DbArgs,
    },
}

/// A new random agent token: `actiond_` + 256 bits base64url.
pub fn new_token() -> String {
    let bytes: [u8; 32] = rand::random();
    format!(
        "actiond_{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    )
}

/// Creates an agent; returns (agent, token).
pub async fn create_agent(
    db: &Db,
    tenant: &str,
    name: &str,
    owner: Option<&str>,
    expires_in: Option<&str>,
) -> anyhow::Result<(agents::Agent, String)> {
    let secs = match expires_in {
        None => None,
        Some(s) => {
            let d = actiond_core::ids::parse_duration(s)
                .map_err(|e| crate::exit::invalid(format!("--expires-in: {e}")))?;
            if d.as_secs() == 0 || d.as_secs() > 10 * 365 * 86_400 {
                return Err(crate::exit::invalid(
                    "--expires-in: must be between 1s and 3650d",
                ));
            }
            Some(i64::try_from(d.as_secs())?)
        }
    };
    let token = new_token();
    let hash = actiond_core::canonical::sha256_hex(token.as_bytes());
    let agent = agents::create(db, tenant, name, owner, &hash, secs).await?;
    Ok((agent, token))
}

/// `actiond agent …`.
pub async fn agent(cmd: AgentCmd) -> anyhow::Result<()> {
    match cmd {
        AgentCmd::Create {
            tenant,
            name,
            owner,
            expires_in,
            token_file,
            jwt_issuer,
            jwt_subject,
            db,
        } => {
            let db = db.connect()?;
            // A missing tenant is "not found" (exit 3), as for `agent list`, before a token
            // file is created.
            super::tenant_must_exist(&db, &tenant).await?;
            if let (Some(iss), Some(sub)) = (jwt_issuer, jwt_subject) {
                return create_workload(&db, &tenant, &name, Some(&owner), &iss, &sub).await;
            }
            create(
                &db,
                &tenant,
                &name,
                Some(&owner),
                expires_in.as_deref(),
                token_file,
            )
            .await
        }
        AgentCmd::List { tenant, out, db } => list(&tenant, out.output, &db).await,
        AgentCmd::Revoke { tenant, name, db } => revoke(&tenant, &name, &db).await,
        AgentCmd::Freeze { tenant, name, db } => freeze(&tenant, &name, &db).await,
        AgentCmd::Unfreeze { tenant, name, db } => unfreeze(&tenant, &name, &db).await,
    }
}

/// `actiond agent create`: the token goes to `token_file` (created first, removed again if the
/// agent cannot be created) or to stdout.
async fn create(
    db: &Db,
    tenant: &str,
    name: &str,
    owner: Option<&str>,
    expires_in: Option<&str>,
    token_file: Option<PathBuf>,
) -> anyhow::Result<()> {
    // Create the token file first: a token that cannot be written must not exist.
    let file = match &token_file {
        Some(p) => Some(open_secret(p)?),
        None => None,
    };
    let created = create_agent(db, tenant, name, owner, expires_in).await;
    let (a, token) = match created {
        Ok(x) => x,
        Err(e) => {
            if let Some(p) = &token_file {
                let _ = std::fs::remove_file(p);
            }
            return Err(e);
        }
    };
    match (token_file, file) {
        (Some(p), Some(mut f)) => {
            use std::io::Write as _;
            f.write_all(token.as_bytes())?;
            say(&format!(
                "agent {} ({}) created in tenant {}; token written to {}",
                a.name,
                a.id,
                a.tenant_id,
                p.display()
            ));
        }
        _ => {
            say(&format!(
                "agent {} ({}) created in tenant {}",
                a.name, a.id, a.tenant_id
            ));
            say(&format!("token (shown once): {token}"));
        }
    }
    Ok(())
}

/// `actiond agent create --jwt-issuer ISS --jwt-subject SUB`: no token exists for this agent.
async fn create_workload(
    db: &Db,
    tenant: &str,
    name: &str,
    owner: Option<&str>,
    issuer: &str,
    subject: &str,
) -> anyhow::Result<()> {
    let a = agents::create_workload(db, tenant, name, owner, issuer, subject).await?;
    say(&format!(
        "agent {} ({}) created in tenant {}; it authenticates with JWTs from issuer {issuer} with subject {subject} (no token was created)",
        a.name, a.id, a.tenant_id
    ));
    Ok(())
}

/// `actiond agent list`: exit 3 for a tenant that does not exist.
async fn list(tenant: &str, format: crate::output::Format, db: &DbArgs) -> anyhow::Result<()> {
    let db = db.connect()?;
    let all = agents::list(&db, tenant).await?;
    if all.is_empty() {
        super::tenant_must_exist(&db, tenant).await?;
    }
    let rows: Vec<serde_json::Value> = all
        .iter()
        .map(|a| {
            let status = if a.revoked_at.is_some() {
                "revoked"
            } else if a.frozen_at.is_some() {
                "frozen"
            } else {
                "active"
            };
            serde_json::json!({
                "name": a.name, "id": a.id, "tenant": a.tenant_id, "owner": a.owner_subject,
                "status": status, "created_at": a.created_at, "expires_at": a.expires_at,
                "frozen_at": a.frozen_at, "revoked_at": a.revoked_at,
            })
        })
        .collect();
    crate::output::print_list(
        format,
        &rows,
        &[
            ("NAME", "name"),
            ("ID", "id"),
            ("OWNER", "owner"),
            ("STATUS", "status"),
            ("EXPIRES", "expires_at"),
            ("FROZEN SINCE", "frozen_at"),
        ],
        &format!("no agents in tenant {tenant}"),
    )
}

/// `actiond agent revoke`: exit 3 when there is no live agent of that name.
async fn revoke(tenant: &str, name: &str, db: &DbArgs) -> anyhow::Result<()> {
    let db = db.connect()?;
    match agents::revoke(&db, tenant, agents::AgentRef::Name(name), "operator").await? {
        Some((_, denied)) => say(&format!(
            "agent {name} in tenant {tenant}: revoked; {denied} open proposal(s) denied, an approved one will not run"
        )),
        None => {
            return Err(crate::exit::not_found(format!(
                "no live agent {name:?} in tenant {tenant:?}"
            )));
        }
    }
    Ok(())
}

/// The agent named `name` in `tenant`; exit 3 when there is none.
async fn named(db: &Db, tenant: &str, name: &str) -> anyhow::Result<agents::Agent> {
    agents::list(db, tenant)
        .await?
        .into_iter()
        .find(|a| a.name == name)
        .ok_or_else(|| crate::exit::not_found(format!("no agent {name:?} in tenant {tenant:?}")))
}

/// `actiond agent freeze`: as `operator:cli`; exit 3 when there is no such agent or it is
/// frozen already.
async fn freeze(tenant: &str, name: &str, db: &DbArgs) -> anyhow::Result<()> {
    let db = db.connect()?;
    let agent = named(&db, tenant, name).await?;
    let reason = "agent frozen by an operator: its open requests were denied.";
    match agents::freeze(&db, tenant, agent.id, "operator:cli", reason).await? {
        Some(denied) => {
            say(&format!(
                "agent {name} in tenant {tenant}: frozen; {denied} open proposal(s) denied, its new ones are refused until `actiond agent unfreeze`"
            ));
            Ok(())
        }
        None => Err(crate::exit::not_found(format!(
            "agent {name:?} in tenant {tenant:?} is frozen already"
        ))),
    }
}

/// `actiond agent unfreeze`: as `operator:cli`; exit 3 when there is no such agent or it is
/// not frozen.
async fn unfreeze(tenant: &str, name: &str, db: &DbArgs) -> anyhow::Result<()> {
    let db = db.connect()?;
    let agent = named(&db, tenant, name).await?;
    if agents::unfreeze(&db, tenant, agent.id, "operator:cli").await? {
        say(&format!(
            "agent {name} in tenant {tenant}: unfrozen; its new proposals are accepted again"
        ));
        Ok(())
    } else {
        Err(crate::exit::not_found(format!(
            "agent {name:?} in tenant {tenant:?} is not frozen"
        )))
    }
}
