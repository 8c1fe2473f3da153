//! The sealed audit chain: hashing, seal signing and verification. Pure; the store feeds it rows
//! and the CLI feeds it export files.
//!
//! **Chains are per tenant.** Each tenant's events, in id order, form one hash chain:
//! `chain_hash(e) = SHA-256(prev ‖ JCS(e))`, where `prev` is the 32 raw bytes of the previous
//! event's chain hash in the same tenant (32 zero bytes for the tenant's first event) and
//! `JCS(e)` is the RFC 8785 canonical form of the event object ([`ChainEvent`]). Per-tenant
//! chains let one tenant's export be verified by a third party without the other tenants' data.
//!
//! **Seals.** A seal covers one tenant's events with ids in `first_event_id..=last_event_id`
//! (`event_count` of them). Its payload ([`SealPayload`]) names the chain hash before the first
//! event (`start_hash`), the head hash after the last (`head_hash`) and the previous seal's hash
//! (`prev_seal_hash`, SHA-256 of that seal's canonical payload), and is signed with Ed25519
//! (RFC 8032) over `"actiond-audit-seal-v1\n" ‖ JCS(payload)`.
//!
//! **Verification** ([`Verifier`]) needs the public key only. It stops at the first thing that
//! differs and names it: an event whose recomputed chain hash differs from the sealed one
//! (edited, swapped), an event that is sealed but missing (deleted), an event inside a sealed
//! range the seal does not list (inserted), a seal whose signature, sequence, links or counts do
//! not hold (forged, re-signed, truncated tail).
//!
//! **Times.** An event's `at` is the database clock when the row was written (its id comes from
//! the same insert), so along a tenant's chain the times rise with the ids, and every sealed
//! event was written before its seal's `sealed_at`. The database owner can write a row with any
//! `at` before it is sealed; the seal would then sign the false time. So the sealer refuses,
//! and verification reports, an event dated more than [`CHAIN_CLOCK_SKEW`] before the event
//! before it in its tenant's chain (back-dated) or after the seal that covers it (dated in the
//! future), and a seal dated more than that before the seal before it ([`event_time`]). The
//! skew absorbs concurrent inserts (an id taken just before another insert's time) and a
//! database clock stepped back by NTP; a tenant moved from another cell carries that cell's
//! clock until its first seal here.

use crate::canonical::canonicalize;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use ring::signature::{ED25519, Ed25519KeyPair, KeyPair as _, UnparsedPublicKey};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::HashMap;

/// How far an event's time may fall behind the event before it in its tenant's chain, or lie
/// after the `sealed_at` of its seal, and how far a seal's `sealed_at` may fall behind the seal
/// before it: 60 s, the skew actiond allows every clock it compares
/// ([`crate::external_time::CLOCK_SKEW`]).
pub const CHAIN_CLOCK_SKEW: std::time::Duration = crate::external_time::CLOCK_SKEW;

/// Domain separation prefix of a seal's signing input.
pub const SEAL_SIGNING_PREFIX: &[u8] = b"actiond-audit-seal-v1\n";

/// The chain hash before a tenant's first event: 32 zero bytes, hex.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// One audit event exactly as it is hashed (and exported). `at` is UTC with microseconds
/// (`2026-12-01T02:25:49.123456Z`); `proposal_id` a lowercase hyphenated UUID.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChainEvent {
    /// Sequence number (global across tenants; ids have gaps).
    pub id: i64,
    /// Tenant.
    pub tenant_id: String,
    /// Proposal, if any.
    pub proposal_id: Option<String>,
    /// Database time of the event.
    pub at: String,
    /// What happened.
    pub kind: String,
    /// Who did it.
    pub actor: String,
    /// State before.
    pub from_state: Option<String>,
    /// State after.
    pub to_state: Option<String>,
    /// Intent hash.
    pub intent_hash: Option<String>,
    /// SHA-256 of the canonical params.
    pub params_sha256: Option<String>,
    /// Anything else the writer recorded (never params).
    pub detail: Value,
}

/// Parses a chain time (`at`, `sealed_at`: RFC 3339, UTC with microseconds as the store writes
/// them). Errors: the text is not an RFC 3339 time.
pub fn parse_chain_time(t: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    chrono::DateTime::parse_from_rfc3339(t)
        .map(|d| d.to_utc())
        .map_err(|_| format!("{t:?} is not an RFC 3339 time"))
}

fn skew() -> chrono::TimeDelta {
    crate::external_time::clock_skew_delta()
}

