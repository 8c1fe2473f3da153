//! The sealer: chains unsealed audit events per tenant and writes signed seals
//! (see [`actiond_core::audit_chain`] for the hashes and signatures).
//!
//! **Never past a running transaction.** Sequence ids are taken before commit, and the V6
//! trigger gives every inserting transaction its transaction id *before* its event id. A
//! checkpoint is `(S, X)`: `S` the sequence position read first, `X` the `xmax` of a snapshot
//! taken right after. Every id `≤ S` belongs to a transaction with an id `< X`; once the oldest
//! running transaction (`pg_snapshot_xmin`) is `≥ X`, all of them have ended and every event up
//! to `S` is final (committed or never to exist). The sealer seals only up to the newest such
//! checkpoint, so an event held open by a long transaction is sealed later, in order, and the
//! events after it wait with it: no skip, no gap.
//!
//! **One sealer at a time.** A sealer holds a session advisory lock on its own connection for
//! as long as it runs; a second one waits. Each batch is one transaction (seal rows and event
//! hashes together), so a sealer killed mid-seal leaves nothing half-written.
//!
//! **The head lives outside the database.** With [`Sealer::keep_heads`] the sealer holds each
//! tenant's newest seal ([`KeptHead`], saved by the caller in the sealer's own state) and
//! extends a chain only when the database's seals continue it ([`continue_head`]): a deleted
//! tail, a deleted tenant or a rewritten seal is refused, nothing is sealed, and the caller
//! raises the alarm. The seal extended is checked against the kept head and the sealer's own
//! key in the transaction that extends it.

use crate::{Db, Result, StoreError};
use actiond_core::audit_chain::{
    ChainEvent, GENESIS_HASH, Seal, SealPayload, SealSigner, chain_hash, event_time,
    parse_chain_time,
};
use actiond_core::audit_head::{KeptHead, continue_head};
use std::collections::{BTreeMap, VecDeque};

/// Session advisory lock key held by the working sealer ("actseal\0").
pub const SEALER_LOCK: i64 = 0x6163_7473_6561_6c00;

/// Columns of `audit_events e` in [`ChainEvent`] order (`at` as UTC text with microseconds).
pub const EVENT_COLUMNS: &str = "e.id, e.tenant_id, e.proposal_id::text, \
     to_char(e.at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), e.kind, e.actor, \
     e.from_state, e.to_state, e.intent_hash, e.params_sha256, e.detail";

/// Reads a [`ChainEvent`] from a row whose first 11 columns are [`EVENT_COLUMNS`] (from
/// `offset`).
pub fn event_from_row(r: &tokio_postgres::Row, offset: usize) -> ChainEvent {
    ChainEvent {
        id: r.get(offset),
        tenant_id: r.get(offset + 1),
        proposal_id: r.get(offset + 2),
        at: r.get(offset + 3),
        kind: r.get(offset + 4),
        actor: r.get(offset + 5),
        from_state: r.get(offset + 6),
        to_state: r.get(offset + 7),
        intent_hash: r.get(offset + 8),
        params_sha256: r.get(offset + 9),
        detail: r.get(offset + 10),
    }
}

/// What one [`Sealer::seal_through`] call did.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct SealReport {
    /// Seal rows written.
    pub seals: u64,
    /// Events sealed.
    pub events: u64,
    /// Highest event id sealed so far (0: none).
    pub sealed_through: i64,
    /// Events sealed whose times do not hold ([`actiond_core::audit_chain::event_time`]:
    /// back-dated or dated after the seal), one sentence each. They are sealed as they are —
    /// the seal keeps the false time as evidence, and `audit verify` reports it — and the
    /// caller raises the alarm.
    pub misdated: Vec<String>,
}

/// A working sealer: holds the lock on its own connection.
pub struct Sealer {
    client: tokio_postgres::Client,
    signer: SealSigner,
    pending: VecDeque<(i64, u64)>,
    /// Each tenant's newest seal, when the head is kept outside the database.
    heads: Option<Heads>,
    /// The kept heads changed since [`Sealer::take_changed_heads`].
    heads_changed: bool,
    /// Seals committed (or found committed past the kept head) and not yet taken by
    /// [`Sealer::take_written`], in order.
    written: Vec<Seal>,
}

