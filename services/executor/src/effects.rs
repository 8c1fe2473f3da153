//! The effect, read back. After a handler reports success, the executor reads the provider
//! again with the handler's own `read_back` (the refund under the grant's idempotency key, the
//! RRset PowerDNS now serves over DNS) and records it, with the outcome, as a `proposal.effect`
//! audit event: a read-back that is not what was approved ends the run `effect_mismatch`
//! (counted in `actiond_effect_read_backs_total{verdict}` and alerted on). The settler asks the
//! same question of `outcome_unknown` proposals, once they are older than
//! `--settle-after-ms`, and records `succeeded`, `failed` or `effect_mismatch` with the
//! evidence; it never runs a handler.

use crate::Worker;
use crate::handlers::{self, Execution, Outcome};
use actiond_core::effect::{EffectRecord, Verdict};
use actiond_core::handlers::HandlerKind;
use actiond_core::tenant::HandlerEntry;
use actiond_store::effects::{self, Unsettled};
use actiond_store::grants::StoredGrant;
use actiond_store::proposals::ProposalRow;
use std::time::Duration;

/// Longest time one read-back may take.
const READ_BACK_TIMEOUT: Duration = Duration::from_secs(5);

/// How long the settler leaves a proposal whose provider could not be read before asking
/// again. The claim of a round sets this next-try time in the database before the provider is
/// asked (`effect_settle_tries`, V47): a restarted executor does not ask again at once, and
/// another replica does not ask the same provider meanwhile.
const RETRY_UNREAD: Duration = Duration::from_secs(60);

/// Actions whose executor entry can read its effect back.
pub fn read_back_actions() -> Vec<&'static str> {
    HandlerKind::ALL
        .into_iter()
        .filter(|k| handlers::handler(*k).read_back.is_some())
        .map(HandlerKind::action)
        .collect()
}

/// Runs `kind`'s read-back within `budget` (at most [`READ_BACK_TIMEOUT`]); a provider that
/// does not answer in time is [`Verdict::Unread`].
pub(crate) async fn read(
    kind: HandlerKind,
    ex: &Execution<'_>,
    budget: Duration,
) -> Option<EffectRecord> {
    let read_back = handlers::handler(kind).read_back?;
    let budget = budget.min(READ_BACK_TIMEOUT);
    Some(match tokio::time::timeout(budget, read_back(ex)).await {
        Ok(r) => r,
        Err(_) => EffectRecord {
            verdict: Verdict::Unread,
            after: String::new(),
            reason: format!("the provider did not answer within {budget:?}"),
            evidence: serde_json::Value::Null,
            settled: false,
        },
    })
}

/// The execution context of `row` under its spent `grant` and the approved settings.
fn execution<'a>(
    w: &'a Worker,
    row: &'a ProposalRow,
    grant: &StoredGrant,
    entry: &'a HandlerEntry,
    params: &'a serde_json::Value,
    reported: Option<&'a str>,
) -> Execution<'a> {
    Execution {
        tenant: &row.tenant_id,
        proposal_id: row.id,
        grant_id: grant.claims.id,
        params,
        settings: &entry.settings,
        credentials: &w.credentials,
        http: &w.http,
        destinations: &w.destinations,
        timeout: READ_BACK_TIMEOUT,
        reported,
    }
}

/// After a run: when the handler succeeded and can read its effect back, reads it within
/// `budget` and returns the outcome to record (`effect_mismatch` when the provider does not
/// show what was approved) with the record for the `proposal.effect` event. Other outcomes
/// pass unchanged, without a read-back.
pub(crate) async fn after_run(
    w: &Worker,
    row: &ProposalRow,
    grant: &StoredGrant,
    entry: &HandlerEntry,
    outcome: Outcome,
    budget: Duration,
) -> (Outcome, Option<EffectRecord>) {
    if !matches!(outcome, Outcome::Succeeded(_)) {
        return (outcome, None);
    }
    let params: serde_json::Value =
        serde_json::from_str(&row.params_json).unwrap_or(serde_json::Value::Null);
    if actiond_core::effect::not_readable(entry.kind.action(), &entry.settings, &params).is_some() {
        // Nothing to read (SMTP; a webhook without read_back_url; a statement without
        // read_back): the card says so from the settings, no event is written.
        return (outcome, None);
    }
    let ex = execution(w, row, grant, entry, &params, Some(outcome.detail()));
    let Some(effect) = read(entry.kind, &ex, budget).await else {
        return (outcome, None);
    };
    count(w, entry.kind, effect.verdict);
    let outcome = match effect.verdict.after_success() {
        actiond_core::state::ProposalState::EffectMismatch => {
            tracing::error!(proposal = %row.id, after = %effect.after, reason = %effect.reason, "ALERT: the effect read back is not what was approved");
            w.metrics
                .effect_mismatches
                .with_label_values(&[entry.kind.action()])
                .inc();
            Outcome::EffectMismatch(format!(
                "{} (provider said: {}); read back: {}",
                effect.reason,
                outcome.detail(),
                effect.after
            ))
        }
        _ => outcome,
    };
    (outcome, Some(effect))
}