/// Checks one event's time against the chain around it (see the module's **Times**): `prev`
/// is the time of the event before it in its tenant's chain (None for the first), `sealed_at`
/// the time of the seal that covers it (or will). Returns the event's time, the next event's
/// `prev`. Errors: one sentence naming the event, both times and what it means.
pub fn event_time(
    ev: &ChainEvent,
    prev: Option<chrono::DateTime<chrono::Utc>>,
    sealed_at: &str,
) -> Result<chrono::DateTime<chrono::Utc>, String> {
    let name = format!("event {} (tenant {})", ev.id, ev.tenant_id);
    let at = parse_chain_time(&ev.at).map_err(|e| format!("{name}: its time {e}"))?;
    if let Some(prev) = prev
        && at < prev - skew()
    {
        return Err(format!(
            "{name} is dated {}, {} s before the event before it in the chain ({}): back-dated before it was sealed, or the database clock was set back",
            ev.at,
            (prev - at).num_seconds(),
            prev.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
        ));
    }
    let sealed = parse_chain_time(sealed_at).map_err(|e| format!("{name}: its seal's time {e}"))?;
    if at > sealed + skew() {
        return Err(format!(
            "{name} is dated {}, after its seal's time {sealed_at}: dated in the future before it was sealed",
            ev.at
        ));
    }
    Ok(at)
}

/// Errors building chain or seal values.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    /// A hash is not 64 lowercase hex characters.
    #[error("{0} is not a 64-character hex SHA-256")]
    BadHash(String),
    /// The event or payload cannot be canonicalized.
    #[error("cannot canonicalize: {0}")]
    Canonical(String),
    /// A key could not be read or generated.
    #[error("bad key: {0}")]
    BadKey(String),
}

fn hash_bytes(hex_hash: &str) -> Result<[u8; 32], ChainError> {
    let mut out = [0u8; 32];
    match hex::decode(hex_hash) {
        Ok(v) if v.len() == 32 && hex_hash.bytes().all(|b| !b.is_ascii_uppercase()) => {
            out.copy_from_slice(&v);
            Ok(out)
        }
        _ => Err(ChainError::BadHash(hex_hash.to_owned())),
    }
}

/// `SHA-256(prev ‖ JCS(event))` as lowercase hex; `prev` is a hex chain hash.
pub fn chain_hash(prev: &str, event: &ChainEvent) -> Result<String, ChainError> {
    let prev = hash_bytes(prev)?;
    let v = serde_json::to_value(event).map_err(|e| ChainError::Canonical(e.to_string()))?;
    let jcs = canonicalize(&v).map_err(|e| ChainError::Canonical(e.to_string()))?;
    let mut h = Sha256::new();
    h.update(prev);
    h.update(jcs.as_bytes());
    Ok(hex::encode(h.finalize()))
}

/// What a seal signs. Hashes are lowercase hex SHA-256.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealPayload {
    /// Tenant whose chain this seal covers.
    pub tenant_id: String,
    /// Per-tenant seal sequence number, from 1, without gaps.
    pub seq: i64,
    /// Lowest event id covered.
    pub first_event_id: i64,
    /// Highest event id covered.
    pub last_event_id: i64,
    /// Number of the tenant's events in `first_event_id..=last_event_id`.
    pub event_count: i64,
    /// Chain hash before the first covered event (the previous seal's head; genesis for seq 1).
    pub start_hash: String,
    /// Chain hash after the last covered event.
    pub head_hash: String,
    /// Hash of the previous seal's payload ([`SealPayload::hash`]); genesis for seq 1.
    pub prev_seal_hash: String,
    /// Id of the signing key (informational: verification uses the key it is given).
    pub key_id: String,
    /// When it was sealed (UTC, RFC 3339).
    pub sealed_at: String,
}

impl SealPayload {
    /// RFC 8785 form of the payload.
    pub fn canonical(&self) -> Result<String, ChainError> {
        let v = serde_json::to_value(self).map_err(|e| ChainError::Canonical(e.to_string()))?;
        canonicalize(&v).map_err(|e| ChainError::Canonical(e.to_string()))
    }
    /// The bytes signed: [`SEAL_SIGNING_PREFIX`] ‖ JCS(payload).
    pub fn signing_input(&self) -> Result<Vec<u8>, ChainError> {
        let mut v = SEAL_SIGNING_PREFIX.to_vec();
        v.extend_from_slice(self.canonical()?.as_bytes());
        Ok(v)
    }
    /// SHA-256 of the canonical payload, hex: the next seal's `prev_seal_hash`.
    pub fn hash(&self) -> Result<String, ChainError> {
        Ok(crate::canonical::sha256_hex(self.canonical()?))
    }
}

/// A seal as stored or exported: the payload and its Ed25519 signature (base64).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seal {
    /// What was signed.
    #[serde(flatten)]
    pub payload: SealPayload,
    /// Base64 Ed25519 signature over [`SealPayload::signing_input`].
    pub sig: String,
}

/// The sealer's Ed25519 key.
pub struct SealSigner {
    key_id: String,
    pair: Ed25519KeyPair,
}

impl std::fmt::Debug for SealSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SealSigner")
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

