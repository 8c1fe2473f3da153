//! The trusted issuers of agents' workload JWTs: a YAML file named by `--jwt-issuers-file`.
//!
//! ```yaml
//! jwks_refresh_interval: 60s   # optional: at most one JWKS fetch per issuer per interval on an unknown `kid`
//! jwks_max_age: 1h             # optional: keys are fetched again after this long (in the background)
//! jwks_max_stale: 1h           # optional: past jwks_max_age, how long keys stay trusted while no fetch succeeds
//! issuers:
//!   - issuer: https://kubernetes.default.svc.cluster.local   # the exact `iss` (RFC 7519 §4.1.1)
//!     jwks_uri: https://10.0.0.1/openid/v1/jwks              # the issuer's JWK Set (RFC 7517 §5)
//!     audience: actiond                                       # required in `aud` (RFC 7519 §4.1.3)
//!     algorithms: [RS256]                                     # JWS `alg` values accepted (RFC 7518 §3.1)
//!     max_token_lifetime: 1h                                  # exp - iat at most this
//!   - issuer: https://login.example.com
//!     discovery: true            # jwks_uri from {issuer}/.well-known/openid-configuration
//!     audience: https://actiond.example.com
//!     algorithms: [ES256, RS256]
//!     max_token_lifetime: 15m
//! ```
//!
//! Refused at startup, naming the field: HMAC algorithms (`HS256`…: a shared secret is not a
//! workload identity, and HMAC with a public key is a classic forgery), `none`, an empty
//! audience or algorithm list, both or neither of `jwks_uri` and `discovery`, plain `http` to a
//! host other than loopback, and an issuer listed twice. There is no clock `leeway` setting:
//! `exp`, `nbf` and `iat` are judged with the one clock skew every time from outside gets
//! ([`actiond_core::external_time::CLOCK_SKEW`]), and a file that still sets `leeway` is refused
//! naming it rather than silently ignored.

use jsonwebtoken::{Algorithm, AlgorithmFamily};
use serde::Deserialize;
use std::time::Duration;
use url::Url;

/// Longest `max_token_lifetime` accepted: workload tokens are short-lived.
pub const MAX_TOKEN_LIFETIME_CAP: Duration = Duration::from_secs(24 * 3600);
/// Longest `jwks_max_stale` accepted: a key the issuer may have withdrawn is not trusted for
/// longer than a day past `jwks_max_age` however long the issuer stays unreachable.
pub const MAX_JWKS_STALE: Duration = Duration::from_secs(24 * 3600);

/// One trusted issuer, validated.
#[derive(Debug, Clone)]
pub struct IssuerConfig {
    /// The exact `iss` value its tokens carry.
    pub issuer: String,
    /// Where its keys come from.
    pub keys: KeySource,
    /// The `aud` value tokens must contain.
    pub audience: String,
    /// Accepted JWS algorithms (never HMAC, never `none`).
    pub algorithms: Vec<Algorithm>,
    /// Longest accepted lifetime, `exp - iat` (or `exp - now` without `iat`).
    pub max_token_lifetime: Duration,
}

/// Where an issuer's JSON Web Key Set is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// A fixed JWKS URL.
    JwksUri(Url),
    /// OpenID Connect Discovery 1.0 §4: `jwks_uri` of `{issuer}/.well-known/openid-configuration`,
    /// whose `issuer` must equal the configured one.
    Discovery(Url),
}