/// Every tenant's [`KeptHead`], by tenant id.
pub type Heads = BTreeMap<String, KeptHead>;

fn xid(s: &str) -> Result<u64> {
    s.parse()
        .map_err(|_| StoreError::Config(format!("unexpected xid8 value {s:?}")))
}

impl Sealer {
    /// Takes the sealer lock if free; `None` when another sealer works.
    pub async fn try_acquire(db: &Db, signer: SealSigner) -> Result<Option<Self>> {
        let client = db.dedicated().await?;
        let got: bool = client
            .query_one("SELECT pg_try_advisory_lock($1)", &[&SEALER_LOCK])
            .await?
            .get(0);
        Ok(got.then(|| Self {
            client,
            signer,
            pending: VecDeque::new(),
            heads: None,
            heads_changed: false,
            written: Vec::new(),
        }))
    }

    /// From now on, extends only chains that continue `heads` (loaded from the sealer's own
    /// state; empty for a new state on a database without seals).
    pub fn keep_heads(&mut self, heads: Heads) {
        self.heads = Some(heads);
    }

    /// The kept heads when they changed since the last call (to save them), else `None`.
    pub fn take_changed_heads(&mut self) -> Option<Heads> {
        if !std::mem::take(&mut self.heads_changed) {
            return None;
        }
        self.heads.clone()
    }

    /// Seals written since the last call (for the sink), in order; a seal written before a
    /// crash and found past the kept head at start comes again.
    pub fn take_written(&mut self) -> Vec<Seal> {
        std::mem::take(&mut self.written)
    }

    /// True when the database holds any seal.
    pub async fn any_seal(&self) -> Result<bool> {
        Ok(self
            .client
            .query_one("SELECT EXISTS (SELECT 1 FROM audit_seals)", &[])
            .await?
            .get(0))
    }

    /// Takes every tenant's chain as it is in the database as the kept heads, after checking
    /// each from seal 1 (links and the sealer's own signature): a new state for a sealer that
    /// ran without one. `Ok(Err(line))` names the first chain that does not hold.
    pub async fn adopt_heads(&mut self) -> Result<std::result::Result<usize, String>> {
        let rows = self
            .client
            .query(
                &format!("SELECT {SEAL_COLUMNS} FROM audit_seals ORDER BY tenant_id, seq"),
                &[],
            )
            .await?;
        let mut by_tenant: BTreeMap<String, Vec<Seal>> = BTreeMap::new();
        for r in &rows {
            let s = seal_from_row(r);
            by_tenant
                .entry(s.payload.tenant_id.clone())
                .or_default()
                .push(s);
        }
        let mut heads = Heads::new();
        for (t, seals) in &by_tenant {
            match continue_head(t, None, seals, |s| self.signer.verifies(s)) {
                Ok(Some(h)) => {
                    heads.insert(t.clone(), h);
                }
                Ok(None) => {}
                Err(e) => return Ok(Err(e)),
            }
        }
        let n = heads.len();
        self.heads = Some(heads);
        self.heads_changed = true;
        Ok(Ok(n))
    }

