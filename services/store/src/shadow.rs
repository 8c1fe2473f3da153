//! Shadow policies: a candidate tenant document evaluated beside the live one on every new
//! proposal, without acting on it (tables `shadow_documents`, `shadow_decisions`).
//!
//! - [`store`] (`actiond tenant shadow -f NEW.yaml`) validates a candidate and makes it the
//!   tenant's one open shadow (an earlier open one is closed), audited.
//! - The policy worker reads the open shadow of each tenant in its batch ([`ShadowCache`]),
//!   evaluates it and [`record`]s both results in the decision's transaction.
//! - [`report`] (`actiond policy shadow-report`, the web app's tenant-admin page) counts the
//!   decisions the candidate would have flipped, by direction and deciding rule, with examples.
//! - [`promote`] (`actiond tenant promote`) applies the candidate through the one apply path
//!   ([`tenants::apply_in`]: versioned, audited) and closes it, in one transaction.

use crate::tenants::{self, Applied};
use crate::{Db, Result, StoreError, audit};
use actiond_core::audit::AuditKind;
use actiond_core::canonical::sha256_hex;
use actiond_core::policy::{CompiledPolicy, Effect};
use actiond_core::tenant::TenantDocument;
use deadpool_postgres::{GenericClient, Transaction};
use serde::Serialize;
use serde_json::json;
use std::collections::HashMap;
use std::sync::Mutex;
use uuid::Uuid;

/// Examples kept per flip group in a [`ShadowReport`].
pub const EXAMPLES_PER_FLIP: usize = 3;

/// A stored candidate document.
#[derive(Debug, Clone, Serialize)]
pub struct ShadowDocument {
    /// Tenant.
    pub tenant_id: String,
    /// Candidate number within the tenant (1, 2, …).
    pub seq: i32,
    /// SHA-256 of the source.
    pub sha256: String,
    /// The YAML as stored.
    pub source: String,
    /// Who stored it.
    pub stored_by: String,
    /// When (database clock).
    pub stored_at: chrono::DateTime<chrono::Utc>,
    /// The live version when it was stored.
    pub live_version: Option<i32>,
    /// When it was promoted or replaced; `None` while it is being evaluated.
    pub closed_at: Option<chrono::DateTime<chrono::Utc>>,
    /// The live version it became, when promoted.
    pub promoted_version: Option<i32>,
}

const SHADOW_COLS: &str = "tenant_id, seq, sha256, source, stored_by, stored_at, live_version, closed_at, promoted_version";

fn row_to_shadow(r: &tokio_postgres::Row) -> ShadowDocument {
    ShadowDocument {
        tenant_id: r.get(0),
        seq: r.get(1),
        sha256: r.get(2),
        source: r.get(3),
        stored_by: r.get(4),
        stored_at: r.get(5),
        live_version: r.get(6),
        closed_at: r.get(7),
        promoted_version: r.get(8),
    }
}

/// Validates `source` (a whole tenant document, as for `tenant apply`) and stores it as the
/// tenant's open shadow, closing the previous open one. The tenant must already have a live
/// document. Errors name the field (`policy.rules[1].when: …`).
pub async fn store(db: &Db, source: &str, stored_by: &str) -> Result<ShadowDocument> {
    let doc = TenantDocument::parse(source).map_err(|e| StoreError::Conflict(e.to_string()))?;
    let tenant = doc.tenant.as_str().to_owned();
    let sha = sha256_hex(source.as_bytes());
    let mut client = db.client().await?;
    let tx = client.transaction().await?;
    // Serialize with appliers and promoters of this tenant.
    if tx
        .query_opt("SELECT 1 FROM tenants WHERE id = $1 FOR UPDATE", &[&tenant])
        .await?
        .is_none()
    {
        return Err(StoreError::Conflict(format!(
            "tenant {tenant:?} has no live document yet: apply one with `actiond tenant apply` first"
        )));
    }
    let live = tenants::latest_version(&tx, &tenant).await?.map(|(v, _)| v);
    tx.execute(
        "UPDATE shadow_documents SET closed_at = now() WHERE tenant_id = $1 AND closed_at IS NULL",
        &[&tenant],
    )
    .await?;
    let q = format!(
        "INSERT INTO shadow_documents (tenant_id, seq, sha256, source, stored_by, live_version)
         SELECT $1, COALESCE(max(seq), 0) + 1, $2, $3, $4, $5 FROM shadow_documents WHERE tenant_id = $1
         RETURNING {SHADOW_COLS}"
    );
    let row = tx
        .query_one(&q, &[&tenant, &sha, &source, &stored_by, &live])
        .await?;
    let stored = row_to_shadow(&row);
    let actor = format!("operator:{stored_by}");
    audit::write(
        &tx,
        &audit::Event::new(
            &tenant,
            None,
            AuditKind::TenantShadowStored,
            &actor,
            json!({"shadow_seq": stored.seq, "sha256": sha, "live_version": live}),
        ),
    )
    .await?;
    tx.commit().await?;
    Ok(stored)
}