/// The whole file, validated.
#[derive(Debug, Clone)]
pub struct IssuersConfig {
    /// Trusted issuers, each `issuer` once.
    pub issuers: Vec<IssuerConfig>,
    /// Least time between two JWKS fetches of one issuer caused by an unknown `kid`.
    pub jwks_refresh_interval: Duration,
    /// Fetched keys are fetched again after this long.
    pub jwks_max_age: Duration,
    /// Past `jwks_max_age`, how long keys stay trusted while no fetch succeeds (the issuer is
    /// unreachable): afterwards its tokens are refused until a fetch succeeds.
    pub jwks_max_stale: Duration,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    issuers: Vec<RawIssuer>,
    jwks_refresh_interval: Option<String>,
    jwks_max_age: Option<String>,
    jwks_max_stale: Option<String>,
    /// Refused when present (see the module documentation); read only to say so by name.
    leeway: Option<serde_yaml_ng::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIssuer {
    issuer: String,
    jwks_uri: Option<String>,
    #[serde(default)]
    discovery: bool,
    audience: String,
    algorithms: Vec<String>,
    max_token_lifetime: String,
}

fn duration(field: &str, raw: Option<&str>, default: Duration) -> Result<Duration, String> {
    match raw {
        None => Ok(default),
        Some(s) => actiond_core::ids::parse_duration(s).map_err(|e| format!("{field}: {e}")),
    }
}

/// A URL the api may fetch keys from: https, or http to a loopback host (tests, sidecars).
pub(crate) fn fetchable(field: &str, raw: &str) -> Result<Url, String> {
    let url = Url::parse(raw).map_err(|e| format!("{field}: {raw:?} is not a URL: {e}"))?;
    let loopback = match url.host() {
        Some(url::Host::Ipv4(a)) => a.is_loopback(),
        Some(url::Host::Ipv6(a)) => a.is_loopback(),
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        None => false,
    };
    match url.scheme() {
        "https" => Ok(url),
        "http" if loopback => Ok(url),
        _ => Err(format!(
            "{field}: {raw:?} must be an https URL (plain http only to a loopback address)"
        )),
    }
}

fn algorithm(field: &str, raw: &str) -> Result<Algorithm, String> {
    let alg: Algorithm = raw.parse().map_err(|_| {
        format!("{field}: {raw:?} is not a JWS algorithm (RS256, PS256, ES256, ES384, EdDSA, ...)")
    })?;
    if alg.family() == AlgorithmFamily::Hmac {
        return Err(format!(
            "{field}: {raw} is HMAC, a shared secret; only public-key algorithms identify a workload"
        ));
    }
    Ok(alg)
}

fn issuer(i: usize, raw: RawIssuer) -> Result<IssuerConfig, String> {
    let at = |f: &str| format!("issuers[{i}].{f}");
    if raw.issuer.is_empty() || raw.issuer.len() > 512 {
        return Err(format!("{}: must be 1 to 512 characters", at("issuer")));
    }
    let keys = match (raw.jwks_uri, raw.discovery) {
        (Some(u), false) => KeySource::JwksUri(fetchable(&at("jwks_uri"), &u)?),
        (None, true) => {
            let base = fetchable(&at("issuer"), &raw.issuer)?;
            let well_known = format!(
                "{}/.well-known/openid-configuration",
                base.as_str().trim_end_matches('/')
            );
            KeySource::Discovery(fetchable(&at("issuer"), &well_known)?)
        }
        _ => {
            return Err(format!(
                "{}: give either jwks_uri or discovery: true",
                at("jwks_uri")
            ));
        }
    };
    if raw.audience.is_empty() {
        return Err(format!(
            "{}: required, the value tokens carry in aud",
            at("audience")
        ));
    }
    if raw.algorithms.is_empty() {
        return Err(format!("{}: list at least one algorithm", at("algorithms")));
    }
    let algorithms = raw
        .algorithms
        .iter()
        .map(|a| algorithm(&at("algorithms"), a))
        .collect::<Result<Vec<_>, _>>()?;
    let max_token_lifetime = duration(
        &at("max_token_lifetime"),
        Some(&raw.max_token_lifetime),
        Duration::ZERO,
    )?;
    if max_token_lifetime.is_zero() || max_token_lifetime > MAX_TOKEN_LIFETIME_CAP {
        return Err(format!(
            "{}: must be between 1s and 24h",
            at("max_token_lifetime")
        ));
    }
    Ok(IssuerConfig {
        issuer: raw.issuer,
        keys,
        audience: raw.audience,
        algorithms,
        max_token_lifetime,
    })
}

impl IssuersConfig {
    /// Parses and validates the YAML text of the issuers file; errors name the field.
    pub fn from_yaml(text: &str) -> Result<Self, String> {
        let raw: RawFile = serde_yaml_ng::from_str(text).map_err(|e| e.to_string())?;
        let jwks_refresh_interval = duration(
            "jwks_refresh_interval",
            raw.jwks_refresh_interval.as_deref(),
            Duration::from_secs(60),
        )?;
        let jwks_max_age = duration(
            "jwks_max_age",
            raw.jwks_max_age.as_deref(),
            Duration::from_secs(3600),
        )?;
        if jwks_max_age < jwks_refresh_interval {
            return Err("jwks_max_age: must not be shorter than jwks_refresh_interval".into());
        }
        let jwks_max_stale = duration(
            "jwks_max_stale",
            raw.jwks_max_stale.as_deref(),
            Duration::from_secs(3600),
        )?;
        if jwks_max_stale > MAX_JWKS_STALE {
            return Err("jwks_max_stale: must be at most 24h".into());
        }
        if raw.leeway.is_some() {
            return Err(format!(
                "leeway: no longer a setting; exp, nbf and iat are judged with the fixed {} s clock skew every time from outside gets (remove the line)",
                actiond_core::external_time::CLOCK_SKEW.as_secs()
            ));
        }
        let mut issuers = Vec::new();
        for (i, r) in raw.issuers.into_iter().enumerate() {
            let c = issuer(i, r)?;
            if issuers.iter().any(|o: &IssuerConfig| o.issuer == c.issuer) {
                return Err(format!(
                    "issuers[{i}].issuer: {:?} is listed twice",
                    c.issuer
                ));
            }
            issuers.push(c);
        }
        Ok(Self {
            issuers,
            jwks_refresh_interval,
            jwks_max_age,
            jwks_max_stale,
        })
    }

