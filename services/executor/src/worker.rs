//! The executor worker: verifies, spends, runs handlers, records outcomes, sweeps.

use crate::{ExecutorArgs, ExecutorMetrics, destinations, effects, finisher, handlers, refusal};
use actiond_core::grant::{GrantError, KeyKind, TrustedKeys};
use actiond_core::intent::Intent;
use actiond_core::policy::{CompiledPolicy, Decision, Effect, EvalInput, decide_within};
use actiond_core::tenant::HandlerEntry;
use actiond_runtime::credentials::CredentialsDir;
use actiond_store::executor_queue::{self, ClaimedRow, Spend, StartRequest};
use actiond_store::grants::StoredGrant;
use actiond_store::policy_cache::PolicyCache;
use actiond_store::proposals::ProposalRow;
use actiond_store::{Db, policy_queue};
use handlers::{Destinations, Execution, Outcome};
use refusal::Refusal;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

/// The executor worker.
pub struct Worker {
    pub(crate) db: Db,
    pub(crate) id: String,
    pub(crate) trusted: TrustedKeys,
    pub(crate) credentials: CredentialsDir,
    pub(crate) destinations: Destinations,
    pub(crate) http: reqwest::Client,
    pub(crate) cache: PolicyCache,
    pub(crate) metrics: ExecutorMetrics,
    pub(crate) finisher: finisher::Finisher,
    pub(crate) claim_lease: Duration,
    pub(crate) lease_margin: Duration,
}

/// A claimed row that passed stages 1–3: its verified grant, the grant's issuer kind and the
/// handler settings of the approved document version.
struct Ready {
    grant: StoredGrant,
    kind: KeyKind,
    entry: HandlerEntry,
}

/// What [`Worker::gather`] read for one row, before its rules run again.
struct Gathered {
    grant: StoredGrant,
    kind: KeyKind,
    /// The tenant's current policy document.
    current: CompiledPolicy,
    /// The rules' input for this row under `current`.
    input: EvalInput,
    /// Stage 3, applied only when the rules still allow the row.
    entry: Result<HandlerEntry, Stop>,
}

/// Why the pipeline of [`Worker::process_batch`] stopped early: a refusal to record, or a failure
/// (database, pool) that leaves the lease to expire.
enum Stop {
    Refuse(Refusal),
    Fail(anyhow::Error),
}

impl From<Refusal> for Stop {
    fn from(r: Refusal) -> Self {
        Stop::Refuse(r)
    }
}

impl From<anyhow::Error> for Stop {
    fn from(e: anyhow::Error) -> Self {
        Stop::Fail(e)
    }
}

/// Loads `<key_id>.pub` files from a directory.
pub fn load_trusted_keys(dir: &Path) -> anyhow::Result<TrustedKeys> {
    let mut keys = TrustedKeys::default();
    let entries = std::fs::read_dir(dir)
        .map_err(|e| anyhow::anyhow!("trusted keys directory {}: {e}", dir.display()))?;
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(key_id) = name.strip_suffix(".pub") else {
            continue;
        };
        let text = std::fs::read_to_string(entry.path())?;
        keys.insert_b64(key_id, &text)
            .map_err(|e| anyhow::anyhow!("{}: {e}", entry.path().display()))?;
    }
    if keys.is_empty() {
        anyhow::bail!("no trusted grant keys (*.pub) in {}", dir.display());
    }
    Ok(keys)
}

