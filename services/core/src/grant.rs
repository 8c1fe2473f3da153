//! Grants: signed, single-use permissions bound to one intent (design, "The grant").
//!
//! A grant is `{version: 1, id, proposal_id, tenant_id, intent_hash, doc_version, expires_at,
//! key_id, [preview_sha256], sig}`. `sig` is Ed25519 (RFC 8032, via `ring`) over the bytes
//! `"actiond/grant/v1\0"` followed by the RFC 8785 canonical JSON of the other fields.
//! `expires_at` is integer microseconds since the Unix epoch, taken from the database clock.
//! `preview_sha256` (the hash of the stored preview a person approved, see
//! [`crate::preview`]) is signed only when present: a grant without a preview has exactly the
//! signed bytes it had before the field existed, so grants issued by an older build still
//! verify, and a grant with one cannot lose it (removing it changes the signed bytes).
//! `doc_sha256` (the SHA-256 of the tenant document version's source text, as the policy worker
//! decided under it) is signed the same way: the executor runs the handler only with a document
//! whose source hashes to it, so whoever can write `tenant_documents` cannot change what an
//! approved action does after its grant was signed.
//!
//! The key id says who signed, by prefix: `policy-…` (the policy worker's automatic allow),
//! `web-…` (a person through the approval app), `breakglass-…` (an operator through the CLI).
//! The executor re-checks policy differently for the two kinds (see [`KeyKind`]), and trusts
//! only the public keys in its own configuration.

use crate::canonical::canonicalize;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use ring::rand::SystemRandom;
use ring::signature::{ED25519, Ed25519KeyPair, KeyPair, UnparsedPublicKey};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use uuid::Uuid;

/// Domain-separation prefix of the signed message.
pub const SIGNING_CONTEXT: &[u8] = b"actiond/grant/v1\0";
/// The only grant version this build understands.
pub const GRANT_VERSION: u32 = 1;
/// Length of an Ed25519 signature in bytes.
pub const SIGNATURE_LEN: usize = 64;

/// The signed fields of a grant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantClaims {
    /// Always [`GRANT_VERSION`]; any other value is refused.
    pub version: u32,
    /// Grant id (also used as the provider idempotency key where the provider honours one).
    pub id: Uuid,
    /// The proposal this grant permits.
    pub proposal_id: Uuid,
    /// The proposal's tenant.
    pub tenant_id: String,
    /// The intent hash of the proposal as it was decided.
    pub intent_hash: String,
    /// The tenant document version whose handler settings the execution must use.
    pub doc_version: i32,
    /// Expiry, microseconds since the Unix epoch, from the database clock.
    pub expires_at: i64,
    /// Which key signed it; its prefix gives the [`KeyKind`].
    pub key_id: String,
    /// SHA-256 (lowercase hex) of the canonical preview document the approver was shown
    /// ([`crate::preview::PreviewDoc`]), when the decision had one; left out of the signed
    /// JSON when `None`. Before running, the executor reads the provider again and does not
    /// run when a binding field changed (state `stale`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview_sha256: Option<String>,
    /// SHA-256 (lowercase hex) of the source text of tenant document `doc_version`, the
    /// document the decision was made under; left out of the signed JSON when `None` (grants
    /// of builds before it). The executor refuses a grant whose document version's source
    /// does not hash to it (`document_changed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doc_sha256: Option<String>,
}

impl GrantClaims {
    /// The exact bytes that are signed: [`SIGNING_CONTEXT`] ‖ JCS(claims).
    pub fn signing_input(&self) -> Vec<u8> {
        let value = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
        let jcs = canonicalize(&value).unwrap_or_default();
        let mut msg = Vec::with_capacity(SIGNING_CONTEXT.len() + jcs.len());
        msg.extend_from_slice(SIGNING_CONTEXT);
        msg.extend_from_slice(jcs.as_bytes());
        msg
    }
}

/// Who issued a grant, from the key id's prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyKind {
    /// `policy-…`: automatic allow. The executor requires `allow` from current policy.
    Policy,
    /// `web-…`: a person in the approval app. The executor requires "not block" now.
    Approver,
    /// `breakglass-…`: an operator on the CLI. Treated like a person; trusted only where
    /// configured.
    BreakGlass,
}