impl SealSigner {
    /// Loads the key from base64 PKCS#8 (as `actiond audit keygen` writes it).
    pub fn from_pkcs8_b64(key_id: &str, text: &str) -> Result<Self, ChainError> {
        let der = B64
            .decode(text.trim())
            .map_err(|_| ChainError::BadKey("seal key file is not base64".into()))?;
        let pair = Ed25519KeyPair::from_pkcs8_maybe_unchecked(&der)
            .map_err(|e| ChainError::BadKey(format!("seal key is not Ed25519 PKCS#8: {e}")))?;
        Ok(Self {
            key_id: key_id.to_owned(),
            pair,
        })
    }
    /// The key id written into seals.
    pub fn key_id(&self) -> &str {
        &self.key_id
    }
    /// Base64 of the raw 32-byte public key.
    pub fn public_b64(&self) -> String {
        B64.encode(self.pair.public_key().as_ref())
    }
    /// True when `s` carries a valid signature by this key (the seal the sealer extends must
    /// be its own).
    pub fn verifies(&self, s: &Seal) -> bool {
        let (Ok(sig), Ok(input)) = (B64.decode(&s.sig), s.payload.signing_input()) else {
            return false;
        };
        UnparsedPublicKey::new(&ED25519, self.pair.public_key().as_ref())
            .verify(&input, &sig)
            .is_ok()
    }
    /// Signs a payload.
    pub fn sign(&self, p: &SealPayload) -> Result<Seal, ChainError> {
        let sig = self.pair.sign(&p.signing_input()?);
        Ok(Seal {
            payload: p.clone(),
            sig: B64.encode(sig.as_ref()),
        })
    }
}

/// Where a record came from, for messages: an event id in the database or a file line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    /// Read from the database.
    Db,
    /// Line number (from 1) of an export file.
    Line(u64),
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Db => Ok(()),
            Location::Line(n) => write!(f, "line {n}: "),
        }
    }
}

/// The first thing that differs. `Display` names the event or seal (and the file line).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{at}{what}")]
pub struct Mismatch {
    /// Where.
    pub at: Location,
    /// What differs, naming the event id or seal (tenant and sequence number).
    pub what: String,
}

/// One row of the chain in id order: the event as it is now (None when it is gone) and what the
/// sealer recorded for it (None when it was never sealed).
#[derive(Debug, Clone)]
pub struct ChainItem {
    /// Event id.
    pub id: i64,
    /// Tenant (of the event, else of the sealed record).
    pub tenant_id: String,
    /// The event, when present.
    pub event: Option<ChainEvent>,
    /// (seal sequence number, chain hash) recorded at sealing, when sealed.
    pub sealed: Option<(i64, String)>,
    /// The tenant the sealer recorded for the event, when known (the database keeps it beside
    /// the chain hash; an export file does not), so an edited tenant id is named as such.
    pub sealed_tenant: Option<String>,
}

#[derive(Default)]
struct TenantState {
    seals: Vec<Seal>,
    idx: usize,
    running: String,
    count: i64,
    started: bool,
    /// Time of the last event verified in this tenant's chain.
    last_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// Verifies seals and events with one public key. Feed every seal first ([`Verifier::seal`]),
/// then [`Verifier::check_seals`], then every [`ChainItem`] in id order, then
/// [`Verifier::finish`]. Memory grows with the number of seals, not events.
pub struct Verifier {
    key: UnparsedPublicKey<Vec<u8>>,
    tenants: HashMap<String, TenantState>,
    require_genesis: bool,
    /// Events verified against a seal.
    pub events_verified: u64,
    /// Events present but not sealed yet (after the last seal of their tenant).
    pub events_unsealed: u64,
    /// Events and seals whose times do not hold ([`event_time`]), in the order found. They do
    /// not stop verification (one back-dated row must not hide what follows it);
    /// [`Verifier::finish`] fails with the first.
    pub misdated: Vec<String>,
}

impl Verifier {
    /// `public_b64`: the sealer's raw 32-byte Ed25519 public key in base64. `require_genesis`:
    /// every tenant's seals must start at sequence 1 (a whole database); false for an export
    /// that starts later.
    pub fn new(public_b64: &str, require_genesis: bool) -> Result<Self, ChainError> {
        let key = B64
            .decode(public_b64.trim())
            .map_err(|_| ChainError::BadKey("public key is not base64".into()))?;
        if key.len() != 32 {
            return Err(ChainError::BadKey(
                "public key must be 32 bytes (Ed25519)".into(),
            ));
        }
        Ok(Self {
            key: UnparsedPublicKey::new(&ED25519, key),
            tenants: HashMap::new(),
            require_genesis,
            events_verified: 0,
            events_unsealed: 0,
            misdated: Vec::new(),
        })
    }

