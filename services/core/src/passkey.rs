//! Passkey-signed approvals: the WebAuthn (Web Authentication Level 3, W3C) checks a relying
//! party makes, with a challenge derived from the intent being approved.
//!
//! **Challenge.** An Approve that needs a passkey signs
//! `challenge = SHA-256("actiond/passkey-approval/v1\0" ‖ JCS({doc_version, intent_hash, nonce,
//! proposal_id, tenant_id}))` ([`approval_challenge`]; JCS is RFC 8785, ids in lowercase, the
//! nonce 32 random bytes as lowercase hex, issued by the server and usable once). The browser
//! puts it, base64url without padding, into `clientDataJSON.challenge`, and the authenticator
//! signs `authenticatorData ‖ SHA-256(clientDataJSON)`. So a stored assertion proves that this
//! person's authenticator approved exactly this intent of this proposal under this document
//! version, and anyone holding the stored bytes and the public key can check it again
//! ([`verify_assertion`]), without the server.
//!
//! **Registration** ([`verify_registration`]) reads the credential id and its COSE public key
//! (RFC 9052/9053) from the attestation object's authenticator data, to its last byte. Who
//! registers is vouched for by a fresh sign-in at the identity provider and, when the person
//! already has a passkey for the tenant, an assertion by it (the web app and
//! `actiond_store::passkeys`); the attestation statement is checked there only when the
//! tenant's policy asks for it.
//!
//! **Keys an authenticator cannot have made are refused** ([`check_public_key`]) at
//! registration and again at every assertion: `alg`, `kty` and `crv` must agree — ES256 (COSE
//! -7) is EC2 on P-256 with (x, y) on the curve, EdDSA (-8) is OKP on Ed25519 with a
//! canonically encoded point of prime order (a small-order key such as the identity
//! "verifies" a forged signature on any message), RS256 (-257) is RSA with a 2048–8192-bit odd
//! modulus and e = 65537 — and no private part may be present.
//!
//! **Flags** (WebAuthn Level 3 §6.1): UP and UV must be set; BS (backed up) never without BE
//! (backup eligible); BE is fixed at registration, and an assertion with another BE is refused
//! ([`backup_eligibility_unchanged`]). Signatures are verified with `ring`. Every malformed
//! input is a [`PasskeyError`] naming the field and the rule, never a panic.

use crate::canonical::canonicalize;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use coset::{CborSerializable as _, CoseKey, Label, iana};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// Domain separation prefix of approval challenges (followed by a NUL byte).
pub const CHALLENGE_DOMAIN: &str = "actiond/passkey-approval/v1";

/// Authenticator data flag: user present (WebAuthn Level 3 §6.1, bit 0).
const FLAG_UP: u8 = 0x01;
/// Authenticator data flag: user verified (bit 2).
const FLAG_UV: u8 = 0x04;
/// Authenticator data flag: backup eligible (bit 3): the credential may be synced to other
/// devices. Fixed when the credential is made.
const FLAG_BE: u8 = 0x08;
/// Authenticator data flag: backed up (bit 4): the credential is synced now. Only a
/// backup-eligible credential can be.
const FLAG_BS: u8 = 0x10;
/// Authenticator data flag: attested credential data included (bit 6).
const FLAG_AT: u8 = 0x40;
/// Authenticator data flag: extension data included (bit 7).
const FLAG_ED: u8 = 0x80;

/// Smallest RSA modulus accepted, in bits (NIST SP 800-131A; ring verifies 2048–8192).
pub const RSA_MIN_BITS: usize = 2048;
/// Largest RSA modulus accepted, in bits (ring's limit for RS256).
pub const RSA_MAX_BITS: usize = 8192;

/// Why a registration or an assertion was refused (the message is shown to the person and
/// written to the audit log).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PasskeyError(pub String);

fn err<T>(m: impl Into<String>) -> Result<T, PasskeyError> {
    Err(PasskeyError(m.into()))
}

/// What an approval challenge binds.
#[derive(Debug, Clone, Copy)]
pub struct ChallengeInput<'a> {
    /// The proposal id (lowercase hyphenated UUID).
    pub proposal_id: &'a str,
    /// The tenant id.
    pub tenant_id: &'a str,
    /// The proposal's intent hash (64 lowercase hex).
    pub intent_hash: &'a str,
    /// The tenant document version that escalated the proposal.
    pub doc_version: i32,
    /// The server's single-use nonce (64 lowercase hex).
    pub nonce: &'a str,
}

/// The 32-byte challenge an approval assertion must sign; see the module doc.
pub fn approval_challenge(c: &ChallengeInput<'_>) -> [u8; 32] {
    let obj = json!({
        "doc_version": c.doc_version,
        "intent_hash": c.intent_hash,
        "nonce": c.nonce,
        "proposal_id": c.proposal_id,
        "tenant_id": c.tenant_id,
    });
    // An object of strings and a small integer always canonicalizes.
    let jcs = canonicalize(&obj).unwrap_or_default();
    let mut h = Sha256::new();
    h.update(CHALLENGE_DOMAIN.as_bytes());
    h.update([0u8]);
    h.update(jcs.as_bytes());
    h.finalize().into()
}

/// Domain separation prefix of the challenge an existing passkey signs to vouch for a new
/// registration of the same person in the same tenant.
pub const VOUCH_DOMAIN: &str = "actiond/passkey-registration/v1";

/// A registration needs a sign-in at the identity provider at most this long ago (ID-token
/// `auth_time`, judged by the database clock): a stolen session cookie alone registers nothing.
pub const REGISTER_SIGN_IN_WITHIN_SECS: u64 = 300;

