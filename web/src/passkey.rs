//! Passkeys in the approval app (WebAuthn; rules in `actiond_core::passkey`, storage in
//! `actiond_store::passkeys`).
//!
//! - `GET /passkeys`: the person's passkeys and a form to register one for a tenant they
//!   approve for (bound to their OIDC issuer and subject).
//! - `POST /passkeys/challenge` (CSRF): a single-use challenge as JSON. `purpose=register`
//!   with `tenant`: 32 random bytes (`nonce`, also the challenge). `purpose=approve` with
//!   `proposal`: `{registered: false}` when the person has no passkey for its tenant, else the
//!   nonce, the challenge derived from the proposal's intent hash and document version, and the
//!   credential ids to allow.
//! - `POST /passkeys` (CSRF): finishes a registration.
//! - [`submitted`]: the assertion fields of a decision form (`passkey_nonce`,
//!   `passkey_credential_id`, `passkey_authenticator_data`, `passkey_client_data_json`,
//!   `passkey_signature`, base64url), checked by the store inside the decision's transaction.
//!
//! The relying party is the public URL: RP ID its host, origin its origin.

use crate::AppState;
use crate::error::{WebError, WebResult};
use crate::pages::chrome::{Chrome, parse_form, path_and_query, render};
use crate::session::{Viewer, require_post, require_viewer};
use actiond_core::passkey::{self as pk, Assertion, ChallengeInput, RelyingParty};
use actiond_store::passkeys::{self, Person, SubmittedAssertion};
use askama::Template;
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;
use std::collections::HashMap;
use uuid::Uuid;

/// `/passkeys`.
#[derive(Template)]
#[template(path = "passkeys.html")]
pub(crate) struct PasskeysPage {
    pub(crate) chrome: Chrome,
    pub(crate) notice: String,
    pub(crate) rows: Vec<PasskeyRow>,
    /// Tenants the person may register a passkey for.
    pub(crate) tenants: Vec<String>,
    /// Local path to go back to.
    pub(crate) next: String,
    /// How recent a sign-in registration needs, in minutes.
    pub(crate) sign_in_minutes: u64,
}

/// One registered passkey.
pub(crate) struct PasskeyRow {
    pub(crate) tenant: String,
    pub(crate) label: String,
    pub(crate) alg: String,
    pub(crate) created: String,
    pub(crate) last_used: String,
}

/// An Approve refused because it needs a passkey.
#[derive(Template)]
#[template(path = "passkey_needed.html")]
pub(crate) struct PasskeyNeededPage {
    pub(crate) chrome: Chrome,
    pub(crate) tenant: String,
    pub(crate) id: String,
    /// The person has a passkey for the tenant (the browser sent no signature).
    pub(crate) registered: bool,
}

/// The relying party this app is: RP ID = host of the public URL, origin = its origin.
pub(crate) fn relying_party(state: &AppState) -> RelyingParty {
    RelyingParty {
        id: state.public_url.host_str().unwrap_or_default().to_owned(),
        origin: state.origin.clone(),
    }
}

fn person(v: &Viewer) -> Person<'_> {
    Person {
        issuer: &v.issuer,
        subject: &v.subject,
    }
}

/// 32 random bytes as 64 lowercase hex.
fn new_nonce() -> String {
    hex::encode(rand::random::<[u8; 32]>())
}

/// A local path to come back to, or empty: the login's own check
/// ([`crate::session::local_target`]).
fn local_next(next: Option<&String>) -> String {
    next.and_then(|n| crate::session::local_target(n))
        .unwrap_or_default()
        .to_owned()
}

/// `?next=` and `?registered=` of `GET /passkeys`.
#[derive(Debug, Deserialize)]
pub(crate) struct PasskeysQuery {
    next: Option<String>,
    registered: Option<String>,
}

