//! Passkeys prove a person, not a session: attacks over plain HTTP against the running app
//! (dev login, real Postgres) by a scripted authenticator that sends every shape a real one
//! never does. Each refused registration must name its rule, store no passkey and leave a
//! `passkey.registration_refused` event; each refused signature must approve nothing and
//! issue no grant.
//!
//! - keys no authenticator makes (alg/kty/crv disagreeing, off-curve P-256, small-order
//!   Ed25519, short RSA, e ≠ 65537) and flags WebAuthn Level 3 forbids (no UP, no UV, BS
//!   without BE) are refused at registration;
//! - a degenerate Ed25519 key a database owner slipped into `passkeys` signs nothing, and an
//!   assertion whose BE differs from the registration's approves nothing;
//! - registration needs a recent sign-in (a stale or future `auth_time` sends the person to
//!   sign in again) and, for a second passkey, an assertion by the first;
//! - every registration is announced to the person and the tenant's channels, the user handle
//!   differs per tenant, and the decision page says when the signing key was registered less
//!   than a day before;
//! - a person who approves again after a run went back to the approvers (`on_stale:
//!   reapprove`) leaves one assertion per round, and `actiond audit verify-passkeys` compares
//!   each with the audit event of its own round.

use crate::http::{Dev, hidden};
use crate::support::*;
use actiond_testkit::Scratch;
use actiond_web::AppState;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use coset::{CborSerializable as _, iana};
use reqwest::StatusCode;
use ring::rand::SystemRandom;
use ring::signature::{self as s, EcdsaKeyPair, KeyPair as _};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::time::Duration;
use uuid::Uuid;

const UP: u8 = 0x01;
const UV: u8 = 0x04;
const BE: u8 = 0x08;
const BS: u8 = 0x10;
const AT: u8 = 0x40;

/// acme with every Approve passkey-signed, admins, and both notify channels; globex too, so
/// one person approves for two tenants.
fn docs() -> [String; 2] {
    [
        r#"tenant: acme
policy:
  default: escalate
handlers:
  billing.refund.issue:
    credential: payments
    max_amount: 1000000
approvers:
  claim: groups
  values: [acme-approvers]
  require_passkey: true
admins:
  values: [acme-admins]
notify:
  webhook: approvals-chat
  email: [acme-admins@acme.test]
"#
        .into(),
        GLOBEX_DOC.replace(
            "values: [globex-approvers]",
            "values: [globex-approvers]\n  require_passkey: true",
        ),
    ]
}

/// A scripted authenticator: a P-256 key made with ring, and authenticator data, COSE keys and
/// signatures built by hand, so any field can be wrong.
struct Scripted {
    pair: EcdsaKeyPair,
    id: Vec<u8>,
    count: u32,
}

impl Scripted {
    fn new(id: u8) -> Self {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&s::ECDSA_P256_SHA256_ASN1_SIGNING, &rng).unwrap();
        let pair =
            EcdsaKeyPair::from_pkcs8(&s::ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref(), &rng)
                .unwrap();
        Self {
            pair,
            id: vec![id; 16],
            count: 0,
        }
    }

    fn xy(&self) -> (Vec<u8>, Vec<u8>) {
        let p = self.pair.public_key().as_ref();
        (p[1..33].to_vec(), p[33..65].to_vec())
    }

    /// The honest COSE key.
    fn cose(&self) -> Vec<u8> {
        let (x, y) = self.xy();
        coset::CoseKeyBuilder::new_ec2_pub_key(iana::EllipticCurve::P_256, x, y)
            .algorithm(iana::Algorithm::ES256)
            .build()
            .to_vec()
            .unwrap()
    }

    fn auth_data(&self, rp_id: &str, flags: u8) -> Vec<u8> {
        let mut ad = Sha256::digest(rp_id.as_bytes()).to_vec();
        ad.push(flags);
        ad.extend_from_slice(&self.count.to_be_bytes());
        ad
    }

    /// `client_data_json` and `attestation_object` (base64url) of a registration with these
    /// flags (AT added) and this COSE key.
    fn registration(&self, dev: &Dev, challenge: &str, flags: u8, cose: &[u8]) -> [String; 2] {
        let rp_id = url::Url::parse(&dev.base)
            .unwrap()
            .host_str()
            .unwrap()
            .to_owned();
        let cd = json!({"type": "webauthn.create", "challenge": challenge, "origin": dev.base});
        let mut ad = self.auth_data(&rp_id, flags | AT);
        ad.extend_from_slice(&[0; 16]);
        ad.extend_from_slice(&(self.id.len() as u16).to_be_bytes());
        ad.extend_from_slice(&self.id);
        ad.extend_from_slice(cose);
        let att = coset::cbor::Value::Map(vec![
            ("fmt".into(), "none".into()),
            ("attStmt".into(), coset::cbor::Value::Map(vec![])),
            ("authData".into(), coset::cbor::Value::Bytes(ad)),
        ]);
        let mut out = Vec::new();
        coset::cbor::ser::into_writer(&att, &mut out).unwrap();
        [
            B64.encode(serde_json::to_vec(&cd).unwrap()),
            B64.encode(out),
        ]
    }

    /// An assertion over `challenge` (base64url) with these flags, as four fields named
    /// `{prefix}credential_id`, `…authenticator_data`, `…client_data_json`, `…signature`.
    fn assertion(
        &mut self,
        dev: &Dev,
        challenge: &str,
        flags: u8,
        prefix: &str,
    ) -> Vec<(String, String)> {
        self.count += 1;
        let rp_id = url::Url::parse(&dev.base)
            .unwrap()
            .host_str()
            .unwrap()
            .to_owned();
        let cd = serde_json::to_vec(
            &json!({"type": "webauthn.get", "challenge": challenge, "origin": dev.base}),
        )
        .unwrap();
        let ad = self.auth_data(&rp_id, flags);
        let mut msg = ad.clone();
        msg.extend_from_slice(&Sha256::digest(&cd));
        let sig = self.pair.sign(&SystemRandom::new(), &msg).unwrap();
        fields(prefix, &self.id, &ad, &cd, sig.as_ref())
    }
}

