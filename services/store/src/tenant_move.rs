//! Moving a tenant to another cell: freeze it here, write its rows and sealed chain to a file
//! (`actiond tenant export`), load that file into another cluster (`actiond tenant import`).
//! The file's format and checks are [`actiond_core::tenant_move`]'s.
//!
//! Both sides run as the database's owner (the login that runs migrations): the export writes
//! `tenant_moves` and two audit events no service role may write, the import writes rows in
//! states no service role may insert (`session_replication_role = replica` skips the triggers
//! that guard the services' writes, for this transaction only; the file was checked first).
//!
//! **Never on both clusters.** [`freeze`] takes `SHARE ROW EXCLUSIVE` locks on `proposals`,
//! `grants` and `approvals` before it inserts the tenant's `tenant_moves` row, so it waits for
//! every transaction writing them and every later statement reads the row: a grant spent before
//! the freeze is spent in the file, and none is spent here after it (the executor's claim and
//! spend skip the tenant; `proposals_check_update()` refuses `approved → executing` for it).

use crate::seals::{EVENT_COLUMNS, SEAL_COLUMNS, event_from_row, seal_from_row};
use crate::{Db, Result, StoreError, audit};
use actiond_core::audit::AuditKind;
use actiond_core::audit_export::{Format, event_line, seal_line};
use actiond_core::tenant_move::{CheckedFile, DataDigest, row_line};
use serde_json::{Value, json};
use std::io::Write;

/// The tenant's tables, in the order an import inserts them, with the column naming the
/// tenant. Not moved: web sessions and login states and passkey challenges (sign-ins are
/// per cell; approvers sign in again), and the cell-local `tenant_moves` row.
pub const TABLES: &[(&str, &str)] = &[
    ("tenants", "id"),
    ("tenant_documents", "tenant_id"),
    ("agents", "tenant_id"),
    ("agent_workload_identities", "tenant_id"),
    ("shadow_documents", "tenant_id"),
    ("proposals", "tenant_id"),
    ("proposal_delegations", "tenant_id"),
    ("proposal_facts", "tenant_id"),
    ("proposal_previews", "tenant_id"),
    ("effect_settle_tries", "tenant_id"),
    ("approval_stages", "tenant_id"),
    ("approvals", "tenant_id"),
    ("approval_passkeys", "tenant_id"),
    ("grants", "tenant_id"),
    ("budget_reservations", "tenant_id"),
    ("shadow_decisions", "tenant_id"),
    ("passkeys", "tenant_id"),
    ("passkey_user_handles", "tenant_id"),
    ("passkey_notices", "tenant_id"),
    ("web_notifications", "tenant_id"),
];

/// Where a tenant went, when it moved away from this cluster.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Moved {
    /// The cell it moved to, as the operator named it.
    pub moved_to: String,
    /// When it was frozen here (database clock).
    pub moved_at: chrono::DateTime<chrono::Utc>,
}

/// The tenant's move, if it moved away from this cluster.
pub async fn moved<C: deadpool_postgres::GenericClient>(
    c: &C,
    tenant: &str,
) -> Result<Option<Moved>> {
    let stmt = c
        .prepare_cached("SELECT moved_to, moved_at FROM tenant_moves WHERE tenant_id = $1")
        .await?;
    Ok(c.query_opt(&stmt, &[&tenant]).await?.map(|r| Moved {
        moved_to: r.get(0),
        moved_at: r.get(1),
    }))
}

/// Freezes `tenant` for a move to `moved_to` (idempotent for the same destination) and audits
/// it as `tenant.move_frozen`. Waits at most 10 s for the table locks (then fails: run again).
/// Returns true when this call froze it, false when it was frozen for that move already.
pub async fn freeze(db: &Db, tenant: &str, moved_to: &str, by: &str) -> Result<bool> {
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    tx.batch_execute(
        "SET LOCAL lock_timeout = '10s';
         LOCK TABLE proposals, grants, approvals IN SHARE ROW EXCLUSIVE MODE",
    )
    .await?;
    if tx
        .query_opt("SELECT 1 FROM tenants WHERE id = $1", &[&tenant])
        .await?
        .is_none()
    {
        return Err(StoreError::NotFound("tenant"));
    }
    if let Some(m) = moved(&tx, tenant).await? {
        if m.moved_to != moved_to {
            return Err(StoreError::Conflict(format!(
                "tenant {tenant} is already frozen for a move to {} (since {}); --to {moved_to} names another cell",
                m.moved_to, m.moved_at
            )));
        }
        return Ok(false);
    }
    tx.execute(
        "INSERT INTO tenant_moves (tenant_id, moved_to, moved_by) VALUES ($1, $2, $3)",
        &[&tenant, &moved_to, &by],
    )
    .await?;
    let actor = format!("operator:{by}");
    audit::write(
        &tx,
        &audit::Event::new(
            tenant,
            None,
            AuditKind::TenantMoveFrozen,
            &actor,
            json!({"moved_to": moved_to}),
        ),
    )
    .await?;
    tx.commit().await?;
    Ok(true)
}

