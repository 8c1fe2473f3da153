//! `actiond tenant …`: apply, show, history, diff and validate tenant documents; store a
//! shadow (candidate) document and promote it.

use super::{DbArgs, TenantArg, read_source};
use actiond_core::tenant::TenantDocument;
use actiond_runtime::say;
use actiond_store::tenants::{self, Applied};
use std::path::{Path, PathBuf};

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
    /// Print a tenant's document (latest, or `--version N`).
    ///
    /// `--version` here is the document version, so the program-version flag is off for this
    /// one subcommand (clap refuses two arguments named `version`).
    #[command(disable_version_flag = true)]
    Show {
        #[command(flatten)]
        tenant: TenantArg,
        /// Document version to print (default: the latest).
        #[arg(long, value_parser = clap::value_parser!(i32).range(1..))]
        version: Option<i32>,
        #[command(flatten)]
        out: crate::output::Output,
        #[command(flatten)]
        db: DbArgs,
    },
    /// List a tenant's document versions, newest first.
    History {
        #[command(flatten)]
        tenant: TenantArg,
        #[command(flatten)]
        out: crate::output::Output,
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
    /// Store a candidate document that policy evaluates beside the live one on every new
    /// proposal, without acting on it (replaces the tenant's previous candidate). See
    /// `actiond policy shadow-report`.
    Shadow {
        /// YAML file (a whole tenant document).
        #[arg(short = 'f', long)]
        file: PathBuf,
        /// Who stores it (recorded).
        #[arg(long = "as", env = "USER", default_value = "operator")]
        stored_by: String,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Apply the tenant's candidate document as its next version (versioned and audited like
    /// `apply`) and stop evaluating it.
    Promote {
        #[command(flatten)]
        tenant: TenantArg,
        /// Who promotes it (recorded).
        #[arg(long = "as", env = "USER", default_value = "operator")]
        promoted_by: String,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Move a tenant away: freeze it on this cluster (nothing of it moves forward here from
    /// then on), wait for running handlers, and write its rows and sealed audit chain to one
    /// file for `actiond tenant import` on the destination cell. Run as the database owner;
    /// the sealer must be running.
    Export(super::tenant_move::ExportArgs),
    /// Load a file written by `actiond tenant export` into this cluster, after checking it
    /// whole: version, the source sealer's signatures and chain, anchors, and the data against
    /// the sealed `tenant.exported` event. Refuses a tenant that exists here. Run as the
    /// database owner.
    Import(super::tenant_move::ImportArgs),
}

/// `actiond tenant …`.
pub async fn tenant(cmd: TenantCmd) -> anyhow::Result<()> {
    match cmd {
        TenantCmd::Apply {
            file,
            applied_by,
            db,
        } => apply(&file, &applied_by, &db).await,
        TenantCmd::Show {
            tenant,
            version,
            out,
            db,
        } => show(tenant.id(), version, out.output, &db).await,
        TenantCmd::History { tenant, out, db } => history(tenant.id(), out.output, &db).await,
        TenantCmd::Diff { file, db } => diff(&file, &db).await,
        TenantCmd::Validate { file } => validate(&file),
        TenantCmd::Shadow {
            file,
            stored_by,
            db,
        } => shadow(&file, &stored_by, &db).await,
        TenantCmd::Promote {
            tenant,
            promoted_by,
            db,
        } => promote(tenant.id(), &promoted_by, &db).await,
        TenantCmd::Export(a) => super::tenant_move::export(a).await,
        TenantCmd::Import(a) => super::tenant_move::import(a).await,
    }
}

/// `actiond tenant shadow`.
async fn shadow(file: &Path, stored_by: &str, db: &DbArgs) -> anyhow::Result<()> {
    let source = read_source(file)?;
    let db = db.connect()?;
    // A tenant without a live document is "not found" (exit 3), like `tenant show`; a document
    // that does not parse is left to `store`, which names the field (exit 2).
    if let Ok(doc) = TenantDocument::parse(&source) {
        let c = db.client().await?;
        if tenants::latest_version(&c, doc.tenant.as_str())
            .await?
            .is_none()
        {
            return Err(crate::exit::not_found(format!(
                "tenant {:?} has no live document yet: apply one with `actiond tenant apply` first",
                doc.tenant.as_str()
            )));
        }
    }
    let s = actiond_store::shadow::store(&db, &source, stored_by).await?;
    say(&format!(
        "tenant {}: shadow document {} stored (sha256 {}); policy evaluates it beside live version {} without acting on it",
        s.tenant_id,
        s.seq,
        s.sha256,
        s.live_version
            .map_or_else(|| "-".to_owned(), |v| v.to_string())
    ));
    Ok(())
}

/// `actiond tenant promote`.
async fn promote(tenant: &str, promoted_by: &str, db: &DbArgs) -> anyhow::Result<()> {
    let db = db.connect()?;
    let (s, applied) = actiond_store::shadow::promote(&db, tenant, promoted_by).await?;
    match applied {
        Applied::New(d) => say(&format!(
            "tenant {}: shadow document {} promoted: applied version {} (sha256 {})",
            d.tenant_id, s.seq, d.version, d.sha256
        )),
        Applied::Unchanged(d) => say(&format!(
            "tenant {}: shadow document {} promoted: unchanged, still version {} (sha256 {})",
            d.tenant_id, s.seq, d.version, d.sha256
        )),
    }
    Ok(())
}

/// `actiond tenant apply`.
async fn apply(file: &Path, applied_by: &str, db: &DbArgs) -> anyhow::Result<()> {
    let source = read_source(file)?;
    let db = db.connect()?;
    match tenants::apply(&db, &source, applied_by).await? {
        Applied::New(d) => say(&format!(
            "tenant {}: applied version {} (sha256 {})",
            d.tenant_id, d.version, d.sha256
        )),
        Applied::Unchanged(d) => say(&format!(
            "tenant {}: unchanged, still version {} (sha256 {})",
            d.tenant_id, d.version, d.sha256
        )),
    }
    Ok(())
}

/// `actiond tenant show`: exit 3 naming what is missing, the tenant or the version (with the
/// versions there are).
async fn show(
    tenant: &str,
    version: Option<i32>,
    format: crate::output::Format,
    db: &DbArgs,
) -> anyhow::Result<()> {
    let db = db.connect()?;
    let c = db.client().await?;
    let d = match version {
        Some(v) => tenants::version(&c, tenant, v).await?,
        None => tenants::latest(&c, tenant).await?,
    };
    let Some(d) = d else {
        let latest = tenants::latest_version(&c, tenant).await?;
        return Err(crate::exit::not_found(match (version, latest) {
            (_, None) => format!(
                "tenant {tenant:?} has no document (apply one with `actiond tenant apply -f FILE`)"
            ),
            (Some(v), Some((l, _))) => format!(
                "tenant {tenant:?} has no version {v}: its versions are 1 to {l} (`actiond tenant history --tenant {tenant}` lists them)"
            ),
            (None, Some(_)) => format!("tenant {tenant:?} has no document"),
        }));
    };
    let document: serde_json::Value = d
        .parse()
        .ok()
        .and_then(|doc| serde_json::to_value(doc).ok())
        .unwrap_or(serde_json::Value::Null);
    let v = serde_json::json!({
        "tenant": d.tenant_id, "version": d.version, "sha256": d.sha256,
        "applied_by": d.applied_by, "applied_at": d.applied_at,
        "source": d.source, "document": document,
    });
    crate::output::print(format, &v, || {
        format!(
            "# tenant {} version {} sha256 {} applied by {} at {}\n{}",
            d.tenant_id,
            d.version,
            d.sha256,
            d.applied_by,
            d.applied_at,
            d.source.trim_end()
        )
    })
}

/// `actiond tenant history`: exit 3 for a tenant without documents.
async fn history(tenant: &str, format: crate::output::Format, db: &DbArgs) -> anyhow::Result<()> {
    let db = db.connect()?;
    let all = tenants::history(&db, tenant).await?;
    if all.is_empty() {
        return Err(crate::exit::not_found(format!(
            "tenant {tenant:?} has no document"
        )));
    }
    let rows: Vec<serde_json::Value> = all
        .iter()
        .map(|d| {
            serde_json::json!({
                "version": d.version, "applied_at": d.applied_at, "applied_by": d.applied_by,
                "sha256": d.sha256,
            })
        })
        .collect();
    crate::output::print_list(
        format,
        &rows,
        &[
            ("VERSION", "version"),
            ("APPLIED AT", "applied_at"),
            ("APPLIED BY", "applied_by"),
            ("SHA256", "sha256"),
        ],
        "",
    )
}

/// `actiond tenant diff`.
async fn diff(file: &Path, db: &DbArgs) -> anyhow::Result<()> {
    let source = read_source(file)?;
    let new = TenantDocument::parse(&source)?;
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
    Ok(())
}

/// `actiond tenant validate`.
fn validate(file: &Path) -> anyhow::Result<()> {
    let source = read_source(file)?;
    let d = TenantDocument::parse(&source)?;
    let rules = match d.policy.rules.len() {
        1 => "1 rule".to_owned(),
        n => format!("{n} rules"),
    };
    let handlers = match d.handlers.len() {
        0 => "no handlers".to_owned(),
        1 => format!("handler {}", d.handlers.keys().cloned().collect::<String>()),
        _ => format!(
            "handlers {}",
            d.handlers.keys().cloned().collect::<Vec<_>>().join(", ")
        ),
    };
    say(&format!("ok: tenant {}, {rules}, {handlers}", d.tenant));
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
