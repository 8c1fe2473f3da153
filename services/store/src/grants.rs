//! Grant issue (policy, web, break-glass) and the stored form the executor verifies.
//!
//! Every grant is built by [`sign`] and stored by [`issue_many`] (or [`issue`] for one): the
//! policy worker's allow path, decisions in the approval web app and the break-glass CLI all go
//! through it, so the claims, the expiry clock and the stored row are the same for all issuers.

use crate::Result;
use actiond_core::grant::{GRANT_VERSION, GrantClaims, GrantSigner};
use deadpool_postgres::Transaction;
use std::time::Duration;
use uuid::Uuid;

/// What a grant is for: one proposal's intent under one tenant document version.
#[derive(Debug, Clone, Copy)]
pub struct GrantRequest<'a> {
    /// The proposal it authorizes.
    pub proposal_id: Uuid,
    /// The proposal's tenant.
    pub tenant_id: &'a str,
    /// The proposal's intent hash (lowercase hex SHA-256).
    pub intent_hash: &'a str,
    /// The tenant document version the decision was made under; the executor runs the
    /// handler with this version's settings.
    pub doc_version: i32,
    /// How long it may wait for an executor (the handler's `grant_lifetime`).
    pub lifetime: Duration,
    /// SHA-256 of the stored preview the person approved, when there is one
    /// ([`crate::previews::sha256_for_decision`]); `None` for policy's allow.
    pub preview_sha256: Option<&'a str>,
    /// SHA-256 of the source of document `doc_version` as the decision read it (the policy
    /// worker's compiled document; a person's or operator's decision takes the proposal's
    /// `doc_sha256`, which policy wrote with it). Signed; the executor compares it with the
    /// source it loads.
    pub doc_sha256: Option<&'a str>,
}

/// Signed claims, ready to store.
#[derive(Debug, Clone)]
pub struct SignedGrant {
    /// The claims.
    pub claims: GrantClaims,
    /// Ed25519 signature over the claims' canonical form.
    pub sig: Vec<u8>,
}

/// Builds and signs the claims of one grant. `now_us` is the database clock in microseconds
/// since the Unix epoch; `expires_at = now_us + lifetime` (saturating).
///
/// Errors: [`crate::StoreError::Config`] when the signer cannot sign.
pub fn sign(signer: &GrantSigner, req: &GrantRequest<'_>, now_us: i64) -> Result<SignedGrant> {
    let lifetime_us = i64::try_from(req.lifetime.as_micros()).unwrap_or(i64::MAX);
    let claims = GrantClaims {
        version: GRANT_VERSION,
        id: Uuid::new_v4(),
        proposal_id: req.proposal_id,
        tenant_id: req.tenant_id.to_owned(),
        intent_hash: req.intent_hash.to_owned(),
        doc_version: req.doc_version,
        expires_at: now_us.saturating_add(lifetime_us),
        key_id: signer.key_id().to_owned(),
        preview_sha256: req.preview_sha256.map(str::to_owned),
        doc_sha256: req.doc_sha256.map(str::to_owned),
    };
    let sig = signer
        .sign(&claims)
        .map_err(|e| crate::StoreError::Config(e.to_string()))?;
    Ok(SignedGrant { claims, sig })
}