fn fields(prefix: &str, id: &[u8], ad: &[u8], cd: &[u8], sig: &[u8]) -> Vec<(String, String)> {
    [
        ("credential_id", id),
        ("authenticator_data", ad),
        ("client_data_json", cd),
        ("signature", sig),
    ]
    .into_iter()
    .map(|(k, v)| (format!("{prefix}{k}"), B64.encode(v)))
    .collect()
}

/// An SMTP DATA section with quoted-printable soft line breaks undone.
fn unfold(m: &str) -> String {
    m.replace("=\n", "").replace("=3D", "=")
}

fn cose_map(pairs: Vec<(i64, coset::cbor::Value)>) -> Vec<u8> {
    let m = coset::cbor::Value::Map(pairs.into_iter().map(|(l, v)| (l.into(), v)).collect());
    let mut out = Vec::new();
    coset::cbor::ser::into_writer(&m, &mut out).unwrap();
    out
}

/// The Ed25519 identity point (y = 1): R = identity, S = 0 "verifies" under it for any
/// message.
fn ed25519_identity() -> [u8; 32] {
    let mut y = [0u8; 32];
    y[0] = 1;
    y
}

/// The app with the dev login, notices every second to a captured webhook and SMTP relay.
async fn server(t: &TestDb) -> (Dev, Captured, Scratch) {
    let (cap, hook_url, relay) = capture_servers().await;
    let (creds, _) = credentials(&hook_url);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let args = web_args(&[
        "--listen",
        &addr,
        "--database-url",
        &t.web_url,
        "--credentials-dir",
        creds.to_str().unwrap(),
        "--dev-login",
        "--smtp-relay",
        &relay,
        "--notify-interval",
        "1s",
        "--notify-allow-private",
    ]);
    let state = AppState::build(&args).await.unwrap();
    tokio::spawn(actiond_web::serve_state(
        state.clone(),
        listener,
        std::future::pending(),
    ));
    let dev = Dev {
        base: format!("http://{addr}"),
        state,
        http: reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap(),
    };
    (dev, cap, creds)
}

/// A signed-in person: cookie and CSRF token.
struct Person {
    cookie: String,
    csrf: String,
}

async fn sign_in(dev: &Dev, subject: &str, groups: &str) -> Person {
    let cookie = dev
        .login(subject, &format!("{subject}@acme.test"), groups)
        .await;
    let (_, _, html) = dev.page(&cookie, "/passkeys").await;
    Person {
        csrf: hidden(&html, "csrf"),
        cookie,
    }
}

