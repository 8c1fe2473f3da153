//! Workload identity: agents authenticating with short-lived JWTs from the platform's own
//! identity (Kubernetes service-account tokens, SPIFFE JWT-SVIDs, OAuth client-credentials
//! access tokens) instead of a static token.
//!
//! A token is accepted only when all of this holds, checked in this order (each failure is a
//! [`Rejection`], a 401 naming the claim and the rule):
//!
//! 1. It is a JWS compact serialization (RFC 7515 §7.1) whose header has no `crit` and whose
//!    `alg` is not `none`.
//! 2. Its `iss` (RFC 7519 §4.1.1) is exactly one of the configured trusted issuers, and its
//!    `alg` is one that issuer allows (HMAC is never allowed, see [`config`]).
//! 3. Its `kid` names a key in **that issuer's** JWK Set ([`jwks`]; an unknown `kid` fetches
//!    the set again at most once per interval, without holding up known keys) whose type and
//!    `alg` fit the token's `alg`.
//! 4. The signature verifies (`jsonwebtoken`), and `exp`, `iss`, `aud`, `sub` are present;
//!    `aud` contains the issuer's configured audience.
//! 5. Its times are judged like every time from outside ([`actiond_core::external_time`]):
//!    `exp` has not passed by more than [`CLOCK_SKEW`], `iat` and `nbf` (when present) lie at
//!    most [`CLOCK_SKEW`] in the future, and its lifetime, `exp - iat` (`exp - now` without
//!    `iat`), is at most the issuer's `max_token_lifetime`. Times are NumericDates (RFC 7519
//!    §2: seconds, fractions allowed).
//!
//! The agent is the one bound to `(iss, sub)` by `actiond agent create --jwt-issuer ISS
//! --jwt-subject SUB`, looked up on every request, so revoking it refuses its JWTs at once.
//!
//! **Delegation (RFC 8693 §4.1).** A token with an `act` claim says that the actor `act.sub`
//! acts for the subject `sub`. Then the agent is the one bound to `(iss, act.sub)` and `sub`
//! is the user it acts for ([`WorkloadIdentity::on_behalf_of`]), recorded on each proposal,
//! seen by rules as `on_behalf_of` and shown to approvers. `act.iss`, when present, must equal
//! `iss`; nested `act` claims (earlier actors) are informational only (RFC 8693 §4.1) and
//! ignored.

pub mod config;
pub mod jwks;

use actiond_core::external_time::{CLOCK_SKEW, TimeBound, TimeRefused};
use base64::Engine as _;
use config::IssuersConfig;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Validation};
use serde_json::Value;
use std::collections::HashMap;
use std::time::Duration;

/// Longest JWT accepted, in bytes.
pub const MAX_JWT_BYTES: usize = 8 * 1024;

/// A verified workload token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadIdentity {
    /// `iss`.
    pub issuer: String,
    /// The agent's subject: `sub`, or `act.sub` for a delegated token.
    pub subject: String,
    /// The user the agent acts for: `sub` of a token with an `act` claim.
    pub on_behalf_of: Option<String>,
}

/// Why a JWT was refused. Each is a 401; [`Rejection::detail`] names the claim and the rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    /// Not a compact JWS, bad base64url or JSON, or a `crit` header.
    Malformed,
    /// `alg: none` (an unsigned token).
    AlgNone,
    /// The `alg` is not one the issuer allows, or does not fit the key.
    AlgorithmNotAllowed,
    /// `iss` is missing or not a trusted issuer.
    UnknownIssuer,
    /// The header has no `kid`.
    MissingKid,
    /// The issuer's key set has no key with this `kid` (also after a refresh).
    UnknownKey,
    /// The signature does not verify.
    BadSignature,
    /// `exp` has passed (by more than [`CLOCK_SKEW`]).
    Expired,
    /// `iat` lies in the future by more than [`CLOCK_SKEW`].
    IssuedInFuture,
    /// `nbf` lies in the future by more than [`CLOCK_SKEW`].
    NotYetValid,
    /// `aud` does not contain the configured audience.
    WrongAudience,
    /// A claim is missing or not of its type; the detail names which.
    MissingClaim(Claim),
    /// `exp - iat` is over the issuer's maximum token lifetime.
    LifetimeTooLong,
    /// `act` is not an object with a string `sub`, or its `iss` differs from the token's.
    BadActor,
    /// A valid token whose `(iss, sub)` is bound to no live agent (unknown or revoked).
    NoAgent,
}