impl Worker {
    /// Builds a worker from its configuration.
    pub fn from_args(
        db: Db,
        args: &ExecutorArgs,
        metrics: ExecutorMetrics,
    ) -> anyhow::Result<Self> {
        let credentials = CredentialsDir::resolve(args.credentials_dir.as_deref())?;
        let keys_dir = args
            .trusted_keys_dir
            .clone()
            .unwrap_or_else(|| credentials.path().join("trusted_keys"));
        let trusted = load_trusted_keys(&keys_dir)?;
        // No proxy: `HTTP_PROXY`/`HTTPS_PROXY`/`ALL_PROXY` would send every request to the proxy's
        // address, around the destination guard that runs in the resolver.
        let http = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(destinations::GuardedResolver::new(
                args.allow_private_destinations,
            ))
            .connect_timeout(Duration::from_secs(5))
            .user_agent("actiond-executor")
            .build()?;
        let id = args.id.clone().unwrap_or_else(|| {
            let host = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
            format!("{}-{}", host.trim(), std::process::id())
        });
        Ok(Self {
            finisher: finisher::Finisher::spawn(db.clone(), id.clone()),
            db,
            id,
            trusted,
            credentials,
            destinations: Destinations {
                webhook_hosts: args
                    .webhook_allowed_hosts
                    .iter()
                    .filter(|h| !h.trim().is_empty())
                    .cloned()
                    .collect(),
                billing_base_url: args.billing_base_url.clone(),
                pdns_base_url: args.pdns_base_url.clone(),
                pdns_dns_addr: args.pdns_dns_addr,
                smtp_relay: args.smtp_relay.clone(),
                smtp_allow_plaintext: args.smtp_allow_plaintext,
                allow_private: args.allow_private_destinations,
            },
            http,
            cache: PolicyCache::default(),
            metrics,
            claim_lease: Duration::from_secs(args.claim_lease_secs.max(1)),
            lease_margin: Duration::from_millis(args.lease_margin_ms),
        })
    }

    /// This executor's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Trusted key ids.
    pub fn trusted_key_ids(&self) -> Vec<String> {
        self.trusted.key_ids()
    }

    /// One claim batch, from the claim to the commit (see the crate doc): in **one
    /// transaction** on one connection, claim up to `limit` approved proposals
    /// ([`executor_queue::claim`], `FOR UPDATE SKIP LOCKED`), run stages 1–3 for each
    /// (verify → re-check → settings; CPU and reads only, no network call), record the
    /// refusals, back off from rows whose checks failed for a passing reason, then **one**
    /// statement spends the grants of every row that passed and starts them, and commit. Only
    /// after the commit does each handler run, on its own task holding a slot of `slots`, and
    /// its outcome joins the next group commit.
    ///
    /// `claimed` receives the number of rows claimed as soon as the claim returns, with their
    /// slots already taken, so the caller may claim the next batch while this one is checked.
    /// A failure (database, pool) rolls the transaction back: nothing is spent and the rows
    /// are free again, and each is then leased to this executor for the claim lease (best
    /// effort) so that the next claim does not retry it at once.
    pub async fn run_batch(
        self: Arc<Self>,
        limit: i64,
        slots: Arc<Semaphore>,
        claimed: tokio::sync::oneshot::Sender<anyhow::Result<usize>>,
    ) {
        let mut claimed = Some(claimed);
        let mut ids = Vec::new();
        let result = self
            .clone()
            .claim_check_spend(limit, &slots, &mut claimed, &mut ids)
            .await;
        if let Err(e) = result {
            match claimed.take() {
                // The claim itself failed: the caller backs off.
                Some(tx) => {
                    let _ = tx.send(Err(e));
                }
                None => {
                    tracing::warn!(count = ids.len(), error = %e, "claim batch failed; nothing was spent, the rows back off for the claim lease");
                    if let Err(e) = self.back_off_alone(&ids).await {
                        tracing::warn!(error = %e, "backing off failed; the rows may be claimed again at once");
                    }
                }
            }
        }
    }

    /// [`executor_queue::back_off`] on its own connection, after the claiming transaction failed.
    async fn back_off_alone(&self, ids: &[uuid::Uuid]) -> anyhow::Result<()> {
        let c = self.db.client().await?;
        executor_queue::back_off(&c, ids, &self.id, self.claim_lease).await?;
        Ok(())
    }