    /// Reads and validates the issuers file at `path`. A file that cannot be read keeps its
    /// `std::io::Error` in the chain (missing: not found; not UTF-8: invalid data); a document
    /// that does not validate is an [`actiond_core::FieldErrors`] naming `--jwt-issuers-file`,
    /// so the CLI exits 3 or 2 as its table says.
    pub fn from_file(path: &std::path::Path) -> anyhow::Result<Self> {
        use anyhow::Context as _;
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("--jwt-issuers-file {}", path.display()))?;
        Self::from_yaml(&text).map_err(|e| {
            actiond_core::FieldErrors::one("--jwt-issuers-file", format!("{}: {e}", path.display()))
                .into()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "
issuers:
  - issuer: https://k8s.example
    jwks_uri: https://k8s.example/openid/v1/jwks
    audience: actiond
    algorithms: [RS256, ES256]
    max_token_lifetime: 1h
  - issuer: http://127.0.0.1:9000
    discovery: true
    audience: actiond
    algorithms: [EdDSA]
    max_token_lifetime: 10m
";

    #[test]
    fn a_good_file_parses_with_defaults() {
        let c = IssuersConfig::from_yaml(GOOD).unwrap();
        assert_eq!(c.issuers.len(), 2);
        assert_eq!(c.jwks_refresh_interval, Duration::from_secs(60));
        assert_eq!(
            c.issuers[1].keys,
            KeySource::Discovery(
                Url::parse("http://127.0.0.1:9000/.well-known/openid-configuration").unwrap()
            )
        );
    }

    #[test]
    fn bad_files_name_the_field() {
        let cases = [
            (
                "algorithms: [RS256, ES256]",
                "algorithms: [HS256]",
                "issuers[0].algorithms",
            ),
            (
                "algorithms: [RS256, ES256]",
                "algorithms: [none]",
                "issuers[0].algorithms",
            ),
            (
                "algorithms: [RS256, ES256]",
                "algorithms: []",
                "issuers[0].algorithms",
            ),
            (
                "audience: actiond\n    algorithms: [RS256",
                "audience: ''\n    algorithms: [RS256",
                "issuers[0].audience",
            ),
            (
                "https://k8s.example/openid",
                "http://k8s.example/openid",
                "issuers[0].jwks_uri",
            ),
            (
                "max_token_lifetime: 1h",
                "max_token_lifetime: 2d",
                "issuers[0].max_token_lifetime",
            ),
            (
                "http://127.0.0.1:9000",
                "https://k8s.example",
                "issuers[1].issuer",
            ),
            (
                "    discovery: true\n",
                "    discovery: true\n    jwks_uri: https://x.example/jwks\n",
                "issuers[1].jwks_uri",
            ),
        ];
        for (from, to, field) in cases {
            let text = GOOD.replacen(from, to, 1);
            assert_ne!(text, GOOD, "{from}");
            let e = IssuersConfig::from_yaml(&text).unwrap_err();
            assert!(e.contains(field), "{to}: {e}");
        }
    }

    #[test]
    fn a_leeway_line_is_refused_not_ignored() {
        let e = IssuersConfig::from_yaml(&format!("leeway: 30s\n{GOOD}")).unwrap_err();
        assert!(
            e.starts_with("leeway: ") && e.contains("60 s clock skew"),
            "{e}"
        );
    }
}