/// The claim a [`Rejection::MissingClaim`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// `exp`: required, a number.
    Exp,
    /// `iat`: a number when present.
    Iat,
    /// `nbf`: a number when present.
    Nbf,
    /// `aud`: required.
    Aud,
    /// `sub`: required, a string of 1 to 512 characters.
    Sub,
    /// `iss`: required.
    Iss,
    /// Another claim the JWT library names (none today).
    Other,
}

impl Claim {
    /// The claim named `name` (as the JWT library or this module spells it).
    fn named(name: &str) -> Self {
        match name {
            "exp" => Self::Exp,
            "iat" => Self::Iat,
            "nbf" => Self::Nbf,
            "aud" => Self::Aud,
            "sub" => Self::Sub,
            "iss" => Self::Iss,
            _ => Self::Other,
        }
    }

    /// The problem's `detail`: the claim and what it must be. Before, every such refusal said
    /// "JWT claims exp, iss, aud and sub are required", naming none of them.
    fn detail(self) -> &'static str {
        match self {
            Self::Exp => "JWT claim exp: required, a number (seconds since 1970-01-01 UTC)",
            Self::Iat => "JWT claim iat: must be a number (seconds since 1970-01-01 UTC)",
            Self::Nbf => "JWT claim nbf: must be a number (seconds since 1970-01-01 UTC)",
            Self::Aud => "JWT claim aud: required, naming this API's configured audience",
            Self::Sub => "JWT claim sub: required, a string of 1 to 512 characters",
            Self::Iss => "JWT claim iss: required, a trusted issuer of this API",
            Self::Other => {
                "JWT claims exp, iss, aud and sub are required (exp a number, sub a string of 1 to 512 characters)"
            }
        }
    }
}

impl Rejection {
    /// What the agent's operator reads in the problem's `detail`.
    pub fn detail(self) -> &'static str {
        match self {
            Self::Malformed => {
                "JWT: not a signed JWT (three base64url parts, JSON header and claims, no crit header)"
            }
            Self::AlgNone => "JWT header alg: none is never accepted",
            Self::AlgorithmNotAllowed => {
                "JWT header alg: not an algorithm this issuer is trusted with, or not the key's algorithm"
            }
            Self::UnknownIssuer => "JWT claim iss: missing or not a trusted issuer of this API",
            Self::MissingKid => "JWT header kid: required, the id of the issuer's signing key",
            Self::UnknownKey => "JWT header kid: no such key in the issuer's JWK Set",
            Self::BadSignature => "JWT: the signature does not verify with the issuer's key",
            Self::Expired => {
                "JWT claim exp: the token has expired (more than the 60 s clock skew ago)"
            }
            Self::IssuedInFuture => {
                "JWT claim iat: in the future by more than the 60 s clock skew allowed; the issuer's clock is wrong or the value is not in seconds"
            }
            Self::NotYetValid => {
                "JWT claim nbf: the token is not valid yet (more than the 60 s clock skew allowed)"
            }
            Self::WrongAudience => "JWT claim aud: does not name this API's configured audience",
            Self::MissingClaim(c) => c.detail(),
            Self::LifetimeTooLong => {
                "JWT claims exp - iat: longer than this issuer's max_token_lifetime"
            }
            Self::BadActor => {
                "JWT claim act: must be an object with a string sub (RFC 8693), and its iss, if any, the token's iss"
            }
            Self::NoAgent => {
                "JWT sub: no live agent is bound to this issuer and subject (unknown or revoked)"
            }
        }
    }

    /// A bounded metric label.
    pub fn label(self) -> &'static str {
        match self {
            Self::Malformed => "jwt_malformed",
            Self::AlgNone | Self::AlgorithmNotAllowed => "jwt_algorithm",
            Self::UnknownIssuer => "jwt_issuer",
            Self::MissingKid | Self::UnknownKey => "jwt_key",
            Self::BadSignature => "jwt_signature",
            Self::Expired | Self::IssuedInFuture | Self::NotYetValid | Self::LifetimeTooLong => {
                "jwt_time"
            }
            Self::WrongAudience => "jwt_audience",
            Self::MissingClaim(_) | Self::BadActor => "jwt_claims",
            Self::NoAgent => "jwt_no_agent",
        }
    }
}