    /// The body of [`Worker::run_batch`]; `ids` collects the claimed proposals' ids.
    async fn claim_check_spend(
        self: Arc<Self>,
        limit: i64,
        slots: &Arc<Semaphore>,
        claimed: &mut Option<tokio::sync::oneshot::Sender<anyhow::Result<usize>>>,
        ids: &mut Vec<uuid::Uuid>,
    ) -> anyhow::Result<()> {
        let mut client = self.db.client().await?;
        let tx = client.transaction().await?;
        let rows = executor_queue::claim(&tx, limit).await?;
        let mut batch = Vec::with_capacity(rows.len());
        for row in rows {
            // The caller claims no more than the free slots, and claims one batch at a time.
            let permit = slots.clone().acquire_owned().await?;
            ids.push(row.id);
            batch.push((row, permit));
        }
        if let Some(c) = claimed.take() {
            let _ = c.send(Ok(batch.len()));
        }
        if batch.is_empty() {
            tx.commit().await?;
            return Ok(());
        }
        // Stage 1's signatures, the whole batch in one batch verification; then stages 1–3,
        // every row of the batch at once on the claiming transaction's connection; stage 2's
        // rule evaluations in one handoff to the blocking pool.
        let signatures = self.verify_signatures(&batch);
        let gathered = futures_util::future::join_all(
            batch
                .iter()
                .zip(signatures)
                .map(|((row, _), signature)| self.gather(&tx, row, signature)),
        )
        .await;
        let checked = self.evaluate(gathered).await;
        let mut ready = Vec::new();
        let mut refused = Vec::new();
        let mut failed = Vec::new();
        for ((row, permit), check) in batch.into_iter().zip(checked) {
            match check {
                Ok(r) => ready.push((row, r, permit)),
                Err(Stop::Refuse(r)) => refused.push((row, r)),
                Err(Stop::Fail(e)) => {
                    tracing::warn!(proposal = %row.id, error = %e, "checking failed; the proposal backs off for the claim lease");
                    failed.push(row.id);
                }
            }
        }
        executor_queue::back_off(&tx, &failed, &self.id, self.claim_lease).await?;
        let reqs: Vec<StartRequest<'_>> = ready
            .iter()
            .map(|(row, r, _)| StartRequest {
                row,
                grant_id: r.grant.claims.id,
                key_id: &r.grant.claims.key_id,
                expires_at_us: r.grant.claims.expires_at,
                run_lease: r.entry.timeout + self.lease_margin,
            })
            .collect();
        // The run leases start at the spend's `now()` in Postgres, after this instant: a lease
        // measured from here ends no later than the one the database holds.
        let spending = tokio::time::Instant::now();
        let spends = executor_queue::spend_and_start_many(&tx, &self.id, &reqs).await?;
        drop(reqs);
        let mut run = Vec::new();
        for ((row, r, permit), spend) in ready.into_iter().zip(spends) {
            match self.spent(&row, &r, spend) {
                Ok(true) => run.push((row, r, permit)),
                Ok(false) => {}
                Err(Stop::Refuse(refusal)) => refused.push((row, refusal)),
                Err(Stop::Fail(e)) => {
                    tracing::warn!(proposal = %row.id, error = %e, "spending failed");
                }
            }
        }
        // Refusals from the checks and from the spend (replayed, expired), in this transaction.
        for (row, refusal) in &refused {
            self.refuse(&tx, row, refusal).await?;
        }
        tx.commit().await?;
        for (_, refusal) in &refused {
            self.metrics
                .grants_rejected
                .with_label_values(&[refusal.metric_label()])
                .inc();
        }
        for (_, r, _) in &run {
            self.metrics
                .grants_spent
                .with_label_values(&[r.kind.as_str()])
                .inc();
        }
        // Committed: the grants are spent and the proposals `executing`. Now, and only now, the
        // handlers run.
        for (row, r, permit) in run {
            let lease_end = spending + r.entry.timeout + self.lease_margin;
            tokio::spawn(self.clone().run_spent(row, r, permit, lease_end));
        }
        Ok(())
    }

