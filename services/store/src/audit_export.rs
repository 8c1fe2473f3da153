//! Reading the sealed chain out: `actiond audit export` (JSON Lines or CloudEvents, sealed
//! events only, in id order, each seal before its first event) and `actiond audit verify`
//! against the database. Both read in pages, so memory stays flat whatever the table size.

use crate::seals::{EVENT_COLUMNS, SEAL_COLUMNS, event_from_row, seal_from_row};
use crate::{Db, Result, StoreError};
use actiond_core::audit_chain::{ChainItem, Location, Mismatch, Verifier};
use actiond_core::audit_export::{Format, event_line, seal_line};
use actiond_core::audit_head::Anchor;
use std::collections::{HashMap, HashSet};
use std::io::Write;

/// Rows fetched per page.
const PAGE: i64 = 1000;

/// Where each tenant's export starts: `$1` the `since` time (text Postgres reads as
/// `timestamptz`), `$2` one tenant or NULL for all. One row per tenant with events at or after
/// `$1`: the tenant id and the first event id of the seal holding its first such event (NULL
/// while that event is unsealed).
///
/// The first events are found in one pass over the window through the BRIN index on
/// `audit_events.at` (V25): it reads the pages holding the window's events and at most a block
/// range or two around them, whatever the log's size and however many tenants it holds. The
/// `GROUP BY` also keeps Postgres from answering a bare `min(id)` by walking the primary key from
/// the oldest event, expecting the window to be spread evenly through the log, when on an
/// append-only log it is all at the end: that plan read 6,927 buffers for a 10-minute window of
/// a 200,000-event log (`read_plans::audit_export_start_reads_the_window`).
pub const START_SQL: &str = "SELECT f.tenant_id, (SELECT s.first_event_id FROM audit_seals s
                          WHERE s.tenant_id = f.tenant_id AND s.last_event_id >= f.first_id
                          ORDER BY s.seq LIMIT 1)
 FROM (SELECT e.tenant_id, min(e.id) AS first_id FROM audit_events e
       WHERE e.at >= $1::text::timestamptz AND ($2::text IS NULL OR e.tenant_id = $2)
       GROUP BY e.tenant_id) f";

/// What to export.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    /// Events at or after this time (any form Postgres reads as `timestamptz`). The export starts
    /// at the beginning of the seal holding the first such event, so it verifies on its own.
    pub since: String,
    /// Only this tenant.
    pub tenant: Option<String>,
    /// Output format.
    pub format: Format,
}

/// A running export: call [`Export::page`] until it returns 0 (then again later to follow).
pub struct Export {
    opts: ExportOptions,
    starts: HashMap<String, i64>,
    others_from: i64,
    after: i64,
    emitted: HashSet<(String, i64)>,
    /// Lines written so far.
    pub lines: u64,
}

fn io(e: std::io::Error) -> StoreError {
    StoreError::Config(format!("export output: {e}"))
}

impl Export {
    /// Works out where each tenant's export starts (a seal boundary).
    pub async fn start(db: &Db, opts: ExportOptions) -> Result<Self> {
        let c = db.client().await?;
        let rows = c.query(START_SQL, &[&opts.since, &opts.tenant]).await?;
        let mut starts = HashMap::new();
        for r in &rows {
            if let Some(s) = r.get::<_, Option<i64>>(1) {
                starts.insert(r.get::<_, String>(0), s);
            }
        }
        let sealed: i64 = c
            .query_one(
                "SELECT coalesce(max(event_id), 0) FROM audit_event_hashes",
                &[],
            )
            .await?
            .get(0);
        let others_from = sealed + 1;
        let after = starts.values().copied().min().unwrap_or(others_from) - 1;
        Ok(Self {
            opts,
            starts,
            others_from,
            after,
            emitted: HashSet::new(),
            lines: 0,
        })
    }