impl KeyKind {
    /// Kind of a key id, or `None` when the prefix is unknown.
    pub fn of_key_id(key_id: &str) -> Option<Self> {
        if key_id.starts_with("policy-") {
            Some(Self::Policy)
        } else if key_id.starts_with("web-") {
            Some(Self::Approver)
        } else if key_id.starts_with("breakglass-") {
            Some(Self::BreakGlass)
        } else {
            None
        }
    }
    /// Stable name for metrics and audit events.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Policy => "policy",
            Self::Approver => "approver",
            Self::BreakGlass => "breakglass",
        }
    }
}

/// Why a key file or grant was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantError {
    /// The grant's version is not [`GRANT_VERSION`].
    #[error("unknown grant version {0}")]
    UnknownVersion(u32),
    /// No trusted public key has this id.
    #[error("grant key {0:?} is not trusted by this executor")]
    UntrustedKey(String),
    /// The signature is not 64 bytes, or does not verify.
    #[error("grant signature is invalid")]
    BadSignature,
    /// A key file could not be read as the expected format.
    #[error("invalid key: {0}")]
    BadKey(String),
}

/// Key ids are `^[a-z0-9-]{1,64}$` and start with `policy-`, `web-` or `breakglass-`.
pub fn validate_key_id(key_id: &str) -> Result<KeyKind, GrantError> {
    let shape = !key_id.is_empty()
        && key_id.len() <= 64
        && key_id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    match KeyKind::of_key_id(key_id) {
        Some(k) if shape => Ok(k),
        _ => Err(GrantError::BadKey(format!(
            "key id {key_id:?} must match ^(policy|web|breakglass)-[a-z0-9-]+$"
        ))),
    }
}

/// A grant-signing key (private). Held by policy, web and the break-glass CLI only.
pub struct GrantSigner {
    key_id: String,
    pair: Ed25519KeyPair,
}

impl std::fmt::Debug for GrantSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrantSigner")
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

/// A newly generated key pair, encoded for files: `private_pkcs8_b64` is the secret
/// (base64 PKCS#8 v2), `public_b64` the 32-byte public key in base64.
pub struct GeneratedKey {
    /// Base64 of the PKCS#8 document. Secret.
    pub private_pkcs8_b64: String,
    /// Base64 of the raw 32-byte Ed25519 public key.
    pub public_b64: String,
}

/// Generates a new Ed25519 key pair.
pub fn generate_key() -> Result<GeneratedKey, GrantError> {
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new())
        .map_err(|_| GrantError::BadKey("key generation failed".into()))?;
    let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref())
        .map_err(|e| GrantError::BadKey(e.to_string()))?;
    Ok(GeneratedKey {
        private_pkcs8_b64: B64.encode(pkcs8.as_ref()),
        public_b64: B64.encode(pair.public_key().as_ref()),
    })
}

impl GrantSigner {
    /// Loads a signer from base64 PKCS#8 text (as written by [`generate_key`]; OpenSSL's v1
    /// PKCS#8 is accepted too).
    pub fn from_pkcs8_b64(key_id: &str, text: &str) -> Result<Self, GrantError> {
        validate_key_id(key_id)?;
        let der = B64
            .decode(text.trim())
            .map_err(|_| GrantError::BadKey("signing key file is not base64".into()))?;
        let pair = Ed25519KeyPair::from_pkcs8_maybe_unchecked(&der)
            .map_err(|e| GrantError::BadKey(format!("signing key is not Ed25519 PKCS#8: {e}")))?;
        Ok(Self {
            key_id: key_id.to_owned(),
            pair,
        })
    }
    /// The key id written into every grant this signer makes.
    pub fn key_id(&self) -> &str {
        &self.key_id
    }
    /// Base64 of the public key, for the executor's trusted-keys directory.
    pub fn public_b64(&self) -> String {
        B64.encode(self.pair.public_key().as_ref())
    }
    /// Signs claims; `claims.key_id` must be this signer's id.
    pub fn sign(&self, claims: &GrantClaims) -> Result<Vec<u8>, GrantError> {
        if claims.key_id != self.key_id {
            return Err(GrantError::BadKey("claims name another key id".into()));
        }
        Ok(self.pair.sign(&claims.signing_input()).as_ref().to_vec())
    }
}