struct Issuer {
    config: config::IssuerConfig,
    keys: jwks::KeySet,
}

/// The trusted issuers with their cached key sets.
pub struct Verifier {
    issuers: HashMap<String, Issuer>,
}

/// Whether a bearer value has the shape of a JWS compact serialization (three dot-separated
/// parts); static agent tokens never contain a dot.
pub fn looks_like_jwt(token: &str) -> bool {
    token.bytes().filter(|b| *b == b'.').count() == 2
}

fn segment_json(segment: &str) -> Result<Value, Rejection> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(segment)
        .map_err(|_| Rejection::Malformed)?;
    serde_json::from_slice(&bytes).map_err(|_| Rejection::Malformed)
}

fn kind_to_rejection(kind: &ErrorKind) -> Rejection {
    match kind {
        ErrorKind::ExpiredSignature => Rejection::Expired,
        ErrorKind::ImmatureSignature => Rejection::NotYetValid,
        ErrorKind::InvalidAudience => Rejection::WrongAudience,
        ErrorKind::InvalidIssuer => Rejection::UnknownIssuer,
        ErrorKind::InvalidSignature => Rejection::BadSignature,
        ErrorKind::InvalidAlgorithm | ErrorKind::MissingAlgorithm => Rejection::AlgorithmNotAllowed,
        ErrorKind::MissingRequiredClaim(c) | ErrorKind::InvalidClaimFormat(c) => {
            Rejection::MissingClaim(Claim::named(c))
        }
        _ => Rejection::Malformed,
    }
}

/// The agent's subject and the delegating user, from verified claims (RFC 8693 §4.1).
fn actor(claims: &Value, iss: &str) -> Result<(String, Option<String>), Rejection> {
    let text = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .filter(|s| !s.is_empty() && s.len() <= 512)
            .map(str::to_owned)
    };
    let sub = text(claims.get("sub")).ok_or(Rejection::MissingClaim(Claim::Sub))?;
    match claims.get("act") {
        None => Ok((sub, None)),
        Some(act @ Value::Object(_)) => {
            let actor = text(act.get("sub")).ok_or(Rejection::BadActor)?;
            match act.get("iss") {
                None => {}
                Some(Value::String(i)) if i == iss => {}
                Some(_) => return Err(Rejection::BadActor),
            }
            Ok((actor, Some(sub)))
        }
        Some(_) => Err(Rejection::BadActor),
    }
}

impl Verifier {
    /// Builds the verifier; nothing is fetched until the first token arrives.
    pub fn new(config: IssuersConfig) -> Result<Self, String> {
        // No proxy from the environment: a JWKS over plain http to a loopback sidecar would
        // otherwise travel through `HTTP_PROXY`, which could answer with its own keys.
        let http = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(jwks::FETCH_TIMEOUT)
            .build()
            .map_err(|e| format!("JWKS HTTP client: {e}"))?;
        let issuers = config
            .issuers
            .into_iter()
            .map(|c| {
                let keys = jwks::KeySet::new(
                    c.issuer.clone(),
                    c.keys.clone(),
                    config.jwks_refresh_interval,
                    config.jwks_max_age,
                    config.jwks_max_stale,
                    http.clone(),
                );
                (c.issuer.clone(), Issuer { config: c, keys })
            })
            .collect();
        Ok(Self { issuers })
    }