/// `GET /passkeys`.
pub(crate) async fn page(
    State(state): State<AppState>,
    headers: HeaderMap,
    uri: Uri,
    Query(q): Query<PasskeysQuery>,
) -> WebResult<Response> {
    let v = require_viewer(&state, &headers, &path_and_query(&uri)).await?;
    let rows = passkeys::list(&state.db, &v.tenants, person(&v)).await?;
    let alg = |a: i32| match a {
        -7 => "ES256",
        -8 => "EdDSA",
        -257 => "RS256",
        _ => "?",
    };
    let fmt = |t: chrono::DateTime<chrono::Utc>| t.format("%Y-%m-%d %H:%M UTC").to_string();
    Ok(render(&PasskeysPage {
        chrome: v.chrome(),
        notice: if q.registered.is_some() {
            "Passkey registered. Approvals that need one will now ask for it.".into()
        } else {
            String::new()
        },
        rows: rows
            .into_iter()
            .map(|r| PasskeyRow {
                tenant: r.tenant_id,
                label: actiond_core::text::reveal_invisible(&r.label, false),
                alg: alg(r.alg).into(),
                created: fmt(r.created_at),
                last_used: r.last_used_at.map(fmt).unwrap_or_else(|| "never".into()),
            })
            .collect(),
        tenants: v.tenants.clone(),
        next: local_next(q.next.as_ref()),
        sign_in_minutes: pk::REGISTER_SIGN_IN_WITHIN_SECS / 60,
    }))
}

/// A tenant field that must be one the person approves for.
fn tenant_of<'a>(v: &Viewer, form: &'a HashMap<String, String>) -> WebResult<&'a String> {
    form.get("tenant")
        .filter(|t| v.tenants.contains(t))
        .ok_or_else(|| WebError::BadRequest("tenant: must be a tenant you approve for".into()))
}

