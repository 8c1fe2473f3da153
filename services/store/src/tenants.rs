//! Tenants and their versioned, immutable documents.

use crate::{Db, Result, StoreError, audit};
use actiond_core::canonical::sha256_hex;
use actiond_core::tenant::TenantDocument;
use serde_json::json;

/// A CTE `latest (tenant_id, version)` for a claim whose locked rows are the CTE `p`: each
/// tenant of the claimed rows once, with its latest document version (null when it has none).
/// A subquery per row read `tenant_documents` once per claimed proposal; this reads it once
/// per tenant of the batch, in the claim's own statement (so a document applied a moment ago
/// is never missed for a cached copy). `MATERIALIZED`, so a nested loop that rescans it reads
/// the stored rows instead of running the lookup again. Used by the policy and executor claims.
pub const LATEST_PER_CLAIMED_TENANT_SQL: &str = "latest AS MATERIALIZED (
    SELECT t.tenant_id, (SELECT max(d.version) FROM tenant_documents d WHERE d.tenant_id = t.tenant_id) AS version
    FROM (SELECT DISTINCT tenant_id FROM p) AS t
 )";

/// A stored tenant document version.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StoredDocument {
    /// Tenant id.
    pub tenant_id: String,
    /// Version (1, 2, …).
    pub version: i32,
    /// SHA-256 of the source.
    pub sha256: String,
    /// The YAML as applied.
    pub source: String,
    /// Who applied it.
    pub applied_by: String,
    /// When (database clock).
    pub applied_at: chrono::DateTime<chrono::Utc>,
}

impl StoredDocument {
    /// Parses and validates the stored source again.
    pub fn parse(&self) -> Result<TenantDocument> {
        TenantDocument::parse_stored(&self.source).map_err(|e| {
            StoreError::Conflict(format!(
                "stored document {} v{} no longer validates: {e}",
                self.tenant_id, self.version
            ))
        })
    }
}

/// Result of [`apply`].
#[derive(Debug, Clone)]
pub enum Applied {
    /// A new version was stored.
    New(StoredDocument),
    /// The latest version already has this exact source; nothing stored.
    Unchanged(StoredDocument),
}

/// Validates `source` and stores it as the tenant's next version, creating the tenant on first
/// apply. Applying the same source twice stores nothing the second time.
pub async fn apply(db: &Db, source: &str, applied_by: &str) -> Result<Applied> {
    let mut client = db.client().await?;
    let tx = client.transaction().await?;
    let applied = apply_in(&tx, source, applied_by).await?;
    tx.commit().await?;
    Ok(applied)
}

/// [`apply`] inside the caller's transaction (the one path for every new version: `tenant
/// apply` and `tenant promote` both come here), audited as `tenant.document_applied`.
pub async fn apply_in(
    tx: &deadpool_postgres::Transaction<'_>,
    source: &str,
    applied_by: &str,
) -> Result<Applied> {
    let doc = TenantDocument::parse(source).map_err(|e| StoreError::Conflict(e.to_string()))?;
    let tenant = doc.tenant.as_str().to_owned();
    let sha = sha256_hex(source.as_bytes());
    let document = serde_json::to_value(&doc).unwrap_or_default();
    tx.execute(
        "INSERT INTO tenants (id) VALUES ($1) ON CONFLICT DO NOTHING",
        &[&tenant],
    )
    .await?;
    // Serialize appliers of one tenant on its row.
    tx.execute("SELECT 1 FROM tenants WHERE id = $1 FOR UPDATE", &[&tenant])
        .await?;
    // Same bytes, or the same document written differently (comments, order, spacing).
    if let Some(latest) = latest_in(tx, &tenant).await?
        && (latest.sha256 == sha
            || latest
                .parse()
                .ok()
                .and_then(|d| serde_json::to_value(d).ok())
                .is_some_and(|v| v == document))
    {
        return Ok(Applied::Unchanged(latest));
    }
    let row = tx
        .query_one(
            "INSERT INTO tenant_documents (tenant_id, version, sha256, source, document, applied_by)
             SELECT $1, COALESCE(max(version), 0) + 1, $2, $3, $4, $5 FROM tenant_documents WHERE tenant_id = $1
             RETURNING version, applied_at",
            &[&tenant, &sha, &source, &document, &applied_by],
        )
        .await?;
    let version: i32 = row.get(0);
    let actor = format!("operator:{applied_by}");
    audit::write(
        tx,
        &audit::Event {
            tenant_id: &tenant,
            proposal_id: None,
            kind: actiond_core::audit::AuditKind::TenantDocumentApplied,
            actor: &actor,
            from_state: None,
            to_state: None,
            intent_hash: None,
            params_sha256: None,
            detail: json!({"version": version, "sha256": sha}),
        },
    )
    .await?;
    Ok(Applied::New(StoredDocument {
        tenant_id: tenant,
        version,
        sha256: sha,
        source: source.to_owned(),
        applied_by: applied_by.to_owned(),
        applied_at: row.get(1),
    }))
}

