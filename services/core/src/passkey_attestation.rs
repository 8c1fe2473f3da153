//! Passkey attestation: for tenants where "passkey" must mean a security key or a platform
//! authenticator of a known model (`approvers.passkey_attestation: required`).
//!
//! A registration's attestation statement (WebAuthn Level 3 §8) is where an authenticator's
//! maker vouches for it: a certificate chain ending at the maker's root, and a signature by the
//! certified key over the authenticator data and the client data hash. Without it, an AAGUID
//! is only what the client says. [`check_attestation`] accepts a registration only when all of
//! this holds, and otherwise names the field and the rule:
//!
//! 1. the format is `packed` (§8.2) with **full** attestation (`x5c`): `none` says nothing
//!    about the authenticator, and a self attestation (no `x5c`) is signed by the credential's
//!    own key, which any software can make; `ecdaaKeyId` is refused (withdrawn from the
//!    specification). Other formats (`tpm`, `android-key`, `android-safetynet`, `fido-u2f`,
//!    `apple`) are refused by name: they are not verified by this version;
//! 2. the authenticator's AAGUID is in the tenant's allow-list (`approvers.passkey_aaguids`),
//!    and, when the attestation certificate carries the FIDO AAGUID extension
//!    (`1.3.6.1.4.1.45724.1.1.4`), it names the same AAGUID;
//! 3. the attestation certificate (`x5c[0]`, with `x5c[1..]` as intermediates) chains to one of
//!    the operator's attestation roots (`--passkey-attestation-roots`, PEM), valid now, by
//!    `rustls-webpki` (the X.509 path validation of rustls): signatures, validity periods,
//!    basic constraints and name constraints. Extended key usages are not constrained
//!    (WebAuthn states none);
//! 4. it meets §8.2.1: X.509 version 3, a subject with C, O, CN and OU = `Authenticator
//!    Attestation`, not a CA (read with `x509-parser`);
//! 5. `sig` verifies over `authenticatorData ‖ SHA-256(clientDataJSON)` with the certificate's
//!    key and the statement's `alg` (ES256, ES384 or RS256; `rustls-webpki` with `ring`), and
//!    `alg` is one the certificate's key can make.
//!
//! The CBOR is read with `coset`'s `ciborium`, as the rest of [`crate::passkey`]. What is
//! trusted is the operator's roots and the tenant's AAGUID list; which roots belong to which
//! maker is the operator's choice (the FIDO Metadata Service publishes them per AAGUID).

use crate::passkey::PasskeyError;
use coset::cbor::Value as Cbor;
use rustls_pki_types::{CertificateDer, SignatureVerificationAlgorithm, UnixTime};
use sha2::{Digest, Sha256};
use webpki::{EndEntityCert, KeyPurposeIdIter};

/// The OU an attestation certificate's subject must carry (WebAuthn Level 3 §8.2.1).
pub const ATTESTATION_OU: &str = "Authenticator Attestation";

/// The FIDO AAGUID certificate extension, `id-fido-gen-ce-aaguid`.
const AAGUID_OID: [u64; 10] = [1, 3, 6, 1, 4, 1, 45724, 1, 1, 4];

/// What a tenant requires of a passkey's attestation, with the operator's roots.
#[derive(Debug, Clone, Default)]
pub struct AttestationPolicy {
    /// AAGUIDs (authenticator models) accepted. Empty: none is.
    pub aaguids: Vec<[u8; 16]>,
    /// DER certificates of the attestation roots the operator trusts.
    pub roots: Vec<Vec<u8>>,
}

/// Reads the operator's attestation roots from PEM text (one or more `CERTIFICATE` blocks).
/// Errors name what is wrong; a file with no certificate is an error.
pub fn roots_from_pem(pem_text: &str) -> Result<Vec<Vec<u8>>, String> {
    use rustls_pki_types::pem::PemObject as _;
    let mut out = Vec::new();
    for c in CertificateDer::pem_slice_iter(pem_text.as_bytes()) {
        let c = c.map_err(|e| format!("not PEM certificates: {e}"))?;
        webpki::anchor_from_trusted_cert(&c)
            .map_err(|e| format!("certificate {} is not a usable root: {e}", out.len() + 1))?;
        out.push(c.as_ref().to_vec());
    }
    if out.is_empty() {
        return Err("holds no CERTIFICATE block".into());
    }
    Ok(out)
}