    /// Runs one proposal whose grant this executor has just spent (committed): the pre-run
    /// check of the preview the grant binds ([`crate::prerun`]), the handler, the read-back
    /// ([`effects::after_run`]) and the recording of the outcome within `lease_end`, the end
    /// of its run lease. `permit` is its slot of the executor's concurrency.
    async fn run_spent(
        self: Arc<Self>,
        row: ClaimedRow,
        r: Ready,
        permit: tokio::sync::OwnedSemaphorePermit,
        lease_end: tokio::time::Instant,
    ) {
        if let Err(stale) = crate::prerun::check(&self, &row, &r.grant, &r.entry).await {
            self.metrics
                .executions
                .with_label_values(&[r.entry.kind.action(), "stale"])
                .inc();
            crate::prerun::record(&self, &row, &stale, r.entry.on_stale, lease_end).await;
            drop(permit);
            return;
        }
        let outcome = self.run_handler(&row, &r.grant, &r.entry).await;
        // The read-back must leave time to record within the run lease.
        let budget = lease_end
            .saturating_duration_since(tokio::time::Instant::now())
            .saturating_sub(self.lease_margin / 2);
        let (outcome, effect) =
            effects::after_run(&self, &row, &r.grant, &r.entry, outcome, budget).await;
        if let Err(e) = self
            .record(&row, &outcome, effect.as_ref(), lease_end)
            .await
        {
            tracing::warn!(proposal = %row.id, error = %e, "recording failed; the lease will expire and the sweeper decides");
        }
        drop(permit);
    }

    /// Records `refusal` on `row` (state, agent text, audit event) in the claiming transaction.
    async fn refuse(
        &self,
        tx: &actiond_store::Tx<'_>,
        row: &ProposalRow,
        refusal: &Refusal,
    ) -> anyhow::Result<()> {
        executor_queue::refuse(
            tx,
            row,
            &self.id,
            refusal.state(),
            &refusal.agent_text(),
            refusal.audit_kind(),
            refusal.audit_detail(),
        )
        .await?;
        Ok(())
    }

    /// Stages 1–3 for one row, all but stage 2's rule evaluation ([`Worker::evaluate`] runs
    /// those for the batch): the grant verifies, the tenant's current policy and the rules'
    /// input for this row, and the handler settings of the approved document version. Reads
    /// go through `c`, the claiming transaction.
    /// `signature` is [`Worker::verify_signatures`]' answer for `row`.
    async fn gather(
        &self,
        c: &actiond_store::Tx<'_>,
        row: &ClaimedRow,
        signature: Option<Result<KeyKind, GrantError>>,
    ) -> Result<Gathered, Stop> {
        if row.agent_revoked {
            return Err(Refusal::AgentRevoked.into());
        }
        if row.agent_frozen {
            return Err(Refusal::AgentFrozen.into());
        }
        let (grant, kind) = self.verify(row, signature)?;
        let current = match row.latest_doc_version {
            Some(v) => self
                .cache
                .version(c, &row.tenant_id, v)
                .await
                .map_err(anyhow::Error::from)?,
            None => None,
        };
        let Some(current) = current else {
            return Err(Refusal::NoDocument.into());
        };
        let input = policy_queue::rules_input(c, &current, &row.proposal)
            .await
            .map_err(anyhow::Error::from)?;
        // Kept, not returned: a policy that no longer allows the row is the refusal to report
        // even when the settings are missing too.
        let entry = self.settings(c, row, &grant).await;
        Ok(Gathered {
            grant,
            kind,
            current,
            input,
            entry,
        })
    }

