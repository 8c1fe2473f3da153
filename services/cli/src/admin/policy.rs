//! `actiond policy test`: replay a tenant's recorded decisions through a candidate document.

use super::{DbArgs, read_source};
use actiond_core::policy::{CompiledPolicy, History, decide};
use actiond_runtime::say;
use std::collections::BTreeMap;
use std::path::PathBuf;

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
    let PolicySub::Test {
        file,
        since,
        json,
        db,
    } = cmd;
    let source = read_source(&file)?;
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
        let history = match candidate.doc.handler(&r.action) {
            Some(h) => {
                actiond_store::policy_queue::history_at(
                    &c,
                    &tenant,
                    r.agent_id,
                    &r.action,
                    candidate.doc.policy.history_window,
                    h.kind.history_sum_param(),
                    r.id,
                    r.created_at,
                )
                .await?
            }
            None => History::default(),
        };
        let input = r.eval_input(history);
        let d = decide(&candidate, &input);
        let was = r.effect.map(|e| e.as_str()).unwrap_or_default();
        if d.effect.as_str() == was {
            unchanged += 1;
        } else {
            let rule = d.rule.clone().unwrap_or_else(|| "(default)".into());
            *changed
                .entry((was.to_owned(), d.effect.as_str().to_owned(), rule))
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