    /// Adds a seal and checks its signature.
    pub fn seal(&mut self, s: Seal, at: Location) -> Result<(), Mismatch> {
        let name = seal_name(&s.payload);
        let bad = |what: String| Mismatch { at, what };
        let sig = B64
            .decode(&s.sig)
            .map_err(|_| bad(format!("{name}: signature is not base64")))?;
        let input = s
            .payload
            .signing_input()
            .map_err(|e| bad(format!("{name}: {e}")))?;
        self.key
            .verify(&input, &sig)
            .map_err(|_| bad(format!("{name}: signature does not verify with the given public key (forged or re-signed seal)")))?;
        self.tenants
            .entry(s.payload.tenant_id.clone())
            .or_default()
            .seals
            .push(s);
        Ok(())
    }

    /// Checks each tenant's seals link up: sequence numbers without gaps, `prev_seal_hash` and
    /// `start_hash` equal to the previous seal's hash and head, ranges increasing.
    pub fn check_seals(&mut self) -> Result<u64, Mismatch> {
        let mut n = 0;
        let mut names: Vec<&String> = self.tenants.keys().collect();
        names.sort();
        for t in names {
            let st = &self.tenants[t];
            let mut sorted = st.seals.clone();
            sorted.sort_by_key(|s| s.payload.seq);
            check_links(&sorted, self.require_genesis)?;
            self.misdated.extend(seal_times(&sorted));
            n += sorted.len() as u64;
        }
        for st in self.tenants.values_mut() {
            st.seals.sort_by_key(|s| s.payload.seq);
            if let Some(first) = st.seals.first() {
                st.running = first.payload.start_hash.clone();
            }
        }
        Ok(n)
    }

    /// Checks heads recorded earlier against the seals read (call after
    /// [`Verifier::check_seals`]): each must still be in today's chain. The first that is not
    /// is named (missing tenant, truncated tail, rewritten middle).
    pub fn anchors(&self, anchors: &[crate::audit_head::Anchor]) -> Result<(), Mismatch> {
        for a in anchors {
            let seals = self
                .tenants
                .get(&a.tenant_id)
                .map_or(&[][..], |st| st.seals.as_slice());
            a.check(seals, self.require_genesis)
                .map_err(|what| Mismatch {
                    at: Location::Db,
                    what,
                })?;
        }
        Ok(())
    }

    /// Each tenant's newest seal as an anchor (`tenant:seq:head`), sorted: what to keep and
    /// pass to a later `actiond audit verify --anchor`.
    pub fn heads(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .tenants
            .iter()
            .filter_map(|(t, st)| {
                st.seals
                    .iter()
                    .max_by_key(|s| s.payload.seq)
                    .map(|s| format!("{t}:{}:{}", s.payload.seq, s.payload.head_hash))
            })
            .collect();
        out.sort();
        out
    }

    /// Verifies one row, in id order.
    pub fn item(&mut self, it: &ChainItem, at: Location) -> Result<(), Mismatch> {
        if let Some(what) = tenant_edited(it) {
            return Err(Mismatch { at, what });
        }
        self.item_in_chain(it).map_err(|(what, foreign)| Mismatch {
            at,
            what: if foreign {
                self.sealed_elsewhere(it, what)
            } else {
                what
            },
        })
    }

    /// [`Verifier::item`] in the chain of the event's own tenant. The error says what differs,
    /// and whether the event claims a seal its tenant does not have where it lies (then another
    /// tenant's seal may hold it: see [`Verifier::sealed_elsewhere`]).
    fn item_in_chain(&mut self, it: &ChainItem) -> Result<(), (String, bool)> {
        let st = self.tenants.entry(it.tenant_id.clone()).or_default();
        if !st.started {
            st.started = true;
            if st.running.is_empty() {
                st.running = GENESIS_HASH.to_owned();
            }
        }
        // Close seals that end before this id.
        while st.idx < st.seals.len() && st.seals[st.idx].payload.last_event_id < it.id {
            close_seal(st, Location::Db).map_err(|m| (m.what, false))?;
        }
        let ev_name = format!("event {} (tenant {})", it.id, it.tenant_id);
        let claimed = it.sealed.as_ref().map(|(seq, _)| *seq);
        let Some(seal) = st.seals.get(st.idx) else {
            if let Some(seq) = claimed {
                return Err((
                    format!(
                        "{ev_name} was sealed in seal {seq}, but tenant {} has no seal from event {} on: the chain of tenant {} breaks at event {}",
                        it.tenant_id, it.id, it.tenant_id, it.id
                    ),
                    true,
                ));
            }
            if !self.require_genesis {
                return Err((format!("{ev_name} is not covered by any seal"), false));
            }
            self.events_unsealed += 1;
            return Ok(());
        };
        let sname = seal_name(&seal.payload);
        if it.id < seal.payload.first_event_id {
            return Err((
                format!("{ev_name} lies between seals, before {sname} (inserted event)"),
                claimed.is_some(),
            ));
        }
        let Some(ev) = &it.event else {
            return Err((
                format!("{ev_name} is missing but {sname} covers it (deleted event)"),
                false,
            ));
        };
        let Some((seq, recorded)) = &it.sealed else {
            return Err((
                format!("{ev_name} is inside {sname} but was not sealed (inserted event)"),
                false,
            ));
        };
        if *seq != seal.payload.seq {
            return Err((
                format!("{ev_name} names seal {seq} but lies in {sname}"),
                true,
            ));
        }
        let h = chain_hash(&st.running, ev).map_err(|e| (format!("{ev_name}: {e}"), false))?;
        if &h != recorded {
            return Err((
                format!(
                    "{ev_name} differs from what {sname} sealed (edited, swapped or reordered event)"
                ),
                false,
            ));
        }
        match event_time(ev, st.last_at, &seal.payload.sealed_at) {
            Ok(at) => st.last_at = Some(at),
            Err(what) => self.misdated.push(what),
        }
        st.running = h;
        st.count += 1;
        self.events_verified += 1;
        Ok(())
    }