/// `POST /passkeys/challenge`.
pub(crate) async fn challenge(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> WebResult<Response> {
    let form = parse_form(&body)?;
    let v = require_post(&state, &headers, form.get("csrf").map(String::as_str)).await?;
    let rp = relying_party(&state);
    let nonce = new_nonce();
    match form.get("purpose").map(String::as_str) {
        Some("register") => register_challenge(&state, &v, &form, &rp, &nonce).await,
        Some("approve") => approve_challenge(&state, &v, &form, &rp, &nonce).await,
        _ => Err(WebError::BadRequest(
            "purpose: must be register or approve".into(),
        )),
    }
}

/// `/passkeys`, with `?next=` when the form carried a local one.
fn passkeys_path(next: Option<&String>) -> String {
    let next = local_next(next);
    if next.is_empty() {
        return "/passkeys".into();
    }
    let q = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("next", &next)
        .finish();
    format!("/passkeys?{q}")
}

/// The `purpose=register` answer of [`challenge`]: refused (403, with `sign_in`: where to
/// sign in again with OIDC `max_age`) unless the session's sign-in at the identity provider is
/// recent enough; else the nonce (also the creation challenge), the person's user handle for
/// the tenant, the credentials to exclude and, when they already have a passkey for the
/// tenant, `vouch`: the challenge one of them must sign first and the ids it may be.
async fn register_challenge(
    state: &AppState,
    v: &Viewer,
    form: &HashMap<String, String>,
    rp: &RelyingParty,
    nonce: &str,
) -> WebResult<Response> {
    let tenant = tenant_of(v, form)?;
    if let Err(e) = passkeys::sign_in_fresh(&state.db, v.times.auth_time).await? {
        let back = passkeys_path(form.get("next"));
        let to = crate::session::sign_in_again(state, v, &back, pk::REGISTER_SIGN_IN_WITHIN_SECS);
        let detail = format!("{e}.");
        let body = json!({
            "type": "urn:actiond:problem:sign_in_again",
            "title": "Sign in again",
            "status": 403,
            "detail": detail,
            "sign_in": to,
        });
        let mut r = (
            StatusCode::FORBIDDEN,
            [(header::CONTENT_TYPE, "application/problem+json")],
            body.to_string(),
        )
            .into_response();
        let mut extra = serde_json::Map::new();
        extra.insert("sign_in".into(), json!(to));
        r.extensions_mut()
            .insert(crate::error::ProblemInfo::new("Sign in again", &detail).with_extra(extra));
        return Ok(r);
    }
    passkeys::issue_challenge(&state.db, tenant, person(v), nonce, None).await?;
    let mine = passkeys::list(&state.db, std::slice::from_ref(tenant), person(v)).await?;
    let user_id = passkeys::user_handle(&state.db, tenant, person(v)).await?;
    let ids: Vec<String> = mine.into_iter().map(|p| p.credential_id).collect();
    // A tenant that requires attestation asks the browser to pass the authenticator's on
    // (WebAuthn `attestation: "direct"`); otherwise browsers replace it with `none`.
    let attested = {
        let c = state.db.client().await?;
        state.docs.latest_of(&c, tenant).await?.is_some_and(|d| {
            d.approvers.passkey_attestation == actiond_core::tenant::PasskeyAttestation::Required
        })
    };
    let vouch = if ids.is_empty() {
        serde_json::Value::Null
    } else {
        json!({
            "challenge": pk::b64url(&pk::vouch_challenge(tenant, nonce)),
            "allow": ids,
        })
    };
    Ok(Json(json!({
        "nonce": nonce,
        "challenge": pk::b64url(&hex::decode(nonce).unwrap_or_default()),
        "rp_id": rp.id,
        "user_id": pk::b64url(&user_id),
        "user_name": v.email.clone().unwrap_or_else(|| v.subject.clone()),
        "exclude": ids,
        "vouch": vouch,
        "attestation": if attested { "direct" } else { "none" },
    }))
    .into_response())
}

/// The `purpose=approve` answer of [`challenge`].
async fn approve_challenge(
    state: &AppState,
    v: &Viewer,
    form: &HashMap<String, String>,
    rp: &RelyingParty,
    nonce: &str,
) -> WebResult<Response> {
    let id = form
        .get("proposal")
        .and_then(|s| Uuid::parse_str(s).ok())
        .ok_or_else(|| WebError::BadRequest("proposal: must be a proposal id".into()))?;
    let p = actiond_store::approvals::get(&state.db, Some(&v.tenants), id)
        .await?
        .ok_or(WebError::NotFound)?;
    let doc_version = p.doc_version.ok_or_else(|| {
        WebError::Conflict("this proposal has no policy version; it cannot be approved".into())
    })?;
    let mine = passkeys::list(&state.db, std::slice::from_ref(&p.tenant_id), person(v)).await?;
    if mine.is_empty() {
        return Ok(Json(json!({"registered": false})).into_response());
    }
    passkeys::issue_challenge(&state.db, &p.tenant_id, person(v), nonce, Some(id)).await?;
    let pid = id.to_string();
    let c = pk::approval_challenge(&ChallengeInput {
        proposal_id: &pid,
        tenant_id: &p.tenant_id,
        intent_hash: &p.intent_hash,
        doc_version,
        nonce,
    });
    Ok(Json(json!({
        "registered": true,
        "nonce": nonce,
        "challenge": pk::b64url(&c),
        "rp_id": rp.id,
        "allow": mine.into_iter().map(|p| p.credential_id).collect::<Vec<_>>(),
    }))
    .into_response())
}

/// A required base64url form field.
fn b64_field(form: &HashMap<String, String>, name: &str) -> WebResult<Vec<u8>> {
    let s = form
        .get(name)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| WebError::BadRequest(format!("{name}: is required")))?;
    pk::from_b64url(name, s).map_err(|e| WebError::BadRequest(e.0))
}

