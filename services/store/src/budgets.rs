//! Budgets in Postgres: what a tenant's declared budgets have used, and the reservation the
//! policy worker makes for each proposal it does not block (table `budget_reservations`).
//!
//! **Atomicity.** Reading the usage and inserting the reservation are two statements, so two
//! policy transactions deciding proposals of the same (tenant, action) at once could each see
//! room for one more and jointly overrun. Every reservation of a (tenant, action) therefore
//! first takes a transaction-scoped advisory lock on that pair; the locks of one batch are
//! taken in sorted order, so two batches never wait on each other in a cycle. The lock is held
//! until the decision commits, and in READ COMMITTED each usage query sees every reservation
//! committed before the lock was granted.
//!
//! What counts: a proposal policy allowed, until it ends `blocked` or `expired`; a proposal
//! that escalated (by a rule or by the budget itself), once a person approved it — money a
//! person has not approved is not spent. Nothing counts once older than the budget's window.
//! A reservation holds the summed param's value, never the params.
//!
//! **Plans.** The usage queries read the window's reservations through
//! `budget_reservations_window` and look each one's proposal up by primary key. `OFFSET 0` in
//! their `EXISTS` keeps Postgres from turning it into a semi-join (a hash join over a sequential
//! scan of every proposal, and of every reservation) under the generic plan of a prepared
//! statement, which it chose for a one-tenant table: measured with 10,000 and 200,000
//! proposals, 570 → 13,700 buffers per query before, 1,385 → 1,740 after (the window's
//! reservations held constant; `tests/e2e/read_plans.rs`).

use crate::Result;
use crate::policy_queue::DecidedRow;
use actiond_core::policy::{CompiledPolicy, Effect, raise_for_budget};
use actiond_core::tenant::{Budget, BudgetScope, TenantDocument};
use deadpool_postgres::{GenericClient, Transaction};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use uuid::Uuid;

/// Whether reservation `r` of proposal `p` counts (see the module docs). While a batch is being
/// decided its proposals are still `pending`: the allowed ones count at once.
const COUNTS: &str = "p.state NOT IN ('blocked', 'denied', 'expired', 'withdrawn', 'amended', 'stale')
    AND (r.allowed OR p.state IN ('approved', 'executing', 'succeeded', 'failed', 'outcome_unknown', 'effect_mismatch'))";

/// The value of `budget.sum_of` in `params`, as counted: an integer ≥ 0 (anything else counts 0;
/// handler schemas make budgeted params positive integers at submission).
pub fn amount_of(params: &serde_json::Value, sum_of: &str) -> i64 {
    params
        .get(sum_of)
        .and_then(serde_json::Value::as_i64)
        .unwrap_or(0)
        .max(0)
}

/// The statement of [`used`]: `$1` tenant, `$2` action, `$3` summed param, `$4` the window in
/// seconds, `$5` the agent (NULL: tenant-wide), `$6` the proposal left out (NULL: none).
/// Public for the plan tests.
pub fn used_sql() -> String {
    format!(
        "SELECT COALESCE(sum(r.amount), 0)::bigint FROM budget_reservations r
             WHERE r.tenant_id = $1 AND r.action = $2 AND r.sum_of = $3
               AND r.reserved_at > now() - make_interval(secs => $4)
               AND ($5::uuid IS NULL OR r.agent_id = $5)
               AND ($6::uuid IS NULL OR r.proposal_id <> $6)
               AND EXISTS (SELECT 1 FROM proposals p WHERE p.id = r.proposal_id AND {COUNTS} OFFSET 0)"
    )
}

/// The statement of [`use_ratio`]: `$1`–`$4` as [`used_sql`], `$5` whether per agent.
/// Public for the plan tests.
pub fn use_ratio_sql() -> String {
    format!(
        "SELECT COALESCE(max(s), 0)::bigint FROM (
                SELECT sum(r.amount) AS s FROM budget_reservations r
                WHERE r.tenant_id = $1 AND r.action = $2 AND r.sum_of = $3
                  AND r.reserved_at > now() - make_interval(secs => $4)
                  AND EXISTS (SELECT 1 FROM proposals p WHERE p.id = r.proposal_id AND {COUNTS} OFFSET 0)
                GROUP BY CASE WHEN $5 THEN r.agent_id END) per_scope"
    )
}

