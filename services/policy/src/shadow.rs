//! Shadow evaluation in the policy worker: each proposal of a batch whose tenant has an open
//! candidate document is decided a second time by the candidate — rules, `min_effect`,
//! "no handler" and its budgets (read-only: a candidate reserves nothing) — and both results are
//! recorded in the batch's transaction. Nothing the candidate says changes the proposal.

use actiond_core::policy::{CompiledPolicy, Decision, decide_within, raise_for_budget};
use actiond_core::tenant::TenantDocument;
use actiond_store::policy_queue::{self, DecidedRow};
use actiond_store::shadow::{ShadowCache, ShadowResult};
use deadpool_postgres::Transaction;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

/// The open candidates of the batch's tenants, compiled, by tenant (with their numbers).
pub async fn open_candidates(
    tx: &Transaction<'_>,
    cache: &ShadowCache,
    decided: &[DecidedRow<'_>],
) -> actiond_store::Result<HashMap<String, (i32, CompiledPolicy)>> {
    let tenants: Vec<String> = decided
        .iter()
        .map(|d| d.row.tenant_id.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    cache.open_of(tx, &tenants).await
}

/// Their documents alone, for the budget reservation.
pub fn documents(
    shadows: &HashMap<String, (i32, CompiledPolicy)>,
) -> HashMap<String, Arc<TenantDocument>> {
    shadows
        .iter()
        .map(|(t, (_, p))| (t.clone(), p.doc.clone()))
        .collect()
}

/// Evaluates the open candidates beside the live decisions (already final, budgets included)
/// and records the results. Each candidate evaluation runs off the async executor with the
/// worker's time budget and fails closed like a live one. Rows of frozen or revoked agents are
/// skipped.
/// Returns how many proposals were shadow-evaluated.
pub async fn evaluate_and_record(
    tx: &Transaction<'_>,
    shadows: &HashMap<String, (i32, CompiledPolicy)>,
    decided: &[DecidedRow<'_>],
    budget: Duration,
) -> actiond_store::Result<usize> {
    if shadows.is_empty() {
        return Ok(0);
    }
    let mut results = Vec::new();
    // A frozen agent's proposal is blocked whatever the candidate says (V20 lets nothing of
    // it move forward), so it is neither evaluated nor counted in the shadow report.
    for d in decided.iter().filter(|d| !d.row.agent_stopped()) {
        let Some((seq, candidate)) = shadows.get(&d.row.tenant_id) else {
            continue;
        };
        let decision = evaluate(tx, candidate, d, budget).await?;
        results.push(ShadowResult {
            tenant_id: d.row.tenant_id.clone(),
            shadow_seq: *seq,
            proposal_id: d.row.id,
            action: d.row.action.clone(),
            live_effect: d.decision.effect,
            live_rule: d.decision.rule.clone(),
            shadow_effect: decision.effect,
            shadow_rule: decision.rule,
            shadow_reason: decision.reason,
        });
    }
    actiond_store::shadow::record(tx, &results).await?;
    Ok(results.len())
}

/// The candidate's decision for one proposal, as the live path would make it.
async fn evaluate(
    tx: &Transaction<'_>,
    candidate: &CompiledPolicy,
    d: &DecidedRow<'_>,
    budget: Duration,
) -> actiond_store::Result<Decision> {
    let input = policy_queue::rules_input(tx, candidate, d.row).await?;
    let p = candidate.clone();
    let mut decision =
        actiond_runtime::with_budget(budget, move || decide_within(&p, &input, budget))
            .await
            .unwrap_or_else(|| Decision::budget_exceeded(candidate));
    if decision.effect != actiond_core::policy::Effect::Block {
        let params: serde_json::Value =
            serde_json::from_str(&d.row.params_json).unwrap_or_default();
        // The live reservation of this very proposal is already written: leave it out.
        if let Some(b) = actiond_store::budgets::first_exceeded(
            tx,
            &candidate.doc,
            d.row,
            &params,
            Some(d.row.id),
        )
        .await?
        {
            raise_for_budget(&mut decision, b);
        }
    }
    Ok(decision)
}