/// The public keys an executor trusts, by key id. Loaded from its own configuration only.
#[derive(Debug, Default, Clone)]
pub struct TrustedKeys {
    keys: HashMap<String, TrustedKey>,
}

/// One trusted public key: its issuer kind, its 32 bytes (for `ring`) and the same key
/// decompressed (for batch verification).
#[derive(Debug, Clone)]
struct TrustedKey {
    kind: KeyKind,
    raw: [u8; 32],
    point: ed25519_dalek::VerifyingKey,
}

/// What [`TrustedKeys::verify_many`] found for a set of grants. Of the grants that reach the
/// signature check (those refused before it, for version, key, length or encoding, count in
/// none of the three), each is counted once, by how its signature was checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedMany {
    /// Answer `i` is for grant `i`: who signed it, or why it is refused.
    pub answers: Vec<Result<KeyKind, GrantError>>,
    /// Signatures accepted together by one batch verification that passed.
    pub in_batch: usize,
    /// A signature verified with `ring` because it was the only one to check.
    pub alone: usize,
    /// Signatures verified one by one with `ring` after their batch verification failed:
    /// at least one of them does not verify. Only bad signatures make a batch fail.
    pub after_failed_batch: usize,
}

/// A grant that passed [`TrustedKeys::precheck`]: what its signature check needs.
struct Candidate<'a> {
    kind: KeyKind,
    key: &'a TrustedKey,
    msg: Vec<u8>,
    sig: &'a [u8; SIGNATURE_LEN],
}

impl TrustedKeys {
    /// Adds a key from base64 of the raw 32-byte public key.
    pub fn insert_b64(&mut self, key_id: &str, public_b64: &str) -> Result<(), GrantError> {
        let kind = validate_key_id(key_id)?;
        let raw = B64
            .decode(public_b64.trim())
            .map_err(|_| GrantError::BadKey(format!("public key {key_id} is not base64")))?;
        let raw: [u8; 32] = raw
            .try_into()
            .map_err(|_| GrantError::BadKey(format!("public key {key_id} is not 32 bytes")))?;
        let point = ed25519_dalek::VerifyingKey::from_bytes(&raw).map_err(|_| {
            GrantError::BadKey(format!(
                "public key {key_id} is not an Ed25519 point (RFC 8032 section 5.1.3)"
            ))
        })?;
        // A key made by RFC 8032 key generation is a multiple of the base point: canonically
        // encoded, of prime order. A small-order key (such as 32 zero bytes, y = 0, of order 4, or
        // the identity, y = 1) lets anyone forge a signature on any message in a few tries.
        if !ed25519_prime_order(&raw, &point) {
            return Err(GrantError::BadKey(format!(
                "public key {key_id} is not in Ed25519's prime-order subgroup (a small-order or non-canonical point, not a generated key)"
            )));
        }
        self.keys
            .insert(key_id.to_owned(), TrustedKey { kind, raw, point });
        Ok(())
    }
    /// Number of trusted keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }
    /// True when no key is trusted.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
    /// Trusted key ids, sorted.
    pub fn key_ids(&self) -> Vec<String> {
        let mut v: Vec<String> = self.keys.keys().cloned().collect();
        v.sort();
        v
    }
    /// Verifies a grant. Any signature length but 64 bytes, an unknown version or an untrusted
    /// key is an error, never a panic. Returns who signed it.
    pub fn verify(&self, claims: &GrantClaims, sig: &[u8]) -> Result<KeyKind, GrantError> {
        let c = self.precheck(claims, sig)?;
        Self::verify_one(&c)
    }

