//! Previews of escalated proposals (table `proposal_previews`, migration V9): written once by
//! the executor, read by the approval page and the operator CLI. A preview never changes a
//! decision or a grant; nothing on the decision path reads it.

use crate::{Db, Result, set_tenants};
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// An escalated proposal that has no preview yet.
#[derive(Debug, Clone)]
pub struct PreviewTask {
    /// Proposal id.
    pub id: Uuid,
    /// Tenant.
    pub tenant_id: String,
    /// Action name.
    pub action: String,
    /// Canonical params.
    pub params_json: String,
    /// The tenant document version that escalated it (its handler settings are used).
    pub doc_version: i32,
}

/// A stored preview.
#[derive(Debug, Clone)]
pub struct Preview {
    /// False when the provider could not be read ("preview unavailable").
    pub ok: bool,
    /// The lines for the approver, or why the preview is unavailable.
    pub text: String,
    /// When the provider was read (database clock).
    pub read_at: DateTime<Utc>,
}

/// Up to `limit` escalated proposals of `actions` without a preview, oldest first
/// (executor role).
pub async fn pending(db: &Db, actions: &[&str], limit: i64) -> Result<Vec<PreviewTask>> {
    let c = db.client().await?;
    let rows = c
        .query(
            "SELECT p.id, p.tenant_id, p.action, p.params_json, p.doc_version
             FROM proposals p
             WHERE p.state = 'escalated' AND p.doc_version IS NOT NULL AND p.action = ANY($1)
               AND NOT EXISTS (SELECT 1 FROM proposal_previews v WHERE v.proposal_id = p.id)
             ORDER BY p.created_at LIMIT $2",
            &[&actions, &limit],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| PreviewTask {
            id: r.get(0),
            tenant_id: r.get(1),
            action: r.get(2),
            params_json: r.get(3),
            doc_version: r.get(4),
        })
        .collect())
}

/// Stores a preview (once: a second writer's row is ignored). Executor role.
pub async fn insert(db: &Db, task: &PreviewTask, ok: bool, text: &str) -> Result<()> {
    let text: String = text.chars().take(20_000).collect();
    db.client()
        .await?
        .execute(
            "INSERT INTO proposal_previews (proposal_id, tenant_id, ok, text) VALUES ($1, $2, $3, $4)
             ON CONFLICT (proposal_id) DO NOTHING",
            &[&task.id, &task.tenant_id, &ok, &text],
        )
        .await?;
    Ok(())
}

/// The preview of proposal `id`, seen with `tenants` (row-level security scopes the web role).
pub async fn get(db: &Db, tenants: &[String], id: Uuid) -> Result<Option<Preview>> {
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    set_tenants(&tx, tenants).await?;
    let row = tx
        .query_opt(
            "SELECT ok, text, read_at FROM proposal_previews WHERE proposal_id = $1",
            &[&id],
        )
        .await?;
    tx.commit().await?;
    Ok(row.map(|r| Preview {
        ok: r.get(0),
        text: r.get(1),
        read_at: r.get(2),
    }))
}
