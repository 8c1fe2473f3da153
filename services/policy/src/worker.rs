//! The policy worker: claims, decides, grants, sweeps.

use crate::{Classifiers, PolicyMetrics, shadow};
use actiond_core::grant::GrantSigner;
use actiond_core::policy::{CompiledPolicy, Decision, EvalInput, decide_within};
use actiond_store::listen::{CHANNEL_APPROVED, Notifier};
use actiond_store::policy_cache::PolicyCache;
use actiond_store::policy_queue::{self, DecidedRow};
use actiond_store::proposals::ProposalRow;
use actiond_store::shadow::ShadowCache;
use actiond_store::{Db, budgets, tenants};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// The policy worker.
pub struct Worker {
    db: Db,
    signer: Arc<GrantSigner>,
    cache: PolicyCache,
    shadows: ShadowCache,
    metrics: PolicyMetrics,
    batch: i64,
    budget: Duration,
    approved: Notifier,
    classifiers: Classifiers,
}

impl Worker {
    /// Builds a worker. `signer` must have a `policy-` key id.
    pub fn new(
        db: Db,
        signer: GrantSigner,
        metrics: PolicyMetrics,
        batch: i64,
        budget: Duration,
        classifiers: Classifiers,
    ) -> Self {
        let approved = Notifier::spawn(db.clone(), CHANNEL_APPROVED, Duration::from_millis(20));
        Self {
            db,
            signer: Arc::new(signer),
            cache: PolicyCache::default(),
            shadows: ShadowCache::default(),
            metrics,
            batch,
            budget,
            approved,
            classifiers,
        }
    }

    /// Claims and decides one batch in one transaction. Returns how many were decided.
    pub async fn run_once(&self) -> anyhow::Result<usize> {
        let mut client = self.db.client().await?;
        let tx = client.transaction().await?;
        let claimed = policy_queue::claim(&tx, self.batch).await?;
        let rows = &claimed.rows;
        if rows.is_empty() {
            tx.commit().await?;
            return Ok(0);
        }
        let policies = self.policies_of(&tx, &claimed).await?;
        let mut prepared = Vec::with_capacity(rows.len());
        for row in rows {
            let policy = policies.get(&row.tenant_id).cloned().flatten();
            // A frozen or revoked agent's proposal is blocked without rules: no history read
            // for it.
            let input = match &policy {
                Some(p) if !row.agent_stopped() => {
                    Some(policy_queue::rules_input(&tx, p, row).await?)
                }
                _ => None,
            };
            prepared.push((row, policy, input));
        }
        let mut decisions = self.evaluate(prepared).await;
        self.classify(&mut decisions, &policies).await;
        self.after_rules(&tx, &mut decisions, &policies).await?;
        for d in &decisions {
            let tenant = d.row.tenant_id.as_str();
            if d.decision.rule.as_deref() == Some("no-handler") {
                self.metrics.no_handler.with_label_values(&[tenant]).inc();
            }
            if !d.decision.errors.is_empty() {
                let cause = if d.decision.errors.iter().any(|e| e.contains("time budget")) {
                    "budget"
                } else {
                    "error"
                };
                self.metrics
                    .eval_failures
                    .with_label_values(&[tenant, cause])
                    .inc();
                tracing::warn!(proposal = %d.row.id, tenant, errors = ?d.decision.errors, "rule evaluation failed closed");
            }
            self.metrics
                .decisions
                .with_label_values(&[tenant, d.decision.effect.as_str()])
                .inc();
        }
        let issued =
            policy_queue::record_batch(&tx, &decisions, &self.signer, claimed.now_us).await?;
        open_stages(&tx, &decisions, &policies).await?;
        tx.commit().await?;
        if issued > 0 {
            self.metrics
                .grants_issued
                .with_label_values(&["policy"])
                .inc_by(issued as u64);
            self.approved.hint();
        }
        Ok(rows.len())
    }