/// How far ahead of the database clock an `auth_time` may be (the IdP's clock skew); a later
/// one is refused like a stale one. The one skew of every time taken from outside
/// ([`crate::external_time::CLOCK_SKEW`]).
pub const AUTH_TIME_SKEW_SECS: u64 = crate::external_time::CLOCK_SKEW.as_secs();

/// The 32-byte challenge an existing passkey signs to allow the registration whose challenge
/// nonce is `nonce` (64 lowercase hex) in `tenant_id`:
/// `SHA-256("actiond/passkey-registration/v1\0" ‖ JCS({nonce, tenant_id}))`. Bound to the
/// single-use registration nonce, so the assertion allows exactly one registration.
pub fn vouch_challenge(tenant_id: &str, nonce: &str) -> [u8; 32] {
    let obj = json!({"nonce": nonce, "tenant_id": tenant_id});
    let jcs = canonicalize(&obj).unwrap_or_default();
    let mut h = Sha256::new();
    h.update(VOUCH_DOMAIN.as_bytes());
    h.update([0u8]);
    h.update(jcs.as_bytes());
    h.finalize().into()
}

/// `challenge` as WebAuthn carries it in `clientDataJSON` (base64url, no padding).
pub fn b64url(bytes: &[u8]) -> String {
    B64URL.encode(bytes)
}

/// Decodes base64url (padding tolerated); `field` names the input in the error.
pub fn from_b64url(field: &str, s: &str) -> Result<Vec<u8>, PasskeyError> {
    B64URL
        .decode(s.trim_end_matches('='))
        .map_err(|_| PasskeyError(format!("{field}: must be base64url")))
}

/// The relying party: its id (the web app's host name) and origin (`scheme://host[:port]`).
#[derive(Debug, Clone)]
pub struct RelyingParty {
    /// RP ID: the host of the public URL (`localhost`, `approvals.example.com`).
    pub id: String,
    /// Origin the browser reports in `clientDataJSON.origin`.
    pub origin: String,
}

/// A verified registration: what is stored per credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registered {
    /// Credential id (raw bytes).
    pub credential_id: Vec<u8>,
    /// The credential's public key, COSE_Key CBOR bytes.
    pub public_key: Vec<u8>,
    /// COSE algorithm (-7, -8 or -257).
    pub alg: i64,
    /// Signature counter at registration (0 when the authenticator keeps none).
    pub sign_count: u32,
    /// BE flag: the credential may be synced (a "multi-device" passkey). Fixed for the
    /// credential's life: an assertion with another value is refused.
    pub backup_eligible: bool,
    /// BS flag at registration: the credential was synced then.
    pub backed_up: bool,
    /// The authenticator model's AAGUID (16 bytes; all zero when the authenticator keeps it
    /// private, as with `attestation: "none"`).
    pub aaguid: [u8; 16],
    /// The attestation statement format (`fmt`: `none`, `packed`, `tpm`, …).
    pub fmt: String,
}

/// What a verified assertion's authenticator data says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Asserted {
    /// The authenticator's signature counter.
    pub sign_count: u32,
    /// BE flag (must equal the registration's, [`backup_eligibility_unchanged`]).
    pub backup_eligible: bool,
    /// BS flag.
    pub backed_up: bool,
}

/// An assertion as the browser returned it (raw bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assertion {
    /// Credential id used.
    pub credential_id: Vec<u8>,
    /// Authenticator data.
    pub authenticator_data: Vec<u8>,
    /// Client data JSON, exactly as the browser serialized it.
    pub client_data_json: Vec<u8>,
    /// Signature over `authenticator_data ‖ SHA-256(client_data_json)`.
    pub signature: Vec<u8>,
}

/// Checks `clientDataJSON`: its `type`, `challenge` and `origin`, and that it was not made in a
/// cross-origin frame.
fn check_client_data(
    raw: &[u8],
    want_type: &str,
    challenge: &[u8],
    rp: &RelyingParty,
) -> Result<(), PasskeyError> {
    let v: Value = serde_json::from_slice(raw)
        .map_err(|e| PasskeyError(format!("client_data_json: not JSON ({e})")))?;
    let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default();
    if s("type") != want_type {
        return err(format!(
            "client_data_json.type: must be {want_type} (got {:?})",
            s("type")
        ));
    }
    if s("challenge") != b64url(challenge) {
        return err(
            "client_data_json.challenge: the passkey signed a different challenge than this approval's (another proposal, intent or request)",
        );
    }
    if s("origin") != rp.origin {
        return err(format!(
            "client_data_json.origin: must be {} (got {:?})",
            rp.origin,
            s("origin")
        ));
    }
    if v.get("crossOrigin") == Some(&Value::Bool(true)) {
        return err("client_data_json.crossOrigin: made inside a cross-origin frame");
    }
    Ok(())
}

/// The fixed part of authenticator data, checked.
struct AuthData {
    flags: u8,
    sign_count: u32,
}