    /// The trusted issuers' identifiers, sorted (the `authorization_servers` of RFC 9728).
    pub fn issuer_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.issuers.keys().cloned().collect();
        ids.sort();
        ids
    }

    /// Verifies a JWT as the module documentation says; the agent lookup is the caller's.
    pub async fn verify(&self, token: &str) -> Result<WorkloadIdentity, Rejection> {
        if token.len() > MAX_JWT_BYTES || !looks_like_jwt(token) {
            return Err(Rejection::Malformed);
        }
        let mut parts = token.split('.');
        let header = segment_json(parts.next().unwrap_or(""))?;
        let unverified = segment_json(parts.next().unwrap_or(""))?;
        if header.get("crit").is_some() {
            return Err(Rejection::Malformed);
        }
        match header.get("alg").and_then(Value::as_str) {
            Some(a) if a.eq_ignore_ascii_case("none") => return Err(Rejection::AlgNone),
            Some(_) => {}
            None => return Err(Rejection::Malformed),
        }
        let alg: Algorithm = header
            .get("alg")
            .and_then(Value::as_str)
            .and_then(|a| a.parse().ok())
            .ok_or(Rejection::AlgorithmNotAllowed)?;
        let issuer = unverified
            .get("iss")
            .and_then(Value::as_str)
            .and_then(|i| self.issuers.get(i))
            .ok_or(Rejection::UnknownIssuer)?;
        if !issuer.config.algorithms.contains(&alg) {
            return Err(Rejection::AlgorithmNotAllowed);
        }
        let kid = header
            .get("kid")
            .and_then(Value::as_str)
            .ok_or(Rejection::MissingKid)?;
        let key = issuer.keys.key(kid).await.ok_or(Rejection::UnknownKey)?;
        if !key.allows(alg) {
            return Err(Rejection::AlgorithmNotAllowed);
        }
        let mut validation = Validation::new(alg);
        // The times are judged below, with the one clock skew of `external_time`.
        validation.leeway = 0;
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.set_audience(&[&issuer.config.audience]);
        validation.set_issuer(&[&issuer.config.issuer]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let claims = jsonwebtoken::decode::<Value>(token, &key.key, &validation)
            .map_err(|e| kind_to_rejection(e.kind()))?
            .claims;
        check_times(
            &claims,
            &issuer.config,
            jsonwebtoken::get_current_timestamp() as f64,
        )?;
        let (subject, on_behalf_of) = actor(&claims, &issuer.config.issuer)?;
        Ok(WorkloadIdentity {
            issuer: issuer.config.issuer.clone(),
            subject,
            on_behalf_of,
        })
    }
}

