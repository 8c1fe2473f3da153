//! The tenant move file (`actiond tenant export` / `actiond tenant import`): its lines and the
//! checks an import makes before it writes anything. No I/O: the caller reads the lines.
//!
//! A file is JSON Lines, in this order:
//! 1. a header `{"record":"tenant-export","version":1,"tenant":…,"moved_to":…,"exported_by":…}`;
//! 2. one `{"record":"row","table":T,"row":{…}}` per database row of the tenant (the row as
//!    Postgres' `to_jsonb` writes it), the *data lines*;
//! 3. the tenant's whole sealed audit chain from seal 1, as `actiond audit export` writes it
//!    (`{"record":"seal",…}` lines, then `{"record":"event",…}` lines in id order);
//! 4. a trailer `{"record":"end","lines":N}` (N = every line before it).
//!
//! **Checked against the chain.** The export writes a `tenant.exported` event whose detail
//! holds the SHA-256 of the data lines ([`DataDigest`]) and their count, and waits until the
//! sealer has sealed it before it writes the chain. An import recomputes the digest and finds
//! it in the newest sealed `tenant.exported` event: a changed, added or dropped row, an edited
//! event or seal (signature and chain checked with the source sealer's public key), a file cut
//! short (no trailer, or a trailer that counts other lines) are refused before anything is
//! written. Unknown versions are refused.

use crate::audit_chain::{ChainEvent, ChainItem, Location, Seal, Verifier};
use crate::audit_export::{Record, parse_line};
use crate::audit_head::Anchor;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The file version this build writes and the only one it reads.
pub const VERSION: u64 = 1;

/// The `record` of the header line.
pub const HEADER_RECORD: &str = "tenant-export";

/// The audit kind whose detail carries the data digest.
pub const EXPORTED_KIND: &str = "tenant.exported";

/// The header line.
pub fn header_line(tenant: &str, moved_to: &str, exported_by: &str) -> String {
    json!({"record": HEADER_RECORD, "version": VERSION, "tenant": tenant,
           "moved_to": moved_to, "exported_by": exported_by})
    .to_string()
}

/// One data line: a row of `table`.
pub fn row_line(table: &str, row: &Value) -> String {
    json!({"record": "row", "table": table, "row": row}).to_string()
}

/// The trailer line: `lines` is the number of lines before it.
pub fn end_line(lines: u64) -> String {
    json!({"record": "end", "lines": lines}).to_string()
}

/// SHA-256 over the data lines, each followed by `\n`, in file order, and their count.
#[derive(Default)]
pub struct DataDigest {
    hasher: Sha256,
    /// Data lines seen.
    pub rows: u64,
}

impl DataDigest {
    /// Adds one data line (without its newline).
    pub fn add(&mut self, line: &str) {
        self.hasher.update(line.as_bytes());
        self.hasher.update(b"\n");
        self.rows += 1;
    }
    /// The lowercase hex digest.
    pub fn finish(self) -> String {
        hex::encode(self.hasher.finalize())
    }
}

/// The header of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// The tenant moved.
    pub tenant: String,
    /// The cell it moved to (as the operator named it).
    pub moved_to: String,
    /// Who exported it.
    pub exported_by: String,
}

/// A file that passed [`check_file`]: what the import writes.
#[derive(Debug, Clone)]
pub struct CheckedFile {
    /// The header.
    pub header: Header,
    /// `(table, row)` in file order.
    pub rows: Vec<(String, Value)>,
    /// Every seal, in sequence order.
    pub seals: Vec<Seal>,
    /// Every event with its (seal sequence number, chain hash), in id order.
    pub events: Vec<(ChainEvent, i64, String)>,
    /// SHA-256 of the data lines (equal to the one the sealed `tenant.exported` event holds).
    pub data_sha256: String,
    /// The chain's newest seal as an anchor (`tenant:seq:head`).
    pub head: String,
    /// The source database's clock when it exported the tenant: the `at` of the sealed
    /// `tenant.exported` event (RFC 3339, UTC). The import refuses a file whose export lies in
    /// the future of its own clock.
    pub exported_at: String,
}

/// Columns of the moved tables that hold a time still to come (an expiry, a lease, a deadline,
/// a retry): every other column whose name ends in `_at` records something that happened,
/// so it may not lie after the export (see [`check_row_times`]).
pub const FUTURE_TIME_COLUMNS: &[&str] = &[
    "expires_at",
    "lease_until",
    "due_at",
    "next_try_at",
    "next_attempt_at",
];

