//! Administration: migrations, keys, tenant documents, agents, and the break-glass approvals.

use actiond_core::grant::{GrantSigner, generate_key, validate_key_id};
use actiond_core::handlers::HandlerKind;
use actiond_core::text::reveal_invisible;
use actiond_runtime::credentials::CredentialsDir;
use actiond_runtime::say;
use actiond_store::approvals::{self, Approver, Decided, Verdict};
use actiond_store::tenants::Applied;
use actiond_store::{Db, agents, tenants};
use anyhow::{Context, bail};
use base64::Engine as _;
use std::path::PathBuf;

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

/// `actiond keygen`.
#[derive(Debug, Clone, clap::Args)]
pub struct KeygenArgs {
    /// Key id: `policy-…`, `web-…` or `breakglass-…`.
    #[arg(long)]
    pub key_id: String,
    /// Directory to write `grant_signing_key` (mode 0600, secret) and `<key_id>.pub` into.
    #[arg(long)]
    pub out_dir: PathBuf,
}

/// Creates a new secret file with mode 0600, refusing to overwrite.
pub fn open_secret(path: &std::path::Path) -> anyhow::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot create {} (it must not exist yet)", path.display()))
}

/// Writes a secret file with mode 0600, refusing to overwrite.
pub fn write_secret(path: &std::path::Path, content: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    open_secret(path)?.write_all(content.as_bytes())?;
    Ok(())
}

/// `actiond keygen`.
pub fn keygen(a: KeygenArgs) -> anyhow::Result<()> {
    validate_key_id(&a.key_id)?;
    std::fs::create_dir_all(&a.out_dir)?;
    let k = generate_key()?;
    write_secret(&a.out_dir.join("grant_signing_key"), &k.private_pkcs8_b64)?;
    std::fs::write(
        a.out_dir.join(format!("{}.pub", a.key_id)),
        format!("{}\n", k.public_b64),
    )?;
    say(&format!(
        "wrote {0}/grant_signing_key (secret, 0600) and {0}/{1}.pub (copy it into the executors' trusted_keys directory)",
        a.out_dir.display(),
        a.key_id
    ));
    Ok(())
}

