//! `approvers:` of a tenant document: who may approve for this tenant, by ID-token claim values
//! or by subject (design, "Approvers").

use super::read::{get_duration, get_strings, ser_duration, unknown_keys};
use crate::FieldError;
use serde::Serialize;
use serde_json::Value;
use std::time::Duration;

/// Default `approvers.max_claims_age`: claims read at login count for an Approve for 1 hour.
pub const DEFAULT_MAX_CLAIMS_AGE: Duration = Duration::from_secs(3600);

/// `approvers:` of a tenant document.
#[derive(Debug, Clone, Serialize)]
pub struct Approvers {
    /// The identity provider whose subjects are this tenant's persons (ID-token `iss`); the
    /// web app's configured issuer when absent. Subjects of any other issuer match nothing.
    pub issuer: Option<String>,
    /// Claim holding group names (default `groups`).
    pub claim: String,
    /// Claim values that make someone an approver.
    pub values: Vec<String>,
    /// Subjects that are approvers regardless of claims.
    pub subjects: Vec<String>,
    /// Subjects that are tenant admins in the approval app: they see the "Approvers" page
    /// (decisions, approve ratio and time on page per person) and may unfreeze any agent of
    /// the tenant. An admin must also be an approver to reach the app at all.
    pub admins: Vec<String>,
    /// How old the claims read at login may be for an Approve to count (10s–24h, default 1h);
    /// older ones send the person through the identity provider again (OIDC `max_age`).
    #[serde(serialize_with = "ser_duration")]
    pub max_claims_age: Duration,
    /// Every Approve in this tenant must be signed with the approver's passkey, whatever the
    /// handler says (handlers can also ask with `require_passkey`).
    pub require_passkey: bool,
    /// What registering a passkey for this tenant requires of its attestation: `none` (any
    /// authenticator, the default) or `required` (a verified packed full attestation from an
    /// authenticator model in [`Approvers::passkey_aaguids`], chaining to one of the web app's
    /// `--passkey-attestation-roots`; see [`crate::passkey_attestation`]).
    pub passkey_attestation: PasskeyAttestation,
    /// With `passkey_attestation: required`: the accepted authenticator models (AAGUIDs,
    /// WebAuthn Level 3 §6.5.1), at least one.
    #[serde(serialize_with = "ser_aaguids")]
    pub passkey_aaguids: Vec<[u8; 16]>,
}

/// `approvers.passkey_attestation`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PasskeyAttestation {
    /// Any authenticator; its attestation is not checked (AAGUIDs are recorded, not trusted).
    #[default]
    None,
    /// A verified attestation from an allowed model.
    Required,
}

fn ser_aaguids<S: serde::Serializer>(v: &[[u8; 16]], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(v.iter().map(crate::passkey_attestation::aaguid_text))
}

impl Default for Approvers {
    fn default() -> Self {
        Self {
            issuer: None,
            claim: "groups".into(),
            values: Vec::new(),
            subjects: Vec::new(),
            max_claims_age: DEFAULT_MAX_CLAIMS_AGE,
            admins: Vec::new(),
            require_passkey: false,
            passkey_attestation: PasskeyAttestation::None,
            passkey_aaguids: Vec::new(),
        }
    }
}