    /// Verifies many grants at once; answer `i` is the one [`TrustedKeys::verify`] gives for
    /// `grants[i]`, for every grant whose signature was made without its key's private half.
    ///
    /// The grants that pass the checks before the signature ([`TrustedKeys::precheck`]:
    /// version, trusted key, 64 bytes, canonical S and R encodings) are verified together by
    /// `ed25519_dalek::verify_batch`: one multi-scalar multiplication checking
    /// Σ zᵢ·(Rᵢ + kᵢ·A − Sᵢ·B) = 0 with a 128-bit weight zᵢ per signature, the weights
    /// derived from a transcript of every input, so no chosen set of bad signatures cancels
    /// out. About 18 µs per signature in a batch of 16 here, against 50–64 µs for one `ring`
    /// verification. When the batch fails, each of its grants is verified on its own with
    /// `ring` (RFC 8032 section 5.1.7, as [`TrustedKeys::verify`]), so a refusal names exactly
    /// the grants that fail, with `verify`'s error. A batch of one is verified with `ring`.
    ///
    /// Where the two can differ: a signature whose R carries a small-order component can pass
    /// the batch (when the component's order divides its weight) though `ring` refuses it.
    /// Making such a signature takes the private key, whose holder can sign any grant anyway,
    /// and trusted public keys are in the prime-order subgroup ([`TrustedKeys::insert_b64`]),
    /// so it grants nothing a key holder could not.
    ///
    /// The returned [`VerifiedMany`] also says how each signature was checked, for the
    /// executor's metrics.
    pub fn verify_many(&self, grants: &[(&GrantClaims, &[u8])]) -> VerifiedMany {
        let checked: Vec<Result<Candidate<'_>, GrantError>> = grants
            .iter()
            .map(|(claims, sig)| self.precheck(claims, sig))
            .collect();
        let candidates: Vec<&Candidate<'_>> =
            checked.iter().filter_map(|c| c.as_ref().ok()).collect();
        let together = candidates.len() > 1 && {
            let msgs: Vec<&[u8]> = candidates.iter().map(|c| c.msg.as_slice()).collect();
            let sigs: Vec<ed25519_dalek::Signature> = candidates
                .iter()
                .map(|c| ed25519_dalek::Signature::from_bytes(c.sig))
                .collect();
            let keys: Vec<ed25519_dalek::VerifyingKey> =
                candidates.iter().map(|c| c.key.point).collect();
            ed25519_dalek::verify_batch(&msgs, &sigs, &keys).is_ok()
        };
        let n = candidates.len();
        let (in_batch, alone, after_failed_batch) = match (together, n) {
            (true, _) => (n, 0, 0),
            (false, 0 | 1) => (0, n, 0),
            (false, _) => (0, 0, n),
        };
        let answers = checked
            .into_iter()
            .map(|c| {
                let c = c?;
                if together {
                    Ok(c.kind)
                } else {
                    Self::verify_one(&c)
                }
            })
            .collect();
        VerifiedMany {
            answers,
            in_batch,
            alone,
            after_failed_batch,
        }
    }

    /// The checks of a grant before its signature: known version, trusted key id, 64-byte
    /// signature (lengths first, the guide's `timingSafeEqual` failure mode); then the signed
    /// message.
    fn precheck<'a>(
        &'a self,
        claims: &GrantClaims,
        sig: &'a [u8],
    ) -> Result<Candidate<'a>, GrantError> {
        if claims.version != GRANT_VERSION {
            return Err(GrantError::UnknownVersion(claims.version));
        }
        let key = self
            .keys
            .get(&claims.key_id)
            .ok_or_else(|| GrantError::UntrustedKey(claims.key_id.clone()))?;
        let sig: &[u8; SIGNATURE_LEN] = sig.try_into().map_err(|_| GrantError::BadSignature)?;
        // Refused by `ring` too; checked here so that batch verification never depends on how
        // strictly the Ed25519 crate decodes them (RFC 8032 section 5.1.7, step 1).
        let (r, s) = sig.split_at(32);
        if !is_canonical_scalar(s) || !is_canonical_point(r) {
            return Err(GrantError::BadSignature);
        }
        Ok(Candidate {
            kind: key.kind,
            key,
            msg: claims.signing_input(),
            sig,
        })
    }

    /// One signature, with `ring`.
    fn verify_one(c: &Candidate<'_>) -> Result<KeyKind, GrantError> {
        UnparsedPublicKey::new(&ED25519, &c.key.raw)
            .verify(&c.msg, c.sig)
            .map_err(|_| GrantError::BadSignature)?;
        Ok(c.kind)
    }
}