    /// Checks that every kept head is still continued by the database (one index range per
    /// kept tenant) and moves each to the newest seal that links to it. Returns one line per
    /// tenant whose chain does not continue its head (truncated tail, missing tenant,
    /// rewritten or forged seal); empty when all hold or no head is kept.
    pub async fn check_heads(&mut self) -> Result<Vec<String>> {
        let Some(heads) = &self.heads else {
            return Ok(Vec::new());
        };
        let tenants: Vec<&str> = heads.keys().map(String::as_str).collect();
        let seqs: Vec<i64> = heads.values().map(|h| h.seq).collect();
        let rows = self
            .client
            .query(
                &format!(
                    "SELECT {SEAL_COLUMNS} FROM unnest($1::text[], $2::bigint[]) AS k(t, q)
                     CROSS JOIN LATERAL (SELECT * FROM audit_seals s
                                         WHERE s.tenant_id = k.t AND s.seq >= k.q) s
                     ORDER BY tenant_id, seq"
                ),
                &[&tenants, &seqs],
            )
            .await?;
        let mut by_tenant: BTreeMap<String, Vec<Seal>> = BTreeMap::new();
        for r in &rows {
            let s = seal_from_row(r);
            by_tenant
                .entry(s.payload.tenant_id.clone())
                .or_default()
                .push(s);
        }
        let mut problems = Vec::new();
        let mut moved = Vec::new();
        for (t, kept) in heads {
            let seals = by_tenant.remove(t).unwrap_or_default();
            match continue_head(t, Some(kept), &seals, |s| self.signer.verifies(s)) {
                Ok(Some(h)) if h != *kept => moved.push((t.clone(), h, seals)),
                Ok(_) => {}
                Err(e) => problems.push(e),
            }
        }
        if problems.is_empty() {
            for (t, h, seals) in moved {
                self.written.extend(seals.into_iter().skip(1));
                if let Some(heads) = &mut self.heads {
                    heads.insert(t, h);
                }
                self.heads_changed = true;
            }
        }
        Ok(problems)
    }

    /// Records a checkpoint: the sequence position, then a snapshot's `xmax` (two statements,
    /// in that order).
    pub async fn checkpoint(&mut self) -> Result<()> {
        let r = self
            .client
            .query_one(
                "SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM audit_events_id_seq",
                &[],
            )
            .await?;
        let s: i64 = r.get(0);
        let r = self
            .client
            .query_one("SELECT pg_snapshot_xmax(pg_current_snapshot())::text", &[])
            .await?;
        let x = xid(r.get(0))?;
        self.pending.push_back((s, x));
        Ok(())
    }

    /// The highest event id known final: the newest checkpoint whose transactions have all
    /// ended (older ones are dropped). `None` when no checkpoint is final yet.
    pub async fn final_bound(&mut self) -> Result<Option<i64>> {
        let r = self
            .client
            .query_one("SELECT pg_snapshot_xmin(pg_current_snapshot())::text", &[])
            .await?;
        let xmin = xid(r.get(0))?;
        let mut bound = None;
        while let Some(&(s, x)) = self.pending.front() {
            if x > xmin {
                break;
            }
            bound = Some(s);
            self.pending.pop_front();
        }
        Ok(bound)
    }

    /// True when checkpoints are waiting for running transactions.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Seals every unsealed event with id `≤ bound`, in batches of at most `batch` events (one
    /// transaction each).
    pub async fn seal_through(&mut self, bound: i64, batch: i64) -> Result<SealReport> {
        let mut report = SealReport::default();
        loop {
            let (seals, events, through, misdated) = self.seal_batch(bound, batch).await?;
            report.seals += seals;
            report.events += events;
            report.sealed_through = through;
            report.misdated.extend(misdated);
            if events < batch as u64 {
                return Ok(report);
            }
        }
    }

    async fn seal_batch(&mut self, bound: i64, batch: i64) -> Result<(u64, u64, i64, Vec<String>)> {
        let tx = self.client.transaction().await?;
        let from: i64 = tx
            .query_one(
                "SELECT coalesce(max(event_id), 0) FROM audit_event_hashes",
                &[],
            )
            .await?
            .get(0);
        let rows = tx
            .query(
                &format!(
                    "SELECT {EVENT_COLUMNS} FROM audit_events e WHERE e.id > $1 AND e.id <= $2 ORDER BY e.id LIMIT $3"
                ),
                &[&from, &bound, &batch],
            )
            .await?;
        let mut by_tenant: BTreeMap<String, Vec<ChainEvent>> = BTreeMap::new();
        for r in &rows {
            let e = event_from_row(r, 0);
            by_tenant.entry(e.tenant_id.clone()).or_default().push(e);
        }
        let sealed_at = now_rfc3339(&tx).await?;
        let mut seals = 0;
        let mut written = Vec::with_capacity(by_tenant.len());
        let mut misdated = Vec::new();
        for (tenant, events) in &by_tenant {
            let kept = match &self.heads {
                None => Kept::Nothing,
                Some(h) => h.get(tenant).map_or(Kept::New, Kept::At),
            };
            let (seal, m) =
                seal_tenant(&self.signer, &tx, tenant, events, &sealed_at, kept).await?;
            written.push(seal);
            misdated.extend(m);
            seals += 1;
        }
        tx.commit().await?;
        if let Some(heads) = &mut self.heads {
            for s in &written {
                heads.insert(
                    s.payload.tenant_id.clone(),
                    KeptHead::of(&s.payload).map_err(StoreError::Config)?,
                );
                self.heads_changed = true;
            }
        }
        self.written.extend(written);
        let through = rows.last().map_or(from, |r| r.get(0));
        Ok((seals, rows.len() as u64, through, misdated))
    }
}