fn row_to_doc(r: &tokio_postgres::Row) -> StoredDocument {
    StoredDocument {
        tenant_id: r.get(0),
        version: r.get(1),
        sha256: r.get(2),
        source: r.get(3),
        applied_by: r.get(4),
        applied_at: r.get(5),
    }
}

const DOC_COLS: &str = "tenant_id, version, sha256, source, applied_by, applied_at";

async fn latest_in<C: deadpool_postgres::GenericClient>(
    c: &C,
    tenant: &str,
) -> Result<Option<StoredDocument>> {
    let q = format!(
        "SELECT {DOC_COLS} FROM tenant_documents WHERE tenant_id = $1 ORDER BY version DESC LIMIT 1"
    );
    Ok(c.query_opt(&q, &[&tenant]).await?.as_ref().map(row_to_doc))
}

/// The latest document of a tenant.
pub async fn latest<C: deadpool_postgres::GenericClient>(
    c: &C,
    tenant: &str,
) -> Result<Option<StoredDocument>> {
    latest_in(c, tenant).await
}

/// The latest version number and sha256 of a tenant's document (cheap: for cache checks).
pub async fn latest_version<C: deadpool_postgres::GenericClient>(
    c: &C,
    tenant: &str,
) -> Result<Option<(i32, String)>> {
    let stmt = c
        .prepare_cached(
            "SELECT version, sha256 FROM tenant_documents WHERE tenant_id = $1 ORDER BY version DESC LIMIT 1",
        )
        .await?;
    Ok(c.query_opt(&stmt, &[&tenant])
        .await?
        .map(|r| (r.get(0), r.get(1))))
}

/// One specific version.
pub async fn version<C: deadpool_postgres::GenericClient>(
    c: &C,
    tenant: &str,
    version: i32,
) -> Result<Option<StoredDocument>> {
    let q =
        format!("SELECT {DOC_COLS} FROM tenant_documents WHERE tenant_id = $1 AND version = $2");
    Ok(c.query_opt(&q, &[&tenant, &version])
        .await?
        .as_ref()
        .map(row_to_doc))
}

/// All versions, newest first.
pub async fn history(db: &Db, tenant: &str) -> Result<Vec<StoredDocument>> {
    let c = db.client().await?;
    let q = format!(
        "SELECT {DOC_COLS} FROM tenant_documents WHERE tenant_id = $1 ORDER BY version DESC"
    );
    Ok(c.query(&q, &[&tenant])
        .await?
        .iter()
        .map(row_to_doc)
        .collect())
}

/// All tenant ids.
pub async fn list(db: &Db) -> Result<Vec<String>> {
    let c = db.client().await?;
    Ok(c.query("SELECT id FROM tenants ORDER BY id", &[])
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect())
}