/// Formats an AAGUID as a UUID string (lowercase, hyphenated), as tenant documents write it.
pub fn aaguid_text(a: &[u8; 16]) -> String {
    uuid::Uuid::from_bytes(*a).hyphenated().to_string()
}

fn err<T>(m: impl Into<String>) -> Result<T, PasskeyError> {
    Err(PasskeyError(m.into()))
}

/// Accepts any extended key usage: WebAuthn constrains none for attestation certificates.
struct AnyUsage;

impl webpki::ExtendedKeyUsageValidator for AnyUsage {
    fn validate(&self, _iter: KeyPurposeIdIter<'_, '_>) -> Result<(), webpki::Error> {
        Ok(())
    }
}

/// The signature algorithms a chain may use.
static CHAIN_ALGS: &[&dyn SignatureVerificationAlgorithm] = &[
    webpki::ring::ECDSA_P256_SHA256,
    webpki::ring::ECDSA_P256_SHA384,
    webpki::ring::ECDSA_P384_SHA256,
    webpki::ring::ECDSA_P384_SHA384,
    webpki::ring::ED25519,
    webpki::ring::RSA_PKCS1_2048_8192_SHA256,
    webpki::ring::RSA_PKCS1_2048_8192_SHA384,
    webpki::ring::RSA_PKCS1_2048_8192_SHA512,
];

/// Checks a registration's attestation statement against `policy` (see the module
/// documentation); `aaguid` is the one in the authenticator data ([`crate::passkey::Registered`]),
/// `now` seconds since the Unix epoch. The attestation object and client data are the ones
/// [`crate::passkey::verify_registration`] already accepted.
pub fn check_attestation(
    policy: &AttestationPolicy,
    client_data_json: &[u8],
    attestation_object: &[u8],
    aaguid: &[u8; 16],
    now: u64,
) -> Result<(), PasskeyError> {
    let (fmt, auth_data, stmt) = parse_object(attestation_object)?;
    match fmt.as_str() {
        "packed" => {}
        "none" => {
            return err(format!(
                "attestation_object.fmt: none: the authenticator did not say what it is; {RULE}; register a security key or platform authenticator and let the browser send its attestation"
            ));
        }
        other => {
            return err(format!(
                "attestation_object.fmt: {other:?} attestation is not verified by this version (packed only); {RULE}"
            ));
        }
    }
    if !policy.aaguids.contains(aaguid) {
        return err(format!(
            "authenticator_data.aaguid: {} is not an authenticator model this tenant accepts (approvers.passkey_aaguids)",
            aaguid_text(aaguid)
        ));
    }
    let packed = packed_statement(stmt)?;
    check_certificate_fields(&packed.certs[0], aaguid)?;
    let leaf_der = CertificateDer::from(packed.certs[0].as_slice());
    let leaf = EndEntityCert::try_from(&leaf_der)
        .map_err(|e| PasskeyError(format!("attStmt.x5c[0]: not a usable certificate ({e})")))?;
    verify_chain(policy, &leaf, &packed.certs[1..], now)?;
    let mut signed = auth_data;
    signed.extend_from_slice(&Sha256::digest(client_data_json));
    leaf.verify_signature(packed.verify_alg, &signed, &packed.sig)
        .map_err(|e| {
            PasskeyError(format!(
                "attStmt.sig: does not verify over the authenticator data and client data hash with the attestation certificate's key and alg {} ({e})",
                packed.alg
            ))
        })?;
    Ok(())
}

/// The policy every refusal names.
const RULE: &str =
    "this tenant requires attested passkeys (approvers.passkey_attestation: required)";

/// The attestation object's `fmt`, `authData` and `attStmt` (WebAuthn Level 3 §6.5.4).
fn parse_object(attestation_object: &[u8]) -> Result<(String, Vec<u8>, CborMap), PasskeyError> {
    let att: Cbor = coset::cbor::de::from_reader(attestation_object)
        .map_err(|_| PasskeyError("attestation_object: not CBOR".into()))?;
    let map = att
        .as_map()
        .ok_or_else(|| PasskeyError("attestation_object: not a CBOR map".into()))?;
    let fmt = field(map, "fmt")
        .and_then(|v| v.as_text().map(str::to_owned))
        .unwrap_or_default();
    let auth_data = field(map, "authData")
        .and_then(|v| v.as_bytes().cloned())
        .ok_or_else(|| PasskeyError("attestation_object: no authData".into()))?;
    let stmt = field(map, "attStmt")
        .and_then(|v| v.as_map().cloned())
        .ok_or_else(|| PasskeyError("attestation_object.attStmt: missing or not a map".into()))?;
    Ok((fmt, auth_data, stmt))
}