/// How many of the tenant's proposals are `executing` (a handler running when the freeze
/// came: the export waits until each has recorded its outcome).
pub async fn executing(db: &Db, tenant: &str) -> Result<i64> {
    let c = db.client().await?;
    Ok(c.query_one(
        "SELECT count(*) FROM proposals WHERE tenant_id = $1 AND state = 'executing'",
        &[&tenant],
    )
    .await?
    .get(0))
}

/// Writes every row of the tenant (one repeatable-read snapshot) as data lines; returns the
/// data digest.
pub async fn write_rows<W: Write>(db: &Db, tenant: &str, out: &mut W) -> Result<DataDigest> {
    let mut c = db.client().await?;
    let tx = c
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await?;
    let mut digest = DataDigest::default();
    for (table, key) in TABLES {
        let rows = tx
            .query(
                &format!("SELECT to_jsonb(t) FROM {table} t WHERE {key} = $1"),
                &[&tenant],
            )
            .await?;
        for r in &rows {
            let line = row_line(table, &r.get::<_, Value>(0));
            writeln!(out, "{line}").map_err(io)?;
            digest.add(&line);
        }
    }
    tx.commit().await?;
    Ok(digest)
}

/// Writes the `tenant.exported` event naming the data digest; returns its id.
pub async fn record_export(
    db: &Db,
    tenant: &str,
    moved_to: &str,
    by: &str,
    data_sha256: &str,
    rows: u64,
) -> Result<i64> {
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    let actor = format!("operator:{by}");
    audit::write(
        &tx,
        &audit::Event::new(
            tenant,
            None,
            AuditKind::TenantExported,
            &actor,
            json!({"moved_to": moved_to, "data_sha256": data_sha256, "rows": rows}),
        ),
    )
    .await?;
    let id: i64 = tx
        .query_one(
            "SELECT max(id) FROM audit_events WHERE tenant_id = $1 AND kind = $2",
            &[&tenant, &AuditKind::TenantExported.as_str()],
        )
        .await?
        .get(0);
    tx.commit().await?;
    Ok(id)
}

/// The last event id covered by the seal holding `event_id`, once the sealer has sealed it.
pub async fn sealed_through(db: &Db, tenant: &str, event_id: i64) -> Result<Option<i64>> {
    let c = db.client().await?;
    Ok(c.query_opt(
        "SELECT s.last_event_id FROM audit_event_hashes h
         JOIN audit_seals s ON s.tenant_id = h.tenant_id AND s.seq = h.seal_seq
         WHERE h.event_id = $1 AND h.tenant_id = $2",
        &[&event_id, &tenant],
    )
    .await?
    .map(|r| r.get(0)))
}

/// Writes the tenant's sealed chain from seal 1 through the seal ending at `through`: seals,
/// then events (imported history first, by id), as `actiond audit export` writes them.
/// Returns the lines written.
pub async fn write_chain<W: Write>(
    db: &Db,
    tenant: &str,
    through: i64,
    out: &mut W,
) -> Result<u64> {
    let c = db.client().await?;
    let mut lines = 0;
    let seals = c
        .query(
            &format!(
                "SELECT {SEAL_COLUMNS} FROM audit_seals WHERE tenant_id = $1 AND last_event_id <= $2 ORDER BY seq"
            ),
            &[&tenant, &through],
        )
        .await?;
    for r in &seals {
        writeln!(out, "{}", seal_line(Format::Jsonl, &seal_from_row(r))).map_err(io)?;
        lines += 1;
    }
    let events = c
        .query(
            &format!(
                "SELECT * FROM (
                   SELECT {EVENT_COLUMNS}, h.seal_seq, h.chain_hash FROM audit_events e
                   JOIN audit_event_hashes h ON h.event_id = e.id
                   WHERE e.tenant_id = $1 AND e.id <= $2
                   UNION ALL
                   SELECT {EVENT_COLUMNS}, e.seal_seq, e.chain_hash FROM audit_moved_events e
                   WHERE e.tenant_id = $1) x
                 ORDER BY 1"
            ),
            &[&tenant, &through],
        )
        .await?;
    for r in &events {
        let e = event_from_row(r, 0);
        let line = event_line(Format::Jsonl, &e, r.get(12), r.get(11));
        writeln!(out, "{line}").map_err(io)?;
        lines += 1;
    }
    out.flush().map_err(io)?;
    Ok(lines)
}

/// What [`import`] wrote.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Imported {
    /// Rows per table.
    pub rows: Vec<(String, u64)>,
    /// Seals imported.
    pub seals: u64,
    /// Events imported.
    pub events: u64,
    /// The id of the `tenant.imported` event written here.
    pub event_id: i64,
}