/// The tenant's open shadow, if any.
pub async fn open<C: GenericClient>(c: &C, tenant: &str) -> Result<Option<ShadowDocument>> {
    let q = format!(
        "SELECT {SHADOW_COLS} FROM shadow_documents WHERE tenant_id = $1 AND closed_at IS NULL"
    );
    Ok(c.query_opt(&q, &[&tenant])
        .await?
        .as_ref()
        .map(row_to_shadow))
}

/// One candidate by number.
pub async fn by_seq<C: GenericClient>(
    c: &C,
    tenant: &str,
    seq: i32,
) -> Result<Option<ShadowDocument>> {
    let q = format!("SELECT {SHADOW_COLS} FROM shadow_documents WHERE tenant_id = $1 AND seq = $2");
    Ok(c.query_opt(&q, &[&tenant, &seq])
        .await?
        .as_ref()
        .map(row_to_shadow))
}

/// Applies the tenant's open shadow as its next live version (through [`tenants::apply_in`]:
/// versioned, audited as `tenant.document_applied`) and closes it, audited as
/// `tenant.shadow_promoted`, all in one transaction. Returns the candidate and what apply did.
pub async fn promote(
    db: &Db,
    tenant: &str,
    promoted_by: &str,
) -> Result<(ShadowDocument, Applied)> {
    let mut client = db.client().await?;
    let tx = client.transaction().await?;
    let q = format!(
        "SELECT {SHADOW_COLS} FROM shadow_documents WHERE tenant_id = $1 AND closed_at IS NULL FOR UPDATE"
    );
    let Some(shadow) = tx
        .query_opt(&q, &[&tenant])
        .await?
        .as_ref()
        .map(row_to_shadow)
    else {
        return Err(StoreError::Conflict(format!(
            "tenant {tenant:?} has no shadow document to promote: store one with `actiond tenant shadow -f FILE`"
        )));
    };
    let applied = tenants::apply_in(&tx, &shadow.source, promoted_by).await?;
    let version = match &applied {
        Applied::New(d) | Applied::Unchanged(d) => d.version,
    };
    tx.execute(
        "UPDATE shadow_documents SET closed_at = now(), promoted_version = $3 WHERE tenant_id = $1 AND seq = $2",
        &[&tenant, &shadow.seq, &version],
    )
    .await?;
    let actor = format!("operator:{promoted_by}");
    audit::write(
        &tx,
        &audit::Event::new(
            tenant,
            None,
            AuditKind::TenantShadowPromoted,
            &actor,
            json!({"shadow_seq": shadow.seq, "sha256": shadow.sha256, "version": version}),
        ),
    )
    .await?;
    tx.commit().await?;
    Ok((shadow, applied))
}

/// Compiled open shadows, cached by (tenant, seq) — candidates never change once stored.
#[derive(Default)]
pub struct ShadowCache {
    compiled: Mutex<HashMap<(String, i32), CompiledPolicy>>,
}

