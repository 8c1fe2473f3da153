//! `actiond policy test`: replay a tenant's recorded decisions through a candidate document;
//! `actiond policy shadow-report`: what a shadow document decided differently on live traffic.

use super::{DbArgs, read_source};
use crate::output::Format;
use actiond_core::policy::{CompiledPolicy, History, decide_within};
use actiond_runtime::say;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// How long `policy test` lets one replayed decision run. Recorded params come from agents, so
/// a candidate rule they make slow gives the overrun's fail-closed decision
/// (`Decision::budget_exceeded`) rather than holding the command; it is counted as changed
/// like any other decision. Longer than the services' budgets (policy's default is 100 ms, the
/// executor's re-check 200 ms), because a command run by hand need not keep up with a queue.
const REPLAY_BUDGET: std::time::Duration = std::time::Duration::from_secs(1);

/// `actiond policy test`.
#[derive(Debug, clap::Subcommand)]
pub enum PolicySub {
    /// Replay a tenant's recorded proposals through a candidate document and report how many
    /// decisions would change, per rule and effect, before anyone applies it.
    Test {
        /// Candidate tenant document (YAML).
        #[arg(short = 'f', long)]
        file: PathBuf,
        /// Replay the proposals decided since: a duration back from now (`7d`, `24h`) or an
        /// RFC 3339 time with its offset; a time in the future, or more than 36500d ago, is
        /// refused.
        #[arg(long, default_value = "7d", value_parser = crate::args::since)]
        since: chrono::DateTime<chrono::Utc>,
        /// The same as `-o json` (the older spelling, kept for scripts).
        #[arg(long, hide = true)]
        json: bool,
        #[command(flatten)]
        out: crate::output::Output,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Report how a tenant's shadow document (`actiond tenant shadow`) would have decided the
    /// proposals since it was stored: how many it flips, which way, by its deciding rule, with
    /// examples.
    ShadowReport {
        #[command(flatten)]
        tenant: super::TenantArg,
        /// Candidate number (default: the open one, else the latest).
        #[arg(long)]
        shadow: Option<i32>,
        /// The same as `-o json` (the older spelling, kept for scripts).
        #[arg(long, hide = true)]
        json: bool,
        #[command(flatten)]
        out: crate::output::Output,
        #[command(flatten)]
        db: DbArgs,
    },
}

/// `actiond policy test|shadow-report`.
pub async fn policy(cmd: PolicySub) -> anyhow::Result<()> {
    match cmd {
        PolicySub::Test {
            file,
            since,
            json,
            out,
            db,
        } => what_if(&file, since, format(json, out), &db).await,
        PolicySub::ShadowReport {
            tenant,
            shadow,
            json,
            out,
            db,
        } => shadow_report(tenant.id(), shadow, format(json, out), &db).await,
    }
}

/// `-o`, or `json` when the older `--json` is given.
fn format(json: bool, out: crate::output::Output) -> Format {
    if json { Format::Json } else { out.output }
}

/// `actiond policy shadow-report`.
async fn shadow_report(
    tenant: &str,
    seq: Option<i32>,
    format: Format,
    db: &DbArgs,
) -> anyhow::Result<()> {
    let db = db.connect()?;
    let c = db.client().await?;
    let Some(r) = actiond_store::shadow::report(&c, tenant, seq).await? else {
        return Err(crate::exit::not_found(format!(
            "tenant {tenant:?} has no such shadow document (store one with `actiond tenant shadow -f FILE`)"
        )));
    };
    if format != Format::Table {
        return crate::output::print(format, &serde_json::to_value(&r)?, String::new);
    }
    let s = &r.shadow;
    let status = match (s.closed_at, s.promoted_version) {
        (None, _) => "being evaluated".to_owned(),
        (Some(_), Some(v)) => format!("promoted to version {v}"),
        (Some(_), None) => "replaced".to_owned(),
    };
    say(&format!(
        "shadow report: tenant {tenant}, shadow document {} ({status}; stored by {} at {}, beside live version {})",
        s.seq,
        s.stored_by,
        s.stored_at.to_rfc3339(),
        s.live_version
            .map_or_else(|| "-".to_owned(), |v| v.to_string())
    ));
    say(&format!("  evaluated  {}", r.evaluated));
    say(&format!("  agreed     {}", r.agreed));
    say(&format!("  flipped    {}", r.evaluated - r.agreed));
    for f in &r.flips {
        say(&format!(
            "    {} {} → {}: {} (shadow rule: {})",
            f.direction, f.from, f.to, f.count, f.rule
        ));
        for e in &f.examples {
            say(&format!(
                "      e.g. {} {} (live rule: {})",
                e.proposal_id,
                actiond_core::text::reveal_invisible(&e.action, false),
                e.live_rule
            ));
        }
    }
    Ok(())
}

/// `actiond policy test`.
async fn what_if(
    file: &std::path::Path,
    since: chrono::DateTime<chrono::Utc>,
    format: Format,
    db: &DbArgs,
) -> anyhow::Result<()> {
    let source = read_source(file)?;
    let doc = actiond_core::tenant::TenantDocument::parse(&source)?;
    let since = (actiond_runtime::clock::now_utc() - since)
        .to_std()
        .unwrap_or_default();
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
    // (from, to, deciding rule, whether that rule failed to evaluate) → proposal ids.
    let mut changed: BTreeMap<(String, String, String, bool), Vec<String>> = BTreeMap::new();
    let mut unchanged = 0u64;
    // Proposals on which a candidate rule failed to evaluate, with the errors.
    let mut failures: Vec<(String, Vec<String>)> = Vec::new();
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
        let mut input = r.eval_input(history);
        // Replayed at the time the proposal was submitted, as its history is.
        input.now = Some(r.created_at);
        let d = decide_within(&candidate, &input, REPLAY_BUDGET);
        let failed = !d.errors.is_empty();
        if failed {
            failures.push((r.id.to_string(), d.errors.clone()));
        }
        let was = r.effect.map(|e| e.as_str()).unwrap_or_default();
        if d.effect.as_str() == was {
            unchanged += 1;
        } else {
            let rule = d.rule.clone().unwrap_or_else(|| "(default)".into());
            changed
                .entry((was.to_owned(), d.effect.as_str().to_owned(), rule, failed))
                .or_default()
                .push(r.id.to_string());
        }
    }
    let total_changed: usize = changed.values().map(Vec::len).sum();
    if format != Format::Table {
        let rows: Vec<serde_json::Value> = changed
            .iter()
            .map(|((from, to, rule, failed), ids)| {
                serde_json::json!({
                    "from": from, "to": to, "rule": rule, "count": ids.len(),
                    "failed_to_evaluate": failed, "proposal_ids": ids,
                })
            })
            .collect();
        let failures: Vec<serde_json::Value> = failures
            .iter()
            .map(|(id, errors)| serde_json::json!({"proposal_id": id, "errors": errors}))
            .collect();
        crate::output::print(
            format,
            &serde_json::json!({
                "tenant": tenant, "replayed": recorded.len(), "unchanged": unchanged,
                "changed": total_changed, "changes": rows,
                "failed_to_evaluate": failures.len(), "failures": failures,
            }),
            String::new,
        )?;
    } else {
        say(&format!(
            "policy test: tenant {tenant}, {} decided proposals in the window",
            recorded.len()
        ));
        say(&format!("  unchanged  {unchanged}"));
        say(&format!("  changed    {total_changed}"));
        for ((from, to, rule, failed), ids) in &changed {
            let why = if *failed {
                format!("rule {rule} failed to evaluate, so it failed closed")
            } else {
                format!("deciding rule now: {rule}")
            };
            say(&format!("    {from} → {to}: {} ({why})", ids.len()));
            for id in ids {
                say(&format!("      {id}"));
            }
        }
        say(&format!(
            "  failed to evaluate  {} (a rule that fails counts as matched with at least escalate)",
            failures.len()
        ));
        for (id, errors) in &failures {
            say(&format!("    {id}: {}", errors.join("; ")));
        }
    }
    Ok(())
}