/// The one `INSERT INTO grants` of every issuer, with its eleven parameters numbered from
/// `first`: ids, proposal ids, tenant ids, intent hashes, document versions, expiries in
/// microseconds since the epoch, key ids, signatures (arrays, one element per grant, as
/// [`GrantColumns`] holds them), then `issued_by`, then the preview hashes (an array of
/// nullable text, V42), then the document hashes (likewise, V49). [`issue_many`] runs it alone (`first` = 1);
/// the policy worker's decision statement (`policy_queue::DECIDE_SQL`) runs it as one of its
/// parts. The stored expiry is the signed value itself, in `expires_at_us`; `expires_at` is
/// generated from it (V34), so no second copy can disagree with the signature.
pub fn insert_sql(first: usize) -> String {
    let n = |i: usize| first + i;
    format!(
        "INSERT INTO grants (id, proposal_id, tenant_id, intent_hash, doc_version, expires_at_us, key_id, sig, issued_by, preview_sha256, doc_sha256)
         SELECT g.id, g.proposal_id, g.tenant_id, g.intent_hash, g.version, g.exp, g.key_id, g.sig, ${}::text, g.preview, g.doc
         FROM unnest(${}::uuid[], ${}::uuid[], ${}::text[], ${}::text[], ${}::int4[], ${}::int8[], ${}::text[], ${}::bytea[], ${}::text[], ${}::text[])
              AS g(id, proposal_id, tenant_id, intent_hash, version, exp, key_id, sig, preview, doc)",
        n(8),
        n(0),
        n(1),
        n(2),
        n(3),
        n(4),
        n(5),
        n(6),
        n(7),
        n(9),
        n(10),
    )
}

/// Signed grants as the columns of [`insert_sql`] (its first eight parameters).
#[derive(Debug, Default)]
pub struct GrantColumns {
    ids: Vec<Uuid>,
    proposals: Vec<Uuid>,
    tenants: Vec<String>,
    intents: Vec<String>,
    versions: Vec<i32>,
    expiries: Vec<i64>,
    keys: Vec<String>,
    sigs: Vec<Vec<u8>>,
    previews: Vec<Option<String>>,
    docs: Vec<Option<String>>,
}

impl GrantColumns {
    /// The columns of `signed`, in order.
    pub fn of(signed: &[SignedGrant]) -> Self {
        let mut c = Self::default();
        for g in signed {
            c.ids.push(g.claims.id);
            c.proposals.push(g.claims.proposal_id);
            c.tenants.push(g.claims.tenant_id.clone());
            c.intents.push(g.claims.intent_hash.clone());
            c.versions.push(g.claims.doc_version);
            c.expiries.push(g.claims.expires_at);
            c.keys.push(g.claims.key_id.clone());
            c.sigs.push(g.sig.clone());
            c.previews.push(g.claims.preview_sha256.clone());
            c.docs.push(g.claims.doc_sha256.clone());
        }
        c
    }

    /// The preview hashes, [`insert_sql`]'s tenth parameter (after `issued_by`).
    pub fn previews(&self) -> &(dyn tokio_postgres::types::ToSql + Sync) {
        &self.previews
    }

    /// The document hashes, [`insert_sql`]'s eleventh parameter.
    pub fn docs(&self) -> &(dyn tokio_postgres::types::ToSql + Sync) {
        &self.docs
    }

    /// The eight array parameters, in [`insert_sql`]'s order.
    pub fn params(&self) -> [&(dyn tokio_postgres::types::ToSql + Sync); 8] {
        [
            &self.ids,
            &self.proposals,
            &self.tenants,
            &self.intents,
            &self.versions,
            &self.expiries,
            &self.keys,
            &self.sigs,
        ]
    }
}