/// The order of the Ed25519 group, ℓ = 2^252 + 27742317777372353535851937790883648493
/// (RFC 8032 section 5.1), little-endian.
const ELL: [u8; 32] = [
    0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
];

/// The field prime p = 2^255 − 19 (RFC 8032 section 5.1), little-endian.
const P: [u8; 32] = [
    0xed, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
];

/// `a < b` for little-endian 32-byte integers.
fn less_than(a: &[u8], b: &[u8; 32]) -> bool {
    for i in (0..32).rev() {
        if a[i] != b[i] {
            return a[i] < b[i];
        }
    }
    false
}

/// S of a signature is an integer below ℓ (RFC 8032 section 5.1.7: "If parsing fails …
/// the signature is invalid"; S ≥ ℓ is the malleability the check exists for).
fn is_canonical_scalar(s: &[u8]) -> bool {
    s.len() == 32 && less_than(s, &ELL)
}

/// A point encoding as RFC 8032 section 5.1.2 writes it: y below p, and the sign bit clear
/// when x is 0 (y = 1 or y = p − 1). Whether y is on the curve is left to decoding.
/// Whether `raw`, decoded as `point`, is a key RFC 8032 key generation can make: canonically
/// encoded and in the prime-order subgroup. A small-order point (such as 32 zero bytes, y = 0,
/// of order 4, or the identity, y = 1) "verifies" forged signatures on any message; grant keys
/// and passkeys ([`crate::passkey`]) are both refused with it.
pub(crate) fn ed25519_prime_order(raw: &[u8; 32], point: &ed25519_dalek::VerifyingKey) -> bool {
    is_canonical_point(raw) && !point.is_weak() && point.to_edwards().is_torsion_free()
}

