//! The chain's head kept outside the database: what the sealer remembers of each tenant's newest
//! seal ([`KeptHead`]), the check that the database's seals continue it ([`continue_head`]),
//! and the anchors `actiond audit verify --anchor` compares the database with ([`Anchor`]).
//!
//! The database owner can delete rows the append-only triggers protect (they may disable
//! them). Deleting the newest seals and their events, or a whole tenant's chain, leaves a
//! chain that still verifies on its own; cutting seals from the middle and letting a sealer
//! seal the edited rest gives one too. What the owner cannot do is make the database's chain
//! continue a head they cannot change: the one the sealer keeps in its own state, or one an
//! auditor recorded earlier. Pure: the store and the CLI feed it rows and files.

use crate::audit_chain::{GENESIS_HASH, Seal, SealPayload};
use serde::{Deserialize, Serialize};

/// One tenant's newest seal as the sealer wrote (or last checked) it. Hashes are lowercase hex
/// SHA-256.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptHead {
    /// The seal's per-tenant sequence number.
    pub seq: i64,
    /// The chain hash after the seal's last event.
    pub head_hash: String,
    /// SHA-256 of the seal's canonical payload ([`SealPayload::hash`]).
    pub seal_hash: String,
    /// The seal's last event id.
    pub last_event_id: i64,
}

impl KeptHead {
    /// The head a seal leaves.
    pub fn of(p: &SealPayload) -> Result<Self, String> {
        Ok(Self {
            seq: p.seq,
            head_hash: p.head_hash.clone(),
            seal_hash: p.hash().map_err(|e| e.to_string())?,
            last_event_id: p.last_event_id,
        })
    }

    /// `tenant:seq:head`, the form `actiond audit verify --anchor` takes.
    pub fn anchor(&self, tenant: &str) -> String {
        format!("{tenant}:{}:{}", self.seq, self.head_hash)
    }
}

/// Checks that `seals` — a tenant's seals in the database with sequence numbers from
/// `kept.seq` on (from 1 when nothing is kept), in order — continue the head the sealer kept:
/// the seal at `kept.seq` is the one it wrote (same payload hash), every later one links to the
/// one before (sequence, `prev_seal_hash`, `start_hash`, increasing ranges) and carries a
/// signature `signed` accepts (the sealer's own key). Without a kept head the seals must start
/// at sequence 1 from genesis. Later seals are the sealer's own, written after its state was
/// last saved (a crash between commit and save) or by another replica while this one stood by.
///
/// Returns the new head (`None`: no seal and nothing kept). The error is one line naming the
/// tenant, the seal and what happened: a truncated tail, a missing tenant, a rewritten seal.
pub fn continue_head(
    tenant: &str,
    kept: Option<&KeptHead>,
    seals: &[Seal],
    signed: impl Fn(&Seal) -> bool,
) -> Result<Option<KeptHead>, String> {
    let Some(first) = seals.first() else {
        return match kept {
            None => Ok(None),
            Some(k) => Err(format!(
                "tenant {tenant} has no seal from seal {} on, but the sealer wrote seal {} (head {}): {}",
                k.seq,
                k.seq,
                k.head_hash,
                if k.seq == 1 {
                    "the tenant's chain was deleted (missing tenant)"
                } else {
                    "the chain's tail was deleted (truncated tail)"
                }
            )),
        };
    };
    let mut prev: Option<&SealPayload> = None;
    match kept {
        Some(k) => {
            let p = &first.payload;
            let h = p.hash().map_err(|e| e.to_string())?;
            if p.seq != k.seq || h != k.seal_hash {
                return Err(format!(
                    "seal {} of tenant {tenant} is not the one the sealer wrote (head {} in the database, {} kept by the sealer): the chain was rewritten at or before it",
                    k.seq, p.head_hash, k.head_hash
                ));
            }
            prev = Some(p);
        }
        None => {
            let p = &first.payload;
            if p.seq != 1 || p.start_hash != GENESIS_HASH || p.prev_seal_hash != GENESIS_HASH {
                return Err(format!(
                    "tenant {tenant}'s first seal in the database is seal {}, not seal 1 from genesis (earlier seals deleted)",
                    p.seq
                ));
            }
        }
    }
    for s in seals {
        let p = &s.payload;
        if !signed(s) {
            return Err(format!(
                "seal {} of tenant {tenant}: the signature does not verify with the sealer's key (forged seal)",
                p.seq
            ));
        }
        if let Some(q) = prev.filter(|q| q.seq != p.seq) {
            link(tenant, q, p)?;
        }
        prev = Some(p);
    }
    let last = &seals[seals.len() - 1].payload;
    KeptHead::of(last).map(Some)
}