/// `actiond tenant …`.
#[derive(Debug, clap::Subcommand)]
pub enum TenantCmd {
    /// Validate and store a tenant document as the tenant's next version.
    Apply {
        /// YAML file.
        #[arg(short = 'f', long)]
        file: PathBuf,
        /// Who applies it (recorded).
        #[arg(long = "as", env = "USER", default_value = "operator")]
        applied_by: String,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Print a tenant's document (latest, or `--version`).
    Show {
        /// Tenant id.
        tenant: String,
        /// Version.
        #[arg(long)]
        version: Option<i32>,
        #[command(flatten)]
        db: DbArgs,
    },
    /// List a tenant's document versions.
    History {
        /// Tenant id.
        tenant: String,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Show what a new document would change compared with the tenant's latest version.
    Diff {
        /// YAML file.
        #[arg(short = 'f', long)]
        file: PathBuf,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Validate a document without storing it (CEL compiled, fields checked).
    Validate {
        /// YAML file.
        #[arg(short = 'f', long)]
        file: PathBuf,
    },
}

/// `actiond tenant …`.
pub async fn tenant(cmd: TenantCmd) -> anyhow::Result<()> {
    match cmd {
        TenantCmd::Apply {
            file,
            applied_by,
            db,
        } => {
            let source = std::fs::read_to_string(&file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            let db = db.connect()?;
            match tenants::apply(&db, &source, &applied_by).await? {
                Applied::New(d) => say(&format!(
                    "tenant {}: applied version {} (sha256 {})",
                    d.tenant_id, d.version, d.sha256
                )),
                Applied::Unchanged(d) => say(&format!(
                    "tenant {}: unchanged, still version {} (sha256 {})",
                    d.tenant_id, d.version, d.sha256
                )),
            }
        }
        TenantCmd::Show {
            tenant,
            version,
            db,
        } => {
            let db = db.connect()?;
            let c = db.client().await?;
            let d = match version {
                Some(v) => tenants::version(&c, &tenant, v).await?,
                None => tenants::latest(&c, &tenant).await?,
            };
            let Some(d) = d else {
                bail!("tenant {tenant:?} has no such document")
            };
            say(&format!(
                "# tenant {} version {} sha256 {} applied by {} at {}",
                d.tenant_id, d.version, d.sha256, d.applied_by, d.applied_at
            ));
            say(d.source.trim_end());
        }
        TenantCmd::History { tenant, db } => {
            let db = db.connect()?;
            for d in tenants::history(&db, &tenant).await? {
                say(&format!(
                    "v{}\t{}\t{}\t{}",
                    d.version,
                    d.applied_at.to_rfc3339(),
                    d.applied_by,
                    d.sha256
                ));
            }
        }
        TenantCmd::Diff { file, db } => {
            let source = std::fs::read_to_string(&file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            let new = actiond_core::tenant::TenantDocument::parse(&source)?;
            let db = db.connect()?;
            let c = db.client().await?;
            let old = match tenants::latest(&c, new.tenant.as_str()).await? {
                Some(d) => serde_json::to_value(d.parse()?)?,
                None => serde_json::Value::Null,
            };
            let changes = diff_documents(&old, &serde_json::to_value(&new)?);
            if changes.is_empty() {
                say(&format!("tenant {}: no change", new.tenant));
            } else {
                say(&format!(
                    "tenant {}: {} change(s)",
                    new.tenant,
                    changes.len()
                ));
                for ch in changes {
                    say(&format!("  {ch}"));
                }
            }
        }
        TenantCmd::Validate { file } => {
            let source = std::fs::read_to_string(&file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            let d = actiond_core::tenant::TenantDocument::parse(&source)?;
            say(&format!(
                "ok: tenant {}, {} rules, handlers: {}",
                d.tenant,
                d.policy.rules.len(),
                d.handlers.keys().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
    }
    Ok(())
}

/// `actiond agent …`.
#[derive(Debug, clap::Subcommand)]
pub enum AgentCmd {
    /// Create an agent and print its token (shown once; only its SHA-256 is stored).
    Create {
        /// Tenant id.
        #[arg(long)]
        tenant: String,
        /// Agent name (unique in the tenant).
        #[arg(long)]
        name: String,
        /// Owner subject: this person can never approve the agent's proposals.
        #[arg(long)]
        owner: Option<String>,
        /// Token lifetime, e.g. 90d (no expiry when absent).
        #[arg(long)]
        expires_in: Option<String>,
        /// Write the token to this file (mode 0600) instead of printing it.
        #[arg(long)]
        token_file: Option<PathBuf>,
        #[command(flatten)]
        db: DbArgs,
    },
    /// List a tenant's agents.
    List {
        /// Tenant id.
        #[arg(long)]
        tenant: String,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Revoke an agent's token.
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
                .map_err(|e| anyhow::anyhow!("--expires-in: {e}"))?;
            if d.as_secs() == 0 || d.as_secs() > 10 * 365 * 86_400 {
                bail!("--expires-in: must be between 1s and 3650d");
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
            db,
        } => {
            let db = db.connect()?;
            // Create the token file first: a token that cannot be written must not exist.
            let file = match &token_file {
                Some(p) => Some(open_secret(p)?),
                None => None,
            };
            let created =
                create_agent(&db, &tenant, &name, owner.as_deref(), expires_in.as_deref()).await;
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
        }
        AgentCmd::List { tenant, db } => {
            let db = db.connect()?;
            for a in agents::list(&db, &tenant).await? {
                let status = if a.revoked_at.is_some() {
                    "revoked".to_owned()
                } else {
                    a.expires_at
                        .map(|e| format!("expires {}", e.to_rfc3339()))
                        .unwrap_or_else(|| "active".into())
                };
                say(&format!(
                    "{}\t{}\towner={}\t{}",
                    a.name,
                    a.id,
                    a.owner_subject.unwrap_or_default(),
                    status
                ));
            }
        }
        AgentCmd::Revoke { tenant, name, db } => {
            let db = db.connect()?;
            if agents::revoke(&db, &tenant, &name).await? {
                say(&format!("agent {name} in tenant {tenant}: token revoked"));
            } else {
                bail!("no live agent {name:?} in tenant {tenant:?}");
            }
        }
    }
    Ok(())
}

/// Break-glass key arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct BreakGlassKey {
    /// Directory with this operator's `grant_signing_key`; default `$CREDENTIALS_DIRECTORY`.
    #[arg(long, env = "ACTIOND_CLI_CREDENTIALS_DIR")]
    pub credentials_dir: Option<PathBuf>,
    /// Key id (must start with `breakglass-`); executors must trust it explicitly.
    #[arg(
        long,
        env = "ACTIOND_BREAKGLASS_KEY_ID",
        default_value = "breakglass-1"
    )]
    pub key_id: String,
}

/// `actiond approvals …`.
#[derive(Debug, clap::Subcommand)]
pub enum ApprovalsCmd {
    /// Escalated proposals, oldest first.
    List {
        /// Only this tenant.
        #[arg(long)]
        tenant: Option<String>,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Everything a person needs to decide one proposal.
    Show {
        /// Proposal id.
        id: uuid::Uuid,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Approve (break-glass): issues a grant with the break-glass key.
    Approve(DecideArgs),
    /// Deny (break-glass).
    Deny(DecideArgs),
}

/// Arguments of approve/deny.
#[derive(Debug, clap::Args)]
pub struct DecideArgs {
    /// Proposal id.
    pub id: uuid::Uuid,
    /// Your subject; must be an approver of the tenant and not the agent's owner.
    #[arg(long = "as")]
    pub as_subject: String,
    /// The intent hash (prefix, ≥ 8 hex characters) printed by `approvals show`.
    #[arg(long)]
    pub intent: String,
    /// Comment shown to the agent.
    #[arg(long)]
    pub comment: Option<String>,
    #[command(flatten)]
    pub key: BreakGlassKey,
    #[command(flatten)]
    pub db: DbArgs,
}

fn esc(s: &str) -> String {
    reveal_invisible(s, false)
}

/// `actiond approvals …`.
pub async fn approvals(cmd: ApprovalsCmd) -> anyhow::Result<()> {
    match cmd {
        ApprovalsCmd::List { tenant, db } => {
            let db = db.connect()?;
            let t = tenant.map(|t| vec![t]);
            let rows = approvals::list_escalated(&db, t.as_deref(), 200).await?;
            if rows.is_empty() {
                say("no escalated proposals");
            }
            for p in rows {
                let summary = summary_of(&db, &p).await;
                say(&format!(
                    "{}\t{}\t{}\t{}\tintent {}",
                    p.id,
                    p.tenant_id,
                    p.created_at.format("%Y-%m-%d %H:%M:%S"),
                    esc(&summary),
                    &p.intent_hash[..12]
                ));
            }
        }
        ApprovalsCmd::Show { id, db } => {
            let db = db.connect()?;
            let Some(p) = approvals::get(&db, None, id).await? else {
                bail!("proposal {id} not found")
            };
            let summary = summary_of(&db, &p).await;
            say(&format!("proposal   {}", p.id));
            say(&format!("tenant     {}", p.tenant_id));
            say(&format!("state      {}", p.state));
            say(&format!("action     {}", esc(&summary)));
            say(&format!("target     {}", esc(&p.target)));
            say(&format!(
                "agent      {} ({}), owner {}",
                esc(&p.agent_name),
                p.agent_id,
                p.agent_owner.clone().unwrap_or_else(|| "-".into())
            ));
            say(&format!(
                "session    {}",
                esc(p.session_id.as_deref().unwrap_or("-"))
            ));
            say(&format!(
                "rule       {} — {}",
                p.rule_name.clone().unwrap_or_default(),
                esc(p.decision_reason.as_deref().unwrap_or(""))
            ));
            say(&format!("params     {}", esc(&p.params_json)));
            say(&format!(
                "agent says {}",
                esc(p.agent_reason.as_deref().unwrap_or("-"))
            ));
            say("source text (untrusted, written by whoever the agent read):");
            for line in p.source_text.as_deref().unwrap_or("-").lines() {
                say(&format!("  | {}", esc(line)));
            }
            say(&format!("intent     {}", p.intent_hash));
            say(&format!(
                "policy     version {}",
                p.doc_version
                    .map(|v| v.to_string())
                    .unwrap_or_else(|| "-".into())
            ));
            say(&format!(
                "decide with: actiond approvals approve|deny {} --as YOUR_SUBJECT --intent {}",
                p.id,
                &p.intent_hash[..16]
            ));
        }
        ApprovalsCmd::Approve(a) => decide(a, Verdict::Approve).await?,
        ApprovalsCmd::Deny(a) => decide(a, Verdict::Deny).await?,
    }
    Ok(())
}

async fn summary_of(db: &Db, p: &approvals::ProposalDetail) -> String {
    let params: serde_json::Value = serde_json::from_str(&p.params_json).unwrap_or_default();
    let template = match (p.doc_version, db.client().await) {
        (Some(v), Ok(c)) => tenants::version(&c, &p.tenant_id, v)
            .await
            .ok()
            .flatten()
            .and_then(|d| d.parse().ok())
            .and_then(|d| d.handlers.get(&p.action).and_then(|h| h.summary.clone())),
        _ => None,
    };
    match HandlerKind::lookup(&p.action) {
        Some(k) => k.summary(template.as_deref(), &params, &p.target),
        None => format!("{} (no handler)", p.action),
    }
}

async fn decide(a: DecideArgs, verdict: Verdict) -> anyhow::Result<()> {
    if !a.key.key_id.starts_with("breakglass-") {
        bail!("--key-id must start with breakglass-");
    }
    let creds = CredentialsDir::resolve(a.key.credentials_dir.as_deref())?;
    let signer = GrantSigner::from_pkcs8_b64(&a.key.key_id, &creds.read("grant_signing_key")?)?;
    let db = a.db.connect()?;
    let Some(p) = approvals::get(&db, None, a.id).await? else {
        bail!("proposal {} not found", a.id)
    };
    // The operator must be an approver of this tenant (by subject: the CLI sees no ID token).
    let c = db.client().await?;
    let doc = tenants::latest(&c, &p.tenant_id)
        .await?
        .context("tenant has no document")?
        .parse()?;
    drop(c);
    if !doc.approvers.subjects.contains(&a.as_subject) {
        bail!(
            "{} is not listed in approvers.subjects of tenant {}",
            a.as_subject,
            p.tenant_id
        );
    }
    let approver = Approver {
        issuer: "breakglass".into(),
        subject: a.as_subject.clone(),
        email: None,
        channel: "breakglass",
    };
    let out = approvals::decide(
        &db,
        &signer,
        &p.tenant_id,
        a.id,
        &approver,
        verdict,
        &a.intent,
        None,
        a.comment.as_deref(),
    )
    .await?;
    tracing::warn!(proposal = %a.id, operator = %a.as_subject, "break-glass decision recorded");
    match out {
        Decided::Approved { grant_id } => {
            let c = db.client().await?;
            let _ = c
                .execute(
                    "SELECT pg_notify($1, '')",
                    &[&actiond_store::listen::CHANNEL_APPROVED],
                )
                .await;
            say(&format!(
                "approved {} (grant {grant_id}); an executor will run it",
                a.id
            ));
        }
        Decided::Denied => say(&format!("denied {}; nothing will run", a.id)),
        Decided::NeedsMore { have, need } => say(&format!(
            "approval recorded ({have} of {need}); another person must approve"
        )),
        Decided::AlreadyDecided { state, by, at } => bail!(
            "proposal is already {state}{}",
            match (by, at) {
                (Some(b), Some(t)) => format!(" (decided by {b} at {})", t.to_rfc3339()),
                _ => String::new(),
            }
        ),
    }
    Ok(())
}

/// Differences between two tenant documents (as JSON), one line per changed path. Rules are
/// matched by name, so reordering shows as an order change, not as every rule changing.
pub fn diff_documents(old: &serde_json::Value, new: &serde_json::Value) -> Vec<String> {
    use serde_json::Value;
    fn keyed_rules(v: &Value) -> Value {
        // policy.rules: list → map by name, plus the order.
        let mut v = v.clone();
        if let Some(rules) = v
            .pointer("/policy/rules")
            .and_then(Value::as_array)
            .cloned()
        {
            let mut m = serde_json::Map::new();
            let mut order = Vec::new();
            for r in rules {
                let name = r
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                order.push(Value::String(name.clone()));
                m.insert(name, r);
            }
            if let Some(p) = v.pointer_mut("/policy") {
                p["rules"] = Value::Object(m);
                p["rule_order"] = Value::Array(order);
            }
        }
        v
    }
    fn walk(path: &str, a: Option<&Value>, b: Option<&Value>, out: &mut Vec<String>) {
        match (a, b) {
            (Some(Value::Object(x)), Some(Value::Object(y))) => {
                let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
                keys.sort();
                keys.dedup();
                for k in keys {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    walk(&p, x.get(k), y.get(k), out);
                }
            }
            (Some(x), Some(y)) if x == y => {}
            (None, Some(y)) => out.push(format!("+ {path}: {y}")),
            (Some(x), None) => out.push(format!("- {path}: {x}")),
            (Some(x), Some(y)) => out.push(format!("~ {path}: {x} → {y}")),
            (None, None) => {}
        }
    }
    let mut out = Vec::new();
    walk(
        "",
        Some(&keyed_rules(old)),
        Some(&keyed_rules(new)),
        &mut out,
    );
    out
}

/// `actiond policy test`.
#[derive(Debug, clap::Subcommand)]
pub enum PolicySub {
    /// Replay a tenant's recorded proposals through a candidate document and report how many
    /// decisions would change, per rule and effect, before anyone applies it.
    Test {
        /// Candidate tenant document (YAML).
        #[arg(short = 'f', long)]
        file: PathBuf,
        /// How far back to replay, e.g. 7d, 24h.
        #[arg(long, default_value = "7d")]
        since: String,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        db: DbArgs,
    },
}

/// `actiond policy test`.
pub async fn policy(cmd: PolicySub) -> anyhow::Result<()> {
    use actiond_core::policy::{CompiledPolicy, History, decide};
    use std::collections::BTreeMap;
    let PolicySub::Test {
        file,
        since,
        json,
        db,
    } = cmd;
    let source = std::fs::read_to_string(&file)
        .with_context(|| format!("cannot read {}", file.display()))?;
    let doc = actiond_core::tenant::TenantDocument::parse(&source)?;
    let since = actiond_core::ids::parse_duration(&since).map_err(anyhow::Error::msg)?;
    let tenant = doc.tenant.as_str().to_owned();
    let candidate = CompiledPolicy::new(
        doc,
        0,
        actiond_core::canonical::sha256_hex(source.as_bytes()),
    )
    .map_err(anyhow::Error::msg)?;
    let db = db.connect()?;
    let c = db.client().await?;
    let recorded = actiond_store::policy_queue::decided_since(&c, &tenant, since).await?;
    let mut changed: BTreeMap<(String, String, String), u64> = BTreeMap::new();
    let mut unchanged = 0u64;
    for r in &recorded {
        let history = match candidate.doc.handler(&r.row.action) {
            Some(h) => {
                actiond_store::policy_queue::history_at(
                    &c,
                    &tenant,
                    r.row.agent_id,
                    &r.row.action,
                    candidate.doc.policy.history_window,
                    h.kind.history_sum_param(),
                    r.row.id,
                    r.created_at,
                )
                .await?
            }
            None => History::default(),
        };
        let input = r.row.eval_input(history);
        let d = decide(&candidate, &input);
        if d.effect.as_str() == r.effect {
            unchanged += 1;
        } else {
            let rule = d.rule.clone().unwrap_or_else(|| "(default)".into());
            *changed
                .entry((r.effect.clone(), d.effect.as_str().to_owned(), rule))
                .or_default() += 1;
        }
    }
    let total_changed: u64 = changed.values().sum();
    if json {
        let rows: Vec<serde_json::Value> = changed
            .iter()
            .map(|((from, to, rule), n)| serde_json::json!({"from": from, "to": to, "rule": rule, "count": n}))
            .collect();
        say(&serde_json::to_string_pretty(&serde_json::json!({
            "tenant": tenant, "replayed": recorded.len(), "unchanged": unchanged, "changed": total_changed, "changes": rows
        }))?);
    } else {
        say(&format!(
            "policy test: tenant {tenant}, {} decided proposals in the window",
            recorded.len()
        ));
        say(&format!("  unchanged  {unchanged}"));
        say(&format!("  changed    {total_changed}"));
        for ((from, to, rule), n) in &changed {
            say(&format!(
                "    {from} → {to}: {n} (deciding rule now: {rule})"
            ));
        }
    }
    Ok(())
}