/// `approvers:` (optional; claim `groups` and nobody else when absent).
pub(super) fn parse_approvers(errs: &mut Vec<FieldError>, v: Option<&Value>) -> Approvers {
    let Some(v) = v else {
        return Approvers::default();
    };
    let Some(m) = v.as_object() else {
        errs.push(FieldError::new(
            "approvers",
            "must be a mapping with claim, values, subjects",
        ));
        return Approvers::default();
    };
    unknown_keys(
        errs,
        "approvers",
        m,
        &[
            "issuer",
            "claim",
            "values",
            "subjects",
            "admins",
            "max_claims_age",
            "require_passkey",
            "passkey_attestation",
            "passkey_aaguids",
        ],
    );
    let claim = match m.get("claim") {
        None => "groups".to_owned(),
        Some(Value::String(s)) if !s.is_empty() && s.len() <= 64 => s.clone(),
        Some(_) => {
            errs.push(FieldError::new("approvers.claim", "must be a claim name"));
            "groups".into()
        }
    };
    let issuer = match m.get("issuer") {
        None => None,
        Some(Value::String(s)) if url::Url::parse(s).is_ok() => Some(s.clone()),
        Some(_) => {
            errs.push(FieldError::new("approvers.issuer", "must be an issuer URL"));
            None
        }
    };
    let max_claims_age = get_duration(
        errs,
        "approvers.max_claims_age",
        m.get("max_claims_age"),
        DEFAULT_MAX_CLAIMS_AGE,
    );
    if !(Duration::from_secs(10)..=Duration::from_secs(86_400)).contains(&max_claims_age) {
        errs.push(FieldError::new(
            "approvers.max_claims_age",
            "must be between 10s and 24h",
        ));
    }
    let require_passkey = match m.get("require_passkey") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            errs.push(FieldError::new(
                "approvers.require_passkey",
                "must be true or false",
            ));
            false
        }
    };
    let passkey_attestation = match m.get("passkey_attestation") {
        None => PasskeyAttestation::None,
        Some(Value::String(s)) if s == "none" => PasskeyAttestation::None,
        Some(Value::String(s)) if s == "required" => PasskeyAttestation::Required,
        Some(_) => {
            errs.push(FieldError::new(
                "approvers.passkey_attestation",
                "must be none or required",
            ));
            PasskeyAttestation::None
        }
    };
    let mut passkey_aaguids = Vec::new();
    for (i, a) in get_strings(errs, "approvers.passkey_aaguids", m.get("passkey_aaguids"))
        .iter()
        .enumerate()
    {
        match uuid::Uuid::parse_str(a.trim()) {
            Ok(u) if !u.is_nil() => passkey_aaguids.push(*u.as_bytes()),
            _ => errs.push(FieldError::new(
                format!("approvers.passkey_aaguids[{i}]"),
                "must be an authenticator model's AAGUID, a UUID such as cb69481e-8ff7-4039-93ec-0a2729a154a8 (not the all-zero one of unattested authenticators)",
            )),
        }
    }
    match passkey_attestation {
        PasskeyAttestation::Required if passkey_aaguids.is_empty() => errs.push(FieldError::new(
            "approvers.passkey_aaguids",
            "required with passkey_attestation: required: the authenticator models (AAGUIDs) this tenant accepts",
        )),
        PasskeyAttestation::None if m.contains_key("passkey_aaguids") => errs.push(FieldError::new(
            "approvers.passkey_aaguids",
            "only with passkey_attestation: required (without it, an AAGUID is only what the client says)",
        )),
        _ => {}
    }
    Approvers {
        passkey_attestation,
        passkey_aaguids,
        require_passkey,
        issuer,
        claim,
        values: get_strings(errs, "approvers.values", m.get("values")),
        subjects: get_strings(errs, "approvers.subjects", m.get("subjects")),
        admins: get_strings(errs, "approvers.admins", m.get("admins")),
        max_claims_age,
    }
}

/// `approvers.issuer` must be an `https://` URL (OIDC Discovery requires it), except on a
/// loopback host (`localhost`, `127.0.0.0/8`, `::1`), which tests and `actiond dev` use over
/// `http://`. Checked when a document is applied ([`super::TenantDocument::parse`]), not when
/// a stored one is loaded. Returns the error naming the field, if any.
pub(crate) fn non_https_issuer(a: &Approvers) -> Option<FieldError> {
    let url = url::Url::parse(a.issuer.as_deref()?).ok()?;
    let loopback = match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    let ok = url.scheme() == "https" || (url.scheme() == "http" && loopback);
    (!ok).then(|| {
        FieldError::new(
            "approvers.issuer",
            "must be an https:// URL (http:// only on a loopback host such as 127.0.0.1 or localhost)",
        )
    })
}
/// True when `claims[claim]` (a string or a list of strings) holds one of `values`.
pub(crate) fn claim_matches(claims: &Value, claim: &str, values: &[String]) -> bool {
    match claims.get(claim) {
        Some(Value::String(s)) => values.iter().any(|v| v == s),
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .any(|s| values.iter().any(|v| v == s)),
        _ => false,
    }
}

/// The issuer whose subjects are this tenant's persons: `approvers.issuer` when set, else
/// `deployment_issuer` (the web app's configured issuer).
pub fn pinned_issuer<'a>(approvers: &'a Approvers, deployment_issuer: &'a str) -> &'a str {
    approvers.issuer.as_deref().unwrap_or(deployment_issuer)
}

/// Whether a person signed in with OIDC (`issuer`, `subject`, ID-token `claims`) may decide
/// for a tenant with these `approvers`: the issuer must be the pinned one ([`pinned_issuer`],
/// ignoring a trailing `/`), then the subject is in `approvers.subjects`, or the claim
/// `approvers.claim` holds one of `approvers.values`.
pub fn may_decide(
    approvers: &Approvers,
    deployment_issuer: &str,
    issuer: &str,
    subject: &str,
    claims: &Value,
) -> bool {
    let pinned = pinned_issuer(approvers, deployment_issuer);
    if pinned.trim_end_matches('/') != issuer.trim_end_matches('/') {
        return false;
    }
    may_decide_by_subject(approvers, subject)
        || claim_matches(claims, &approvers.claim, &approvers.values)
}

/// Whether `subject` is listed in `approvers.subjects` (the break-glass CLI sees no ID token,
/// so only the subject list applies there).
pub fn may_decide_by_subject(approvers: &Approvers, subject: &str) -> bool {
    approvers.subjects.iter().any(|s| s == subject)
}