/// Checks the fixed part of authenticator data (WebAuthn Level 3 §6.1): the RP ID hash, user
/// present (UP) and verified (UV), and that backed up (BS) is never set without backup
/// eligible (BE) — §6.1.3 makes BS=1, BE=0 an invalid combination that no authenticator sends.
fn check_auth_data(ad: &[u8], rp: &RelyingParty) -> Result<AuthData, PasskeyError> {
    if ad.len() < 37 {
        return err("authenticator_data: shorter than 37 bytes");
    }
    if ad[..32] != Sha256::digest(rp.id.as_bytes())[..] {
        return err(format!(
            "authenticator_data: made for another relying party than {}",
            rp.id
        ));
    }
    let flags = ad[32];
    if flags & FLAG_UP == 0 {
        return err("authenticator_data.flags: the user was not present (UP flag)");
    }
    if flags & FLAG_UV == 0 {
        return err(
            "authenticator_data.flags: the user was not verified (UV flag: PIN or biometric)",
        );
    }
    if flags & FLAG_BS != 0 && flags & FLAG_BE == 0 {
        return err(
            "authenticator_data.flags: backed up (BS) without backup eligible (BE), a combination no authenticator sends (WebAuthn L3 6.1.3)",
        );
    }
    let sign_count = u32::from_be_bytes([ad[33], ad[34], ad[35], ad[36]]);
    Ok(AuthData { flags, sign_count })
}

/// The `fmt` and `authData` of an attestation object (CBOR map, WebAuthn §6.5).
fn attestation_parts(attestation_object: &[u8]) -> Result<(String, Vec<u8>), PasskeyError> {
    let att: coset::cbor::Value = coset::cbor::de::from_reader(attestation_object)
        .map_err(|_| PasskeyError("attestation_object: not CBOR".into()))?;
    let map = att
        .as_map()
        .ok_or_else(|| PasskeyError("attestation_object: not a CBOR map".into()))?;
    let field = |name: &str| map.iter().find(|(k, _)| k.as_text() == Some(name));
    let auth_data = field("authData")
        .and_then(|(_, v)| v.as_bytes())
        .ok_or_else(|| PasskeyError("attestation_object: no authData".into()))?;
    let fmt = field("fmt")
        .and_then(|(_, v)| v.as_text())
        .ok_or_else(|| PasskeyError("attestation_object.fmt: missing".into()))?;
    Ok((fmt.to_owned(), auth_data.clone()))
}

/// Verifies a registration (`navigator.credentials.create` with the server's `challenge`) and
/// returns the credential to store: client data, authenticator data and its flags
/// ([`check_auth_data`]), the attested credential data read to its last byte (extensions
/// only when the ED flag says so), and a public key an authenticator can have made
/// ([`check_public_key`]). The attestation statement is not verified here.
pub fn verify_registration(
    rp: &RelyingParty,
    challenge: &[u8],
    client_data_json: &[u8],
    attestation_object: &[u8],
) -> Result<Registered, PasskeyError> {
    check_client_data(client_data_json, "webauthn.create", challenge, rp)?;
    let (fmt, auth_data) = attestation_parts(attestation_object)?;
    let AuthData { flags, sign_count } = check_auth_data(&auth_data, rp)?;
    if flags & FLAG_AT == 0 || auth_data.len() < 55 {
        return err("attestation_object: authData holds no attested credential");
    }
    let mut aaguid = [0u8; 16];
    aaguid.copy_from_slice(&auth_data[37..53]);
    let id_len = usize::from(u16::from_be_bytes([auth_data[53], auth_data[54]]));
    let key_start = 55 + id_len;
    if id_len == 0 || id_len > 1023 || auth_data.len() <= key_start {
        return err("attestation_object: bad credential id length");
    }
    let credential_id = auth_data[55..key_start].to_vec();
    let tail = &auth_data[key_start..];
    let mut rest = tail;
    let _: coset::cbor::Value = coset::cbor::de::from_reader(&mut rest).map_err(|_| {
        PasskeyError("attestation_object: credential public key is not CBOR".into())
    })?;
    let public_key = tail[..tail.len() - rest.len()].to_vec();
    if flags & FLAG_ED != 0 {
        let _: coset::cbor::Value = coset::cbor::de::from_reader(&mut rest).map_err(|_| {
            PasskeyError("authenticator_data: ED flag set but no CBOR extensions follow".into())
        })?;
    }
    if !rest.is_empty() {
        return err(format!(
            "authenticator_data: {} bytes after the attested credential data",
            rest.len()
        ));
    }
    let alg = check_public_key(&public_key)?;
    Ok(Registered {
        credential_id,
        public_key,
        alg,
        sign_count,
        backup_eligible: flags & FLAG_BE != 0,
        backed_up: flags & FLAG_BS != 0,
        aaguid,
        fmt,
    })
}

/// Checks that `cose` (COSE_Key bytes) is a public key a real authenticator can have made and
/// returns its COSE algorithm: `alg`, `kty` and `crv` agree (ES256 is EC2 on P-256, EdDSA is
/// OKP on Ed25519, RS256 is RSA; RFC 9053 §2, §7), no private part is present, a P-256 point
/// lies on the curve and is not the identity (SEC 1 §2.3.4), an Ed25519 point is canonically
/// encoded and of prime order (RFC 8032 §5.1.3; a small-order point "verifies" forged
/// signatures), an RSA modulus has 2048–8192 bits and its exponent is 65537.
pub fn check_public_key(cose: &[u8]) -> Result<i64, PasskeyError> {
    Ok(PublicKey::from_cose(cose)?.alg())
}

/// Verifies an approval assertion against the stored COSE public key and the expected
/// challenge; returns what its authenticator data says (counter, BE, BS). Used at decision
/// time and again by the offline audit. The key is checked as at registration
/// ([`check_public_key`]), so a degenerate key stored by other means signs nothing.
pub fn verify_assertion(
    rp: &RelyingParty,
    challenge: &[u8],
    public_key: &[u8],
    a: &Assertion,
) -> Result<Asserted, PasskeyError> {
    check_client_data(&a.client_data_json, "webauthn.get", challenge, rp)?;
    let ad = check_auth_data(&a.authenticator_data, rp)?;
    let key = PublicKey::from_cose(public_key)?;
    let mut msg = a.authenticator_data.clone();
    msg.extend_from_slice(&Sha256::digest(&a.client_data_json));
    key.verify(&msg, &a.signature)?;
    Ok(Asserted {
        sign_count: ad.sign_count,
        backup_eligible: ad.flags & FLAG_BE != 0,
        backed_up: ad.flags & FLAG_BS != 0,
    })
}