/// What the sealer kept of a tenant's head, for [`seal_tenant`].
#[derive(Clone, Copy)]
enum Kept<'a> {
    /// No state: the database's newest seal is extended as it is.
    Nothing,
    /// A state without this tenant: its chain, if any, is checked from seal 1.
    New,
    /// The head the database's newest seal must be.
    At(&'a KeptHead),
}

/// The database's newest seal of `tenant` (in the sealing transaction), checked against what
/// the sealer kept: the same seal, signed with its own key. A tenant the state does not know
/// (sealed by another replica while this one stood by) has its whole chain checked.
async fn extended_seal(
    signer: &SealSigner,
    tx: &tokio_postgres::Transaction<'_>,
    tenant: &str,
    kept: Kept<'_>,
) -> Result<Option<SealPayload>> {
    let last = tx
        .query_opt(
            &format!(
                "SELECT {SEAL_COLUMNS} FROM audit_seals WHERE tenant_id = $1 ORDER BY seq DESC LIMIT 1"
            ),
            &[&tenant],
        )
        .await?
        .map(|r| seal_from_row(&r));
    let refused = |e: String| StoreError::Conflict(format!("refused to extend the chain: {e}"));
    match kept {
        Kept::Nothing => {}
        Kept::At(k) => {
            let seals: Vec<Seal> = last
                .iter()
                .filter(|s| s.payload.seq == k.seq)
                .cloned()
                .collect();
            if let (true, Some(l)) = (seals.is_empty(), &last) {
                return Err(refused(format!(
                    "tenant {tenant}'s newest seal is seal {}, not seal {} that the sealer kept",
                    l.payload.seq, k.seq
                )));
            }
            continue_head(tenant, Some(k), &seals, |s| signer.verifies(s)).map_err(refused)?;
        }
        Kept::New if last.is_some() => {
            let rows = tx
                .query(
                    &format!(
                        "SELECT {SEAL_COLUMNS} FROM audit_seals WHERE tenant_id = $1 ORDER BY seq"
                    ),
                    &[&tenant],
                )
                .await?;
            let seals: Vec<Seal> = rows.iter().map(seal_from_row).collect();
            continue_head(tenant, None, &seals, |s| signer.verifies(s)).map_err(refused)?;
        }
        Kept::New => {}
    }
    Ok(last.map(|s| s.payload))
}