fn is_canonical_point(enc: &[u8]) -> bool {
    if enc.len() != 32 {
        return false;
    }
    let mut y = [0u8; 32];
    y.copy_from_slice(enc);
    let sign = y[31] & 0x80 != 0;
    y[31] &= 0x7f;
    if !less_than(&y, &P) {
        return false;
    }
    let one = y[0] == 1 && y[1..].iter().all(|b| *b == 0);
    let mut minus_one = P;
    minus_one[0] -= 1;
    !(sign && (one || y == minus_one))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(key_id: &str) -> GrantClaims {
        GrantClaims {
            version: 1,
            id: Uuid::nil(),
            proposal_id: Uuid::max(),
            tenant_id: "acme".into(),
            intent_hash: "ab".repeat(32),
            doc_version: 3,
            expires_at: 1_800_000_000_000_000,
            key_id: key_id.into(),
            preview_sha256: None,
            doc_sha256: None,
        }
    }

    /// A new `policy-1` signer and the trusted keys holding only its public key.
    fn policy_1() -> (GrantSigner, TrustedKeys) {
        let k = generate_key().unwrap();
        let signer = GrantSigner::from_pkcs8_b64("policy-1", &k.private_pkcs8_b64).unwrap();
        let mut trusted = TrustedKeys::default();
        trusted.insert_b64("policy-1", &k.public_b64).unwrap();
        (signer, trusted)
    }

    #[test]
    fn sign_and_verify_and_attacks() {
        let (signer, trusted) = policy_1();
        let c = claims("policy-1");
        let sig = signer.sign(&c).unwrap();
        assert_eq!(trusted.verify(&c, &sig), Ok(KeyKind::Policy));

        // Truncated, empty, odd-length, extended, zeroed signatures: errors, no panic.
        for bad in [&sig[..63], &[][..], &sig[..33], &[0u8; 64][..]] {
            assert_eq!(trusted.verify(&c, bad), Err(GrantError::BadSignature));
        }
        let mut longer = sig.clone();
        longer.push(0);
        assert_eq!(trusted.verify(&c, &longer), Err(GrantError::BadSignature));

        // Tampered fields.
        let mut t = c.clone();
        t.expires_at += 1;
        assert_eq!(trusted.verify(&t, &sig), Err(GrantError::BadSignature));
        let mut t = c.clone();
        t.intent_hash = "cd".repeat(32);
        assert_eq!(trusted.verify(&t, &sig), Err(GrantError::BadSignature));
        let mut t = c.clone();
        t.version = 2;
        assert_eq!(trusted.verify(&t, &sig), Err(GrantError::UnknownVersion(2)));

        // A key the executor does not trust.
        let other = generate_key().unwrap();
        let web = GrantSigner::from_pkcs8_b64("web-1", &other.private_pkcs8_b64).unwrap();
        let c2 = claims("web-1");
        let s2 = web.sign(&c2).unwrap();
        assert_eq!(
            trusted.verify(&c2, &s2),
            Err(GrantError::UntrustedKey("web-1".into()))
        );
    }

    /// `sig` with S replaced by S + ℓ: the same point equation, a non-canonical encoding that
    /// RFC 8032 section 5.1.7 requires a verifier to refuse (signature malleability).
    fn malleated(sig: &[u8]) -> Vec<u8> {
        let mut out = sig.to_vec();
        let mut carry = 0u16;
        for (i, l) in ELL.iter().enumerate() {
            let sum = u16::from(out[32 + i]) + u16::from(*l) + carry;
            out[32 + i] = sum as u8;
            carry = sum >> 8;
        }
        out
    }

    #[test]
    fn a_batch_gives_each_grant_the_answer_verify_gives_it() {
        let (p, w) = (generate_key().unwrap(), generate_key().unwrap());
        let policy = GrantSigner::from_pkcs8_b64("policy-1", &p.private_pkcs8_b64).unwrap();
        let web = GrantSigner::from_pkcs8_b64("web-1", &w.private_pkcs8_b64).unwrap();
        let mut trusted = TrustedKeys::default();
        trusted.insert_b64("policy-1", &p.public_b64).unwrap();
        trusted.insert_b64("web-1", &w.public_b64).unwrap();
        let signed: Vec<(GrantClaims, Vec<u8>)> = (0..16)
            .map(|i| {
                let signer = if i % 3 == 0 { &web } else { &policy };
                let mut c = claims(signer.key_id());
                c.id = Uuid::from_u128(i);
                c.expires_at += i as i64;
                let sig = signer.sign(&c).unwrap();
                (c, sig)
            })
            .collect();

        // All good: every answer is the signer's kind.
        let all = signed.clone();
        let args: Vec<(&GrantClaims, &[u8])> = all.iter().map(|(c, s)| (c, s.as_slice())).collect();
        let verified = trusted.verify_many(&args);
        let counts = |v: &VerifiedMany| (v.in_batch, v.alone, v.after_failed_batch);
        assert_eq!(counts(&verified), (16, 0, 0));
        for (i, a) in verified.answers.iter().enumerate() {
            let kind = if i % 3 == 0 {
                KeyKind::Approver
            } else {
                KeyKind::Policy
            };
            assert_eq!(a, &Ok(kind), "grant {i}");
        }

        // Attacks among good grants: each refused with verify's error, the others still pass.
        let mut mixed = signed.clone();
        mixed[1].0.expires_at += 1; // tampered claim
        mixed[2].1.truncate(63); // truncated signature
        mixed[4].1 = malleated(&mixed[4].1); // S + ℓ
        mixed[5].1 = vec![0; 64]; // zeroed
        mixed[7].0.key_id = "policy-2".into(); // a key this executor does not trust
        mixed[8].0.version = 2;
        mixed[10].1[0] ^= 1; // R flipped
        let (c11, s11) = mixed[11].clone();
        mixed[12].1 = s11; // another grant's signature
        mixed[12].0.intent_hash = c11.intent_hash;
        let args: Vec<(&GrantClaims, &[u8])> =
            mixed.iter().map(|(c, s)| (c, s.as_slice())).collect();
        let verified = trusted.verify_many(&args);
        // 12 grants pass the checks before the signature (not 2, 4, 7, 8); four of them (1, 5,
        // 10, 12) do not verify, so the batch fails and each of the 12 is verified on its own.
        assert_eq!(counts(&verified), (0, 0, 12));
        let answers = verified.answers;
        for (i, ((c, s), a)) in mixed.iter().zip(&answers).enumerate() {
            assert_eq!(a, &trusted.verify(c, s), "grant {i}");
        }
        let refused: Vec<usize> = answers
            .iter()
            .enumerate()
            .filter(|(_, a)| a.is_err())
            .map(|(i, _)| i)
            .collect();
        assert_eq!(refused, [1, 2, 4, 5, 7, 8, 10, 12]);
        assert_eq!(answers[4], Err(GrantError::BadSignature));
        assert_eq!(answers[7], Err(GrantError::UntrustedKey("policy-2".into())));
        assert_eq!(answers[8], Err(GrantError::UnknownVersion(2)));

        // One grant, or none.
        let one = trusted.verify_many(&args[..1]);
        assert_eq!(one.answers, vec![Ok(KeyKind::Approver)]);
        assert_eq!(counts(&one), (0, 1, 0));
        assert_eq!(
            trusted.verify_many(&args[1..2]).answers,
            vec![Err(GrantError::BadSignature)]
        );
        let none = trusted.verify_many(&[]);
        assert!(none.answers.is_empty());
        assert_eq!(counts(&none), (0, 0, 0));
    }

    #[test]
    fn a_public_key_must_be_a_curve_point() {
        let mut trusted = TrustedKeys::default();
        // y = 2 has no x on the curve (RFC 8032 section 5.1.3 decoding fails).
        let mut not_a_point = [0u8; 32];
        not_a_point[0] = 2;
        let err = trusted
            .insert_b64("policy-1", &B64.encode(not_a_point))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid key: public key policy-1 is not an Ed25519 point (RFC 8032 section 5.1.3)"
        );
        // Small-order keys: 32 zero bytes (y = 0, order 4), the identity (y = 1), and a real
        // key plus a point of order 8 (mixed order); and a non-canonical encoding (y = p + 1,
        // which decodes as the identity).
        let real = ed25519_dalek::VerifyingKey::from_bytes(
            &B64.decode(generate_key().unwrap().public_b64)
                .unwrap()
                .try_into()
                .unwrap(),
        )
        .unwrap()
        .to_edwards();
        let mixed = real + curve25519_dalek::constants::EIGHT_TORSION[1];
        let mut identity = [0u8; 32];
        identity[0] = 1;
        let mut above_p = P;
        above_p[0] += 1;
        for weak in [[0u8; 32], identity, mixed.compress().to_bytes(), above_p] {
            let err = trusted
                .insert_b64("policy-1", &B64.encode(weak))
                .unwrap_err();
            assert_eq!(
                err.to_string(),
                "invalid key: public key policy-1 is not in Ed25519's prime-order subgroup (a small-order or non-canonical point, not a generated key)"
            );
        }
        let err = trusted
            .insert_b64("policy-1", &B64.encode([1u8; 31]))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid key: public key policy-1 is not 32 bytes"
        );
        assert!(trusted.is_empty());
    }

    #[test]
    fn signatures_with_non_canonical_encodings_are_refused_alone_and_in_a_batch() {
        let (signer, trusted) = policy_1();
        let c = claims("policy-1");
        let sig = signer.sign(&c).unwrap();
        assert!(is_canonical_point(&sig[..32]) && is_canonical_scalar(&sig[32..]));
        // S = ℓ, S = 2^256 − 1; R with y = p, y = 1 and y = p − 1 with the sign bit set.
        let mut minus_one = P;
        minus_one[0] -= 1;
        let mut one = [0u8; 32];
        one[0] = 1;
        let with_s = |s: [u8; 32]| [&sig[..32], &s[..]].concat();
        let with_r = |r: [u8; 32]| [&r[..], &sig[32..]].concat();
        let signed = |mut r: [u8; 32]| {
            r[31] |= 0x80;
            r
        };
        for bad in [
            with_s(ELL),
            with_s([0xff; 32]),
            with_r(P),
            with_r(signed(one)),
            with_r(signed(minus_one)),
        ] {
            assert_eq!(trusted.verify(&c, &bad), Err(GrantError::BadSignature));
            let args = [
                (&c, sig.as_slice()),
                (&c, bad.as_slice()),
                (&c, sig.as_slice()),
            ];
            assert_eq!(
                trusted.verify_many(&args).answers,
                vec![
                    Ok(KeyKind::Policy),
                    Err(GrantError::BadSignature),
                    Ok(KeyKind::Policy)
                ]
            );
        }
        assert!(!is_canonical_point(&P) && is_canonical_point(&minus_one));
        assert!(!is_canonical_scalar(&ELL) && is_canonical_scalar(&[0u8; 32]));
    }

    #[test]
    fn key_ids_are_checked() {
        assert!(validate_key_id("policy-1").is_ok());
        assert!(validate_key_id("admin-1").is_err());
        assert!(validate_key_id("policy-../x").is_err());
        assert!(GrantSigner::from_pkcs8_b64("policy-1", "not base64!").is_err());
    }

    #[test]
    fn signing_input_is_domain_separated_jcs() {
        let c = claims("policy-1");
        let input = c.signing_input();
        assert!(input.starts_with(b"actiond/grant/v1\0{\"doc_version\":3,"));
    }

    /// A grant without a preview signs exactly the bytes of the format before the field
    /// existed (so older grants still verify); one with a preview signs the hash, so a grant
    /// whose preview hash is altered, added or removed no longer verifies.
    #[test]
    fn the_preview_hash_is_signed_only_when_present() {
        let c = claims("policy-1");
        let old = format!(
            "actiond/grant/v1\0{{\"doc_version\":3,\"expires_at\":1800000000000000,\"id\":\"{}\",\"intent_hash\":\"{}\",\"key_id\":\"policy-1\",\"proposal_id\":\"{}\",\"tenant_id\":\"acme\",\"version\":1}}",
            Uuid::nil(),
            "ab".repeat(32),
            Uuid::max()
        );
        assert_eq!(c.signing_input(), old.as_bytes());
        let (signer, trusted) = policy_1();
        let mut bound = c.clone();
        bound.preview_sha256 = Some("cd".repeat(32));
        let input = String::from_utf8(bound.signing_input()).unwrap();
        assert!(input.contains(&format!("\"preview_sha256\":\"{}\"", "cd".repeat(32))));
        let sig = signer.sign(&bound).unwrap();
        assert_eq!(trusted.verify(&bound, &sig), Ok(KeyKind::Policy));
        for altered in [Some("ce".repeat(32)), None] {
            let mut a = bound.clone();
            a.preview_sha256 = altered;
            assert_eq!(trusted.verify(&a, &sig), Err(GrantError::BadSignature));
        }
        let unbound_sig = signer.sign(&c).unwrap();
        assert_eq!(
            trusted.verify(&bound, &unbound_sig),
            Err(GrantError::BadSignature)
        );
        // The document hash is bound the same way: signed when present, never removable.
        let mut pinned = c.clone();
        pinned.doc_sha256 = Some("ef".repeat(32));
        let input = String::from_utf8(pinned.signing_input()).unwrap();
        assert!(input.contains(&format!("\"doc_sha256\":\"{}\"", "ef".repeat(32))));
        let sig = signer.sign(&pinned).unwrap();
        assert_eq!(trusted.verify(&pinned, &sig), Ok(KeyKind::Policy));
        for altered in [Some("ee".repeat(32)), None] {
            let mut a = pinned.clone();
            a.doc_sha256 = altered;
            assert_eq!(trusted.verify(&a, &sig), Err(GrantError::BadSignature));
        }
    }
}
