//! Grant issue (policy, web, break-glass) and the stored form the executor verifies.

use crate::Result;
use actiond_core::grant::{GRANT_VERSION, GrantClaims, GrantSigner};
use deadpool_postgres::Transaction;
use std::time::Duration;
use uuid::Uuid;

/// Issues a grant inside the caller's transaction. `expires_at` comes from the database clock
/// (`now() + lifetime`), is signed, then inserted as that value, so an application clock that is
/// off neither refuses a fresh grant nor accepts an expired one (DESIGN.md).
#[allow(clippy::too_many_arguments)]
pub async fn issue(
    tx: &Transaction<'_>,
    signer: &GrantSigner,
    proposal_id: Uuid,
    tenant_id: &str,
    intent_hash: &str,
    doc_version: i32,
    lifetime: Duration,
    issued_by: &str,
) -> Result<GrantClaims> {
    let lifetime_us = i64::try_from(lifetime.as_micros()).unwrap_or(i64::MAX);
    let stmt = tx
        .prepare_cached("SELECT (extract(epoch FROM now()) * 1000000)::bigint + $1::bigint")
        .await?;
    let expires_at: i64 = tx.query_one(&stmt, &[&lifetime_us]).await?.get(0);
    let claims = GrantClaims {
        version: GRANT_VERSION,
        id: Uuid::new_v4(),
        proposal_id,
        tenant_id: tenant_id.to_owned(),
        intent_hash: intent_hash.to_owned(),
        doc_version,
        expires_at,
        key_id: signer.key_id().to_owned(),
    };
    let sig = signer
        .sign(&claims)
        .map_err(|e| crate::StoreError::Config(e.to_string()))?;
    let ins = tx
        .prepare_cached(
            "INSERT INTO grants (id, proposal_id, tenant_id, intent_hash, doc_version, expires_at_us, expires_at, key_id, sig, issued_by)
             VALUES ($1, $2, $3, $4, $5, $6, 'epoch'::timestamptz + ($6::bigint::text || ' microseconds')::interval, $7, $8, $9)",
        )
        .await?;
    tx.execute(
        &ins,
        &[
            &claims.id,
            &proposal_id,
            &tenant_id,
            &intent_hash,
            &doc_version,
            &expires_at,
            &claims.key_id,
            &sig,
            &issued_by,
        ],
    )
    .await?;
    Ok(claims)
}

/// A grant as stored: its claims (reassembled from columns), signature and spend state.
#[derive(Debug, Clone)]
pub struct StoredGrant {
    /// The signed fields.
    pub claims: GrantClaims,
    /// Signature bytes as stored (any length: verification refuses all but 64).
    pub sig: Vec<u8>,
    /// When it was spent, if it was.
    pub used_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Which executor spent it.
    pub used_by: Option<String>,
}

/// Loads the grant of a proposal.
pub async fn for_proposal<C: deadpool_postgres::GenericClient>(
    c: &C,
    proposal_id: Uuid,
) -> Result<Option<StoredGrant>> {
    let stmt = c
        .prepare_cached(
            "SELECT id, proposal_id, tenant_id, intent_hash, doc_version, expires_at_us, key_id, sig, used_at, used_by
             FROM grants WHERE proposal_id = $1",
        )
        .await?;
    Ok(c.query_opt(&stmt, &[&proposal_id])
        .await?
        .map(|r| StoredGrant {
            claims: GrantClaims {
                version: GRANT_VERSION,
                id: r.get(0),
                proposal_id: r.get(1),
                tenant_id: r.get(2),
                intent_hash: r.get(3),
                doc_version: r.get(4),
                expires_at: r.get(5),
                key_id: r.get(6),
            },
            sig: r.get(7),
            used_at: r.get(8),
            used_by: r.get(9),
        }))
}