async fn seal_tenant(
    signer: &SealSigner,
    tx: &tokio_postgres::Transaction<'_>,
    tenant: &str,
    events: &[ChainEvent],
    sealed_at: &str,
    kept: Kept<'_>,
) -> Result<(Seal, Vec<String>)> {
    let last = extended_seal(signer, tx, tenant, kept).await?;
    // The time of the event before these in the tenant's chain: the previous seal's last event
    // (absent for a tenant moved here, whose earlier events are in `audit_moved_events`).
    let mut prev_at = match &last {
        Some(p) => tx
            .query_opt(
                &format!(
                    "SELECT {EVENT_COLUMNS} FROM audit_events e WHERE e.id = $1 AND e.tenant_id = $2"
                ),
                &[&p.last_event_id, &tenant],
            )
            .await?
            .and_then(|r| parse_chain_time(&event_from_row(&r, 0).at).ok()),
        None => None,
    };
    let mut misdated = Vec::new();
    for e in events {
        match event_time(e, prev_at, sealed_at) {
            Ok(at) => prev_at = Some(at),
            Err(what) => misdated.push(what),
        }
    }
    let (seq, start, prev_hash) = match &last {
        Some(p) => (p.seq + 1, p.head_hash.clone(), p.hash().map_err(chain_err)?),
        None => (1, GENESIS_HASH.to_owned(), GENESIS_HASH.to_owned()),
    };
    let mut running = start.clone();
    let mut ids = Vec::with_capacity(events.len());
    let mut hashes = Vec::with_capacity(events.len());
    for e in events {
        running = chain_hash(&running, e).map_err(chain_err)?;
        ids.push(e.id);
        hashes.push(running.clone());
    }
    let payload = SealPayload {
        tenant_id: tenant.to_owned(),
        seq,
        first_event_id: ids[0],
        last_event_id: ids[ids.len() - 1],
        event_count: ids.len() as i64,
        start_hash: start,
        head_hash: running,
        prev_seal_hash: prev_hash,
        key_id: signer.key_id().to_owned(),
        sealed_at: sealed_at.to_owned(),
    };
    let seal = signer.sign(&payload).map_err(chain_err)?;
    tx.execute(
            "INSERT INTO audit_seals (tenant_id, seq, first_event_id, last_event_id, event_count, start_hash,
                                      head_hash, prev_seal_hash, key_id, sealed_at, sig)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
            &[&payload.tenant_id, &payload.seq, &payload.first_event_id, &payload.last_event_id,
              &payload.event_count, &payload.start_hash, &payload.head_hash, &payload.prev_seal_hash,
              &payload.key_id, &payload.sealed_at, &seal.sig],
        )
        .await?;
    tx.execute(
        "INSERT INTO audit_event_hashes (event_id, tenant_id, seal_seq, chain_hash)
             SELECT i, $2, $3, h FROM unnest($1::bigint[], $4::text[]) AS u(i, h)",
        &[&ids, &tenant, &seq, &hashes],
    )
    .await?;
    Ok((seal, misdated))
}

async fn now_rfc3339(tx: &tokio_postgres::Transaction<'_>) -> Result<String> {
    Ok(tx
        .query_one(
            "SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')",
            &[],
        )
        .await?
        .get(0))
}

fn chain_err(e: actiond_core::audit_chain::ChainError) -> StoreError {
    StoreError::Config(format!("audit chain: {e}"))
}

/// Columns of `audit_seals` in [`seal_from_row`] order.
pub const SEAL_COLUMNS: &str = "tenant_id, seq, first_event_id, last_event_id, event_count, \
     start_hash, head_hash, prev_seal_hash, key_id, sealed_at, sig";

/// Reads a seal from a row of [`SEAL_COLUMNS`].
pub fn seal_from_row(r: &tokio_postgres::Row) -> actiond_core::audit_chain::Seal {
    actiond_core::audit_chain::Seal {
        payload: SealPayload {
            tenant_id: r.get(0),
            seq: r.get(1),
            first_event_id: r.get(2),
            last_event_id: r.get(3),
            event_count: r.get(4),
            start_hash: r.get(5),
            head_hash: r.get(6),
            prev_seal_hash: r.get(7),
            key_id: r.get(8),
            sealed_at: r.get(9),
        },
        sig: r.get(10),
    }
}

/// Seal lag: (age in seconds of the oldest unsealed event, or 0; number of unsealed events).
pub async fn lag(db: &Db) -> Result<(f64, i64)> {
    let c = db.client().await?;
    let r = c
        .query_one(
            "SELECT coalesce(extract(epoch FROM now() - min(at))::float8, 0), count(*)
             FROM audit_events WHERE id > (SELECT coalesce(max(event_id), 0) FROM audit_event_hashes)",
            &[],
        )
        .await?;
    Ok((r.get(0), r.get(1)))
}