/// Counts one read-back by action and verdict.
fn count(w: &Worker, kind: HandlerKind, verdict: Verdict) {
    w.metrics
        .effect_read_backs
        .with_label_values(&[kind.action(), verdict.as_str()])
        .inc();
}

/// Settles `outcome_unknown` proposals until `stop` turns true, every `every`: those older than
/// `settle_after` whose handler can read its effect back. A proposal whose provider could not
/// be read is asked again after [`RETRY_UNREAD`], by whichever executor claims it then.
pub async fn run_settler(
    w: std::sync::Arc<Worker>,
    settle_after: Duration,
    every: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        if *stop.borrow() {
            return;
        }
        if let Err(e) = settle_round(&w, settle_after).await {
            tracing::warn!(error = %e, "settling outcome_unknown proposals failed");
        }
        tokio::select! {
            () = actiond_runtime::clock::sleep(every) => {},
            _ = stop.changed() => {},
        }
    }
}

/// One round of the settler: claims up to 8 proposals (each claim sets its next try
/// [`RETRY_UNREAD`] ahead, in the database, before the provider is asked), reads them back.
/// Returns how many were settled.
pub async fn settle_round(w: &Worker, settle_after: Duration) -> anyhow::Result<usize> {
    let actions = read_back_actions();
    let rows = effects::claim_unsettled(&w.db, &actions, settle_after, RETRY_UNREAD, 8).await?;
    let mut settled = 0;
    for u in &rows {
        if settle_one(w, u).await? {
            settled += 1;
        }
    }
    Ok(settled)
}

/// Reads back one `outcome_unknown` proposal with the settings of the document version its
/// grant names, and records the verdict. False when nothing could be concluded (no settings,
/// the provider unread, or another executor settled it first).
async fn settle_one(w: &Worker, u: &Unsettled) -> anyhow::Result<bool> {
    let row = &u.proposal;
    let client = w.db.client().await?;
    let doc = w
        .cache
        .version(&client, &row.tenant_id, u.grant.claims.doc_version)
        .await?;
    drop(client);
    let Some(entry) = doc.and_then(|d| d.doc.handler(&row.action).cloned()) else {
        tracing::warn!(proposal = %row.id, "cannot settle: the approved document version or its handler is missing");
        effects::note_unread(
            &w.db,
            row.id,
            "the approved document version or its handler is missing",
        )
        .await?;
        return Ok(false);
    };
    let params: serde_json::Value = serde_json::from_str(&row.params_json)?;
    if let Some(why) =
        actiond_core::effect::not_readable(entry.kind.action(), &entry.settings, &params)
    {
        // Asked again only after the retry: a person must find out (the card says why).
        effects::note_unread(&w.db, row.id, &why).await?;
        return Ok(false);
    }
    let ex = execution(w, row, &u.grant, &entry, &params, None);
    let Some(mut effect) = read(entry.kind, &ex, READ_BACK_TIMEOUT).await else {
        return Ok(false);
    };
    count(w, entry.kind, effect.verdict);
    let Some(to) = effect.verdict.settles() else {
        tracing::info!(proposal = %row.id, reason = %effect.reason, "cannot settle yet: the provider could not be read");
        effects::note_unread(&w.db, row.id, &effect.reason).await?;
        return Ok(false);
    };
    effect.settled = true;
    let detail = format!(
        "settled by reading the provider back under grant {}: {}",
        u.grant.claims.id,
        effect.line()
    );
    let done = effects::settle(&w.db, &w.id, row, to, &detail, &effect).await?;
    if done {
        w.metrics.settled.with_label_values(&[to.as_str()]).inc();
        if to == actiond_core::state::ProposalState::EffectMismatch {
            w.metrics
                .effect_mismatches
                .with_label_values(&[entry.kind.action()])
                .inc();
            tracing::error!(proposal = %row.id, after = %effect.after, "ALERT: an outcome_unknown proposal's effect is not what was approved");
        } else {
            tracing::info!(proposal = %row.id, to = to.as_str(), after = %effect.after, "outcome_unknown settled by reading the provider back");
        }
    }
    Ok(done)
}