/// The sealed export time (`exported_at`) against the importing database's clock (`now`): an
/// export dated more than [`crate::external_time::CLOCK_SKEW`] ahead means the source cell's
/// clock runs ahead, and the moved grants' signed expiries and the rows' times would be judged
/// wrongly here. Errors: one sentence with both times and what to do.
pub fn check_export_time(
    exported_at: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(), String> {
    let exported = crate::audit_chain::parse_chain_time(exported_at)
        .map_err(|e| format!("the sealed {EXPORTED_KIND} event's time {e}"))?;
    let ahead = exported - now;
    if ahead > crate::external_time::clock_skew_delta() {
        return Err(format!(
            "the file was exported at {exported_at}, {} s ahead of this database's clock (more than the {} s skew allowed): the source cell's clock runs ahead; set both clocks right, then import",
            ahead.num_seconds(),
            crate::external_time::CLOCK_SKEW.as_secs()
        ));
    }
    Ok(())
}

/// Every time of the file's rows that records something that happened (a column ending in
/// `_at` and not in [`FUTURE_TIME_COLUMNS`]) must lie no later than the sealed export time
/// plus [`crate::external_time::CLOCK_SKEW`]: the export read the rows and wrote its event in
/// one transaction, by one clock. Rows travel with the database triggers off, so nothing on the
/// import side would stamp them again; a row dated later (say a proposal created "tomorrow",
/// whose escalation would then never expire) was written by the source database's owner.
/// `rows` are `(table, row, line)`. Errors: one sentence naming the line, table, column and
/// both times.
pub fn check_row_times(rows: &[(&str, &Value, usize)], exported_at: &str) -> Result<(), String> {
    let exported = crate::audit_chain::parse_chain_time(exported_at)
        .map_err(|e| format!("the sealed {EXPORTED_KIND} event's time {e}"))?;
    let skew = crate::external_time::clock_skew_delta();
    for (table, row, n) in rows {
        let Some(obj) = row.as_object() else { continue };
        for (col, v) in obj {
            if !col.ends_with("_at") || FUTURE_TIME_COLUMNS.contains(&col.as_str()) {
                continue;
            }
            let Some(t) = v.as_str() else { continue };
            let at = crate::audit_chain::parse_chain_time(t)
                .map_err(|e| format!("line {n}: {table}.{col}: {e}"))?;
            if at > exported + skew {
                return Err(format!(
                    "line {n}: {table}.{col} is {t}, after the export ({exported_at}, the sealed {EXPORTED_KIND} event): a time the source database's owner wrote, not one it recorded"
                ));
            }
        }
    }
    Ok(())
}

/// Reads and checks a whole file (`lines` without their newlines) with the source sealer's
/// public key (`public_b64`, raw Ed25519 in base64) and any anchors taken on the source.
/// The error names the line and the rule.
pub fn check_file(
    lines: &[String],
    public_b64: &str,
    anchors: &[Anchor],
) -> Result<CheckedFile, String> {
    let header = parse_header(lines.first().map(String::as_str))?;
    let body = check_trailer(lines)?;
    let mut digest = DataDigest::default();
    let mut rows = Vec::new();
    let mut row_lines = Vec::new();
    let mut seals = Vec::new();
    let mut events = Vec::new();
    for (i, line) in body.iter().enumerate().skip(1) {
        let n = i + 1;
        let v = crate::canonical::parse_strict(line.as_bytes())
            .map_err(|e| format!("line {n}: not a valid JSON line: {e}"))?;
        if v.get("record").and_then(Value::as_str) == Some("row") {
            if !seals.is_empty() || !events.is_empty() {
                return Err(format!("line {n}: a data row after the audit chain began"));
            }
            rows.push(parse_row(&v, &header.tenant).map_err(|e| format!("line {n}: {e}"))?);
            row_lines.push(n);
            digest.add(line);
            continue;
        }
        match parse_line(line).map_err(|e| format!("line {n}: {e}"))? {
            Record::Seal(s) => seals.push((s, n)),
            Record::Event(e, hash, seq) => events.push((e, seq, hash, n)),
        }
    }
    let data_sha256 = digest.finish();
    let head = verify_chain(&header.tenant, &seals, &events, public_b64, anchors)?;
    let exported_at = check_digest(&events, &data_sha256, rows.len())?;
    let timed: Vec<(&str, &Value, usize)> = rows
        .iter()
        .zip(&row_lines)
        .map(|((t, r), n)| (t.as_str(), r, *n))
        .collect();
    check_row_times(&timed, &exported_at)?;
    Ok(CheckedFile {
        header,
        rows,
        seals: seals.into_iter().map(|(s, _)| s).collect(),
        events: events.into_iter().map(|(e, s, h, _)| (e, s, h)).collect(),
        data_sha256,
        head,
        exported_at,
    })
}

fn parse_header(first: Option<&str>) -> Result<Header, String> {
    let first = first.ok_or("line 1: the file is empty (no header)")?;
    let v = crate::canonical::parse_strict(first.as_bytes())
        .map_err(|e| format!("line 1: the header is not valid JSON: {e}"))?;
    if v.get("record").and_then(Value::as_str) != Some(HEADER_RECORD) {
        return Err(format!(
            "line 1: not a tenant export file (record must be {HEADER_RECORD:?})"
        ));
    }
    match v.get("version").and_then(Value::as_u64) {
        Some(VERSION) => {}
        other => {
            return Err(format!(
                "line 1: version {} is not supported: this actiond reads version {VERSION}",
                other.map_or_else(|| "(missing)".to_owned(), |n| n.to_string())
            ));
        }
    }
    let field = |k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or(format!("line 1: header field {k:?} is missing"))
    };
    Ok(Header {
        tenant: field("tenant")?,
        moved_to: field("moved_to")?,
        exported_by: field("exported_by")?,
    })
}