/// What `budget` has used in its window for `agent` (ignored for tenant-wide budgets), not
/// counting the reservation of `exclude`.
pub async fn used<C: GenericClient>(
    c: &C,
    tenant: &str,
    agent: Uuid,
    budget: &Budget,
    exclude: Option<Uuid>,
) -> Result<i64> {
    let agent = (budget.scope == BudgetScope::Agent).then_some(agent);
    let stmt = c.prepare_cached(&used_sql()).await?;
    let secs = budget.per.as_secs_f64();
    let row = c
        .query_one(
            &stmt,
            &[
                &tenant,
                &budget.action,
                &budget.sum_of,
                &secs,
                &agent,
                &exclude,
            ],
        )
        .await?;
    Ok(row.get(0))
}

/// The most-used share of `budget` right now (used ÷ max; above 1.0 when a person approved
/// past it): the tenant's use, or the highest agent's for per-agent budgets.
pub async fn use_ratio<C: GenericClient>(c: &C, tenant: &str, budget: &Budget) -> Result<f64> {
    let stmt = c.prepare_cached(&use_ratio_sql()).await?;
    let per_agent = budget.scope == BudgetScope::Agent;
    let secs = budget.per.as_secs_f64();
    let row = c
        .query_one(
            &stmt,
            &[&tenant, &budget.action, &budget.sum_of, &secs, &per_agent],
        )
        .await?;
    let used: i64 = row.get(0);
    Ok(used as f64 / budget.max as f64)
}

/// The first budget of `doc` that `amount_of(params)` would take past its max, given what each
/// has used (not counting `exclude`). Read-only: the shadow evaluation uses it as it is, the
/// live path under the (tenant, action) lock.
pub async fn first_exceeded<'d, C: GenericClient>(
    c: &C,
    doc: &'d TenantDocument,
    row: &crate::proposals::ProposalRow,
    params: &serde_json::Value,
    exclude: Option<Uuid>,
) -> Result<Option<&'d Budget>> {
    for b in doc.budgets_of(&row.action) {
        let used = used(c, &row.tenant_id, row.agent_id, b, exclude).await?;
        if !b.fits(used, amount_of(params, &b.sum_of)) {
            return Ok(Some(b));
        }
    }
    Ok(None)
}

/// One proposal escalated by a budget, for metrics and logs.
#[derive(Debug, Clone)]
pub struct OverBudget {
    /// Tenant.
    pub tenant: String,
    /// The budgeted action.
    pub action: String,
    /// The proposal.
    pub proposal_id: Uuid,
}

/// The (tenant, action) pairs whose budget lock a batch takes, sorted: those of the rows that
/// reserve, i.e. that have a budget (`budgeted`, live or candidate) and are not blocked. A
/// blocked row reserves nothing and no budget can lower its effect, so it locks nothing: a
/// batch whose only row of a pair is blocked does not wait on, or hold up, that pair's writers.
fn lock_keys<'r>(
    rows: impl Iterator<Item = (&'r str, &'r str, Effect, bool)>,
) -> BTreeSet<(String, String)> {
    rows.filter(|&(_, _, effect, budgeted)| budgeted && effect != Effect::Block)
        .map(|(tenant, action, _, _)| (tenant.to_owned(), action.to_owned()))
        .collect()
}