/// BE is fixed when a credential is made (WebAuthn L3 §6.1.3): an assertion whose BE differs
/// from the registration's comes from another credential, or from authenticator data not made
/// by an authenticator.
pub fn backup_eligibility_unchanged(registered: bool, a: &Asserted) -> Result<(), PasskeyError> {
    if registered == a.backup_eligible {
        return Ok(());
    }
    err(format!(
        "authenticator_data.flags: backup eligible (BE) is {} but was {} at registration; it never changes for a credential",
        u8::from(a.backup_eligible),
        u8::from(registered)
    ))
}

/// Whether a new signature counter is acceptable after `stored`: authenticators that keep no
/// counter report 0 forever; any other must increase (an equal or lower one suggests a cloned
/// authenticator).
pub fn counter_ok(stored: u32, new: u32) -> bool {
    (stored == 0 && new == 0) || new > stored
}

/// SHA-256 (hex) of an approval's passkey evidence, as recorded in its audit event: JCS of
/// `{authenticator_data, client_data_json, credential_id, public_key, signature}` (each
/// base64url), so a sealed audit chain also pins the stored assertion.
pub fn evidence_sha256(a: &Assertion, public_key: &[u8]) -> String {
    let obj = json!({
        "authenticator_data": b64url(&a.authenticator_data),
        "client_data_json": b64url(&a.client_data_json),
        "credential_id": b64url(&a.credential_id),
        "public_key": b64url(public_key),
        "signature": b64url(&a.signature),
    });
    crate::canonical::sha256_hex(canonicalize(&obj).unwrap_or_default())
}

/// A credential public key, decoded from COSE.
enum PublicKey {
    Es256(Vec<u8>),
    Ed25519(Vec<u8>),
    Rs256 { n: Vec<u8>, e: Vec<u8> },
}

/// A COSE_Key's parameters by label, for [`PublicKey::from_cose`].
struct Params<'a>(&'a CoseKey);

impl Params<'_> {
    fn get(&self, label: i64) -> Option<&coset::cbor::Value> {
        self.0
            .params
            .iter()
            .find(|(l, _)| *l == Label::Int(label))
            .map(|(_, v)| v)
    }
    fn bytes(&self, label: i64, name: &str) -> Result<&[u8], PasskeyError> {
        match self.get(label) {
            Some(v) => v.as_bytes().map(Vec::as_slice).ok_or_else(|| {
                PasskeyError(format!(
                    "credential_public_key.{name}: must be a byte string"
                ))
            }),
            None => err(format!("credential_public_key.{name}: missing")),
        }
    }
    fn int(&self, label: i64) -> Option<i128> {
        self.get(label)
            .and_then(coset::cbor::Value::as_integer)
            .map(i128::from)
    }
}

/// `bytes` without leading zero bytes (a big-endian unsigned integer).
fn strip_zeros(bytes: &[u8]) -> &[u8] {
    let first = bytes.iter().position(|b| *b != 0).unwrap_or(bytes.len());
    &bytes[first..]
}

impl PublicKey {
    /// Decodes and checks a COSE_Key (see [`check_public_key`]).
    fn from_cose(bytes: &[u8]) -> Result<Self, PasskeyError> {
        let k = CoseKey::from_slice(bytes)
            .map_err(|_| PasskeyError("credential_public_key: not a COSE_Key".into()))?;
        let alg = match &k.alg {
            Some(coset::Algorithm::Assigned(a)) => *a,
            _ => return err("credential_public_key.alg: missing or not a COSE algorithm"),
        };
        let p = Params(&k);
        let want_kty = match alg {
            iana::Algorithm::ES256 => iana::KeyType::EC2,
            iana::Algorithm::EdDSA => iana::KeyType::OKP,
            iana::Algorithm::RS256 => iana::KeyType::RSA,
            other => {
                return err(format!(
                    "credential_public_key.alg: {other:?} is not one of ES256 (-7), EdDSA (-8), RS256 (-257)"
                ));
            }
        };
        if k.kty != coset::KeyType::Assigned(want_kty) {
            return err(format!(
                "credential_public_key.kty: alg {alg:?} needs kty {want_kty:?}, got {:?}",
                k.kty
            ));
        }
        match alg {
            iana::Algorithm::ES256 => Self::es256(&p),
            iana::Algorithm::EdDSA => Self::ed25519(&p),
            _ => Self::rs256(&p),
        }
    }

    /// ES256: crv P-256 (1), x and y of 32 bytes, no `d`, a point on the curve.
    fn es256(p: &Params<'_>) -> Result<Self, PasskeyError> {
        let crv = iana::EllipticCurve::P_256 as i128;
        if p.int(-1) != Some(crv) {
            return err(format!(
                "credential_public_key.crv: ES256 needs P-256 ({crv}), got {:?}",
                p.int(-1)
            ));
        }
        if p.get(-4).is_some() {
            return err(
                "credential_public_key.d: a private key was sent; an authenticator never does",
            );
        }
        let (x, y) = (p.bytes(-2, "x")?, p.bytes(-3, "y")?);
        if x.len() != 32 || y.len() != 32 {
            return err("credential_public_key: P-256 x and y must be 32 bytes each");
        }
        let mut point = vec![4u8];
        point.extend_from_slice(x);
        point.extend_from_slice(y);
        if p256::PublicKey::from_sec1_bytes(&point).is_err() {
            return err(
                "credential_public_key: (x, y) is not a point on P-256 (or is the identity); no authenticator makes such a key",
            );
        }
        Ok(Self::Es256(point))
    }