/// A CBOR map's entries, in the order sent.
type CborMap = Vec<(Cbor, Cbor)>;

/// The value under text key `name` in a CBOR map.
fn field(m: &[(Cbor, Cbor)], name: &str) -> Option<Cbor> {
    m.iter()
        .find(|(k, _)| k.as_text() == Some(name))
        .map(|(_, v)| v.clone())
}

/// A `packed` attestation statement with a certificate chain (WebAuthn Level 3 §8.2).
struct Packed {
    alg: i64,
    verify_alg: &'static dyn SignatureVerificationAlgorithm,
    sig: Vec<u8>,
    /// DER certificates, leaf first; 1 to 8 of them.
    certs: Vec<Vec<u8>>,
}

/// Reads `alg`, `sig` and `x5c` of a packed statement, refusing ECDAA, self attestation (no
/// `x5c`) and algorithms other than ES256, ES384 and RS256.
fn packed_statement(stmt: CborMap) -> Result<Packed, PasskeyError> {
    if field(&stmt, "ecdaaKeyId").is_some() {
        return err(
            "attStmt.ecdaaKeyId: ECDAA attestation was withdrawn from WebAuthn and is refused",
        );
    }
    let alg = field(&stmt, "alg")
        .and_then(|v| v.as_integer())
        .and_then(|i| i64::try_from(i).ok())
        .ok_or_else(|| PasskeyError("attStmt.alg: missing or not an integer".into()))?;
    let sig = field(&stmt, "sig")
        .and_then(|v| v.as_bytes().cloned())
        .ok_or_else(|| PasskeyError("attStmt.sig: missing or not bytes".into()))?;
    let Some(x5c) = field(&stmt, "x5c") else {
        return err(format!(
            "attStmt.x5c: missing: a self attestation is signed by the credential's own key, which any software can make, so it proves nothing about the authenticator; {RULE}, which needs a certificate chain from the authenticator's maker"
        ));
    };
    let certs: Vec<Vec<u8>> = x5c
        .as_array()
        .filter(|a| !a.is_empty() && a.len() <= 8)
        .and_then(|a| a.iter().map(|c| c.as_bytes().cloned()).collect())
        .ok_or_else(|| {
            PasskeyError("attStmt.x5c: must be 1 to 8 DER certificates (byte strings)".into())
        })?;
    let verify_alg: &'static dyn SignatureVerificationAlgorithm = match alg {
        -7 => webpki::ring::ECDSA_P256_SHA256,
        -35 => webpki::ring::ECDSA_P384_SHA384,
        -257 => webpki::ring::RSA_PKCS1_2048_8192_SHA256,
        other => {
            return err(format!(
                "attStmt.alg: {other} is not accepted for attestation (ES256 -7, ES384 -35, RS256 -257)"
            ));
        }
    };
    Ok(Packed {
        alg,
        verify_alg,
        sig,
        certs,
    })
}

/// The leaf chains through `intermediates` to one of the policy's roots at `now` (seconds
/// since the Unix epoch).
fn verify_chain(
    policy: &AttestationPolicy,
    leaf: &EndEntityCert<'_>,
    intermediates: &[Vec<u8>],
    now: u64,
) -> Result<(), PasskeyError> {
    if policy.roots.is_empty() {
        return err(format!(
            "attStmt.x5c: no attestation roots are configured (the web app's --passkey-attestation-roots), so no chain can be trusted; {RULE}"
        ));
    }
    let root_ders: Vec<CertificateDer<'_>> = policy
        .roots
        .iter()
        .map(|r| CertificateDer::from(r.as_slice()))
        .collect();
    let anchors: Vec<_> = root_ders
        .iter()
        .filter_map(|r| webpki::anchor_from_trusted_cert(r).ok())
        .collect();
    let intermediates: Vec<CertificateDer<'_>> = intermediates
        .iter()
        .map(|c| CertificateDer::from(c.as_slice()))
        .collect();
    leaf.verify_for_usage(
        CHAIN_ALGS,
        &anchors,
        &intermediates,
        UnixTime::since_unix_epoch(std::time::Duration::from_secs(now)),
        AnyUsage,
        None,
        None,
    )
    .map_err(|e| {
        PasskeyError(format!(
            "attStmt.x5c: the attestation certificate does not chain to a trusted attestation root ({e}); {RULE}"
        ))
    })?;
    Ok(())
}