impl ShadowCache {
    /// The open shadow of each of `tenants` that has one, compiled, with its number. A stored
    /// candidate that no longer compiles is skipped with a warning (it decides nothing).
    pub async fn open_of<C: GenericClient>(
        &self,
        c: &C,
        tenants: &[String],
    ) -> Result<HashMap<String, (i32, CompiledPolicy)>> {
        let stmt = c
            .prepare_cached(
                "SELECT tenant_id, seq, sha256, source FROM shadow_documents
                 WHERE tenant_id = ANY($1) AND closed_at IS NULL",
            )
            .await?;
        let mut out = HashMap::new();
        for r in c.query(&stmt, &[&tenants]).await? {
            let (tenant, seq): (String, i32) = (r.get(0), r.get(1));
            let key = (tenant.clone(), seq);
            let cached = self.compiled.lock().ok().and_then(|m| m.get(&key).cloned());
            let compiled = match cached {
                Some(p) => p,
                None => {
                    let source: String = r.get(3);
                    let built = TenantDocument::parse_stored(&source)
                        .map_err(|e| e.to_string())
                        .and_then(|d| CompiledPolicy::new(d, 0, r.get(2)));
                    match built {
                        Ok(p) => {
                            if let Ok(mut m) = self.compiled.lock() {
                                m.insert(key, p.clone());
                            }
                            p
                        }
                        Err(e) => {
                            tracing::warn!(tenant, seq, error = %e, "shadow document skipped");
                            continue;
                        }
                    }
                }
            };
            out.insert(tenant, (seq, compiled));
        }
        Ok(out)
    }
}

/// One proposal's live and shadow results.
#[derive(Debug, Clone)]
pub struct ShadowResult {
    /// Tenant.
    pub tenant_id: String,
    /// Candidate number.
    pub shadow_seq: i32,
    /// The proposal.
    pub proposal_id: Uuid,
    /// Its action.
    pub action: String,
    /// What the live document decided (after budgets).
    pub live_effect: Effect,
    /// The live deciding rule.
    pub live_rule: Option<String>,
    /// What the candidate would have decided.
    pub shadow_effect: Effect,
    /// The candidate's deciding rule.
    pub shadow_rule: Option<String>,
    /// The candidate's reason.
    pub shadow_reason: String,
}

/// Records a batch of shadow results in one statement, in the caller's transaction.
pub async fn record(tx: &Transaction<'_>, results: &[ShadowResult]) -> Result<()> {
    if results.is_empty() {
        return Ok(());
    }
    let col = |f: fn(&ShadowResult) -> Option<String>| -> Vec<Option<String>> {
        results.iter().map(f).collect()
    };
    let tenants = col(|r| Some(r.tenant_id.clone()));
    let seqs: Vec<i32> = results.iter().map(|r| r.shadow_seq).collect();
    let ids: Vec<Uuid> = results.iter().map(|r| r.proposal_id).collect();
    let actions = col(|r| Some(r.action.clone()));
    let live = col(|r| Some(r.live_effect.as_str().to_owned()));
    let live_rules = col(|r| r.live_rule.clone());
    let shadow = col(|r| Some(r.shadow_effect.as_str().to_owned()));
    let shadow_rules = col(|r| r.shadow_rule.clone());
    let reasons = col(|r| Some(r.shadow_reason.clone()));
    let stmt = tx
        .prepare_cached(
            "INSERT INTO shadow_decisions (tenant_id, shadow_seq, proposal_id, action, live_effect, live_rule,
                                           shadow_effect, shadow_rule, shadow_reason)
             SELECT * FROM unnest($1::text[], $2::int4[], $3::uuid[], $4::text[], $5::text[], $6::text[],
                                  $7::text[], $8::text[], $9::text[])
             ON CONFLICT DO NOTHING",
        )
        .await?;
    tx.execute(
        &stmt,
        &[
            &tenants,
            &seqs,
            &ids,
            &actions,
            &live,
            &live_rules,
            &shadow,
            &shadow_rules,
            &reasons,
        ],
    )
    .await?;
    Ok(())
}

/// One proposal a candidate would have decided differently.
#[derive(Debug, Clone, Serialize)]
pub struct FlipExample {
    /// The proposal.
    pub proposal_id: Uuid,
    /// Its action.
    pub action: String,
    /// The live deciding rule (`(default)` when none matched).
    pub live_rule: String,
}