/// The lines before the trailer, when the trailer counts them exactly.
fn check_trailer(lines: &[String]) -> Result<&[String], String> {
    let (last, body) = lines.split_last().ok_or("the file is empty (no header)")?;
    let v: Value = serde_json::from_str(last).unwrap_or(Value::Null);
    if v.get("record").and_then(Value::as_str) != Some("end") {
        return Err(format!(
            "line {}: the file does not end with its {{\"record\":\"end\"}} line (truncated file)",
            lines.len()
        ));
    }
    let n = v.get("lines").and_then(Value::as_u64);
    if n != Some(body.len() as u64) {
        return Err(format!(
            "line {}: the end line counts {} lines but {} precede it (lines added or removed)",
            lines.len(),
            n.map_or_else(|| "(missing)".to_owned(), |n| n.to_string()),
            body.len()
        ));
    }
    Ok(body)
}

fn parse_row(v: &Value, tenant: &str) -> Result<(String, Value), String> {
    let table = v
        .get("table")
        .and_then(Value::as_str)
        .ok_or("row without table")?;
    let row = v
        .get("row")
        .filter(|r| r.is_object())
        .ok_or("row without an object")?;
    let key = if table == "tenants" {
        "id"
    } else {
        "tenant_id"
    };
    if row.get(key).and_then(Value::as_str) != Some(tenant) {
        return Err(format!(
            "a row of {table} whose {key} is not the file's tenant {tenant:?}"
        ));
    }
    Ok((table.to_owned(), row.clone()))
}

/// Every seal and event of the file, with the source's key, from seal 1 (nothing may be
/// missing) and nothing unsealed. Returns the head anchor.
fn verify_chain(
    tenant: &str,
    seals: &[(Seal, usize)],
    events: &[(ChainEvent, i64, String, usize)],
    public_b64: &str,
    anchors: &[Anchor],
) -> Result<String, String> {
    let mut v = Verifier::new(public_b64, true).map_err(|e| e.to_string())?;
    for (s, n) in seals {
        if s.payload.tenant_id != tenant {
            return Err(format!(
                "line {n}: a seal of another tenant ({})",
                s.payload.tenant_id
            ));
        }
        v.seal(s.clone(), Location::Line(*n as u64))
            .map_err(|m| m.to_string())?;
    }
    v.check_seals().map_err(|m| m.to_string())?;
    v.anchors(anchors).map_err(|m| m.to_string())?;
    let mut last = 1;
    for (e, seq, hash, n) in events {
        last = *n as u64;
        if e.tenant_id != tenant {
            return Err(format!(
                "line {n}: an event of another tenant ({})",
                e.tenant_id
            ));
        }
        let it = ChainItem {
            id: e.id,
            tenant_id: e.tenant_id.clone(),
            sealed: Some((*seq, hash.clone())),
            sealed_tenant: None,
            event: Some(e.clone()),
        };
        v.item(&it, Location::Line(last))
            .map_err(|m| m.to_string())?;
    }
    v.finish(Location::Line(last)).map_err(|m| m.to_string())?;
    if v.events_unsealed > 0 {
        return Err(format!(
            "{} events are not sealed: export only after the sealer sealed them",
            v.events_unsealed
        ));
    }
    v.heads()
        .into_iter()
        .next()
        .ok_or_else(|| "the file holds no seal: its chain cannot be checked".to_owned())
}