    /// EdDSA: crv Ed25519 (6), x of 32 bytes, no `d`, canonical and of prime order.
    fn ed25519(p: &Params<'_>) -> Result<Self, PasskeyError> {
        let crv = iana::EllipticCurve::Ed25519 as i128;
        if p.int(-1) != Some(crv) {
            return err(format!(
                "credential_public_key.crv: EdDSA needs Ed25519 ({crv}), got {:?}",
                p.int(-1)
            ));
        }
        if p.get(-4).is_some() {
            return err(
                "credential_public_key.d: a private key was sent; an authenticator never does",
            );
        }
        let raw: [u8; 32] = p.bytes(-2, "x")?.try_into().map_err(|_| {
            PasskeyError("credential_public_key.x: an Ed25519 key is 32 bytes".into())
        })?;
        let point = ed25519_dalek::VerifyingKey::from_bytes(&raw).map_err(|_| {
            PasskeyError(
                "credential_public_key.x: not an Ed25519 point (RFC 8032 section 5.1.3)".into(),
            )
        })?;
        if !crate::grant::ed25519_prime_order(&raw, &point) {
            return err(
                "credential_public_key.x: a small-order or non-canonical Ed25519 point, which verifies forged signatures; no authenticator makes such a key",
            );
        }
        Ok(Self::Ed25519(raw.to_vec()))
    }

    /// RS256: n of 2048–8192 bits and odd, e = 65537, no private exponent.
    fn rs256(p: &Params<'_>) -> Result<Self, PasskeyError> {
        if p.get(-3).is_some() {
            return err(
                "credential_public_key.d: a private key was sent; an authenticator never does",
            );
        }
        let n = strip_zeros(p.bytes(-1, "n")?);
        let e = strip_zeros(p.bytes(-2, "e")?);
        let bits = n.first().map_or(0, |top| {
            (n.len() - 1) * 8 + (8 - top.leading_zeros() as usize)
        });
        if !(RSA_MIN_BITS..=RSA_MAX_BITS).contains(&bits) {
            return err(format!(
                "credential_public_key.n: a {bits}-bit RSA modulus; {RSA_MIN_BITS} to {RSA_MAX_BITS} bits are accepted"
            ));
        }
        if n.last().is_some_and(|b| b & 1 == 0) {
            return err(
                "credential_public_key.n: an even RSA modulus is not a product of two primes",
            );
        }
        if e != [1, 0, 1] {
            return err(format!(
                "credential_public_key.e: must be 65537, got 0x{}",
                hex::encode(e)
            ));
        }
        Ok(Self::Rs256 {
            n: n.to_vec(),
            e: e.to_vec(),
        })
    }

    fn alg(&self) -> i64 {
        match self {
            Self::Es256(_) => -7,
            Self::Ed25519(_) => -8,
            Self::Rs256 { .. } => -257,
        }
    }