/// WebAuthn Level 3 §8.2.1: version 3, subject C, O, OU = [`ATTESTATION_OU`], CN; not a CA;
/// the AAGUID extension, when present, names `aaguid`.
fn check_certificate_fields(der: &[u8], aaguid: &[u8; 16]) -> Result<(), PasskeyError> {
    use x509_parser::prelude::*;
    let (_, cert) = X509Certificate::from_der(der)
        .map_err(|_| PasskeyError("attStmt.x5c[0]: not a DER X.509 certificate".into()))?;
    if cert.version() != X509Version::V3 {
        return err("attStmt.x5c[0]: must be an X.509 version 3 certificate (WebAuthn 8.2.1)");
    }
    let subject = cert.subject();
    let has = |mut it: Box<dyn Iterator<Item = &AttributeTypeAndValue<'_>> + '_>| {
        it.any(|a| a.as_str().is_ok_and(|s| !s.is_empty()))
    };
    let ou_ok = subject
        .iter_organizational_unit()
        .any(|a| a.as_str() == Ok(ATTESTATION_OU));
    if !(has(Box::new(subject.iter_country()))
        && has(Box::new(subject.iter_organization()))
        && has(Box::new(subject.iter_common_name()))
        && ou_ok)
    {
        return err(format!(
            "attStmt.x5c[0].subject: must name C, O, CN and OU = {ATTESTATION_OU:?} (WebAuthn 8.2.1)"
        ));
    }
    if let Ok(Some(bc)) = cert.basic_constraints()
        && bc.value.ca
    {
        return err(
            "attStmt.x5c[0]: a CA certificate cannot be an attestation certificate (basic constraints CA)",
        );
    }
    let oid = x509_parser::oid_registry::Oid::from(&AAGUID_OID)
        .map_err(|_| PasskeyError("internal: the AAGUID extension's OID".into()))?;
    match cert.get_extension_unique(&oid) {
        Ok(None) => Ok(()),
        Ok(Some(ext)) => {
            // extnValue holds an OCTET STRING of 16 bytes.
            let v = ext.value;
            if v.len() == 18 && v[0] == 0x04 && v[1] == 16 && v[2..] == aaguid[..] {
                if ext.critical {
                    return err(
                        "attStmt.x5c[0]: the AAGUID extension must not be critical (WebAuthn 8.2.1)",
                    );
                }
                Ok(())
            } else {
                err(format!(
                    "attStmt.x5c[0]: its AAGUID extension does not name the authenticator data's AAGUID {}",
                    aaguid_text(aaguid)
                ))
            }
        }
        Err(_) => err("attStmt.x5c[0]: the AAGUID extension appears more than once"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{
        BasicConstraints, CertificateParams, CustomExtension, DistinguishedName, DnType, IsCa,
        Issuer, KeyPair,
    };
    use ring::rand::SystemRandom;
    use ring::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair};

    const MODEL: [u8; 16] = [0xcb; 16];
    const NOW: u64 = 1_790_000_000;

    /// An attestation CA made now: its DER and the issuer that signs leaves.
    fn ca(name: &str) -> (Vec<u8>, Issuer<'static, KeyPair>) {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, name);
        p.not_before = rcgen::date_time_ymd(2020, 1, 1);
        p.not_after = rcgen::date_time_ymd(2090, 1, 1);
        let der = p.self_signed(&key).unwrap().der().to_vec();
        (der, Issuer::new(p, key))
    }

    /// A leaf attestation certificate under `issuer` (subject per §8.2.1 unless `ou` differs),
    /// with the AAGUID extension naming `ext_aaguid` when given; and the leaf's signing key.
    fn leaf(
        issuer: &Issuer<'_, KeyPair>,
        ou: &str,
        ext_aaguid: Option<[u8; 16]>,
    ) -> (Vec<u8>, EcdsaKeyPair) {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CountryName, "SE");
        dn.push(DnType::OrganizationName, "Test Authenticators AB");
        dn.push(DnType::OrganizationalUnitName, ou);
        dn.push(DnType::CommonName, "Test Key Series 1");
        p.distinguished_name = dn;
        p.not_before = rcgen::date_time_ymd(2020, 1, 1);
        p.not_after = rcgen::date_time_ymd(2090, 1, 1);
        if let Some(a) = ext_aaguid {
            let mut v = vec![0x04, 16];
            v.extend_from_slice(&a);
            p.custom_extensions
                .push(CustomExtension::from_oid_content(&AAGUID_OID, v));
        }
        let der = p.signed_by(&key, issuer).unwrap().der().to_vec();
        let pair = EcdsaKeyPair::from_pkcs8(
            &ECDSA_P256_SHA256_ASN1_SIGNING,
            &key.serialize_der(),
            &SystemRandom::new(),
        )
        .unwrap();
        (der, pair)
    }

    const AUTH_DATA: &[u8] = b"authenticator data as the authenticator wrote it";
    const CLIENT_DATA: &[u8] = br#"{"type":"webauthn.create"}"#;

    /// An attestation object: `fmt`, and a packed statement signed by `key` (with `x5c` when
    /// given).
    fn object(fmt: &str, key: Option<&EcdsaKeyPair>, x5c: Option<Vec<Vec<u8>>>) -> Vec<u8> {
        let mut stmt = Vec::new();
        if let Some(k) = key {
            let mut signed = AUTH_DATA.to_vec();
            signed.extend_from_slice(&Sha256::digest(CLIENT_DATA));
            let sig = k.sign(&SystemRandom::new(), &signed).unwrap();
            stmt.push((Cbor::Text("alg".into()), Cbor::Integer((-7).into())));
            stmt.push((Cbor::Text("sig".into()), Cbor::Bytes(sig.as_ref().to_vec())));
        }
        if let Some(chain) = x5c {
            stmt.push((
                Cbor::Text("x5c".into()),
                Cbor::Array(chain.into_iter().map(Cbor::Bytes).collect()),
            ));
        }
        let v = Cbor::Map(vec![
            (Cbor::Text("fmt".into()), Cbor::Text(fmt.into())),
            (Cbor::Text("attStmt".into()), Cbor::Map(stmt)),
            (
                Cbor::Text("authData".into()),
                Cbor::Bytes(AUTH_DATA.to_vec()),
            ),
        ]);
        let mut out = Vec::new();
        coset::cbor::ser::into_writer(&v, &mut out).unwrap();
        out
    }

    fn policy(root: &[u8]) -> AttestationPolicy {
        AttestationPolicy {
            aaguids: vec![MODEL],
            roots: vec![root.to_vec()],
        }
    }

    fn check(p: &AttestationPolicy, obj: &[u8]) -> Result<(), PasskeyError> {
        check_attestation(p, CLIENT_DATA, obj, &MODEL, NOW)
    }

    #[test]
    fn a_packed_full_attestation_of_an_allowed_model_passes() {
        let (root, issuer) = ca("Test Attestation Root");
        let (cert, key) = leaf(&issuer, ATTESTATION_OU, Some(MODEL));
        assert_eq!(
            check(
                &policy(&root),
                &object("packed", Some(&key), Some(vec![cert]))
            ),
            Ok(())
        );
        // Without the AAGUID extension too (it is optional).
        let (cert, key) = leaf(&issuer, ATTESTATION_OU, None);
        assert_eq!(
            check(
                &policy(&root),
                &object("packed", Some(&key), Some(vec![cert]))
            ),
            Ok(())
        );
        // PEM roots read back to the same DER.
        let pem = format!(
            "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
            base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &root)
        );
        assert_eq!(roots_from_pem(&pem).unwrap(), vec![root]);
        assert!(roots_from_pem("nothing").is_err());
    }

    /// The chain is judged at the time given (the registration's database clock): before the
    /// certificates' notBefore and after their notAfter it is refused, naming the rule.
    #[test]
    fn a_certificate_outside_its_validity_at_the_given_time_is_refused() {
        let (root, issuer) = ca("Test Attestation Root");
        let (cert, key) = leaf(&issuer, ATTESTATION_OU, Some(MODEL));
        let obj = object("packed", Some(&key), Some(vec![cert]));
        // 2019-01-01 (before 2020-01-01) and 2091-01-01 (after 2090-01-01).
        for now in [1_546_300_800, 3_818_448_000] {
            let e = check_attestation(&policy(&root), CLIENT_DATA, &obj, &MODEL, now)
                .unwrap_err()
                .0;
            assert!(
                e.starts_with("attStmt.x5c: the attestation certificate does not chain to a trusted attestation root"),
                "{now}: {e}"
            );
        }
    }

    #[test]
    fn every_weaker_attestation_is_refused_naming_the_rule() {
        let (root, issuer) = ca("Test Attestation Root");
        let (other_root, other) = ca("Somebody Else's Root");
        let (cert, key) = leaf(&issuer, ATTESTATION_OU, Some(MODEL));
        let p = policy(&root);
        let refused = |obj: Vec<u8>, p: &AttestationPolicy| check(p, &obj).unwrap_err().0;
        // none.
        let e = refused(object("none", None, None), &p);
        assert!(
            e.starts_with("attestation_object.fmt: none") && e.contains("required"),
            "{e}"
        );
        // Self attestation: packed, signed, no x5c.
        let e = refused(object("packed", Some(&key), None), &p);
        assert!(
            e.starts_with("attStmt.x5c: missing: a self attestation"),
            "{e}"
        );
        // A format this version does not verify.
        let e = refused(object("tpm", Some(&key), Some(vec![cert.clone()])), &p);
        assert!(e.contains("\"tpm\" attestation is not verified"), "{e}");
        // A model outside the allow-list.
        let only_other = AttestationPolicy {
            aaguids: vec![[0x11; 16]],
            roots: vec![root.clone()],
        };
        let e = refused(
            object("packed", Some(&key), Some(vec![cert.clone()])),
            &only_other,
        );
        assert!(
            e.starts_with("authenticator_data.aaguid: cbcbcbcb-") && e.contains("passkey_aaguids"),
            "{e}"
        );
        // A bad signature: signed by another key than the certificate's.
        let (_, stranger) = leaf(&issuer, ATTESTATION_OU, Some(MODEL));
        let e = refused(
            object("packed", Some(&stranger), Some(vec![cert.clone()])),
            &p,
        );
        assert!(e.starts_with("attStmt.sig: does not verify"), "{e}");
        // A certificate that does not chain to the configured root.
        let (foreign, foreign_key) = leaf(&other, ATTESTATION_OU, Some(MODEL));
        let e = refused(
            object("packed", Some(&foreign_key), Some(vec![foreign])),
            &p,
        );
        assert!(
            e.contains("does not chain to a trusted attestation root"),
            "{e}"
        );
        // ...which passes with that root configured: the chain decides, not the shape.
        let (foreign, foreign_key) = leaf(&other, ATTESTATION_OU, Some(MODEL));
        assert_eq!(
            check(
                &policy(&other_root),
                &object("packed", Some(&foreign_key), Some(vec![foreign]))
            ),
            Ok(())
        );
        // The certificate's AAGUID extension names another model.
        let (wrong, wrong_key) = leaf(&issuer, ATTESTATION_OU, Some([0x22; 16]));
        let e = refused(object("packed", Some(&wrong_key), Some(vec![wrong])), &p);
        assert!(e.contains("AAGUID extension does not name"), "{e}");
        // A subject without the attestation OU.
        let (plain, plain_key) = leaf(&issuer, "Web Servers", Some(MODEL));
        let e = refused(object("packed", Some(&plain_key), Some(vec![plain])), &p);
        assert!(e.starts_with("attStmt.x5c[0].subject"), "{e}");
        // No roots configured.
        let no_roots = AttestationPolicy {
            aaguids: vec![MODEL],
            roots: Vec::new(),
        };
        let e = refused(object("packed", Some(&key), Some(vec![cert])), &no_roots);
        assert!(e.contains("no attestation roots are configured"), "{e}");
    }
}