/// Applies the live budgets to a batch of decisions, in the policy worker's transaction and
/// after the rules: locks each (tenant, action) that a row reserves for ([`lock_keys`], sorted),
/// then, in claim order,
/// raises `allow` to `escalate` for a proposal that would exceed a budget, and reserves every
/// proposal that is not blocked. `policies` are the documents the batch was decided with, by
/// tenant; `candidates` the tenants' open shadow documents, whose budgets are reserved for too
/// (so a candidate's new budget has a usage to be judged on) but never enforced. Returns the
/// proposals a budget escalated.
pub async fn reserve_batch(
    tx: &Transaction<'_>,
    decided: &mut [DecidedRow<'_>],
    policies: &HashMap<String, Option<CompiledPolicy>>,
    candidates: &HashMap<String, Arc<TenantDocument>>,
) -> Result<Vec<OverBudget>> {
    let live_of = |tenant: &str| {
        policies
            .get(tenant)
            .and_then(Option::as_ref)
            .map(|p| p.doc.clone())
    };
    // The params each row reserves: those of its action's budgets, live or candidate.
    let sums_of = |d: &DecidedRow<'_>| -> BTreeSet<String> {
        let tenant = d.row.tenant_id.as_str();
        live_of(tenant)
            .into_iter()
            .chain(candidates.get(tenant).cloned())
            .flat_map(|doc| {
                doc.budgets_of(&d.row.action)
                    .map(|b| b.sum_of.clone())
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let sums: Vec<BTreeSet<String>> = decided.iter().map(sums_of).collect();
    let keys = lock_keys(decided.iter().zip(&sums).map(|(d, s)| {
        (
            d.row.tenant_id.as_str(),
            d.row.action.as_str(),
            d.decision.effect,
            !s.is_empty(),
        )
    }));
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let lock = tx
        .prepare_cached("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
        .await?;
    for (tenant, action) in &keys {
        let key = format!("actiond.budget\u{1f}{tenant}\u{1f}{action}");
        tx.execute(&lock, &[&key]).await?;
    }
    let insert = tx
        .prepare_cached(
            "INSERT INTO budget_reservations (proposal_id, tenant_id, agent_id, action, sum_of, amount, allowed)
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING",
        )
        .await?;
    let mut over = Vec::new();
    for (d, sums) in decided.iter_mut().zip(&sums) {
        if sums.is_empty() || d.decision.effect == Effect::Block {
            continue;
        }
        let params: serde_json::Value =
            serde_json::from_str(&d.row.params_json).unwrap_or_default();
        if let Some(doc) = live_of(&d.row.tenant_id)
            && let Some(b) = first_exceeded(tx, &doc, d.row, &params, None).await?
            && raise_for_budget(&mut d.decision, b)
        {
            over.push(OverBudget {
                tenant: d.row.tenant_id.clone(),
                action: d.row.action.clone(),
                proposal_id: d.row.id,
            });
        }
        for sum_of in sums {
            tx.execute(
                &insert,
                &[
                    &d.row.id,
                    &d.row.tenant_id,
                    &d.row.agent_id,
                    &d.row.action,
                    sum_of,
                    &amount_of(&params, sum_of),
                    &(d.decision.effect == Effect::Allow),
                ],
            )
            .await?;
        }
    }
    Ok(over)
}

#[cfg(test)]
mod tests {
    use super::{amount_of, lock_keys};
    use actiond_core::policy::Effect;
    use serde_json::json;

    #[test]
    fn only_rows_that_reserve_take_the_budget_lock() {
        let pair = |t: &str, a: &str| (t.to_owned(), a.to_owned());
        let keys = lock_keys(
            [
                // The batch's only refund of acme is blocked: it reserves nothing.
                ("acme", "billing.refund.issue", Effect::Block, true),
                // No budget on this action.
                ("acme", "webhook.post", Effect::Allow, false),
                ("beta", "billing.refund.issue", Effect::Escalate, true),
                ("beta", "billing.refund.issue", Effect::Block, true),
                ("alpha", "billing.refund.issue", Effect::Allow, true),
            ]
            .into_iter(),
        );
        assert_eq!(
            keys.into_iter().collect::<Vec<_>>(),
            [
                pair("alpha", "billing.refund.issue"),
                pair("beta", "billing.refund.issue")
            ]
        );
    }

    #[test]
    fn amounts_are_non_negative_integers() {
        assert_eq!(amount_of(&json!({"amount": 1200}), "amount"), 1200);
        assert_eq!(amount_of(&json!({"amount": "1200"}), "amount"), 0);
        assert_eq!(amount_of(&json!({"amount": -5}), "amount"), 0);
        assert_eq!(amount_of(&json!({}), "amount"), 0);
    }
}