    /// The rules' decision for each claimed row, in order: a frozen agent's proposal is blocked
    /// without rules, a tenant without a document blocks, the others are evaluated off the
    /// async executor, each within its budget, in one handoff to the blocking pool for the
    /// batch ([`actiond_runtime::with_budget_each`]); an overrun fails closed
    /// ([`Decision::budget_exceeded`]).
    async fn evaluate<'a>(
        &self,
        mut prepared: Vec<(&'a ProposalRow, Option<CompiledPolicy>, Option<EvalInput>)>,
    ) -> Vec<DecidedRow<'a>> {
        let timer = self
            .metrics
            .eval_seconds
            .with_label_values::<&str>(&[])
            .start_timer();
        let mut jobs = Vec::new();
        for (row, policy, input) in prepared.iter_mut() {
            if row.agent_stopped() {
                continue;
            }
            if let (Some(p), Some(input)) = (policy.as_ref(), input.take()) {
                jobs.push((p.clone(), input));
            }
        }
        let budget = self.budget;
        let mut evaluated = actiond_runtime::with_budget_each(
            budget,
            jobs,
            move |(p, input): (CompiledPolicy, EvalInput)| decide_within(&p, &input, budget),
        )
        .await
        .into_iter();
        let decisions: Vec<DecidedRow<'a>> = prepared
            .into_iter()
            .map(|(row, policy, _)| match policy {
                // A frozen or revoked agent's proposal is blocked before any rule runs (V20 and
                // V34 refuse to allow or escalate it; the freeze or revocation denies the ones
                // it saw).
                _ if row.agent_stopped() => DecidedRow {
                    row,
                    decision: if row.agent_revoked {
                        Decision::agent_revoked()
                    } else {
                        Decision::agent_frozen()
                    },
                    doc_version: None,
                    doc_sha256: None,
                    grant_lifetime: Duration::ZERO,
                    classifier: None,
                },
                Some(p) => {
                    let lifetime = p
                        .doc
                        .handler(&row.action)
                        .map(|h| h.grant_lifetime)
                        .unwrap_or(actiond_core::tenant::DEFAULT_GRANT_LIFETIME);
                    let d = evaluated
                        .next()
                        .flatten()
                        .unwrap_or_else(|| Decision::budget_exceeded(&p));
                    DecidedRow {
                        row,
                        decision: d,
                        doc_version: Some(p.version),
                        doc_sha256: Some(p.sha256.clone()),
                        grant_lifetime: lifetime,
                        classifier: None,
                    }
                }
                None => DecidedRow {
                    row,
                    decision: Decision {
                        effect: actiond_core::policy::Effect::Block,
                        rule: Some("no-document".into()),
                        reason: "this tenant has no policy document".into(),
                        errors: Vec::new(),
                    },
                    doc_version: None,
                    doc_sha256: None,
                    grant_lifetime: Duration::ZERO,
                    classifier: None,
                },
            })
            .collect();
        timer.observe_duration();
        decisions
    }

    /// The compiled latest document of each tenant of a claimed batch (`None`: it has none).
    /// The versions came with the claim; compiled documents come from the cache.
    async fn policies_of(
        &self,
        tx: &deadpool_postgres::Transaction<'_>,
        claimed: &policy_queue::Claimed,
    ) -> actiond_store::Result<HashMap<String, Option<CompiledPolicy>>> {
        let mut policies = HashMap::with_capacity(claimed.latest.len());
        for (tenant, latest) in &claimed.latest {
            let p = match latest {
                Some(v) => self.cache.version(tx, tenant, *v).await?,
                None => None,
            };
            policies.insert(tenant.clone(), p);
        }
        Ok(policies)
    }

    /// Asks each tenant's classifier (when its document names one) about every decision it
    /// could still raise (allow or escalate), all calls at once, each within the tenant's
    /// timeout; applies the raise-only rule and records the answer for the audit event.
    async fn classify(
        &self,
        decisions: &mut [DecidedRow<'_>],
        policies: &HashMap<String, Option<CompiledPolicy>>,
    ) {
        let asks = decisions.iter().enumerate().filter_map(|(i, d)| {
            let p = policies.get(&d.row.tenant_id)?.as_ref()?;
            let askable = d.decision.effect < actiond_core::policy::Effect::Block
                && d.doc_version.is_some()
                && p.doc.policy.classifier.is_some();
            askable.then_some((i, p, d))
        });
        let answers = futures_util::future::join_all(asks.map(|(i, p, d)| async move {
            let req = classifier_request(d);
            (i, self.classifiers.ask(&p.doc.policy, &req).await, p)
        }))
        .await;
        for (i, answer, p) in answers {
            let (Some((outcome, took)), Some(r)) = (answer, p.doc.policy.classifier.as_ref())
            else {
                continue;
            };
            let d = &mut decisions[i];
            let tenant = d.row.tenant_id.as_str();
            let combined =
                actiond_core::classifier::combine(d.decision.effect, &r.endpoint, &outcome);
            self.metrics
                .classifier_calls
                .with_label_values(&[tenant, outcome.label()])
                .inc();
            self.metrics
                .classifier_seconds
                .with_label_values(&[tenant])
                .observe(took.as_secs_f64());
            let detail = match &outcome {
                actiond_core::classifier::Outcome::Error(e)
                | actiond_core::classifier::Outcome::Malformed(e) => Some(e.as_str()),
                _ => None,
            };
            if detail.is_some() || outcome.label() == "timeout" {
                tracing::warn!(proposal = %d.row.id, tenant, endpoint = r.endpoint, outcome = outcome.label(), detail, "classifier failed: escalating");
            }
            d.classifier = Some(serde_json::json!({
                "endpoint": r.endpoint,
                "outcome": outcome.label(),
                "effect": outcome.answer().map(|a| a.effect.as_str()),
                "reason": outcome.answer().and_then(|a| a.reason.clone()),
                "detail": detail,
                "latency_ms": took.as_millis() as u64,
                "changed": combined.changed.is_some(),
                "rules_effect": d.decision.effect.as_str(),
            }));
            if let Some((rule, reason)) = combined.changed {
                d.decision.effect = combined.effect;
                d.decision.rule = Some(rule);
                d.decision.reason = reason;
            }
        }
    }

    /// What follows the rules in the batch's transaction: the budgets (which may raise a
    /// decision, and reserve) and the shadow evaluation (which records, and changes nothing).
    async fn after_rules(
        &self,
        tx: &deadpool_postgres::Transaction<'_>,
        decisions: &mut [DecidedRow<'_>],
        policies: &HashMap<String, Option<CompiledPolicy>>,
    ) -> anyhow::Result<()> {
        let candidates = shadow::open_candidates(tx, &self.shadows, decisions).await?;
        let over = budgets::reserve_batch(tx, decisions, policies, &shadow::documents(&candidates))
            .await?;
        for o in over {
            self.metrics
                .budget_escalations
                .with_label_values(&[&o.tenant, &o.action])
                .inc();
            tracing::info!(proposal = %o.proposal_id, tenant = o.tenant, action = o.action, "over budget: escalated");
        }
        shadow::evaluate_and_record(tx, &candidates, decisions, self.budget).await?;
        Ok(())
    }

    /// Expires stale `pending`/`escalated` rows of every tenant by its `escalation_ttl`, after
    /// moving on the approval stages whose `within` passed (re-routed or expired).
    pub async fn sweep(&self) -> anyhow::Result<u64> {
        let mut total = 0;
        for (id, tenant, what) in actiond_store::stages::sweep(&self.db, self.batch).await? {
            if what == actiond_store::stages::TimedOut::Expired {
                self.metrics.expired.with_label_values(&[&tenant]).inc();
                total += 1;
            }
            tracing::info!(proposal = %id, tenant, outcome = %what.describe(), "approval stage timed out");
        }
        for tenant in tenants::list(&self.db).await? {
            // One tenant's failure (a stored document that no longer parses, say) is logged and
            // skipped: it must not stop expiry for the tenants after it.
            match self.expire_tenant(&tenant).await {
                Ok(n) => total += n,
                Err(e) => tracing::warn!(tenant, error = %e, "expiry sweep skipped this tenant"),
            }
        }
        Ok(total)
    }

    /// Expires one tenant's stale `pending`/`escalated` rows by its latest document's
    /// `escalation_ttl`; a tenant with no document is left alone. Returns how many expired.
    async fn expire_tenant(&self, tenant: &str) -> anyhow::Result<u64> {
        let mut c = self.db.client().await?;
        let Some(policy) = self.cache.latest(&c, tenant).await? else {
            return Ok(0);
        };
        let tx = c.transaction().await?;
        let n = policy_queue::expire_stale(&tx, tenant, policy.doc.policy.escalation_ttl).await?;
        tx.commit().await?;
        if n > 0 {
            self.metrics.expired.with_label_values(&[tenant]).inc_by(n);
            tracing::info!(tenant, expired = n, "expired proposals past escalation_ttl");
        }
        Ok(n)
    }

    /// Refreshes the queue gauges from the database (called at scrape time).
    pub async fn refresh_gauges(&self) {
        match actiond_store::metrics::queue_ages(&self.db).await {
            Ok(rows) => {
                self.metrics.oldest_age.reset();
                self.metrics.depth.reset();
                for (tenant, state, age, count) in rows {
                    self.metrics
                        .oldest_age
                        .with_label_values(&[&tenant, &state])
                        .set(age);
                    self.metrics
                        .depth
                        .with_label_values(&[&tenant, &state])
                        .set(count as f64);
                }
            }
            Err(e) => tracing::warn!(error = %e.detail(), "queue gauges not refreshed"),
        }
        if let Err(e) = self.refresh_budget_gauges().await {
            tracing::warn!(error = %e.detail(), "budget gauges not refreshed");
        }
    }

    /// Sets `budget_use_ratio{tenant,action}` from the database: for each budgeted action of
    /// each tenant's latest document, the highest use ÷ max among its budgets.
    async fn refresh_budget_gauges(&self) -> actiond_store::Result<()> {
        let c = self.db.client().await?;
        let docs = self.cache.latest_of_every_tenant(&c).await?;
        self.metrics.budget_use.reset();
        for doc in docs {
            self.metrics.touch_tenant(doc.tenant.as_str(), &doc.budgets);
            let mut highest: HashMap<&str, f64> = HashMap::new();
            for b in &doc.budgets {
                let ratio = budgets::use_ratio(&c, doc.tenant.as_str(), b).await?;
                let h = highest.entry(b.action.as_str()).or_insert(0.0);
                *h = h.max(ratio);
            }
            for (action, ratio) in highest {
                self.metrics
                    .budget_use
                    .with_label_values(&[doc.tenant.as_str(), action])
                    .set(ratio);
            }
        }
        Ok(())
    }
}

pub(crate) async fn work_loop(
    worker: Arc<Worker>,
    wake: Arc<Notify>,
    mut stop_rx: tokio::sync::watch::Receiver<bool>,
    poll: Duration,
    sweep_every: Option<Duration>,
) {
    let mut last_sweep: Option<tokio::time::Instant> = None;
    let mut backoff = Duration::from_millis(100);
    loop {
        if *stop_rx.borrow() {
            break;
        }
        if let Some(every) = sweep_every
            && last_sweep.is_none_or(|t| t.elapsed() >= every)
        {
            last_sweep = Some(tokio::time::Instant::now());
            if let Err(e) = worker.sweep().await {
                tracing::warn!(error = %e, "sweep failed");
            }
        }
        match worker.run_once().await {
            Ok(n) if n as i64 >= worker.batch => {
                backoff = Duration::from_millis(100);
                wake.notify_one(); // more may be waiting: bring another loop in
            }
            Ok(_) => {
                backoff = Duration::from_millis(100);
                tokio::select! {
                    () = wake.notified() => {},
                    () = actiond_runtime::clock::sleep(poll) => {},
                    _ = stop_rx.changed() => {},
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "policy batch failed; retrying");
                tokio::select! {
                    () = actiond_runtime::clock::sleep(backoff) => {},
                    _ = stop_rx.changed() => {},
                }
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}

/// Writes the approval stages of every proposal this batch escalated whose handler (in the
/// document version that decided it) declares `approvals: {stages}`, in the batch's
/// transaction: stage 1 opens with the escalation.
async fn open_stages(
    tx: &deadpool_postgres::Transaction<'_>,
    decisions: &[DecidedRow<'_>],
    policies: &HashMap<String, Option<CompiledPolicy>>,
) -> anyhow::Result<()> {
    for d in decisions {
        if d.decision.effect != actiond_core::policy::Effect::Escalate {
            continue;
        }
        let Some(p) = policies.get(&d.row.tenant_id).and_then(Option::as_ref) else {
            continue;
        };
        if Some(p.version) != d.doc_version {
            continue;
        }
        if let Some(staged) = p
            .doc
            .handler(&d.row.action)
            .and_then(|h| h.approvals.as_ref())
        {
            actiond_store::stages::open(tx, d.row, staged).await?;
        }
    }
    Ok(())
}

/// The classifier's view of a decided row (see [`actiond_core::classifier`]).
fn classifier_request<'a>(
    d: &'a DecidedRow<'_>,
) -> actiond_core::classifier::ClassifierRequest<'a> {
    let r = d.row;
    actiond_core::classifier::ClassifierRequest {
        proposal_id: r.id,
        tenant: &r.tenant_id,
        agent: &r.agent_name,
        action: &r.action,
        target: &r.target,
        params: serde_json::from_str(&r.params_json).unwrap_or(serde_json::Value::Null),
        source_text: r.source_text.as_deref(),
        agent_reason: r.agent_reason.as_deref(),
        effect: d.decision.effect,
    }
}