    fn verify(&self, msg: &[u8], sig: &[u8]) -> Result<(), PasskeyError> {
        use ring::signature as s;
        let ok = match self {
            Self::Es256(point) => s::UnparsedPublicKey::new(&s::ECDSA_P256_SHA256_ASN1, point)
                .verify(msg, sig)
                .is_ok(),
            Self::Ed25519(x) => s::UnparsedPublicKey::new(&s::ED25519, x)
                .verify(msg, sig)
                .is_ok(),
            Self::Rs256 { n, e } => s::RsaPublicKeyComponents { n, e }
                .verify(&s::RSA_PKCS1_2048_8192_SHA256, msg, sig)
                .is_ok(),
        };
        if ok {
            Ok(())
        } else {
            err("signature: does not verify with the registered passkey")
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ring::rand::SystemRandom;
    use ring::signature::{self as s, EcdsaKeyPair, KeyPair as _};

    /// A software authenticator (P-256), for tests: what Chromium's virtual one does.
    pub(crate) struct SoftKey {
        pair: EcdsaKeyPair,
        pub(crate) id: Vec<u8>,
        pub(crate) count: u32,
    }

    impl SoftKey {
        pub(crate) fn new() -> Self {
            let rng = SystemRandom::new();
            let pkcs8 =
                EcdsaKeyPair::generate_pkcs8(&s::ECDSA_P256_SHA256_ASN1_SIGNING, &rng).unwrap();
            let pair =
                EcdsaKeyPair::from_pkcs8(&s::ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref(), &rng)
                    .unwrap();
            Self {
                pair,
                id: vec![7; 16],
                count: 0,
            }
        }

        pub(crate) fn cose(&self) -> Vec<u8> {
            let p = self.pair.public_key().as_ref();
            coset::CoseKeyBuilder::new_ec2_pub_key(
                iana::EllipticCurve::P_256,
                p[1..33].to_vec(),
                p[33..65].to_vec(),
            )
            .algorithm(iana::Algorithm::ES256)
            .build()
            .to_vec()
            .unwrap()
        }

        fn auth_data(&self, rp: &RelyingParty, flags: u8) -> Vec<u8> {
            let mut ad = Sha256::digest(rp.id.as_bytes()).to_vec();
            ad.push(flags);
            ad.extend_from_slice(&self.count.to_be_bytes());
            ad
        }

        pub(crate) fn register(&self, rp: &RelyingParty, challenge: &[u8]) -> (Vec<u8>, Vec<u8>) {
            self.register_shaped(rp, challenge, FLAG_UP | FLAG_UV, &self.cose(), &[])
        }

        /// A registration with these flags (AT is added), this COSE key and these bytes after
        /// it: what a scripted authenticator can send.
        pub(crate) fn register_shaped(
            &self,
            rp: &RelyingParty,
            challenge: &[u8],
            flags: u8,
            cose: &[u8],
            after: &[u8],
        ) -> (Vec<u8>, Vec<u8>) {
            let cd = json!({"type": "webauthn.create", "challenge": b64url(challenge), "origin": rp.origin});
            let mut ad = self.auth_data(rp, flags | FLAG_AT);
            ad.extend_from_slice(&[0; 16]);
            ad.extend_from_slice(&(self.id.len() as u16).to_be_bytes());
            ad.extend_from_slice(&self.id);
            ad.extend_from_slice(cose);
            ad.extend_from_slice(after);
            let att = coset::cbor::Value::Map(vec![
                ("fmt".into(), "none".into()),
                ("attStmt".into(), coset::cbor::Value::Map(vec![])),
                ("authData".into(), coset::cbor::Value::Bytes(ad)),
            ]);
            let mut out = Vec::new();
            coset::cbor::ser::into_writer(&att, &mut out).unwrap();
            (serde_json::to_vec(&cd).unwrap(), out)
        }

        pub(crate) fn assert(&mut self, rp: &RelyingParty, challenge: &[u8]) -> Assertion {
            self.assert_flags(rp, challenge, FLAG_UP | FLAG_UV)
        }

        pub(crate) fn assert_flags(
            &mut self,
            rp: &RelyingParty,
            challenge: &[u8],
            flags: u8,
        ) -> Assertion {
            self.count += 1;
            let cd = serde_json::to_vec(&json!({"type": "webauthn.get", "challenge": b64url(challenge), "origin": rp.origin})).unwrap();
            let ad = self.auth_data(rp, flags);
            let mut msg = ad.clone();
            msg.extend_from_slice(&Sha256::digest(&cd));
            let sig = self.pair.sign(&SystemRandom::new(), &msg).unwrap();
            Assertion {
                credential_id: self.id.clone(),
                authenticator_data: ad,
                client_data_json: cd,
                signature: sig.as_ref().to_vec(),
            }
        }
    }

    fn rp() -> RelyingParty {
        RelyingParty {
            id: "localhost".into(),
            origin: "http://localhost:8081".into(),
        }
    }

    fn input(nonce: &str) -> ChallengeInput<'_> {
        ChallengeInput {
            proposal_id: "0193a1b2-0000-7000-8000-000000000001",
            tenant_id: "demo",
            intent_hash: "ab",
            doc_version: 3,
            nonce,
        }
    }

    #[test]
    fn challenge_is_domain_separated_jcs() {
        let c = approval_challenge(&input("00"));
        let jcs = r#"{"doc_version":3,"intent_hash":"ab","nonce":"00","proposal_id":"0193a1b2-0000-7000-8000-000000000001","tenant_id":"demo"}"#;
        let want: [u8; 32] =
            Sha256::digest([b"actiond/passkey-approval/v1\0".as_slice(), jcs.as_bytes()].concat())
                .into();
        assert_eq!(c, want);
        assert_ne!(c, approval_challenge(&input("01")));
    }

    #[test]
    fn register_then_assert_and_every_tamper_fails() {
        let rp = rp();
        let mut key = SoftKey::new();
        let (cd, att) = key.register(&rp, b"register-challenge");
        let reg = verify_registration(&rp, b"register-challenge", &cd, &att).unwrap();
        assert_eq!((reg.alg, reg.credential_id.clone()), (-7, key.id.clone()));
        assert!(verify_registration(&rp, b"other", &cd, &att).is_err());
        let ch = approval_challenge(&input("00"));
        let a = key.assert(&rp, &ch);
        assert_eq!(
            verify_assertion(&rp, &ch, &reg.public_key, &a).unwrap(),
            Asserted {
                sign_count: 1,
                backup_eligible: false,
                backed_up: false
            }
        );
        assert!(!reg.backup_eligible && reg.fmt == "none" && reg.aaguid == [0; 16]);
        let other = approval_challenge(&input("01"));
        let e = verify_assertion(&rp, &other, &reg.public_key, &a).unwrap_err();
        assert!(e.0.contains("different challenge"), "{e}");
        let mut t = a.clone();
        t.authenticator_data[36] ^= 1;
        assert!(
            verify_assertion(&rp, &ch, &reg.public_key, &t)
                .unwrap_err()
                .0
                .contains("signature")
        );
        let mut t = a.clone();
        t.signature[10] ^= 1;
        assert!(verify_assertion(&rp, &ch, &reg.public_key, &t).is_err());
        let mut t = a.clone();
        t.authenticator_data[32] &= !FLAG_UV;
        assert!(verify_assertion(&rp, &ch, &reg.public_key, &t).is_err());
        let evil = RelyingParty {
            id: "evil.example".into(),
            origin: rp.origin.clone(),
        };
        assert!(verify_assertion(&evil, &ch, &reg.public_key, &a).is_err());
        assert!(verify_assertion(&rp, &ch, b"\xa0", &a).is_err());
        assert!(verify_assertion(&rp, &ch, &[], &a).is_err());
        assert!(counter_ok(0, 0) && counter_ok(1, 2) && !counter_ok(2, 2) && !counter_ok(3, 0));
    }

    #[test]
    fn garbage_never_panics() {
        let rp = rp();
        for junk in [
            &b""[..],
            b"\xff",
            b"\xa1\x68authData\x41\x00",
            b"\x9f\x9f\x9f",
        ] {
            assert!(verify_registration(&rp, b"c", b"{}", junk).is_err());
        }
    }

    /// A COSE_Key map from (label, value) pairs, as a scripted authenticator would send it.
    fn cose_map(pairs: Vec<(i64, coset::cbor::Value)>) -> Vec<u8> {
        let m = coset::cbor::Value::Map(pairs.into_iter().map(|(l, v)| (l.into(), v)).collect());
        let mut out = Vec::new();
        coset::cbor::ser::into_writer(&m, &mut out).unwrap();
        out
    }

    fn b(v: &[u8]) -> coset::cbor::Value {
        coset::cbor::Value::Bytes(v.to_vec())
    }

    fn i(v: i64) -> coset::cbor::Value {
        v.into()
    }

    /// A valid P-256 point's x and y (from a generated key).
    fn p256_xy() -> (Vec<u8>, Vec<u8>) {
        let k = SoftKey::new();
        let p = k.pair.public_key().as_ref().to_vec();
        (p[1..33].to_vec(), p[33..65].to_vec())
    }

    /// The identity point of Ed25519 (y = 1): of order 1, it "verifies" R = identity, S = 0
    /// over any message.
    const ED25519_IDENTITY: [u8; 32] = {
        let mut y = [0u8; 32];
        y[0] = 1;
        y
    };

    /// A 2048-bit odd modulus (not a real key: registration does not need one).
    fn rsa_n(bits: usize) -> Vec<u8> {
        let mut n = vec![0xa5u8; bits / 8];
        n[0] = 0xc1;
        let last = n.len() - 1;
        n[last] |= 1;
        n
    }

    /// Registers a key of this shape; the refusal's message.
    fn refusal(flags: u8, cose: &[u8], after: &[u8]) -> String {
        let rp = rp();
        let (cd, att) = SoftKey::new().register_shaped(&rp, b"c", flags, cose, after);
        match verify_registration(&rp, b"c", &cd, &att) {
            Ok(r) => panic!("registered a bad shape: {r:?}"),
            Err(e) => e.0,
        }
    }

    const OK: u8 = FLAG_UP | FLAG_UV;

    #[test]
    fn keys_no_authenticator_makes_are_refused_at_registration() {
        let (x, y) = p256_xy();
        let mut off = y.clone();
        off[31] ^= 1;
        let ec2 = |kty: i64, crv: i64, y: &[u8]| {
            cose_map(vec![
                (1, i(kty)),
                (3, i(-7)),
                (-1, i(crv)),
                (-2, b(&x)),
                (-3, b(y)),
            ])
        };
        let okp = |kty: i64, crv: i64, x: &[u8]| {
            cose_map(vec![(1, i(kty)), (3, i(-8)), (-1, i(crv)), (-2, b(x))])
        };
        let rsa = |kty: i64, n: &[u8], e: &[u8]| {
            cose_map(vec![(1, i(kty)), (3, i(-257)), (-1, b(n)), (-2, b(e))])
        };
        let mut small = [0u8; 32];
        small[31] = 0; // y = 0: order 4
        let real_ed = ring::signature::Ed25519KeyPair::from_seed_unchecked(&[9; 32]).unwrap();
        let real_ed = real_ed.public_key().as_ref().to_vec();
        let cases: Vec<(&str, Vec<u8>, &str)> = vec![
            (
                "ES256 as OKP",
                ec2(1, 1, &y),
                "credential_public_key.kty: alg ES256 needs kty EC2",
            ),
            (
                "ES256 on P-384",
                ec2(2, 2, &y),
                "credential_public_key.crv: ES256 needs P-256 (1)",
            ),
            (
                "ES256 without crv",
                cose_map(vec![(1, i(2)), (3, i(-7)), (-2, b(&x)), (-3, b(&y))]),
                "credential_public_key.crv",
            ),
            (
                "ES256 off the curve",
                ec2(2, 1, &off),
                "is not a point on P-256",
            ),
            (
                "ES256 compressed y",
                cose_map(vec![
                    (1, i(2)),
                    (3, i(-7)),
                    (-1, i(1)),
                    (-2, b(&x)),
                    (-3, coset::cbor::Value::Bool(true)),
                ]),
                "credential_public_key.y: must be a byte string",
            ),
            (
                "ES256 with d",
                cose_map(vec![
                    (1, i(2)),
                    (3, i(-7)),
                    (-1, i(1)),
                    (-2, b(&x)),
                    (-3, b(&y)),
                    (-4, b(&[1; 32])),
                ]),
                "credential_public_key.d: a private key",
            ),
            (
                "EdDSA identity",
                okp(1, 6, &ED25519_IDENTITY),
                "small-order or non-canonical Ed25519 point",
            ),
            (
                "EdDSA y = 0",
                okp(1, 6, &small),
                "small-order or non-canonical Ed25519 point",
            ),
            (
                "EdDSA on X25519",
                okp(1, 4, &real_ed),
                "credential_public_key.crv: EdDSA needs Ed25519 (6)",
            ),
            (
                "EdDSA as EC2",
                okp(2, 6, &real_ed),
                "credential_public_key.kty: alg EdDSA needs kty OKP",
            ),
            (
                "EdDSA short x",
                okp(1, 6, &real_ed[..31]),
                "credential_public_key.x: an Ed25519 key is 32 bytes",
            ),
            (
                "RS256 1024 bits",
                rsa(3, &rsa_n(1024), &[1, 0, 1]),
                "credential_public_key.n: a 1024-bit RSA modulus",
            ),
            (
                "RS256 e = 3",
                rsa(3, &rsa_n(2048), &[3]),
                "credential_public_key.e: must be 65537, got 0x03",
            ),
            (
                "RS256 e = 1",
                rsa(3, &rsa_n(2048), &[0, 0, 1]),
                "credential_public_key.e: must be 65537",
            ),
            (
                "RS256 even n",
                rsa(
                    3,
                    &{
                        let mut n = rsa_n(2048);
                        n[255] = 0x10;
                        n
                    },
                    &[1, 0, 1],
                ),
                "even RSA modulus",
            ),
            (
                "RS256 as EC2",
                rsa(2, &rsa_n(2048), &[1, 0, 1]),
                "credential_public_key.kty: alg RS256 needs kty RSA",
            ),
            (
                "ES384",
                cose_map(vec![(1, i(2)), (3, i(-35)), (-1, i(2))]),
                "credential_public_key.alg",
            ),
        ];
        for (name, cose, want) in cases {
            let got = refusal(OK, &cose, &[]);
            assert!(got.contains(want), "{name}: {got}");
        }
        // The same shapes, well formed, register.
        let rp = rp();
        for cose in [
            ec2(2, 1, &y),
            okp(1, 6, &real_ed),
            rsa(3, &rsa_n(2048), &[0, 1, 0, 1]),
        ] {
            let (cd, att) = SoftKey::new().register_shaped(&rp, b"c", OK, &cose, &[]);
            verify_registration(&rp, b"c", &cd, &att).unwrap();
        }
    }

    #[test]
    fn a_degenerate_ed25519_key_signs_nothing() {
        let rp = rp();
        let key = cose_map(vec![
            (1, i(1)),
            (3, i(-8)),
            (-1, i(6)),
            (-2, b(&ED25519_IDENTITY)),
        ]);
        let ch = approval_challenge(&input("00"));
        let cd = serde_json::to_vec(
            &json!({"type": "webauthn.get", "challenge": b64url(&ch), "origin": rp.origin}),
        )
        .unwrap();
        let mut ad = Sha256::digest(rp.id.as_bytes()).to_vec();
        ad.push(OK);
        ad.extend_from_slice(&[0, 0, 0, 9]);
        // R = the identity, S = 0: [S]B = R + [k]A holds for A = identity, whatever k is.
        let mut forged = ED25519_IDENTITY.to_vec();
        forged.extend_from_slice(&[0; 32]);
        let mut msg = ad.clone();
        msg.extend_from_slice(&Sha256::digest(&cd));
        let ring_says =
            s::UnparsedPublicKey::new(&s::ED25519, ED25519_IDENTITY).verify(&msg, &forged);
        let a = Assertion {
            credential_id: vec![1],
            authenticator_data: ad,
            client_data_json: cd,
            signature: forged,
        };
        assert!(
            ring_says.is_ok(),
            "ring alone accepts the forged signature under the identity key"
        );
        let e = verify_assertion(&rp, &ch, &key, &a).unwrap_err();
        assert!(e.0.contains("small-order"), "{e}");
    }

    #[test]
    fn flags_per_webauthn_level_3() {
        let good = SoftKey::new().cose();
        for (flags, want) in [
            (FLAG_UV, "the user was not present (UP flag)"),
            (FLAG_UP, "the user was not verified (UV flag"),
            (OK | FLAG_BS, "backed up (BS) without backup eligible (BE)"),
        ] {
            let got = refusal(flags, &good, &[]);
            assert!(got.contains(want), "{flags:#x}: {got}");
        }
        let got = refusal(OK, &good, &[0xa0]);
        assert!(
            got.contains("1 bytes after the attested credential data"),
            "{got}"
        );
        let got = refusal(OK | FLAG_ED, &good, &[]);
        assert!(got.contains("ED flag set but no CBOR extensions"), "{got}");
        // BE and BS together register (a synced passkey), and BE is remembered.
        let rp = rp();
        let mut key = SoftKey::new();
        let (cd, att) = key.register_shaped(&rp, b"c", OK | FLAG_BE | FLAG_BS, &good_of(&key), &[]);
        let reg = verify_registration(&rp, b"c", &cd, &att).unwrap();
        assert!(reg.backup_eligible && reg.backed_up);
        let ch = approval_challenge(&input("00"));
        let same = verify_assertion(
            &rp,
            &ch,
            &reg.public_key,
            &key.assert_flags(&rp, &ch, OK | FLAG_BE),
        )
        .unwrap();
        backup_eligibility_unchanged(reg.backup_eligible, &same).unwrap();
        let lost =
            verify_assertion(&rp, &ch, &reg.public_key, &key.assert_flags(&rp, &ch, OK)).unwrap();
        let e = backup_eligibility_unchanged(reg.backup_eligible, &lost).unwrap_err();
        assert!(
            e.0.contains("backup eligible (BE) is 0 but was 1 at registration"),
            "{e}"
        );
        let e = verify_assertion(
            &rp,
            &ch,
            &reg.public_key,
            &key.assert_flags(&rp, &ch, OK | FLAG_BS),
        )
        .unwrap_err();
        assert!(e.0.contains("BS) without backup eligible"), "{e}");
    }

    fn good_of(k: &SoftKey) -> Vec<u8> {
        k.cose()
    }
}