    /// Stage 2's evaluations for a batch: the current policy of every row that got this far,
    /// once more, with the same rules input the policy worker builds
    /// ([`policy_queue::rules_input`]), each within its 200 ms budget
    /// ([`actiond_runtime::with_budget_each`]: one handoff to the blocking pool for the batch).
    /// A row whose policy no longer allows what its grant's issuer could is refused; the others
    /// get their handler settings (stage 3). Answers are in the order of `gathered`.
    async fn evaluate(&self, gathered: Vec<Result<Gathered, Stop>>) -> Vec<Result<Ready, Stop>> {
        let mut jobs = Vec::new();
        let mut rest = Vec::with_capacity(gathered.len());
        for g in gathered {
            match g {
                Ok(g) => {
                    jobs.push((g.current.clone(), g.input));
                    rest.push(Ok((g.grant, g.kind, g.current, g.entry)));
                }
                Err(stop) => rest.push(Err(stop)),
            }
        }
        let budget = Duration::from_millis(200);
        let mut decisions = actiond_runtime::with_budget_each(
            budget,
            jobs,
            move |(policy, input): (CompiledPolicy, EvalInput)| {
                decide_within(&policy, &input, budget)
            },
        )
        .await
        .into_iter();
        rest.into_iter()
            .map(|r| {
                let (grant, kind, current, entry) = r?;
                let now = decisions
                    .next()
                    .flatten()
                    .unwrap_or_else(|| Decision::budget_exceeded(&current));
                let still_ok = match kind {
                    KeyKind::Policy => now.effect == Effect::Allow,
                    KeyKind::Approver | KeyKind::BreakGlass => now.effect != Effect::Block,
                };
                if !still_ok {
                    return Err(Refusal::PolicyChanged {
                        effect_now: now.effect.as_str(),
                        rule: now.rule,
                        doc_version: current.version,
                        grant_kind: kind.as_str(),
                    }
                    .into());
                }
                Ok(Ready {
                    grant,
                    kind,
                    entry: entry?,
                })
            })
            .collect()
    }

    /// Stage 1's signature checks for a claim batch, all at once ([`TrustedKeys::verify_many`]:
    /// one batch verification, each grant on its own only when the batch fails). Answer `i` is
    /// for `batch[i]`: `None` when that row has no grant.
    fn verify_signatures<P>(
        &self,
        batch: &[(ClaimedRow, P)],
    ) -> Vec<Option<Result<KeyKind, GrantError>>> {
        let (rows, grants): (Vec<usize>, Vec<(&actiond_core::grant::GrantClaims, &[u8])>) = batch
            .iter()
            .enumerate()
            .filter_map(|(i, (row, _))| {
                row.grant
                    .as_ref()
                    .map(|g| (i, (&g.claims, g.sig.as_slice())))
            })
            .unzip();
        let mut out: Vec<Option<Result<KeyKind, GrantError>>> =
            batch.iter().map(|_| None).collect();
        let verified = self.trusted.verify_many(&grants);
        for (method, n) in [
            ("batch", verified.in_batch),
            ("single", verified.alone),
            ("fallback", verified.after_failed_batch),
        ] {
            if n > 0 {
                self.metrics
                    .signatures_verified
                    .with_label_values(&[method])
                    .inc_by(n as u64);
            }
        }
        for (i, answer) in rows.into_iter().zip(verified.answers) {
            out[i] = Some(answer);
        }
        out
    }

    /// Stage 1: the grant exists, its signature verifies against a trusted key, and it is bound
    /// to this proposal's recomputed intent hash.
    fn verify(
        &self,
        row: &ClaimedRow,
        signature: Option<Result<KeyKind, GrantError>>,
    ) -> Result<(StoredGrant, KeyKind), Stop> {
        let (Some(grant), Some(signature)) = (row.grant.clone(), signature) else {
            return Err(Refusal::MissingGrant.into());
        };
        let kind = signature.map_err(|e| {
            tracing::error!(proposal = %row.id, key_id = %grant.claims.key_id, error = %e, "ALERT: grant refused");
            Refusal::from_grant_error(&e, &grant.claims.key_id)
        })?;
        let agent_id = row.agent_id.to_string();
        let recomputed = Intent {
            tenant_id: &row.tenant_id,
            agent_id: &agent_id,
            action: &row.action,
            target: &row.target,
            params_json: &row.params_json,
        }
        .hash();
        if grant.claims.proposal_id != row.id
            || grant.claims.tenant_id != row.tenant_id
            || grant.claims.intent_hash != recomputed
            || row.intent_hash != recomputed
        {
            tracing::error!(proposal = %row.id, "ALERT: grant does not match this proposal");
            return Err(Refusal::IntentMismatch {
                grant_intent: grant.claims.intent_hash.clone(),
                recomputed,
                stored: row.intent_hash.clone(),
            }
            .into());
        }
        Ok((grant, kind))
    }