    /// `what`, plus the seal of another tenant that covers the event under the sequence number
    /// it names, if there is one: an event whose tenant id was edited (in an export file, which
    /// does not record the sealed tenant separately) no longer matches its own tenant's seals.
    fn sealed_elsewhere(&self, it: &ChainItem, what: String) -> String {
        let Some((seq, _)) = &it.sealed else {
            return what;
        };
        let mut names: Vec<&String> = self.tenants.keys().collect();
        names.sort();
        let other = names
            .into_iter()
            .filter(|t| **t != it.tenant_id)
            .flat_map(|t| self.tenants[t].seals.iter())
            .map(|s| &s.payload)
            .find(|p| p.seq == *seq && p.first_event_id <= it.id && it.id <= p.last_event_id);
        match other {
            Some(p) => format!(
                "{what}; {} covers it under that number, so its tenant id may have been edited",
                seal_name(p)
            ),
            None => what,
        }
    }

    /// Closes every open seal: their counts and head hashes must match what was seen (a
    /// truncated tail shows here).
    pub fn finish(&mut self, at: Location) -> Result<(), Mismatch> {
        let mut names: Vec<String> = self.tenants.keys().cloned().collect();
        names.sort();
        for t in names {
            if let Some(st) = self.tenants.get_mut(&t) {
                if !st.started {
                    st.started = true;
                }
                while st.idx < st.seals.len() {
                    close_seal(st, at)?;
                }
            }
        }
        match self.misdated.as_slice() {
            [] => Ok(()),
            [first, rest @ ..] => Err(Mismatch {
                at,
                what: match rest.len() {
                    0 => first.clone(),
                    n => format!("{first} (and {n} more events or seals whose times do not hold)"),
                },
            }),
        }
    }
}

fn seal_name(p: &SealPayload) -> String {
    format!(
        "seal {} of tenant {} (events {}..={})",
        p.seq, p.tenant_id, p.first_event_id, p.last_event_id
    )
}

/// When the sealer recorded the event for another tenant than the event names now: what the
/// verifier says (the event no longer matches the seal of its tenant, whose chain breaks there).
fn tenant_edited(it: &ChainItem) -> Option<String> {
    let ev = it.event.as_ref()?;
    let sealed_for = it.sealed_tenant.as_ref()?;
    if ev.tenant_id == *sealed_for {
        return None;
    }
    let seal = it.sealed.as_ref().map_or_else(String::new, |(seq, _)| {
        format!(" in seal {seq} of tenant {sealed_for}")
    });
    Some(format!(
        "event {} (tenant {}) was sealed as an event of tenant {sealed_for}{seal}: its tenant id was edited, and the chain of tenant {sealed_for} breaks at event {}",
        it.id, ev.tenant_id, it.id
    ))
}

fn close_seal(st: &mut TenantState, at: Location) -> Result<(), Mismatch> {
    let p = &st.seals[st.idx].payload;
    if st.count != p.event_count {
        return Err(Mismatch {
            at,
            what: format!(
                "{} covers {} events but {} were found (deleted events or truncated tail)",
                seal_name(p),
                p.event_count,
                st.count
            ),
        });
    }
    if st.running != p.head_hash {
        return Err(Mismatch {
            at,
            what: format!(
                "{}: recomputed head hash differs from the sealed head",
                seal_name(p)
            ),
        });
    }
    st.idx += 1;
    st.count = 0;
    Ok(())
}

fn check_links(sorted: &[Seal], require_genesis: bool) -> Result<(), Mismatch> {
    let bad = |p: &SealPayload, what: &str| Mismatch {
        at: Location::Db,
        what: format!("{}: {what}", seal_name(p)),
    };
    let mut prev: Option<&SealPayload> = None;
    for s in sorted {
        let p = &s.payload;
        if p.first_event_id > p.last_event_id || p.event_count < 1 {
            return Err(bad(p, "empty or inverted range"));
        }
        match prev {
            None => {
                if require_genesis
                    && (p.seq != 1
                        || p.start_hash != GENESIS_HASH
                        || p.prev_seal_hash != GENESIS_HASH)
                {
                    return Err(bad(
                        p,
                        "the first seal is not sequence 1 from genesis (earlier seals deleted)",
                    ));
                }
            }
            Some(q) => {
                if p.seq != q.seq + 1 {
                    return Err(bad(
                        p,
                        &format!("follows seal {} (a seal is missing)", q.seq),
                    ));
                }
                let qh = q.hash().map_err(|e| bad(p, &e.to_string()))?;
                if p.prev_seal_hash != qh {
                    return Err(bad(p, "prev_seal_hash is not the previous seal's hash"));
                }
                if p.start_hash != q.head_hash {
                    return Err(bad(p, "start_hash is not the previous seal's head"));
                }
                if p.first_event_id <= q.last_event_id {
                    return Err(bad(p, "overlaps the previous seal"));
                }
            }
        }
        prev = Some(p);
    }
    Ok(())
}

/// The seals of one tenant (sorted by `seq`) whose `sealed_at` is not a time or falls more than
/// [`CHAIN_CLOCK_SKEW`] behind the seal before it, as sentences.
fn seal_times(sorted: &[Seal]) -> Vec<String> {
    let mut out = Vec::new();
    let mut prev: Option<(&SealPayload, chrono::DateTime<chrono::Utc>)> = None;
    for s in sorted {
        let p = &s.payload;
        let t = match parse_chain_time(&p.sealed_at) {
            Ok(t) => t,
            Err(e) => {
                out.push(format!("{}: sealed_at {e}", seal_name(p)));
                continue;
            }
        };
        if let Some((q, qt)) = prev
            && t < qt - skew()
        {
            out.push(format!(
                "{}: sealed at {}, {} s before seal {} (sealed at {}): the seals' times go backwards",
                seal_name(p),
                p.sealed_at,
                (qt - t).num_seconds(),
                q.seq,
                q.sealed_at
            ));
        }
        prev = Some((p, t));
    }
    out
}

/// Generates a new sealer key: (base64 PKCS#8 secret, base64 raw public key).
pub fn generate_seal_key() -> Result<(String, String), ChainError> {
    let g = crate::grant::generate_key().map_err(|e| ChainError::BadKey(e.to_string()))?;
    Ok((g.private_pkcs8_b64, g.public_b64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(id: i64, tenant: &str, kind: &str) -> ChainEvent {
        ChainEvent {
            id,
            tenant_id: tenant.into(),
            proposal_id: None,
            at: "2026-12-01T00:00:00.000000Z".into(),
            kind: kind.into(),
            actor: "policy".into(),
            from_state: None,
            to_state: None,
            intent_hash: None,
            params_sha256: None,
            detail: serde_json::json!({"n": 1.5}),
        }
    }

    /// Seals `events` (one tenant) as one seal after `prev`; returns items and the seal.
    fn seal_of(
        signer: &SealSigner,
        events: &[ChainEvent],
        prev: Option<&Seal>,
    ) -> (Vec<ChainItem>, Seal) {
        seal_at(signer, events, prev, "2026-12-01T00:00:01Z")
    }

    /// [`seal_of`] with the seal's time.
    fn seal_at(
        signer: &SealSigner,
        events: &[ChainEvent],
        prev: Option<&Seal>,
        sealed_at: &str,
    ) -> (Vec<ChainItem>, Seal) {
        let seq = prev.map_or(1, |p| p.payload.seq + 1);
        let start = prev.map_or(GENESIS_HASH.to_owned(), |p| p.payload.head_hash.clone());
        let mut running = start.clone();
        let mut items = Vec::new();
        for e in events {
            running = chain_hash(&running, e).unwrap();
            items.push(ChainItem {
                id: e.id,
                tenant_id: e.tenant_id.clone(),
                event: Some(e.clone()),
                sealed: Some((seq, running.clone())),
                sealed_tenant: Some(e.tenant_id.clone()),
            });
        }
        let p = SealPayload {
            tenant_id: events[0].tenant_id.clone(),
            seq,
            first_event_id: events[0].id,
            last_event_id: events[events.len() - 1].id,
            event_count: events.len() as i64,
            start_hash: start,
            head_hash: running,
            prev_seal_hash: prev.map_or(GENESIS_HASH.to_owned(), |p| p.payload.hash().unwrap()),
            key_id: signer.key_id().into(),
            sealed_at: sealed_at.into(),
        };
        (items, signer.sign(&p).unwrap())
    }

    fn run(pubk: &str, seals: &[Seal], items: &[ChainItem]) -> Result<(), Mismatch> {
        let mut v = Verifier::new(pubk, true).unwrap();
        for s in seals {
            v.seal(s.clone(), Location::Db)?;
        }
        v.check_seals()?;
        for it in items {
            v.item(it, Location::Db)?;
        }
        v.finish(Location::Db)
    }

    #[test]
    fn verifies_and_names_tampering() {
        let (sk, pk) = generate_seal_key().unwrap();
        let signer = SealSigner::from_pkcs8_b64("sealer-1", &sk).unwrap();
        let e1: Vec<_> = [1, 2, 4].iter().map(|i| ev(*i, "a", "x")).collect();
        let e2: Vec<_> = [7, 9].iter().map(|i| ev(*i, "a", "y")).collect();
        let (mut items, s1) = seal_of(&signer, &e1, None);
        let (i2, s2) = seal_of(&signer, &e2, Some(&s1));
        items.extend(i2);
        let seals = vec![s1.clone(), s2.clone()];
        run(&pk, &seals, &items).unwrap();

        // Edited event.
        let mut t = items.clone();
        t[1].event.as_mut().unwrap().actor = "mallory".into();
        let e = run(&pk, &seals, &t).unwrap_err();
        assert!(e.what.contains("event 2 "), "{e}");
        // Deleted event.
        let mut t = items.clone();
        t[2].event = None;
        assert!(run(&pk, &seals, &t).unwrap_err().what.contains("event 4 "));
        // Inserted event inside a seal.
        let mut t = items.clone();
        t.insert(
            2,
            ChainItem {
                id: 3,
                tenant_id: "a".into(),
                event: Some(ev(3, "a", "z")),
                sealed: None,
                sealed_tenant: None,
            },
        );
        assert!(run(&pk, &seals, &t).unwrap_err().what.contains("event 3 "));
        // Truncated tail: last two events and their records gone.
        let t = items[..3].to_vec();
        assert!(run(&pk, &seals, &t).unwrap_err().what.contains("seal 2 "));
        // Re-signed seal with another key.
        let (sk2, _) = generate_seal_key().unwrap();
        let other = SealSigner::from_pkcs8_b64("sealer-1", &sk2).unwrap();
        let forged = other.sign(&s2.payload).unwrap();
        let e = run(&pk, &[s1.clone(), forged], &items).unwrap_err();
        assert!(e.what.contains("signature"), "{e}");
        // A wrong public key is refused cleanly.
        assert!(Verifier::new("AAAA", true).is_err());
    }

    /// Times the database owner wrote before the sealer signed them: an event dated more than a
    /// minute before the event before it (back-dated) or after its seal (dated ahead), and a
    /// seal dated before the seal before it, fail verification; times within the skew (an id
    /// taken just before another insert's time) verify.
    #[test]
    fn names_misdated_events_and_seals() {
        let (sk, pk) = generate_seal_key().unwrap();
        let signer = SealSigner::from_pkcs8_b64("sealer-1", &sk).unwrap();
        let at = |id: i64, t: &str| ChainEvent {
            at: t.into(),
            ..ev(id, "a", "x")
        };
        let chain = |times: [&str; 4], sealed: [&str; 2]| {
            let e: Vec<_> = times.iter().zip(1..).map(|(t, i)| at(i, t)).collect();
            let (mut items, s1) = seal_at(&signer, &e[..2], None, sealed[0]);
            let (i2, s2) = seal_at(&signer, &e[2..], Some(&s1), sealed[1]);
            items.extend(i2);
            run(&pk, &[s1, s2], &items).map_err(|m| m.what)
        };
        let seals = ["2026-12-01T10:00:00.000000Z", "2026-12-01T10:05:00.000000Z"];
        // In order, and 59 s out of order (concurrent inserts, a clock stepped back a little).
        chain(
            [
                "2026-12-01T09:59:00.000000Z",
                "2026-12-01T09:59:58.000000Z",
                "2026-12-01T09:58:59.000000Z",
                "2026-12-01T10:05:59.000000Z",
            ],
            seals,
        )
        .unwrap();
        // Back-dated by a month, across a seal's boundary.
        let e = chain(
            [
                "2026-12-01T09:59:00.000000Z",
                "2026-12-01T09:59:58.000000Z",
                "2026-11-01T10:01:00.000000Z",
                "2026-12-01T10:02:00.000000Z",
            ],
            seals,
        )
        .unwrap_err();
        assert_eq!(
            e,
            "event 3 (tenant a) is dated 2026-11-01T10:01:00.000000Z, 2591938 s before the event before it in the chain (2026-12-01T09:59:58.000000Z): back-dated before it was sealed, or the database clock was set back"
        );
        // Dated after the seal that covers it.
        let e = chain(
            [
                "2026-12-01T09:59:00.000000Z",
                "2026-12-01T10:01:01.000000Z",
                "2026-12-01T10:02:00.000000Z",
                "2026-12-01T10:03:00.000000Z",
            ],
            seals,
        )
        .unwrap_err();
        assert_eq!(
            e,
            "event 2 (tenant a) is dated 2026-12-01T10:01:01.000000Z, after its seal's time 2026-12-01T10:00:00.000000Z: dated in the future before it was sealed"
        );
        // A seal dated before the seal before it.
        let e = chain(
            [
                "2026-12-01T09:00:00.000000Z",
                "2026-12-01T09:01:00.000000Z",
                "2026-12-01T09:02:00.000000Z",
                "2026-12-01T09:03:00.000000Z",
            ],
            ["2026-12-01T10:00:00.000000Z", "2026-12-01T09:58:59.000000Z"],
        )
        .unwrap_err();
        assert_eq!(
            e,
            "seal 2 of tenant a (events 3..=4): sealed at 2026-12-01T09:58:59.000000Z, 61 s before seal 1 (sealed at 2026-12-01T10:00:00.000000Z): the seals' times go backwards"
        );
        // Every finding is counted, none stops the verification.
        let e = chain(
            [
                "2026-12-01T09:59:00.000000Z",
                "2026-11-01T09:00:00.000000Z",
                "2026-11-01T09:00:00.000000Z",
                "2026-12-01T10:06:01.000000Z",
            ],
            seals,
        )
        .unwrap_err();
        assert!(
            e.starts_with("event 2 (tenant a) is dated 2026-11-01T09:00:00.000000Z"),
            "{e}"
        );
        // Event 3 is back-dated too (against event 1, the last well-dated one) and event 4 lies
        // after its seal.
        assert!(
            e.ends_with("(and 2 more events or seals whose times do not hold)"),
            "{e}"
        );
        // A back-dated event does not hide a later edit: the edit is named.
        let e: Vec<_> = ["2026-12-01T09:59:00Z", "2026-11-01T09:00:00Z"]
            .iter()
            .zip(1..)
            .map(|(t, i)| at(i, t))
            .collect();
        let (mut items, s1) = seal_at(&signer, &e, None, seals[0]);
        items[1].event.as_mut().unwrap().actor = "mallory".into();
        let e = run(&pk, &[s1], &items).unwrap_err().what;
        assert!(
            e.contains("event 2 (tenant a) differs from what seal 1"),
            "{e}"
        );
        // A time that is not RFC 3339.
        let e = chain(
            [
                "yesterday",
                "2026-12-01T09:01:00Z",
                "2026-12-01T09:02:00Z",
                "2026-12-01T09:03:00Z",
            ],
            seals,
        )
        .unwrap_err();
        assert_eq!(
            e,
            "event 1 (tenant a): its time \"yesterday\" is not an RFC 3339 time"
        );
    }

    /// An event moved to another tenant is named as such: from the database (which records the
    /// sealed tenant) plainly, from an export file (which does not) by the seal that covers it.
    #[test]
    fn names_an_edited_tenant_id() {
        let (sk, pk) = generate_seal_key().unwrap();
        let signer = SealSigner::from_pkcs8_b64("sealer-1", &sk).unwrap();
        let ea: Vec<_> = [1, 3, 5].iter().map(|i| ev(*i, "a", "x")).collect();
        let eb: Vec<_> = [2, 4].iter().map(|i| ev(*i, "b", "x")).collect();
        let (ia, sa) = seal_of(&signer, &ea, None);
        let (ib, sb) = seal_of(&signer, &eb, None);
        let mut items: Vec<ChainItem> = ia.into_iter().chain(ib).collect();
        items.sort_by_key(|it| it.id);
        let seals = vec![sa, sb];
        run(&pk, &seals, &items).unwrap();
        let moved = |t: &mut Vec<ChainItem>, to: &str| {
            let it = &mut t[4];
            assert_eq!(it.id, 5);
            it.tenant_id = to.into();
            it.event.as_mut().unwrap().tenant_id = to.into();
        };
        // From the database: the sealed tenant is known.
        let mut t = items.clone();
        moved(&mut t, "c");
        let e = run(&pk, &seals, &t).unwrap_err().what;
        assert_eq!(
            e,
            "event 5 (tenant c) was sealed as an event of tenant a in seal 1 of tenant a: its tenant id was edited, and the chain of tenant a breaks at event 5"
        );
        // From a file: a tenant without seals there, and one whose own seal does not hold it.
        for to in ["c", "b"] {
            let mut t = items.clone();
            for it in &mut t {
                it.sealed_tenant = None;
            }
            moved(&mut t, to);
            let e = run(&pk, &seals, &t).unwrap_err().what;
            assert!(
                e.contains("seal 1 of tenant a (events 1..=5) covers it under that number"),
                "{to}: {e}"
            );
            assert!(!e.contains("deleted?"), "{e}");
        }
    }
}