/// Decisions flipped the same way by the same candidate rule.
#[derive(Debug, Clone, Serialize)]
pub struct Flip {
    /// The live effect.
    pub from: Effect,
    /// The candidate's effect.
    pub to: Effect,
    /// `stricter` (the candidate is more severe) or `looser`.
    pub direction: &'static str,
    /// The candidate's deciding rule (`(default)`, `budget`, `min-effect`, `no-handler`…).
    pub rule: String,
    /// How many decisions.
    pub count: i64,
    /// The most recent few, newest first (at most [`EXAMPLES_PER_FLIP`]).
    pub examples: Vec<FlipExample>,
}

/// What a candidate would have changed, over every proposal it was evaluated on.
#[derive(Debug, Clone, Serialize)]
pub struct ShadowReport {
    /// The candidate.
    pub shadow: ShadowDocument,
    /// Proposals evaluated.
    pub evaluated: i64,
    /// Of those, decided the same way.
    pub agreed: i64,
    /// The rest, grouped by direction and rule, largest groups first.
    pub flips: Vec<Flip>,
}

/// The report of candidate `seq` (default: the open one, else the latest) of `tenant`;
/// `None` when the tenant never had a candidate.
pub async fn report<C: GenericClient>(
    c: &C,
    tenant: &str,
    seq: Option<i32>,
) -> Result<Option<ShadowReport>> {
    let shadow = match seq {
        Some(s) => by_seq(c, tenant, s).await?,
        None => {
            let q = format!(
                "SELECT {SHADOW_COLS} FROM shadow_documents WHERE tenant_id = $1
                 ORDER BY (closed_at IS NULL) DESC, seq DESC LIMIT 1"
            );
            c.query_opt(&q, &[&tenant])
                .await?
                .as_ref()
                .map(row_to_shadow)
        }
    };
    let Some(shadow) = shadow else {
        return Ok(None);
    };
    let totals = c
        .query_one(
            "SELECT count(*), count(*) FILTER (WHERE live_effect = shadow_effect)
             FROM shadow_decisions WHERE tenant_id = $1 AND shadow_seq = $2",
            &[&tenant, &shadow.seq],
        )
        .await?;
    let groups = c
        .query(
            "SELECT live_effect, shadow_effect, COALESCE(shadow_rule, '(default)'), count(*),
                    (array_agg(proposal_id ORDER BY decided_at DESC, proposal_id))[1:$3],
                    (array_agg(action ORDER BY decided_at DESC, proposal_id))[1:$3],
                    (array_agg(COALESCE(live_rule, '(default)') ORDER BY decided_at DESC, proposal_id))[1:$3]
             FROM shadow_decisions WHERE tenant_id = $1 AND shadow_seq = $2 AND live_effect <> shadow_effect
             GROUP BY 1, 2, 3 ORDER BY 4 DESC, 1, 2, 3",
            &[&tenant, &shadow.seq, &(EXAMPLES_PER_FLIP as i32)],
        )
        .await?;
    let mut flips = Vec::with_capacity(groups.len());
    for g in groups {
        let parse = |s: String| {
            Effect::parse(&s).ok_or_else(|| StoreError::Conflict(format!("stored effect {s:?}")))
        };
        let (from, to) = (parse(g.get(0))?, parse(g.get(1))?);
        let ids: Vec<Uuid> = g.get(4);
        let actions: Vec<String> = g.get(5);
        let rules: Vec<String> = g.get(6);
        flips.push(Flip {
            from,
            to,
            direction: if to > from { "stricter" } else { "looser" },
            rule: g.get(2),
            count: g.get(3),
            examples: ids
                .into_iter()
                .zip(actions)
                .zip(rules)
                .map(|((proposal_id, action), live_rule)| FlipExample {
                    proposal_id,
                    action,
                    live_rule,
                })
                .collect(),
        });
    }
    Ok(Some(ShadowReport {
        shadow,
        evaluated: totals.get(0),
        agreed: totals.get(1),
        flips,
    }))
}