    /// Stage 3: the handler settings of the version the grant names, so a later apply cannot
    /// redirect an approved action, and only when that version is the one that decided the
    /// proposal (every issuer signs it; only policy writes `proposals.doc_version`), so a key
    /// holder cannot pick another stored version, and when its source still hashes to the
    /// grant's signed `doc_sha256`, so a rewrite of the stored version cannot either.
    async fn settings(
        &self,
        client: &actiond_store::Tx<'_>,
        row: &ClaimedRow,
        grant: &StoredGrant,
    ) -> Result<HandlerEntry, Stop> {
        if row.doc_version != Some(grant.claims.doc_version) {
            tracing::error!(proposal = %row.id, grant_doc_version = grant.claims.doc_version, decided_doc_version = ?row.doc_version, "ALERT: grant names another document version than the one that decided the proposal");
            return Err(Refusal::VersionMismatch {
                signed: grant.claims.doc_version,
                decided: row.doc_version,
            }
            .into());
        }
        let Some(approved_doc) = self
            .cache
            .version(client, &row.tenant_id, grant.claims.doc_version)
            .await
            .map_err(anyhow::Error::from)?
        else {
            return Err(Refusal::ApprovedVersionMissing.into());
        };
        // The grant signs the hash of the source it was decided under; the cache's hash is
        // of the source it compiled. A grant of an older build has none and is judged by
        // version alone.
        if let Some(signed) = grant.claims.doc_sha256.as_deref()
            && signed != approved_doc.sha256
        {
            return Err(Refusal::DocumentChanged {
                doc_version: grant.claims.doc_version,
                signed: signed.to_owned(),
                stored: approved_doc.sha256.clone(),
            }
            .into());
        }
        approved_doc
            .doc
            .handler(&row.action)
            .cloned()
            .ok_or_else(|| {
                Refusal::NoHandler {
                    action: row.action.clone(),
                }
                .into()
            })
    }

    /// Stage 4, after the batch's spend ([`executor_queue::spend_and_start_many`]): `true`
    /// when the handler may run, `false` when the proposal is no longer `approved` (another
    /// executor or the sweeper moved it: nothing to record), a refusal when the grant was
    /// replayed or expired.
    fn spent(&self, row: &ClaimedRow, ready: &Ready, spend: Spend) -> Result<bool, Stop> {
        let grant = &ready.grant;
        match spend {
            Spend::Started => Ok(true),
            Spend::Replayed { used_by } => {
                tracing::error!(proposal = %row.id, grant = %grant.claims.id, used_by = ?used_by, "ALERT: replayed grant refused");
                Err(Refusal::Replayed {
                    grant_id: grant.claims.id,
                    used_by,
                }
                .into())
            }
            Spend::Expired => Err(Refusal::Expired {
                grant_id: grant.claims.id,
            }
            .into()),
            Spend::ExpiresTooFar => {
                tracing::error!(proposal = %row.id, grant = %grant.claims.id, key_id = %grant.claims.key_id, expires_at_us = grant.claims.expires_at, "ALERT: grant expiry beyond any grant lifetime refused");
                Err(Refusal::ExpiresTooFar {
                    grant_id: grant.claims.id,
                    expires_at_us: grant.claims.expires_at,
                }
                .into())
            }
            Spend::NoLongerApproved => {
                tracing::warn!(proposal = %row.id, "no longer approved at the spend; another executor or the sweeper moved it");
                Ok(false)
            }
            Spend::AgentFrozen => Err(Refusal::AgentFrozen.into()),
            Spend::AgentRevoked => Err(Refusal::AgentRevoked.into()),
        }
    }