    /// Writes the next page of sealed events (and the seals they need); returns how many
    /// events it read (0 = caught up).
    pub async fn page<W: Write>(&mut self, db: &Db, out: &mut W) -> Result<usize> {
        let c = db.client().await?;
        let rows = c
            .query(
                &format!(
                    "SELECT {EVENT_COLUMNS}, h.seal_seq, h.chain_hash FROM audit_events e
                     JOIN audit_event_hashes h ON h.event_id = e.id
                     WHERE e.id > $1 AND ($2::text IS NULL OR e.tenant_id = $2)
                     ORDER BY e.id LIMIT $3"
                ),
                &[&self.after, &self.opts.tenant, &PAGE],
            )
            .await?;
        for r in &rows {
            let e = event_from_row(r, 0);
            let seq: i64 = r.get(11);
            let hash: String = r.get(12);
            self.after = e.id;
            let from = self
                .starts
                .get(&e.tenant_id)
                .copied()
                .unwrap_or(self.others_from);
            if e.id < from {
                continue;
            }
            if self.emitted.insert((e.tenant_id.clone(), seq)) {
                let s = c
                    .query_one(
                        &format!(
                            "SELECT {SEAL_COLUMNS} FROM audit_seals WHERE tenant_id = $1 AND seq = $2"
                        ),
                        &[&e.tenant_id, &seq],
                    )
                    .await?;
                writeln!(out, "{}", seal_line(self.opts.format, &seal_from_row(&s))).map_err(io)?;
                self.lines += 1;
            }
            writeln!(out, "{}", event_line(self.opts.format, &e, &hash, seq)).map_err(io)?;
            self.lines += 1;
        }
        out.flush().map_err(io)?;
        Ok(rows.len())
    }
}

/// Summary of a successful verification.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Verified {
    /// Seals checked.
    pub seals: u64,
    /// Events verified against a seal.
    pub events: u64,
    /// Events not sealed yet (after their tenant's last seal).
    pub unsealed: u64,
    /// Each tenant's newest seal as `tenant:seq:head`: the anchors to keep for a later
    /// verification.
    pub heads: Vec<String>,
}

/// Verifies every seal and event in the database with the sealer's public key (events of
/// tenants imported from another cell included: `audit_moved_events`, V44), in one
/// repeatable-read snapshot, reading through a cursor, and checks that the chain still holds
/// every anchor (heads recorded earlier). `Ok(Err(m))` names the first mismatch.
pub async fn verify_db(
    db: &Db,
    public_b64: &str,
    anchors: &[Anchor],
) -> Result<std::result::Result<Verified, Mismatch>> {
    let mut v = Verifier::new(public_b64, true).map_err(|e| StoreError::Config(e.to_string()))?;
    let mut c = db.client().await?;
    let tx = c
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await?;
    let seals = tx
        .bind(
            &format!("SELECT {SEAL_COLUMNS} FROM audit_seals ORDER BY tenant_id, seq"),
            &[],
        )
        .await?;
    loop {
        let rows = tx.query_portal(&seals, PAGE as i32).await?;
        for r in &rows {
            if let Err(m) = v.seal(seal_from_row(r), Location::Db) {
                return Ok(Err(m));
            }
        }
        if rows.len() < PAGE as usize {
            break;
        }
    }
    let nseals = match v.check_seals().and_then(|n| v.anchors(anchors).map(|()| n)) {
        Ok(n) => n,
        Err(m) => return Ok(Err(m)),
    };
    let items = tx
        .bind(
            &format!(
                "SELECT * FROM (
                   SELECT {EVENT_COLUMNS}, e.id IS NOT NULL, h.event_id, h.tenant_id, h.seal_seq, h.chain_hash,
                          coalesce(e.id, h.event_id) AS ord
                   FROM audit_events e FULL OUTER JOIN audit_event_hashes h ON h.event_id = e.id
                   UNION ALL
                   SELECT {EVENT_COLUMNS}, true, e.id, e.tenant_id, e.seal_seq, e.chain_hash, e.id
                   FROM audit_moved_events e) x
                 ORDER BY ord"
            ),
            &[],
        )
        .await?;
    loop {
        let rows = tx.query_portal(&items, PAGE as i32).await?;
        for r in &rows {
            let present: bool = r.get(11);
            let sealed_id: Option<i64> = r.get(12);
            let sealed_tenant: Option<String> = r.get(13);
            let seq: Option<i64> = r.get(14);
            let hash: Option<String> = r.get(15);
            let event = present.then(|| event_from_row(r, 0));
            let it = ChainItem {
                id: event.as_ref().map_or(sealed_id.unwrap_or(0), |e| e.id),
                tenant_id: event
                    .as_ref()
                    .map(|e| e.tenant_id.clone())
                    .or_else(|| sealed_tenant.clone())
                    .unwrap_or_default(),
                sealed: seq.zip(hash),
                sealed_tenant,
                event,
            };
            if let Err(m) = v.item(&it, Location::Db) {
                return Ok(Err(m));
            }
        }
        if rows.len() < PAGE as usize {
            break;
        }
    }
    if let Err(m) = v.finish(Location::Db) {
        return Ok(Err(m));
    }
    Ok(Ok(Verified {
        seals: nseals,
        events: v.events_verified,
        unsealed: v.events_unsealed,
        heads: v.heads(),
    }))
}
