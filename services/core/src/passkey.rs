//! Passkey-signed approvals: the WebAuthn (Web Authentication Level 2, W3C) checks a relying
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
//! (RFC 9052/9053) from the attestation object's authenticator data. The attestation statement
//! is not verified (actiond asks for `attestation: "none"`): who registers is vouched for by the
//! signed-in OIDC session, not by the authenticator's maker.
//!
//! Accepted key types: ES256 (COSE -7, P-256), EdDSA (-8, Ed25519) and RS256 (-257, 2048–8192
//! bits); signatures are verified with `ring`. Every malformed input is a [`PasskeyError`],
//! never a panic.

use crate::canonical::canonicalize;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use coset::{CborSerializable as _, CoseKey, Label, iana};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// Domain separation prefix of approval challenges (followed by a NUL byte).
pub const CHALLENGE_DOMAIN: &str = "actiond/passkey-approval/v1";

/// Authenticator data flag: user present.
const FLAG_UP: u8 = 0x01;
/// Authenticator data flag: user verified.
const FLAG_UV: u8 = 0x04;
/// Authenticator data flag: attested credential data included.
const FLAG_AT: u8 = 0x40;

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

/// Checks the fixed part of authenticator data (RP ID hash, user present and verified) and
/// returns its flags and signature counter.
fn check_auth_data(ad: &[u8], rp: &RelyingParty) -> Result<(u8, u32), PasskeyError> {
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
        return err("authenticator_data: the user was not present (UP flag)");
    }
    if flags & FLAG_UV == 0 {
        return err("authenticator_data: the user was not verified (UV flag: PIN or biometric)");
    }
    let count = u32::from_be_bytes([ad[33], ad[34], ad[35], ad[36]]);
    Ok((flags, count))
}

/// Verifies a registration (`navigator.credentials.create` with the server's `challenge`) and
/// returns the credential to store.
pub fn verify_registration(
    rp: &RelyingParty,
    challenge: &[u8],
    client_data_json: &[u8],
    attestation_object: &[u8],
) -> Result<Registered, PasskeyError> {
    check_client_data(client_data_json, "webauthn.create", challenge, rp)?;
    let att: coset::cbor::Value = coset::cbor::de::from_reader(attestation_object)
        .map_err(|_| PasskeyError("attestation_object: not CBOR".into()))?;
    let auth_data = att
        .as_map()
        .and_then(|m| {
            m.iter()
                .find(|(k, _)| k.as_text() == Some("authData"))
                .and_then(|(_, v)| v.as_bytes())
        })
        .ok_or_else(|| PasskeyError("attestation_object: no authData".into()))?;
    let (flags, sign_count) = check_auth_data(auth_data, rp)?;
    if flags & FLAG_AT == 0 || auth_data.len() < 55 {
        return err("attestation_object: authData holds no attested credential");
    }
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
    let key_len = tail.len() - rest.len();
    let public_key = auth_data
        .get(key_start..key_start.saturating_add(key_len))
        .ok_or_else(|| PasskeyError("attestation_object: truncated public key".into()))?
        .to_vec();
    let alg = PublicKey::from_cose(&public_key)?.alg();
    Ok(Registered {
        credential_id,
        public_key,
        alg,
        sign_count,
    })
}

/// Verifies an approval assertion against the stored COSE public key and the expected
/// challenge; returns the authenticator's signature counter. Used at decision time and again
/// by the offline audit.
pub fn verify_assertion(
    rp: &RelyingParty,
    challenge: &[u8],
    public_key: &[u8],
    a: &Assertion,
) -> Result<u32, PasskeyError> {
    check_client_data(&a.client_data_json, "webauthn.get", challenge, rp)?;
    let (_, count) = check_auth_data(&a.authenticator_data, rp)?;
    let key = PublicKey::from_cose(public_key)?;
    let mut msg = a.authenticator_data.clone();
    msg.extend_from_slice(&Sha256::digest(&a.client_data_json));
    key.verify(&msg, &a.signature)?;
    Ok(count)
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

impl PublicKey {
    fn from_cose(bytes: &[u8]) -> Result<Self, PasskeyError> {
        let k = CoseKey::from_slice(bytes)
            .map_err(|_| PasskeyError("public key: not a COSE_Key".into()))?;
        let param = |label: i64| {
            k.params
                .iter()
                .find(|(l, _)| *l == Label::Int(label))
                .and_then(|(_, v)| v.as_bytes().cloned())
        };
        let alg = match &k.alg {
            Some(coset::Algorithm::Assigned(a)) => *a,
            _ => return err("public key: no algorithm"),
        };
        let kty = &k.kty;
        match alg {
            iana::Algorithm::ES256 if *kty == coset::KeyType::Assigned(iana::KeyType::EC2) => {
                let (Some(x), Some(y)) = (param(-2), param(-3)) else {
                    return err("public key: EC2 key without x and y");
                };
                if x.len() != 32 || y.len() != 32 {
                    return err("public key: P-256 coordinates must be 32 bytes");
                }
                let mut point = vec![4u8];
                point.extend_from_slice(&x);
                point.extend_from_slice(&y);
                Ok(Self::Es256(point))
            }
            iana::Algorithm::EdDSA if *kty == coset::KeyType::Assigned(iana::KeyType::OKP) => {
                match param(-2) {
                    Some(x) if x.len() == 32 => Ok(Self::Ed25519(x)),
                    _ => err("public key: Ed25519 key must have a 32-byte x"),
                }
            }
            iana::Algorithm::RS256 if *kty == coset::KeyType::Assigned(iana::KeyType::RSA) => {
                match (param(-1), param(-2)) {
                    (Some(n), Some(e)) => Ok(Self::Rs256 { n, e }),
                    _ => err("public key: RSA key without n and e"),
                }
            }
            other => err(format!(
                "public key: algorithm {other:?} is not one of ES256, EdDSA, RS256"
            )),
        }
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
            let cd = json!({"type": "webauthn.create", "challenge": b64url(challenge), "origin": rp.origin});
            let mut ad = self.auth_data(rp, FLAG_UP | FLAG_UV | FLAG_AT);
            ad.extend_from_slice(&[0; 16]);
            ad.extend_from_slice(&(self.id.len() as u16).to_be_bytes());
            ad.extend_from_slice(&self.id);
            ad.extend_from_slice(&self.cose());
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
            self.count += 1;
            let cd = serde_json::to_vec(&json!({"type": "webauthn.get", "challenge": b64url(challenge), "origin": rp.origin})).unwrap();
            let ad = self.auth_data(rp, FLAG_UP | FLAG_UV);
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
        assert_eq!(verify_assertion(&rp, &ch, &reg.public_key, &a).unwrap(), 1);
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
}