    /// Stage 5: run the handler with its timeout.
    async fn run_handler(
        &self,
        row: &ClaimedRow,
        grant: &StoredGrant,
        entry: &HandlerEntry,
    ) -> Outcome {
        let params: serde_json::Value =
            serde_json::from_str(&row.params_json).unwrap_or(serde_json::Value::Null);
        let timer = self
            .metrics
            .handler_seconds
            .with_label_values(&[entry.kind.action()])
            .start_timer();
        let outcome = handlers::execute(
            entry.kind,
            &Execution {
                tenant: &row.tenant_id,
                proposal_id: row.id,
                grant_id: grant.claims.id,
                params: &params,
                settings: &entry.settings,
                credentials: &self.credentials,
                http: &self.http,
                destinations: &self.destinations,
                timeout: entry.timeout,
                reported: None,
            },
        )
        .await;
        timer.observe_duration();
        self.metrics
            .executions
            .with_label_values(&[entry.kind.action(), outcome.as_str()])
            .inc();
        if !matches!(outcome, Outcome::Succeeded(_)) {
            tracing::warn!(proposal = %row.id, outcome = outcome.as_str(), detail = outcome.detail(), "handler did not succeed");
        }
        outcome
    }

    /// Stage 6: record the outcome (with what was read back, [`effects::after_run`]). It must not be lost to a database outage (a restart, a
    /// failover): retry until `lease_end`, the end of the run lease (handler timeout + lease
    /// margin, measured from before the spend), not merely for the margin: a handler that
    /// returned early leaves the rest of its timeout as lease, and only after the lease may the
    /// sweeper call the outcome unknown. Past `lease_end` the outcome is `outcome_unknown`.
    async fn record(
        &self,
        row: &ClaimedRow,
        outcome: &Outcome,
        effect: Option<&actiond_core::effect::EffectRecord>,
        lease_end: tokio::time::Instant,
    ) -> anyhow::Result<()> {
        let deadline = lease_end;
        let mut wait = Duration::from_millis(100);
        loop {
            let written = match effect {
                // With its `proposal.effect` event, in one transaction of its own.
                Some(e) => actiond_store::effects::finish_with_effect(
                    &self.db,
                    &self.id,
                    row,
                    outcome.state(),
                    outcome.detail(),
                    e,
                )
                .await
                .map_err(anyhow::Error::from),
                None => {
                    self.finisher
                        .finish(row, outcome.state(), outcome.detail())
                        .await
                }
            };
            match written {
                Ok(true) => return Ok(()),
                Ok(false) => {
                    tracing::error!(proposal = %row.id, "lease ran out before the outcome was recorded; it is outcome_unknown");
                    return Ok(());
                }
                Err(e) if tokio::time::Instant::now() + wait < deadline => {
                    tracing::warn!(proposal = %row.id, error = %e, "recording the outcome failed; retrying");
                    actiond_runtime::clock::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(1));
                }
                Err(e) => {
                    tracing::error!(proposal = %row.id, outcome = outcome.as_str(), error = %e, "ALERT: outcome could not be recorded; the sweeper will mark it outcome_unknown");
                    return Err(e);
                }
            }
        }
    }

    /// One sweep of lease and grant expiry.
    pub async fn sweep(&self) -> anyhow::Result<()> {
        let s = executor_queue::sweep(&self.db).await?;
        if s.outcome_unknown > 0 {
            tracing::error!(
                count = s.outcome_unknown,
                "ALERT: executions lost their lease after the spend; marked outcome_unknown"
            );
            self.metrics
                .swept
                .with_label_values(&["outcome_unknown"])
                .inc_by(s.outcome_unknown);
        }
        if s.expired > 0 {
            tracing::warn!(
                count = s.expired,
                "approved proposals expired unspent (executors lagged)"
            );
            self.metrics
                .swept
                .with_label_values(&["expired"])
                .inc_by(s.expired);
            self.metrics
                .grants_rejected
                .with_label_values(&["expired"])
                .inc_by(s.expired);
        }
        Ok(())
    }
}