/// Loads a checked file in one transaction. Refuses a tenant that already exists here (or
/// ever moved away from here).
pub async fn import(db: &Db, f: &CheckedFile, by: &str) -> Result<Imported> {
    let tenant = f.header.tenant.as_str();
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    if tx
        .query_opt("SELECT 1 FROM tenants WHERE id = $1", &[&tenant])
        .await?
        .is_some()
    {
        return Err(StoreError::Conflict(format!(
            "tenant {tenant} already exists on this cluster: a move loads a tenant only into a cluster that never held it"
        )));
    }
    // The rows' times are the source's clock (checked against its sealed export time by
    // `check_file`); the export time itself is judged against this database's clock.
    let now: chrono::DateTime<chrono::Utc> = tx.query_one("SELECT now()", &[]).await?.get(0);
    actiond_core::tenant_move::check_export_time(&f.exported_at, now)
        .map_err(StoreError::Conflict)?;
    tx.batch_execute("SET LOCAL session_replication_role = replica")
        .await?;
    let mut counts = Vec::new();
    for (table, _) in TABLES {
        let rows: Vec<&Value> = f
            .rows
            .iter()
            .filter(|(t, _)| t == table)
            .map(|(_, r)| r)
            .collect();
        if rows.is_empty() {
            continue;
        }
        let n = insert_rows(
            &tx,
            table,
            &Value::Array(rows.into_iter().cloned().collect()),
        )
        .await?;
        counts.push(((*table).to_owned(), n));
    }
    if let Some((t, _)) = f
        .rows
        .iter()
        .find(|(t, _)| !TABLES.iter().any(|(n, _)| n == t))
    {
        return Err(StoreError::Conflict(format!(
            "the file holds rows of table {t:?}, which a tenant move does not carry"
        )));
    }
    let seals = Value::Array(
        f.seals
            .iter()
            .map(|s| {
                let mut v = serde_json::to_value(&s.payload).unwrap_or_default();
                v["sig"] = Value::String(s.sig.clone());
                v
            })
            .collect(),
    );
    insert_rows(&tx, "audit_seals", &seals).await?;
    let events = Value::Array(
        f.events
            .iter()
            .map(|(e, seq, hash)| {
                let mut v = serde_json::to_value(e).unwrap_or_default();
                v["seal_seq"] = json!(seq);
                v["chain_hash"] = json!(hash);
                v
            })
            .collect(),
    );
    insert_rows(&tx, "audit_moved_events", &events).await?;
    let max_id = f.events.iter().map(|(e, ..)| e.id).max().unwrap_or(0);
    // The tenant's next events here must come after its imported ones (seals cover rising ids).
    tx.execute(
        "SELECT setval('audit_events_id_seq', $1)
         WHERE $1 > (SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM audit_events_id_seq)",
        &[&max_id],
    )
    .await?;
    tx.batch_execute("SET LOCAL session_replication_role = origin")
        .await?;
    let actor = format!("operator:{by}");
    audit::write(
        &tx,
        &audit::Event::new(
            tenant,
            None,
            AuditKind::TenantImported,
            &actor,
            json!({"from_head": f.head, "data_sha256": f.data_sha256,
                   "moved_to": f.header.moved_to}),
        ),
    )
    .await?;
    let event_id: i64 = tx
        .query_one(
            "SELECT max(id) FROM audit_events WHERE tenant_id = $1",
            &[&tenant],
        )
        .await?
        .get(0);
    tx.commit().await?;
    Ok(Imported {
        rows: counts,
        seals: f.seals.len() as u64,
        events: f.events.len() as u64,
        event_id,
    })
}

/// Inserts JSON objects into `table` by column name (`jsonb_populate_recordset`): the
/// table's columns that the first object names, never a generated one (the rest take their
/// defaults).
async fn insert_rows(
    tx: &deadpool_postgres::Transaction<'_>,
    table: &str,
    rows: &Value,
) -> Result<u64> {
    let Some(first) = rows.get(0).and_then(Value::as_object) else {
        return Ok(0);
    };
    let names: Vec<String> = tx
        .query(
            "SELECT attname::text FROM pg_attribute
             WHERE attrelid = $1::text::regclass AND attnum > 0 AND NOT attisdropped AND attgenerated = ''
             ORDER BY attnum",
            &[&table],
        )
        .await?
        .iter()
        .map(|r| r.get::<_, String>(0))
        .filter(|n| first.contains_key(n))
        .collect();
    let cols = names
        .iter()
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", ");
    Ok(tx
        .execute(
            &format!(
                "INSERT INTO {table} ({cols}) SELECT {cols} FROM jsonb_populate_recordset(NULL::{table}, $1::jsonb)"
            ),
            &[rows],
        )
        .await?)
}

fn io(e: std::io::Error) -> StoreError {
    StoreError::Config(format!("tenant export output: {e}"))
}