/// Signs one grant per request, all expiring relative to `now_us` (the issuing transaction's
/// `now()` in microseconds since the epoch, read from the database).
///
/// Errors: [`crate::StoreError::Config`] when the signer cannot sign.
pub fn sign_many(
    signer: &GrantSigner,
    reqs: &[GrantRequest<'_>],
    now_us: i64,
) -> Result<Vec<SignedGrant>> {
    reqs.iter().map(|r| sign(signer, r, now_us)).collect()
}

/// The issuing transaction's `now()` in microseconds since the epoch: what grant expiries are
/// computed from, so the database clock alone decides whether a grant has expired.
pub const NOW_US_SQL: &str = "(extract(epoch FROM now()) * 1000000)::bigint";

/// Issues grants inside the caller's transaction, one statement for all. The expiry comes
/// from the database clock (the transaction's `now()`, read once), is signed, then stored as
/// that value, so an application clock that is off neither refuses a fresh grant nor accepts
/// an expired one. `issued_by` is recorded on every row (`policy`, or the approvers' subjects).
pub async fn issue_many(
    tx: &Transaction<'_>,
    signer: &GrantSigner,
    reqs: &[GrantRequest<'_>],
    issued_by: &str,
) -> Result<Vec<GrantClaims>> {
    if reqs.is_empty() {
        return Ok(Vec::new());
    }
    let now = tx.prepare_cached(&format!("SELECT {NOW_US_SQL}")).await?;
    let now_us: i64 = tx.query_one(&now, &[]).await?.get(0);
    let signed = sign_many(signer, reqs, now_us)?;
    let cols = GrantColumns::of(&signed);
    let ins = tx.prepare_cached(&insert_sql(1)).await?;
    let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = cols.params().to_vec();
    params.push(&issued_by);
    params.push(cols.previews());
    params.push(cols.docs());
    tx.execute(&ins, &params).await?;
    Ok(signed.into_iter().map(|g| g.claims).collect())
}

/// Issues one grant inside the caller's transaction; see [`issue_many`].
pub async fn issue(
    tx: &Transaction<'_>,
    signer: &GrantSigner,
    req: &GrantRequest<'_>,
    issued_by: &str,
) -> Result<GrantClaims> {
    let mut claims = issue_many(tx, signer, std::slice::from_ref(req), issued_by).await?;
    claims
        .pop()
        .ok_or_else(|| crate::StoreError::Config("no grant was issued".into()))
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

/// The columns [`StoredGrant::from_row`] reads, for a query over `grants g` (each prefixed
/// `grant_` so they can sit beside a proposal's columns).
pub const GRANT_COLUMNS: &str = "g.id AS grant_id, g.proposal_id AS grant_proposal_id, g.tenant_id AS grant_tenant_id,
    g.intent_hash AS grant_intent_hash, g.doc_version AS grant_doc_version, g.expires_at_us AS grant_expires_at_us,
    g.key_id AS grant_key_id, g.sig AS grant_sig, g.used_at AS grant_used_at, g.used_by AS grant_used_by,
    g.preview_sha256 AS grant_preview_sha256, g.doc_sha256 AS grant_doc_sha256";

impl StoredGrant {
    /// Reads the columns of [`GRANT_COLUMNS`] by name; `None` when `grant_id` is null (a
    /// left join found no grant).
    pub fn from_row(r: &tokio_postgres::Row) -> Result<Option<Self>> {
        let Some(id) = r.try_get::<_, Option<Uuid>>("grant_id")? else {
            return Ok(None);
        };
        Ok(Some(StoredGrant {
            claims: GrantClaims {
                version: GRANT_VERSION,
                id,
                proposal_id: r.try_get("grant_proposal_id")?,
                tenant_id: r.try_get("grant_tenant_id")?,
                intent_hash: r.try_get("grant_intent_hash")?,
                doc_version: r.try_get("grant_doc_version")?,
                expires_at: r.try_get("grant_expires_at_us")?,
                key_id: r.try_get("grant_key_id")?,
                preview_sha256: r.try_get("grant_preview_sha256")?,
                doc_sha256: r.try_get("grant_doc_sha256")?,
            },
            sig: r.try_get("grant_sig")?,
            used_at: r.try_get("grant_used_at")?,
            used_by: r.try_get("grant_used_by")?,
        }))
    }
}

/// Loads the live grant of a proposal (not one voided when a run went back to the approvers).
pub async fn for_proposal<C: deadpool_postgres::GenericClient>(
    c: &C,
    proposal_id: Uuid,
) -> Result<Option<StoredGrant>> {
    let stmt = c
        .prepare_cached(&format!(
            "SELECT {GRANT_COLUMNS} FROM grants g WHERE g.proposal_id = $1 AND g.voided_at IS NULL"
        ))
        .await?;
    match c.query_opt(&stmt, &[&proposal_id]).await? {
        Some(r) => StoredGrant::from_row(&r),
        None => Ok(None),
    }
}