/// The newest `tenant.exported` event names this data. Returns its time.
fn check_digest(
    events: &[(ChainEvent, i64, String, usize)],
    data_sha256: &str,
    rows: usize,
) -> Result<String, String> {
    let Some((e, _, _, n)) = events.iter().rev().find(|(e, ..)| e.kind == EXPORTED_KIND) else {
        return Err(format!(
            "no sealed {EXPORTED_KIND} event: the file's data cannot be checked against the chain"
        ));
    };
    let sealed = e.detail.get("data_sha256").and_then(Value::as_str);
    if sealed != Some(data_sha256) {
        return Err(format!(
            "line {n}: the data lines hash to {data_sha256}, but the sealed {EXPORTED_KIND} event {} holds {} (rows changed, added or removed)",
            e.id,
            sealed.unwrap_or("(none)")
        ));
    }
    let counted = e.detail.get("rows").and_then(Value::as_u64);
    if counted != Some(rows as u64) {
        return Err(format!(
            "line {n}: the file holds {rows} data rows, the sealed {EXPORTED_KIND} event {} counts {}",
            e.id,
            counted.map_or_else(|| "(none)".to_owned(), |n| n.to_string())
        ));
    }
    Ok(e.at.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row's recorded time after the export is refused, naming line, table and column;
    /// times still to come (expiries, leases, deadlines) and times within the skew pass.
    #[test]
    fn row_times_after_the_export_are_refused() {
        let exported = "2026-12-06T10:00:00.000000Z";
        let ok = serde_json::json!({"created_at": "2026-12-06T10:00:59.000000+00:00",
                                    "expires_at": "2027-01-01T00:00:00+00:00",
                                    "due_at": "2027-01-01T00:00:00+00:00",
                                    "lease_until": "2027-01-01T00:00:00+00:00",
                                    "decided_at": null, "id": "x"});
        check_row_times(&[("proposals", &ok, 3)], exported).unwrap();
        let bad = serde_json::json!({"created_at": "2026-12-07T10:00:00+00:00"});
        assert_eq!(
            check_row_times(&[("proposals", &ok, 3), ("proposals", &bad, 4)], exported)
                .unwrap_err(),
            "line 4: proposals.created_at is 2026-12-07T10:00:00+00:00, after the export (2026-12-06T10:00:00.000000Z, the sealed tenant.exported event): a time the source database's owner wrote, not one it recorded"
        );
        let bad = serde_json::json!({"opened_at": "soon"});
        assert_eq!(
            check_row_times(&[("approval_stages", &bad, 7)], exported).unwrap_err(),
            "line 7: approval_stages.opened_at: \"soon\" is not an RFC 3339 time"
        );
    }

    /// An export dated more than the skew ahead of the importing database is refused, naming
    /// both clocks; one a minute ahead or in the past passes.
    #[test]
    fn an_export_from_a_clock_running_ahead_is_refused() {
        let now = crate::audit_chain::parse_chain_time("2026-12-06T10:00:00Z").unwrap();
        check_export_time("2026-12-06T10:01:00.000000Z", now).unwrap();
        check_export_time("2026-12-05T10:00:00.000000Z", now).unwrap();
        assert_eq!(
            check_export_time("2026-12-06T10:05:00.000000Z", now).unwrap_err(),
            "the file was exported at 2026-12-06T10:05:00.000000Z, 300 s ahead of this database's clock (more than the 60 s skew allowed): the source cell's clock runs ahead; set both clocks right, then import"
        );
    }

    #[test]
    fn unknown_versions_and_truncated_files_are_refused() {
        let h = header_line("acme", "cell-b", "ops").replace("\"version\":1", "\"version\":2");
        let e = check_file(&[h, end_line(1)], "", &[]).unwrap_err();
        assert!(e.contains("version 2 is not supported"), "{e}");
        let h = header_line("acme", "cell-b", "ops");
        let e = check_file(std::slice::from_ref(&h), "", &[]).unwrap_err();
        assert!(e.contains("truncated"), "{e}");
        let e = check_file(
            &[h.clone(), row_line("agents", &json!({})), end_line(1)],
            "",
            &[],
        )
        .unwrap_err();
        assert!(e.contains("counts 1 lines but 2"), "{e}");
        let e = check_file(
            &[
                h,
                row_line("agents", &json!({"tenant_id": "beta"})),
                end_line(2),
            ],
            "",
            &[],
        )
        .unwrap_err();
        assert!(e.contains("not the file's tenant"), "{e}");
    }

    #[test]
    fn the_digest_covers_each_line_and_its_order() {
        let mut a = DataDigest::default();
        a.add("x");
        a.add("y");
        let mut b = DataDigest::default();
        b.add("y");
        b.add("x");
        assert_ne!(a.finish(), b.finish());
    }
}