/// `POST /passkeys`: finishes a registration.
pub(crate) async fn register(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> WebResult<Response> {
    let form = parse_form(&body)?;
    let v = require_post(&state, &headers, form.get("csrf").map(String::as_str)).await?;
    let tenant = tenant_of(&v, &form)?;
    let nonce = form
        .get("nonce")
        .filter(|n| n.len() == 64 && n.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or_else(|| WebError::BadRequest("nonce: must be the 64-hex challenge nonce".into()))?;
    let client_data = b64_field(&form, "client_data_json")?;
    let attestation = b64_field(&form, "attestation_object")?;
    let label: String = form
        .get("label")
        .map(|s| s.trim())
        .unwrap_or_default()
        .chars()
        .filter(|c| !c.is_control())
        .take(100)
        .collect();
    let rp = relying_party(&state);
    let vouch = match form.get("vouch_credential_id").filter(|s| !s.is_empty()) {
        None => None,
        Some(_) => Some(Assertion {
            credential_id: b64_field(&form, "vouch_credential_id")?,
            authenticator_data: b64_field(&form, "vouch_authenticator_data")?,
            client_data_json: b64_field(&form, "vouch_client_data_json")?,
            signature: b64_field(&form, "vouch_signature")?,
        }),
    };
    let policy = {
        let c = state.db.client().await?;
        let doc = state.docs.latest_of(&c, tenant).await?;
        doc.filter(|d| {
            d.approvers.passkey_attestation == actiond_core::tenant::PasskeyAttestation::Required
        })
        .map(|d| actiond_core::passkey_attestation::AttestationPolicy {
            aaguids: d.approvers.passkey_aaguids.clone(),
            roots: state.attestation_roots.clone(),
        })
    };
    let out = passkeys::register(
        &state.db,
        &passkeys::Registration {
            attestation: policy.as_ref(),
            tenant,
            person: person(&v),
            email: v.email.as_deref(),
            auth_time: v.times.auth_time,
            rp: &rp,
            nonce,
            client_data_json: &client_data,
            attestation_object: &attestation,
            label: &label,
            vouch: vouch.as_ref(),
        },
    )
    .await?;
    if let Err(e) = out {
        tracing::warn!(tenant = %tenant, subject = %v.subject, reason = %e, "passkey registration refused");
        return Err(WebError::Conflict(format!(
            "The passkey was not registered: {e}."
        )));
    }
    tracing::info!(tenant = %tenant, subject = %v.subject, "passkey registered");
    let next = local_next(form.get("next"));
    let mut to = "/passkeys?registered=1".to_owned();
    if !next.is_empty() {
        to.push_str("&next=");
        to.push_str(
            &percent_encoding::utf8_percent_encode(&next, percent_encoding::NON_ALPHANUMERIC)
                .to_string(),
        );
    }
    Ok((StatusCode::SEE_OTHER, [(header::LOCATION, to)]).into_response())
}

/// The assertion of a decision form, when `passkey_nonce` is given; the relying party comes
/// from configuration. Errors: 400 naming the field.
pub(crate) fn submitted(
    state: &AppState,
    form: &HashMap<String, String>,
) -> WebResult<Option<SubmittedAssertion>> {
    let Some(nonce) = form.get("passkey_nonce").filter(|n| !n.is_empty()) else {
        return Ok(None);
    };
    if nonce.len() != 64
        || !nonce
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        return Err(WebError::BadRequest(
            "passkey_nonce: must be 64 lowercase hex".into(),
        ));
    }
    Ok(Some(SubmittedAssertion {
        nonce: nonce.clone(),
        assertion: Assertion {
            credential_id: b64_field(form, "passkey_credential_id")?,
            authenticator_data: b64_field(form, "passkey_authenticator_data")?,
            client_data_json: b64_field(form, "passkey_client_data_json")?,
            signature: b64_field(form, "passkey_signature")?,
        },
        rp: relying_party(state),
    }))
}

/// The page of an Approve refused for want of a passkey: how to register one (403).
pub(crate) async fn needed_page(
    state: &AppState,
    v: &Viewer,
    tenant: &str,
    id: Uuid,
) -> WebResult<Response> {
    let registered = !passkeys::list(&state.db, &[tenant.to_owned()], person(v))
        .await?
        .is_empty();
    let mut r = (
        StatusCode::FORBIDDEN,
        render(&PasskeyNeededPage {
            chrome: v.chrome(),
            tenant: tenant.to_owned(),
            id: id.to_string(),
            registered,
        }),
    )
        .into_response();
    r.extensions_mut().insert(crate::error::ProblemInfo::new(
        "Passkey required",
        "approving this needs your passkey: register one on /passkeys, then approve again",
    ));
    Ok(r)
}