/// `POST /passkeys/challenge` for `purpose` (`register` with `tenant`, or `approve` with
/// `proposal`): status and JSON body.
async fn challenge(dev: &Dev, who: &Person, extra: &[(&str, &str)]) -> (StatusCode, Value) {
    let mut form = vec![("csrf", who.csrf.as_str())];
    form.extend_from_slice(extra);
    let r = dev
        .http
        .post(format!("{}/passkeys/challenge", dev.base))
        .header("cookie", &who.cookie)
        .header("accept", "application/json")
        .form(&form)
        .send()
        .await
        .unwrap();
    let status = r.status();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn register_challenge(dev: &Dev, who: &Person, tenant: &str) -> Value {
    let (status, o) = challenge(dev, who, &[("purpose", "register"), ("tenant", tenant)]).await;
    assert_eq!(status, StatusCode::OK, "{o}");
    o
}

/// Registers with a fresh challenge; the answer's status and body.
async fn register(
    dev: &Dev,
    who: &Person,
    key: &mut Scripted,
    flags: u8,
    cose: Option<&[u8]>,
    vouch: bool,
) -> (StatusCode, String) {
    let cose = cose.map_or_else(|| key.cose(), <[u8]>::to_vec);
    let o = register_challenge(dev, who, "acme").await;
    let [cd, att] = key.registration(dev, o["challenge"].as_str().unwrap(), flags, &cose);
    let mut form: Vec<(String, String)> = [
        ("csrf", who.csrf.as_str()),
        ("tenant", "acme"),
        ("nonce", o["nonce"].as_str().unwrap()),
        ("client_data_json", &cd),
        ("attestation_object", &att),
        ("label", "scripted"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    if vouch {
        let vouch_challenge = o["vouch"]["challenge"].as_str().unwrap().to_owned();
        form.extend(key.assertion(dev, &vouch_challenge, UP | UV, "vouch_"));
    }
    let refs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let (status, _, body) = dev.post(&who.cookie, "/passkeys", &refs, None).await;
    (status, body)
}

/// Passkeys stored for `subject` in acme.
async fn stored(t: &TestDb, subject: &str) -> i64 {
    let c = t.db.client().await.unwrap();
    c.query_one(
        "SELECT count(*) FROM passkeys WHERE subject = $1",
        &[&subject],
    )
    .await
    .unwrap()
    .get(0)
}

/// The reasons of `passkey.registration_refused` events, oldest first.
async fn refusals(t: &TestDb) -> Vec<String> {
    let c = t.db.client().await.unwrap();
    c.query(
        "SELECT detail->>'reason' FROM audit_events WHERE kind = 'passkey.registration_refused' ORDER BY id",
        &[],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| r.get(0))
    .collect()
}

async fn setup() -> (TestDb, Dev, Captured, Scratch, Uuid) {
    let t = fresh_db().await;
    let [acme, globex] = docs();
    actiond_store::tenants::apply(&t.db, &acme, "test")
        .await
        .unwrap();
    actiond_store::tenants::apply(&t.db, &globex, "test")
        .await
        .unwrap();
    let bot = agent(&t.db, "acme", "refund-bot", "dave").await;
    let params = json!({"payment_id": "pi_1", "amount": 60_000, "currency": "USD"});
    let p = escalated(
        &t.db,
        "acme",
        bot,
        "billing.refund.issue",
        "pi_1",
        params,
        "Refund.",
        None,
        ("", "default"),
    )
    .await;
    let (dev, cap, creds) = server(&t).await;
    (t, dev, cap, creds, p)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_and_flags_no_authenticator_sends_are_refused_at_registration() {
    let (t, dev, _cap, _creds, _) = setup().await;
    let mallory = sign_in(&dev, "mallory", "acme-approvers").await;
    let mut key = Scripted::new(1);
    let (x, y) = key.xy();
    let mut off = y.clone();
    off[31] ^= 1;
    let int = |v: i64| coset::cbor::Value::from(v);
    let bytes = |v: &[u8]| coset::cbor::Value::Bytes(v.to_vec());
    let mut n = vec![0xc5u8; 128];
    n[127] |= 1;
    let mut n2048 = vec![0xc5u8; 256];
    n2048[255] |= 1;
    let shapes: Vec<(&str, u8, Option<Vec<u8>>, &str)> = vec![
        (
            "ES256 point off the curve",
            UP | UV,
            Some(cose_map(vec![
                (1, int(2)),
                (3, int(-7)),
                (-1, int(1)),
                (-2, bytes(&x)),
                (-3, bytes(&off)),
            ])),
            "credential_public_key: (x, y) is not a point on P-256",
        ),
        (
            "ES256 claiming P-384",
            UP | UV,
            Some(cose_map(vec![
                (1, int(2)),
                (3, int(-7)),
                (-1, int(2)),
                (-2, bytes(&x)),
                (-3, bytes(&y)),
            ])),
            "credential_public_key.crv: ES256 needs P-256",
        ),
        (
            "ES256 as an OKP key",
            UP | UV,
            Some(cose_map(vec![
                (1, int(1)),
                (3, int(-7)),
                (-1, int(1)),
                (-2, bytes(&x)),
            ])),
            "credential_public_key.kty: alg ES256 needs kty EC2",
        ),
        (
            "EdDSA with the identity point",
            UP | UV,
            Some(cose_map(vec![
                (1, int(1)),
                (3, int(-8)),
                (-1, int(6)),
                (-2, bytes(&ed25519_identity())),
            ])),
            "credential_public_key.x: a small-order or non-canonical Ed25519 point",
        ),
        (
            "RS256 with 1024 bits",
            UP | UV,
            Some(cose_map(vec![
                (1, int(3)),
                (3, int(-257)),
                (-1, bytes(&n)),
                (-2, bytes(&[1, 0, 1])),
            ])),
            "credential_public_key.n: a 1024-bit RSA modulus",
        ),
        (
            "RS256 with e = 3",
            UP | UV,
            Some(cose_map(vec![
                (1, int(3)),
                (3, int(-257)),
                (-1, bytes(&n2048)),
                (-2, bytes(&[3])),
            ])),
            "credential_public_key.e: must be 65537",
        ),
        (
            "no user presence",
            UV,
            None,
            "the user was not present (UP flag)",
        ),
        (
            "no user verification",
            UP,
            None,
            "the user was not verified (UV flag",
        ),
        (
            "backed up but not backup eligible",
            UP | UV | BS,
            Some(key.cose()),
            "backed up (BS) without backup eligible (BE)",
        ),
    ];
    for (i, (name, flags, cose, want)) in shapes.iter().enumerate() {
        let (status, body) =
            register(&dev, &mallory, &mut key, *flags, cose.as_deref(), false).await;
        assert_eq!(status, StatusCode::CONFLICT, "{name}: {body}");
        assert!(
            body.contains("The passkey was not registered"),
            "{name}: {body}"
        );
        assert!(body.contains(want), "{name}: want {want:?} in {body}");
        assert_eq!(
            stored(&t, "mallory").await,
            0,
            "{name}: a passkey row was stored"
        );
        let reasons = refusals(&t).await;
        assert_eq!(reasons.len(), i + 1, "{name}: {reasons:?}");
        assert!(
            reasons[i].contains(want),
            "{name}: audited {:?}",
            reasons[i]
        );
    }
    // The same person, the same authenticator, honest bytes: registered.
    let (status, body) = register(&dev, &mallory, &mut key, UP | UV, None, false).await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{body}");
    assert_eq!(stored(&t, "mallory").await, 1);
}

/// An Approve of `p` signed with `fields`; the answer's status and body.
async fn approve(
    dev: &Dev,
    who: &Person,
    p: Uuid,
    fields: &[(String, String)],
) -> (StatusCode, String) {
    let (_, _, html) = dev.page(&who.cookie, &format!("/p/{p}")).await;
    let mut form: Vec<(String, String)> = ["csrf", "intent_hash", "doc_version", "shown"]
        .into_iter()
        .map(|k| (k.to_owned(), hidden(&html, k)))
        .collect();
    form.push(("verdict".into(), "approve".into()));
    form.extend_from_slice(fields);
    let refs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let (status, _, body) = dev
        .post(&who.cookie, &format!("/p/{p}/decide"), &refs, None)
        .await;
    (status, body)
}

/// Nothing was approved or issued for `p`.
async fn untouched(t: &TestDb, p: Uuid) {
    let (state, approvals, grants) = proposal_facts(&t.db, p).await;
    assert_eq!(
        (state.as_str(), approvals.len(), grants.len()),
        ("escalated", 0, 0),
        "{approvals:?} {grants:?}"
    );
    let c = t.db.client().await.unwrap();
    let kept: i64 = c
        .query_one(
            "SELECT count(*) FROM approval_passkeys WHERE proposal_id = $1",
            &[&p],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(kept, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_degenerate_key_or_a_changed_be_flag_approves_nothing() {
    let (t, dev, _cap, _creds, p) = setup().await;
    let mallory = sign_in(&dev, "mallory", "acme-approvers").await;
    // The database owner slips a small-order Ed25519 key into mallory's passkeys.
    let c = t.db.client().await.unwrap();
    let degenerate = cose_map(vec![
        (1, 1.into()),
        (3, (-8).into()),
        (-1, 6.into()),
        (-2, coset::cbor::Value::Bytes(ed25519_identity().to_vec())),
    ]);
    c.execute(
        "INSERT INTO passkeys (tenant_id, credential_id, issuer, subject, public_key, alg, rp_id)
         VALUES ('acme', '\\x0909', $1, 'mallory', $2, -8, '127.0.0.1')",
        &[&actiond_web::DEV_ISSUER, &degenerate.as_slice()],
    )
    .await
    .unwrap();
    let (status, o) = challenge(
        &dev,
        &mallory,
        &[("purpose", "approve"), ("proposal", &p.to_string())],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{o}");
    let rp_id = "127.0.0.1";
    let cd = serde_json::to_vec(
        &json!({"type": "webauthn.get", "challenge": o["challenge"], "origin": dev.base}),
    )
    .unwrap();
    let mut ad = Sha256::digest(rp_id.as_bytes()).to_vec();
    ad.push(UP | UV);
    ad.extend_from_slice(&[0, 0, 0, 1]);
    // R = identity, S = 0: ring alone accepts it under the identity key.
    let mut forged = ed25519_identity().to_vec();
    forged.extend_from_slice(&[0; 32]);
    let mut signed = fields("passkey_", &[9, 9], &ad, &cd, &forged);
    signed.push(("passkey_nonce".into(), o["nonce"].as_str().unwrap().into()));
    let (status, body) = approve(&dev, &mallory, p, &signed).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        body.contains("small-order or non-canonical Ed25519 point"),
        "{body}"
    );
    untouched(&t, p).await;

    // A real key registered without BE; an assertion claiming BE is refused.
    let mut key = Scripted::new(2);
    let (status, body) = register(&dev, &mallory, &mut key, UP | UV, None, true).await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "the degenerate key cannot vouch either: {body}"
    );
    c.execute("DELETE FROM passkeys WHERE credential_id = '\\x0909'", &[])
        .await
        .unwrap();
    let (status, body) = register(&dev, &mallory, &mut key, UP | UV, None, false).await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{body}");
    let (_, o) = challenge(
        &dev,
        &mallory,
        &[("purpose", "approve"), ("proposal", &p.to_string())],
    )
    .await;
    let mut signed = key.assertion(
        &dev,
        o["challenge"].as_str().unwrap(),
        UP | UV | BE | BS,
        "passkey_",
    );
    signed.push(("passkey_nonce".into(), o["nonce"].as_str().unwrap().into()));
    let (status, body) = approve(&dev, &mallory, p, &signed).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        body.contains("backup eligible (BE) is 1 but was 0 at registration"),
        "{body}"
    );
    untouched(&t, p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registration_needs_a_recent_sign_in_and_the_existing_passkey() {
    let (t, dev, cap, _creds, p) = setup().await;
    let alice = sign_in(&dev, "alice", "acme-approvers,globex-approvers").await;
    let c = t.db.client().await.unwrap();
    let set_auth_time = |secs: i64| {
        let c = &c;
        async move {
            c.execute(
                "UPDATE web_sessions SET auth_time = now() + make_interval(secs => $1::float8) WHERE subject = 'alice'",
                &[&(secs as f64)],
            )
            .await
            .unwrap();
        }
    };
    // A session signed in ten minutes ago (a stolen cookie) is sent to sign in again.
    set_auth_time(-600).await;
    let (status, o) = challenge(
        &dev,
        &alice,
        &[
            ("purpose", "register"),
            ("tenant", "acme"),
            ("next", "/queue"),
        ],
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{o}");
    assert!(
        o["detail"]
            .as_str()
            .unwrap()
            .starts_with("auth_time: registering a passkey needs a sign-in"),
        "{o}"
    );
    assert_eq!(
        o["sign_in"],
        "/login?next=%2Fpasskeys%3Fnext%3D%252Fqueue&again=1"
    );
    // An auth_time ahead of the database clock by more than the skew is no better.
    set_auth_time(600).await;
    let (status, o) = challenge(&dev, &alice, &[("purpose", "register"), ("tenant", "acme")]).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{o}");
    assert!(
        o["detail"].as_str().unwrap().contains("in the future"),
        "{o}"
    );
    // A challenge taken while fresh does not help once the sign-in is stale.
    set_auth_time(0).await;
    let mut first = Scripted::new(1);
    let o = register_challenge(&dev, &alice, "acme").await;
    assert!(
        o["vouch"].is_null(),
        "a first passkey needs no vouching: {o}"
    );
    let [cd, att] = first.registration(
        &dev,
        o["challenge"].as_str().unwrap(),
        UP | UV,
        &first.cose(),
    );
    set_auth_time(-400).await;
    let form = [
        ("csrf", alice.csrf.as_str()),
        ("tenant", "acme"),
        ("nonce", o["nonce"].as_str().unwrap()),
        ("client_data_json", &cd),
        ("attestation_object", &att),
    ];
    let (status, _, body) = dev.post(&alice.cookie, "/passkeys", &form, None).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        body.contains("auth_time: registering a passkey needs a sign-in"),
        "{body}"
    );
    assert_eq!(stored(&t, "alice").await, 0);

    // Fresh: the first passkey registers.
    set_auth_time(-30).await;
    let (status, body) = register(&dev, &alice, &mut first, UP | UV, None, false).await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{body}");
    // A second one without the first's assertion is refused; with it, registered.
    let mut second = Scripted::new(2);
    let (status, body) = register(&dev, &alice, &mut second, UP | UV, None, false).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        body.contains("vouch: you already have a passkey for this tenant"),
        "{body}"
    );
    assert_eq!(stored(&t, "alice").await, 1);
    // Signed by the new key itself (not one of alice's): refused.
    let (status, body) = register(&dev, &alice, &mut second, UP | UV, None, true).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        body.contains("vouch.credential_id: not one of your passkeys"),
        "{body}"
    );
    assert_eq!(stored(&t, "alice").await, 1);
    let o = register_challenge(&dev, &alice, "acme").await;
    let [cd, att] = second.registration(
        &dev,
        o["challenge"].as_str().unwrap(),
        UP | UV,
        &second.cose(),
    );
    let mut form: Vec<(String, String)> = vec![
        ("csrf".into(), alice.csrf.clone()),
        ("tenant".into(), "acme".into()),
        ("nonce".into(), o["nonce"].as_str().unwrap().into()),
        ("client_data_json".into(), cd),
        ("attestation_object".into(), att),
        ("label".into(), "second key".into()),
    ];
    form.extend(first.assertion(
        &dev,
        o["vouch"]["challenge"].as_str().unwrap(),
        UP | UV,
        "vouch_",
    ));
    let refs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let (status, _, body) = dev.post(&alice.cookie, "/passkeys", &refs, None).await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{body}");
    assert_eq!(stored(&t, "alice").await, 2);
    let vouched: Option<Vec<u8>> = c
        .query_one(
            "SELECT vouched_by FROM passkeys WHERE credential_id = $1",
            &[&second.id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(vouched.as_deref(), Some(first.id.as_slice()));

    // One user handle per tenant.
    let acme = register_challenge(&dev, &alice, "acme").await["user_id"].clone();
    let globex = register_challenge(&dev, &alice, "globex").await["user_id"].clone();
    assert_eq!(B64.decode(acme.as_str().unwrap()).unwrap().len(), 32);
    assert_ne!(
        acme, globex,
        "a synced passkey of one tenant would replace the other's"
    );
    assert_eq!(
        acme,
        register_challenge(&dev, &alice, "acme").await["user_id"]
    );

    // Alice and acme's channels are told of both passkeys.
    actiond_testkit::eventually(
        Duration::from_secs(20),
        "two passkey notices by webhook and mail",
        || async {
            let hooks = cap.webhooks.lock().unwrap().clone();
            let mails = cap.mails.lock().unwrap().clone();
            let hooks: Vec<String> = hooks
                .iter()
                .filter_map(|h| h["text"].as_str())
                .filter(|t| t.starts_with("New passkey in acme"))
                .map(str::to_owned)
                .collect();
            let mails: Vec<String> = mails
                .iter()
                .map(|m| unfold(m))
                .filter(|m| m.contains("New passkey in acme"))
                .collect();
            (hooks.len() == 2 && mails.len() == 2).then_some((hooks, mails))
        },
    )
    .await;
    let mails: Vec<String> = cap
        .mails
        .lock()
        .unwrap()
        .iter()
        .map(|m| unfold(m))
        .collect();
    let mail = mails.iter().find(|m| m.contains("second key")).unwrap();
    assert!(
        mail.contains("alice@acme.test") && mail.contains("acme-admins@acme.test"),
        "{mail}"
    );
    assert!(mail.contains("allowed by their existing passkey"), "{mail}");
    let hooks = cap.webhooks.lock().unwrap().clone();
    assert!(
        hooks.iter().any(|h| h["text"]
            .as_str()
            .unwrap_or_default()
            .contains("their first passkey for this tenant")),
        "{hooks:?}"
    );

    // The decision page says the signing key is less than a day old.
    let (_, o) = challenge(
        &dev,
        &alice,
        &[("purpose", "approve"), ("proposal", &p.to_string())],
    )
    .await;
    let mut signed = first.assertion(&dev, o["challenge"].as_str().unwrap(), UP | UV, "passkey_");
    signed.push(("passkey_nonce".into(), o["nonce"].as_str().unwrap().into()));
    let (status, body) = approve(&dev, &alice, p, &signed).await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{body}");
    let (_, _, html) = dev.page(&alice.cookie, &format!("/p/{p}")).await;
    assert!(
        html.contains("signed with a passkey registered &#60;1 min before (less than a day)"),
        "{html}"
    );
    // A key registered two days before signing is not pointed out.
    c.execute(
        "UPDATE passkeys SET created_at = created_at - interval '2 days' WHERE credential_id = $1",
        &[&first.id],
    )
    .await
    .unwrap();
    let (_, _, html) = dev.page(&alice.cookie, &format!("/p/{p}")).await;
    assert!(!html.contains("less than a day"), "{html}");
}

/// A tenant that requires attestation (`approvers.passkey_attestation: required`) asks the
/// browser for `attestation: "direct"` and refuses a passkey without one (the scripted
/// authenticator's `fmt: none`, what every software "passkey" can send), naming the rule:
/// nothing stored, the refusal audited. (The attestation verifier itself is attacked with
/// generated CAs and certificates in `actiond_core::passkey_attestation`'s tests.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_that_requires_attestation_refuses_an_unattested_passkey() {
    let (t, dev, _cap, _creds, _) = setup().await;
    let [acme, _] = docs();
    let required = acme.replace(
        "  require_passkey: true\n",
        "  require_passkey: true\n  passkey_attestation: required\n  passkey_aaguids: [cb69481e-8ff7-4039-93ec-0a2729a154a8]\n",
    );
    assert_ne!(required, acme);
    actiond_store::tenants::apply(&t.db, &required, "test")
        .await
        .unwrap();
    let mallory = sign_in(&dev, "mallory", "acme-approvers").await;
    let o = register_challenge(&dev, &mallory, "acme").await;
    assert_eq!(o["attestation"], "direct", "{o}");
    let mut key = Scripted::new(7);
    let (status, body) = register(&dev, &mallory, &mut key, UP | UV, None, false).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        unfold(&body).contains("attestation_object.fmt: none")
            && unfold(&body).contains("passkey_attestation: required"),
        "{body}"
    );
    assert_eq!(stored(&t, "mallory").await, 0);
    assert!(
        refusals(&t)
            .await
            .iter()
            .any(|r| r.starts_with("attestation_object.fmt: none")),
        "{:?}",
        refusals(&t).await
    );
}

/// Signs an Approve of `p` as `who` with `key` over a fresh approval challenge; the answer's
/// status and body.
async fn approve_with(
    dev: &Dev,
    who: &Person,
    key: &mut Scripted,
    p: Uuid,
) -> (StatusCode, String) {
    let (status, o) = challenge(
        dev,
        who,
        &[("purpose", "approve"), ("proposal", &p.to_string())],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{o}");
    let mut signed = key.assertion(dev, o["challenge"].as_str().unwrap(), UP | UV, "passkey_");
    signed.push(("passkey_nonce".into(), o["nonce"].as_str().unwrap().into()));
    approve(dev, who, p, &signed).await
}

/// A refund with `on_stale: reapprove` in a tenant where every Approve is passkey-signed: alice
/// approves it (round 0), the run finds the payment changed and sends it back to the
/// approvers (as the executor does, through `previews::reescalate`), and alice approves it
/// again with the same passkey (round 1). Both stored assertions verify, each against the audit
/// event of its own round (the round-1 one was compared with alice's round-0 event and reported
/// as tampered). A database owner who swaps the two rounds' assertions — each row still a valid
/// signature over its own challenge — is caught on both rows, also with events that do not
/// record their round (written before they did).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_approval_round_is_verified_against_its_own_audit_event() {
    let t = fresh_db().await;
    let doc = r#"tenant: acme
policy:
  default: escalate
handlers:
  billing.refund.issue:
    credential: payments
    max_amount: 1000000
    on_stale: reapprove
approvers:
  claim: groups
  values: [acme-approvers]
  require_passkey: true
"#;
    actiond_store::tenants::apply(&t.db, doc, "test")
        .await
        .unwrap();
    let bot = agent(&t.db, "acme", "refund-bot", "dave").await;
    let params = json!({"payment_id": "pi_1", "amount": 60_000, "currency": "USD"});
    let p = escalated(
        &t.db,
        "acme",
        bot,
        "billing.refund.issue",
        "pi_1",
        params.clone(),
        "Refund.",
        None,
        ("", "default"),
    )
    .await;
    let read = |refunded: i64| actiond_store::previews::Read {
        text: format!("Payment pi_1: {refunded} already refunded"),
        binding: json!({"amount_refunded": refunded}),
        warnings: Vec::new(),
    };
    let task = actiond_store::previews::PreviewTask {
        id: p,
        tenant_id: "acme".into(),
        action: "billing.refund.issue".into(),
        params_json: actiond_core::canonical::canonicalize(&params).unwrap(),
        doc_version: 1,
        facts: None,
    };
    actiond_store::previews::insert(&t.db, &task, Ok(read(0)))
        .await
        .unwrap();
    let (dev, _cap, _creds) = server(&t).await;
    let alice = sign_in(&dev, "alice", "acme-approvers").await;
    let mut key = Scripted::new(7);
    let (status, body) = register(&dev, &alice, &mut key, UP | UV, None, false).await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{body}");

    let (status, body) = approve_with(&dev, &alice, &mut key, p).await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{body}");
    assert_eq!(proposal_facts(&t.db, p).await.0, "approved");
    // The run: the executor spends the grant, reads the payment again, finds it changed and
    // sends the proposal back to the approvers with its approvals void.
    let c = t.db.client().await.unwrap();
    c.execute(
        "UPDATE grants SET used_at = now(), used_by = 'exec-1' WHERE proposal_id = $1",
        &[&p],
    )
    .await
    .unwrap();
    c.execute(
        "UPDATE proposals SET state = 'executing', lease_owner = 'exec-1',
                lease_until = now() + interval '1 minute' WHERE id = $1",
        &[&p],
    )
    .await
    .unwrap();
    let row = actiond_store::approvals::get(&t.db, None, p)
        .await
        .unwrap()
        .unwrap();
    let sent_back = actiond_store::previews::reescalate(
        &t.db,
        &row,
        "exec-1",
        "the payment changed since the preview",
        json!({"changes": [{"field": "amount_refunded", "before": 0, "now": 5000}]}),
        read(5000),
    )
    .await
    .unwrap();
    assert!(sent_back);
    assert_eq!(proposal_facts(&t.db, p).await.0, "escalated");

    let (status, body) = approve_with(&dev, &alice, &mut key, p).await;
    assert_eq!(status, StatusCode::SEE_OTHER, "{body}");
    assert_eq!(proposal_facts(&t.db, p).await.0, "approved");
    let rounds: Vec<i32> = c
        .query(
            "SELECT round FROM approval_passkeys WHERE proposal_id = $1 AND subject = 'alice' ORDER BY round",
            &[&p],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(rounds, [0, 1], "one stored assertion per round");
    let (checked, findings) = actiond_store::passkeys::verify_all(&t.db).await.unwrap();
    assert_eq!((checked, findings), (2, Vec::new()));

    // The owner swaps the two rounds' assertions: each row still holds a valid signature over
    // its own challenge, but not the evidence its round's event recorded.
    swap_rounds(&c, p).await;
    let swapped = |findings: Vec<actiond_store::passkeys::Finding>| {
        assert_eq!(findings.len(), 2, "{findings:?}");
        for f in &findings {
            assert_eq!((f.proposal_id, f.subject.as_str()), (p, "alice"));
            assert_eq!(
                f.problem, "evidence_sha256: differs from the approval's audit event",
                "{findings:?}"
            );
        }
    };
    let (checked, findings) = actiond_store::passkeys::verify_all(&t.db).await.unwrap();
    assert_eq!(checked, 2);
    swapped(findings);
    // Events written before they recorded their round (the owner strips it, as those were
    // written): the k-th event of the person goes with the k-th round of their assertions, so
    // the swap is still caught, and the rows as they were verify.
    c.batch_execute(
        "ALTER TABLE audit_events DISABLE TRIGGER audit_events_no_update;
         UPDATE audit_events SET detail = detail - 'approval_round'
          WHERE kind IN ('approval.recorded', 'approval.decided') AND detail ? 'approval_round';
         ALTER TABLE audit_events ENABLE TRIGGER audit_events_no_update;",
    )
    .await
    .unwrap();
    let (_, findings) = actiond_store::passkeys::verify_all(&t.db).await.unwrap();
    swapped(findings);
    swap_rounds(&c, p).await;
    let (checked, findings) = actiond_store::passkeys::verify_all(&t.db).await.unwrap();
    assert_eq!((checked, findings), (2, Vec::new()));
}

/// Swaps the stored assertions of rounds 0 and 1 of proposal `p` behind the append-only trigger,
/// as a database owner could (the nonce is unique, so through a placeholder).
async fn swap_rounds(c: &actiond_store::Client, p: Uuid) {
    let mut r = c
        .query(
            "SELECT credential_id, authenticator_data, client_data_json, signature, sign_count, evidence_sha256, nonce
             FROM approval_passkeys WHERE proposal_id = $1 ORDER BY round",
            &[&p],
        )
        .await
        .unwrap();
    let (r1, r0) = (r.pop().unwrap(), r.pop().unwrap());
    c.batch_execute("ALTER TABLE approval_passkeys DISABLE TRIGGER approval_passkeys_no_update")
        .await
        .unwrap();
    let set = "UPDATE approval_passkeys SET credential_id = $3, authenticator_data = $4, client_data_json = $5,
                      signature = $6, sign_count = $7, evidence_sha256 = $8, nonce = $9
               WHERE proposal_id = $1 AND round = $2";
    let placeholder = "0".repeat(64);
    for (round, from, nonce) in [
        (0, &r1, placeholder),
        (1, &r0, r0.get::<_, String>(6)),
        (0, &r1, r1.get::<_, String>(6)),
    ] {
        let b = |i: usize| from.get::<_, Vec<u8>>(i);
        c.execute(
            set,
            &[
                &p,
                &round,
                &b(0),
                &b(1),
                &b(2),
                &b(3),
                &from.get::<_, i64>(4),
                &from.get::<_, String>(5),
                &nonce,
            ],
        )
        .await
        .unwrap();
    }
    c.batch_execute("ALTER TABLE approval_passkeys ENABLE TRIGGER approval_passkeys_no_update")
        .await
        .unwrap();
}