/// Judges a verified token's `exp`, `iat` and `nbf` against `now` (seconds since the epoch)
/// with [`CLOCK_SKEW`], then its lifetime against the issuer's `max_token_lifetime`.
fn check_times(claims: &Value, issuer: &config::IssuerConfig, now: f64) -> Result<(), Rejection> {
    let time = |name: &str| match claims.get(name) {
        None => Ok(None),
        Some(v) => v
            .as_f64()
            .filter(|t| t.is_finite())
            .map(Some)
            .ok_or(Rejection::MissingClaim(Claim::named(name))),
    };
    let exp = time("exp")?.ok_or(Rejection::MissingClaim(Claim::Exp))?;
    if now - exp > CLOCK_SKEW.as_secs_f64() {
        return Err(Rejection::Expired);
    }
    let max_lifetime = issuer.max_token_lifetime;
    if let Some(iat) = time("iat")? {
        // Older than the longest lifetime (and the skew) cannot be a live token either.
        TimeBound::new("iat", max_lifetime.saturating_add(CLOCK_SKEW))
            .check_unix(iat, now)
            .map_err(|e| match e {
                TimeRefused::Ahead { .. } => Rejection::IssuedInFuture,
                TimeRefused::TooOld { .. } => Rejection::LifetimeTooLong,
                TimeRefused::Malformed { .. } => Rejection::MissingClaim(Claim::Iat),
            })?;
    }
    if let Some(nbf) = time("nbf")? {
        // Only the future side bounds `nbf`: an old one is every token's normal case.
        TimeBound::new("nbf", Duration::MAX)
            .check_unix(nbf, now)
            .map_err(|e| match e {
                TimeRefused::Ahead { .. } => Rejection::NotYetValid,
                _ => Rejection::MissingClaim(Claim::Nbf),
            })?;
    }
    let lifetime = exp - time("iat")?.unwrap_or(now);
    if lifetime > max_lifetime.as_secs_f64() {
        return Err(Rejection::LifetimeTooLong);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn times_are_judged_with_the_one_clock_skew() {
        let issuer = config::IssuerConfig {
            issuer: "i".into(),
            keys: config::KeySource::JwksUri("https://i.example/jwks".parse().unwrap()),
            audience: "a".into(),
            algorithms: vec![Algorithm::ES256],
            max_token_lifetime: Duration::from_secs(3600),
        };
        let now = 1_790_000_000.0;
        let at = |c: Value| check_times(&c, &issuer, now);
        assert_eq!(at(json!({"exp": now + 300.0, "iat": now})), Ok(()));
        // Inside the skew on both sides.
        assert_eq!(at(json!({"exp": now - 59.0, "iat": now + 59.0})), Ok(()));
        assert_eq!(at(json!({"exp": now + 300.0, "nbf": now + 60.0})), Ok(()));
        // Ten minutes ahead is refused naming the claim.
        let e = at(json!({"exp": now + 900.0, "iat": now + 600.0})).unwrap_err();
        assert_eq!(e, Rejection::IssuedInFuture);
        assert!(e.detail().starts_with("JWT claim iat:"), "{}", e.detail());
        assert_eq!(
            at(json!({"exp": now + 900.0, "nbf": now + 600.0})),
            Err(Rejection::NotYetValid)
        );
        assert_eq!(at(json!({"exp": now - 61.0})), Err(Rejection::Expired));
        // Without iat the lifetime is judged from now: exp an hour and more ahead is refused.
        assert_eq!(at(json!({"exp": now + 3600.0})), Ok(()));
        assert_eq!(
            at(json!({"exp": now + 3601.0})),
            Err(Rejection::LifetimeTooLong)
        );
        assert_eq!(
            at(json!({"exp": now + 30.0 * 86400.0})),
            Err(Rejection::LifetimeTooLong)
        );
        // iat in milliseconds.
        assert_eq!(
            at(json!({"exp": now + 300.0, "iat": now * 1000.0})),
            Err(Rejection::IssuedInFuture)
        );
        assert_eq!(
            at(json!({"exp": now + 300.0, "iat": now - 7200.0})),
            Err(Rejection::LifetimeTooLong)
        );
        assert_eq!(
            at(json!({"exp": "soon"})),
            Err(Rejection::MissingClaim(Claim::Exp))
        );
        assert_eq!(
            at(json!({"exp": now + 60.0, "nbf": "later"})),
            Err(Rejection::MissingClaim(Claim::Nbf))
        );
        // Each names its claim, never the list of all of them.
        for (c, name) in [
            (Claim::Exp, "exp"),
            (Claim::Iat, "iat"),
            (Claim::Nbf, "nbf"),
            (Claim::Aud, "aud"),
            (Claim::Sub, "sub"),
            (Claim::Iss, "iss"),
        ] {
            assert_eq!(Claim::named(name), c);
            let d = Rejection::MissingClaim(c).detail();
            assert!(d.starts_with(&format!("JWT claim {name}: ")), "{d}");
        }
        // The details state the skew the code applies.
        let skew = format!("{} s clock skew", CLOCK_SKEW.as_secs());
        for r in [
            Rejection::Expired,
            Rejection::IssuedInFuture,
            Rejection::NotYetValid,
        ] {
            assert!(r.detail().contains(&skew), "{}", r.detail());
        }
    }

    #[test]
    fn act_names_the_agent_and_sub_the_user() {
        let plain = json!({"sub": "bot"});
        assert_eq!(actor(&plain, "i"), Ok(("bot".into(), None)));
        let delegated = json!({"sub": "jane@customer.example", "act": {"sub": "bot"}});
        assert_eq!(
            actor(&delegated, "i"),
            Ok(("bot".into(), Some("jane@customer.example".into())))
        );
        let same_iss =
            json!({"sub": "jane", "act": {"sub": "bot", "iss": "i", "act": {"sub": "x"}}});
        assert_eq!(
            actor(&same_iss, "i"),
            Ok(("bot".into(), Some("jane".into())))
        );
        for bad in [
            json!({"sub": "jane", "act": "bot"}),
            json!({"sub": "jane", "act": {}}),
            json!({"sub": "jane", "act": {"sub": 7}}),
            json!({"sub": "jane", "act": {"sub": "bot", "iss": "other"}}),
        ] {
            assert_eq!(actor(&bad, "i"), Err(Rejection::BadActor), "{bad}");
        }
        assert_eq!(
            actor(&json!({}), "i"),
            Err(Rejection::MissingClaim(Claim::Sub))
        );
        assert_eq!(
            actor(&json!({"sub": ""}), "i"),
            Err(Rejection::MissingClaim(Claim::Sub))
        );
        assert!(
            Rejection::MissingClaim(Claim::Sub)
                .detail()
                .starts_with("JWT claim sub:")
        );
    }

    #[test]
    fn only_three_part_values_are_jwts() {
        assert!(looks_like_jwt("a.b.c"));
        assert!(!looks_like_jwt("actiond_abc"));
        assert!(!looks_like_jwt("a.b.c.d.e"));
    }
}