fn link(tenant: &str, q: &SealPayload, p: &SealPayload) -> Result<(), String> {
    let qh = q.hash().map_err(|e| e.to_string())?;
    let what = if p.seq != q.seq + 1 {
        format!("follows seal {} (a seal is missing)", q.seq)
    } else if p.prev_seal_hash != qh {
        "prev_seal_hash is not the previous seal's hash".to_owned()
    } else if p.start_hash != q.head_hash {
        "start_hash is not the previous seal's head".to_owned()
    } else if p.first_event_id <= q.last_event_id {
        "overlaps the previous seal".to_owned()
    } else {
        return Ok(());
    };
    Err(format!("seal {} of tenant {tenant}: {what}", p.seq))
}

/// A head recorded earlier, that today's chain must still hold: seal `seq` of `tenant_id` with
/// head `head_hash`, and, when the anchor comes from a file of seals (the sealer's sink, an
/// earlier export), the whole seal (`seal_hash`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anchor {
    /// Tenant.
    pub tenant_id: String,
    /// Seal sequence number.
    pub seq: i64,
    /// Chain hash after the seal's last event.
    pub head_hash: String,
    /// SHA-256 of the seal's canonical payload, when the whole seal is known.
    pub seal_hash: Option<String>,
}

impl Anchor {
    /// Parses `tenant:seq:head` (the tenant may itself contain `:`; seq and head may not). The
    /// error names the part that is wrong.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut parts = s.trim().rsplitn(3, ':');
        let (Some(head), Some(seq), Some(tenant)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(format!("{s:?} is not tenant:seq:head"));
        };
        let seq: i64 = seq
            .parse()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("{s:?}: seq {seq:?} is not a positive integer"))?;
        if head.len() != 64
            || !head
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(format!(
                "{s:?}: head {head:?} is not a 64-character lowercase hex SHA-256"
            ));
        }
        if tenant.is_empty() {
            return Err(format!("{s:?}: the tenant is empty"));
        }
        Ok(Self {
            tenant_id: tenant.to_owned(),
            seq,
            head_hash: head.to_owned(),
            seal_hash: None,
        })
    }

    /// The anchor a seal gives (the whole seal known).
    pub fn of_seal(p: &SealPayload) -> Result<Self, String> {
        Ok(Self {
            tenant_id: p.tenant_id.clone(),
            seq: p.seq,
            head_hash: p.head_hash.clone(),
            seal_hash: Some(p.hash().map_err(|e| e.to_string())?),
        })
    }

    /// Checks the anchor against one tenant's seals (all that were read, in sequence order;
    /// `complete`: they start at sequence 1, as in the database). The error names the anchor
    /// and says what happened: the tenant is missing, the tail was truncated, the seal was
    /// rewritten, or (an export starting later) the anchored seal is not there to compare.
    pub fn check(&self, seals: &[Seal], complete: bool) -> Result<(), String> {
        let name = format!("anchor {}:{}:{}", self.tenant_id, self.seq, self.head_hash);
        let t = &self.tenant_id;
        let Some(newest) = seals.last() else {
            return Err(format!(
                "{name}: tenant {t} has no seal (missing tenant: its chain was deleted)"
            ));
        };
        let newest = newest.payload.seq;
        if newest < self.seq {
            return Err(format!(
                "{name}: tenant {t}'s newest seal is {newest}, the anchor holds seal {} (truncated tail: seals {}..={} are gone)",
                self.seq,
                newest + 1,
                self.seq
            ));
        }
        let Some(s) = seals.iter().find(|s| s.payload.seq == self.seq) else {
            let from = seals.first().map_or(0, |s| s.payload.seq);
            return Err(if complete {
                format!(
                    "{name}: tenant {t} has no seal {} (a seal is missing)",
                    self.seq
                )
            } else {
                format!(
                    "{name}: the seals of tenant {t} here start at seal {from}; the anchored seal cannot be compared"
                )
            });
        };
        let p = &s.payload;
        let whole = match &self.seal_hash {
            Some(h) => p.hash().map_err(|e| e.to_string())? == *h,
            None => true,
        };
        if p.head_hash != self.head_hash || !whole {
            return Err(format!(
                "{name}: seal {} of tenant {t} is not the anchored one (head {}): rewritten middle, the chain was changed at or before seal {} and sealed again",
                self.seq, p.head_hash, self.seq
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit_chain::{SealSigner, generate_seal_key};

    fn chain(signer: &SealSigner, n: i64) -> Vec<Seal> {
        let mut out: Vec<Seal> = Vec::new();
        for seq in 1..=n {
            let prev = out.last().map(|s| s.payload.clone());
            let p = SealPayload {
                tenant_id: "acme".into(),
                seq,
                first_event_id: seq * 10,
                last_event_id: seq * 10 + 5,
                event_count: 2,
                start_hash: prev
                    .as_ref()
                    .map_or(GENESIS_HASH.into(), |q| q.head_hash.clone()),
                head_hash: format!("{seq:064x}"),
                prev_seal_hash: prev
                    .as_ref()
                    .map_or(GENESIS_HASH.into(), |q| q.hash().unwrap()),
                key_id: "sealer-1".into(),
                sealed_at: "2026-12-01T00:00:00.000000Z".into(),
            };
            out.push(signer.sign(&p).unwrap());
        }
        out
    }

    #[test]
    fn continues_its_own_head_and_refuses_the_rest() {
        let (sk, _) = generate_seal_key().unwrap();
        let signer = SealSigner::from_pkcs8_b64("sealer-1", &sk).unwrap();
        let ok = |s: &Seal| signer.verifies(s);
        let seals = chain(&signer, 5);
        let k3 = KeptHead::of(&seals[2].payload).unwrap();
        // Exactly at the kept head, and ahead of it (a crash before the state was saved).
        let h = continue_head("acme", Some(&k3), &seals[2..3], ok).unwrap();
        assert_eq!(h, Some(k3.clone()));
        let h = continue_head("acme", Some(&k3), &seals[2..], ok).unwrap();
        assert_eq!(h.unwrap().seq, 5);
        // From genesis without a kept head.
        assert_eq!(
            continue_head("acme", None, &seals, ok)
                .unwrap()
                .unwrap()
                .seq,
            5
        );
        assert_eq!(continue_head("acme", None, &[], ok).unwrap(), None);
        // Truncated tail, missing tenant.
        let e = continue_head("acme", Some(&k3), &[], ok).unwrap_err();
        assert!(e.contains("truncated tail"), "{e}");
        let k1 = KeptHead::of(&seals[0].payload).unwrap();
        let e = continue_head("acme", Some(&k1), &[], ok).unwrap_err();
        assert!(e.contains("missing tenant"), "{e}");
        // Rewritten: another seal 3 (re-sealed after an edit).
        let mut other = seals[2].payload.clone();
        other.head_hash = format!("{:064x}", 99);
        let other = signer.sign(&other).unwrap();
        let e = continue_head("acme", Some(&k3), &[other], ok).unwrap_err();
        assert!(e.contains("rewritten"), "{e}");
        // A later seal signed by another key, or a gap.
        let (sk2, _) = generate_seal_key().unwrap();
        let forger = SealSigner::from_pkcs8_b64("sealer-1", &sk2).unwrap();
        let mut t = seals[2..].to_vec();
        t[1] = forger.sign(&t[1].payload).unwrap();
        let e = continue_head("acme", Some(&k3), &t, ok).unwrap_err();
        assert!(e.contains("seal 4 ") && e.contains("signature"), "{e}");
        let t = vec![seals[2].clone(), seals[4].clone()];
        let e = continue_head("acme", Some(&k3), &t, ok).unwrap_err();
        assert!(e.contains("a seal is missing"), "{e}");
        let e = continue_head("acme", None, &seals[1..], ok).unwrap_err();
        assert!(e.contains("not seal 1"), "{e}");
    }

    #[test]
    fn anchors_name_what_happened() {
        let (sk, _) = generate_seal_key().unwrap();
        let signer = SealSigner::from_pkcs8_b64("sealer-1", &sk).unwrap();
        let seals = chain(&signer, 5);
        let a = Anchor::parse(&KeptHead::of(&seals[3].payload).unwrap().anchor("a:b")).unwrap();
        assert_eq!((a.tenant_id.as_str(), a.seq), ("a:b", 4));
        let a = Anchor::of_seal(&seals[3].payload).unwrap();
        a.check(&seals, true).unwrap();
        assert!(
            a.check(&seals[..3], true)
                .unwrap_err()
                .contains("truncated tail")
        );
        assert!(a.check(&[], true).unwrap_err().contains("missing tenant"));
        let mut re = seals.clone();
        re[3].payload.sealed_at = "2026-12-02T00:00:00.000000Z".into();
        assert!(a.check(&re, true).unwrap_err().contains("rewritten middle"));
        assert!(
            a.check(&seals[4..], false)
                .unwrap_err()
                .contains("cannot be compared")
        );
        for bad in [
            "acme:0:ab",
            "acme:x:ab",
            &format!("acme:1:{}", "A".repeat(64)),
            "nope",
        ] {
            assert!(Anchor::parse(bad).is_err(), "{bad}");
        }
    }
}
