//! The OpenID Connect client: discovery, the authorization request (code flow, PKCE S256,
//! `state`, `nonce`) and the code exchange with ID-token verification (issuer, audience,
//! expiry, nonce, signature with an algorithm from configuration only).
//!
//! Discovery is lazy and cached for [`METADATA_TTL`], so the IdP may start after the web
//! service and rotated signing keys are picked up. The HTTP client follows no redirects.

use actiond_core::external_time::{CLOCK_SKEW, TimeBound, TimeRefused};
use anyhow::Context as _;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use openidconnect::core::{
    CoreAuthDisplay, CoreAuthPrompt, CoreErrorResponseType, CoreGenderClaim, CoreJsonWebKey,
    CoreJweContentEncryptionAlgorithm, CoreJwsSigningAlgorithm, CoreProviderMetadata,
    CoreResponseType, CoreRevocableToken, CoreRevocationErrorResponse,
    CoreTokenIntrospectionResponse, CoreTokenType,
};
use openidconnect::{
    AdditionalClaims, AuthenticationFlow, AuthorizationCode, Client, ClientId, ClientSecret,
    CsrfToken, EmptyExtraTokenFields, EndpointMaybeSet, EndpointNotSet, EndpointSet,
    HttpClientError, IdTokenFields, IssuerUrl, Nonce, PkceCodeChallenge, PkceCodeVerifier,
    RedirectUrl, RequestTokenError, Scope, StandardErrorResponse, StandardTokenResponse,
    TokenResponse as _,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::RwLock;

/// How long discovered metadata (endpoints, JWKS) is reused.
pub(crate) const METADATA_TTL: Duration = Duration::from_secs(600);

/// The oldest an ID token's `iat` and `nbf` may be: the token endpoint mints the token during
/// the callback, so ten minutes covers an IdP that back-dates them by a few for its own skew.
pub(crate) const ID_TOKEN_MAX_AGE: Duration = Duration::from_secs(600);

/// The oldest an ID token's `auth_time` may be: a sign-in at the IdP more than a year ago, or
/// before 1970, is an IdP fault, not a sign-in. (Whether it is recent enough for an Approve is
/// judged at decision time against the handler's `reauth_within`.)
pub(crate) const AUTH_TIME_MAX_AGE: Duration = Duration::from_secs(366 * 86_400);

/// The time claims of an ID token, each in its window (see [`actiond_core::external_time`]):
/// `iat` (required), `nbf` and `auth_time` (when present).
const TIME_CLAIMS: [(TimeBound, bool); 3] = [
    (TimeBound::new("iat", ID_TOKEN_MAX_AGE), true),
    (TimeBound::new("nbf", ID_TOKEN_MAX_AGE), false),
    (TimeBound::new("auth_time", AUTH_TIME_MAX_AGE), false),
];

/// A refused login answer. `reason` is the `web_logins_total` result label; `detail` says what
/// was wrong and carries no token, authorization code, client secret, nonce or state (it is
/// logged and shown to the person).
#[derive(Debug)]
pub(crate) struct LoginRefused {
    pub(crate) reason: &'static str,
    pub(crate) detail: String,
}

impl LoginRefused {
    fn new(reason: &'static str, detail: impl Into<String>) -> Self {
        Self {
            reason,
            detail: detail.into(),
        }
    }
}

/// What went wrong at the token endpoint, without the response body (it holds the tokens) or
/// the request (it holds the code, the verifier and the client secret).
fn exchange_failure(
    e: &RequestTokenError<
        HttpClientError<reqwest::Error>,
        StandardErrorResponse<CoreErrorResponseType>,
    >,
) -> String {
    match e {
        RequestTokenError::ServerResponse(r) => {
            let code: String = r
                .error()
                .to_string()
                .chars()
                .filter(char::is_ascii_graphic)
                .take(64)
                .collect();
            format!("the token endpoint answered the error {code}")
        }
        RequestTokenError::Request(HttpClientError::Reqwest(r)) if r.is_timeout() => {
            "the token endpoint did not answer in time".into()
        }
        RequestTokenError::Request(_) => "the token endpoint could not be reached".into(),
        RequestTokenError::Parse(p, _body) => {
            // The parser's message names a value only where a string was not expected, and no
            // secret field (tokens, nonce) is anything but a string; the body is never printed.
            let why: String = p.inner().to_string().chars().take(200).collect();
            match p.path().to_string().as_str() {
                "." => format!("the token response is not a valid one: {why}"),
                at => format!("the token response is not a valid one (at `{at}`): {why}"),
            }
        }
        RequestTokenError::Other(m) => format!("the token endpoint's answer was refused: {m}"),
    }
}

/// The `max_age` a login was started with, and how long ago it was started (seconds, by the
/// database clock that stored the login).
#[derive(Debug, Clone, Copy)]
pub(crate) struct MaxAgeAsked {
    /// The OIDC `max_age` sent in the authorization request.
    pub(crate) max_age: Duration,
    /// Seconds since the login was started.
    pub(crate) login_age_secs: f64,
}

/// Checks the time claims of a verified ID token (compact form `jwt`) against `now` (seconds
/// since the epoch) and returns its `auth_time`, if any. The raw payload is read because the
/// OIDC library rounds fractional times and bounds none of them.
///
/// With `asked` (the login was started with `max_age`), `auth_time` is required (OpenID
/// Connect Core 1.0 §3.1.2.1) and must be at most `max_age` plus [`CLOCK_SKEW`] older than the
/// start of the login: an identity provider that ignored `max_age` and reused an old sign-in
/// is refused, naming `auth_time` and `max_age`.
fn check_times(
    jwt: &str,
    now: i64,
    asked: Option<MaxAgeAsked>,
) -> Result<Option<i64>, TimeRefused> {
    let unreadable = TimeRefused::Malformed {
        field: "id_token",
        why: "its payload is not readable JSON",
    };
    let payload: Value = jwt
        .split('.')
        .nth(1)
        .and_then(|p| URL_SAFE_NO_PAD.decode(p.trim_end_matches('=')).ok())
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or(unreadable)?;
    let mut auth_time = None;
    for (bound, required) in TIME_CLAIMS {
        match payload.get(bound.field) {
            Some(v) => {
                let t = bound.check_numeric_date(v, now)?;
                if bound.field == "auth_time" {
                    auth_time = Some(t);
                }
            }
            None if required => {
                return Err(TimeRefused::Malformed {
                    field: bound.field,
                    why: "missing",
                });
            }
            None => {}
        }
    }
    if let Some(a) = asked {
        let Some(t) = auth_time else {
            return Err(TimeRefused::Malformed {
                field: "auth_time",
                why: "missing although the sign-in was requested with max_age (OpenID Connect Core 1.0 §3.1.2.1)",
            });
        };
        // Its age when the login began; a sign-in after that is what max_age asks for.
        let started = now as f64 - a.login_age_secs.max(0.0);
        let age_at_start = (started - t as f64).max(0.0);
        TimeBound::new(MAX_AGE_FIELD, a.max_age.saturating_add(CLOCK_SKEW))
            .check_age(age_at_start)?;
    }
    Ok(auth_time)
}

/// How a refusal of an `auth_time` older than the requested `max_age` names its field.
const MAX_AGE_FIELD: &str = "auth_time (the identity provider ignored max_age)";

/// Every claim of the ID token beyond the standard ones (`groups`, custom claims), kept as
/// JSON so the tenant documents can name any claim.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ExtraClaims {
    #[serde(flatten)]
    pub(crate) other: Map<String, Value>,
}
impl AdditionalClaims for ExtraClaims {}

type TokenResp = StandardTokenResponse<
    IdTokenFields<
        ExtraClaims,
        EmptyExtraTokenFields,
        CoreGenderClaim,
        CoreJweContentEncryptionAlgorithm,
        CoreJwsSigningAlgorithm,
    >,
    CoreTokenType,
>;

type OidcClient = Client<
    ExtraClaims,
    CoreAuthDisplay,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJsonWebKey,
    CoreAuthPrompt,
    StandardErrorResponse<CoreErrorResponseType>,
    TokenResp,
    CoreTokenIntrospectionResponse,
    CoreRevocableToken,
    CoreRevocationErrorResponse,
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

/// A started login: where to send the browser and what to keep for the callback.
pub(crate) struct StartedLogin {
    pub(crate) auth_url: url::Url,
    pub(crate) state: String,
    pub(crate) nonce: String,
    pub(crate) pkce_verifier: String,
}

/// The person the IdP vouched for.
#[derive(Debug, Clone)]
pub(crate) struct Identity {
    pub(crate) issuer: String,
    pub(crate) subject: String,
    pub(crate) email: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) claims: Value,
    /// ID-token `auth_time`: when the IdP last authenticated the person, within
    /// [`AUTH_TIME_MAX_AGE`] and the clock skew of now (checked before it is stored).
    pub(crate) auth_time: Option<chrono::DateTime<chrono::Utc>>,
}

/// The configured OIDC relying party.
pub(crate) struct Oidc {
    issuer: IssuerUrl,
    client_id: ClientId,
    secret: ClientSecret,
    redirect: RedirectUrl,
    algs: Vec<CoreJwsSigningAlgorithm>,
    scopes: Vec<String>,
    http: reqwest::Client,
    cached: RwLock<Option<(Arc<OidcClient>, Instant)>>,
}

/// Parses the configured algorithm names; `none` and HMAC algorithms are refused because an
/// HMAC "signature" keyed with a public value proves nothing.
pub(crate) fn parse_algs(names: &[String]) -> anyhow::Result<Vec<CoreJwsSigningAlgorithm>> {
    let mut out = Vec::new();
    for n in names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
        if n.eq_ignore_ascii_case("none") || n.to_ascii_uppercase().starts_with("HS") {
            anyhow::bail!(
                "--oidc-algs: {n} is refused (only asymmetric signatures: RS256, ES256, PS256, EdDSA…)"
            );
        }
        let alg: CoreJwsSigningAlgorithm = serde_json::from_value(Value::String(n.to_owned()))
            .with_context(|| format!("--oidc-algs: unknown algorithm {n:?}"))?;
        out.push(alg);
    }
    if out.is_empty() {
        anyhow::bail!("--oidc-algs must name at least one algorithm");
    }
    Ok(out)
}

impl Oidc {
    /// A relying party for `issuer`; nothing is fetched yet.
    pub(crate) fn new(
        issuer: &str,
        client_id: &str,
        secret: &str,
        redirect: url::Url,
        algs: &[String],
        scopes: &str,
    ) -> anyhow::Result<Self> {
        // No proxy from the environment: discovery, the JWKS and the token exchange (client
        // secret and code) go to the issuer itself, never to whatever `HTTP_PROXY`/`HTTPS_PROXY`
        // name; a proxy could read the secret and, for an `http` issuer, answer with keys of
        // its own (e2e `idp_clocks::the_sign_in_does_not_follow_a_proxy_from_the_environment`).
        let http = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(10))
            .build()
            .context("HTTP client for OIDC")?;
        Ok(Self {
            issuer: IssuerUrl::new(issuer.to_owned()).context("--oidc-issuer")?,
            client_id: ClientId::new(client_id.to_owned()),
            secret: ClientSecret::new(secret.to_owned()),
            redirect: RedirectUrl::from_url(redirect),
            algs: parse_algs(algs)?,
            scopes: scopes
                .split_whitespace()
                .filter(|s| *s != "openid")
                .map(str::to_owned)
                .collect(),
            http,
            cached: RwLock::new(None),
        })
    }

    /// The configured issuer.
    pub(crate) fn issuer(&self) -> &str {
        self.issuer.as_str()
    }

    async fn client(&self, force: bool) -> anyhow::Result<Arc<OidcClient>> {
        if !force
            && let Some((c, at)) = self.cached.read().await.as_ref()
            && at.elapsed() < METADATA_TTL
        {
            return Ok(c.clone());
        }
        let meta = CoreProviderMetadata::discover_async(self.issuer.clone(), &self.http)
            .await
            .map_err(|e| anyhow::anyhow!("OIDC discovery at {}: {e}", self.issuer.as_str()))?;
        let client: OidcClient =
            Client::from_provider_metadata(meta, self.client_id.clone(), Some(self.secret.clone()))
                .set_redirect_uri(self.redirect.clone());
        let client = Arc::new(client);
        *self.cached.write().await = Some((client.clone(), Instant::now()));
        Ok(client)
    }

    /// Starts a login: a fresh `state`, `nonce` and PKCE (S256) verifier; with `max_age`, the
    /// IdP must have authenticated the person at most that long ago, or do it again (OpenID
    /// Connect Core 1.0 §3.1.2.1).
    pub(crate) async fn start(&self, max_age: Option<Duration>) -> anyhow::Result<StartedLogin> {
        let client = self.client(false).await?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut req = client
            .authorize_url(
                AuthenticationFlow::<CoreResponseType>::AuthorizationCode,
                CsrfToken::new_random,
                Nonce::new_random,
            )
            .set_pkce_challenge(challenge);
        for s in &self.scopes {
            req = req.add_scope(Scope::new(s.clone()));
        }
        if let Some(m) = max_age {
            req = req.set_max_age(m);
        }
        let (auth_url, state, nonce) = req.url();
        Ok(StartedLogin {
            auth_url,
            state: state.secret().clone(),
            nonce: nonce.secret().clone(),
            pkce_verifier: verifier.secret().clone(),
        })
    }

    /// Exchanges the code (with the PKCE verifier) and verifies the ID token: signature with an
    /// allowed algorithm and the IdP's published key, issuer, audience (this client only),
    /// expiry and nonce; then its times: `iat`, `nbf` and `auth_time` must be whole seconds in
    /// their windows ([`TIME_CLAIMS`]), so an impossible `auth_time` is never stored.
    ///
    /// With `asked` (the login was started with `max_age`), `auth_time` must be present and
    /// recent enough ([`check_times`]).
    ///
    /// Errors: [`LoginRefused`], which never carries a token, the code, the client secret or the
    /// nonce.
    pub(crate) async fn finish(
        &self,
        code: &str,
        pkce_verifier: &str,
        nonce: &str,
        asked: Option<MaxAgeAsked>,
    ) -> Result<Identity, LoginRefused> {
        let discovery = |e: anyhow::Error| LoginRefused::new("discovery", format!("{e:#}"));
        let client = self.client(false).await.map_err(discovery)?;
        let token = client
            .exchange_code(AuthorizationCode::new(code.to_owned()))
            .map_err(|e| LoginRefused::new("token_exchange", format!("token endpoint: {e}")))?
            .set_pkce_verifier(PkceCodeVerifier::new(pkce_verifier.to_owned()))
            .request_async(&self.http)
            .await
            .map_err(|e| LoginRefused::new("token_exchange", exchange_failure(&e)))?;
        let id_token = token.id_token().ok_or_else(|| {
            LoginRefused::new("token_exchange", "the token response carries no ID token")
        })?;
        let nonce = Nonce::new(nonce.to_owned());
        let verify = |c: &OidcClient| {
            let verifier = c.id_token_verifier().set_allowed_algs(self.algs.clone());
            id_token.claims(&verifier, &nonce).cloned()
        };
        let refused = |e: openidconnect::ClaimsVerificationError| {
            LoginRefused::new("id_token", format!("ID token refused: {e}"))
        };
        let claims = match verify(&client) {
            Ok(c) => c,
            Err(openidconnect::ClaimsVerificationError::SignatureVerification(e)) => {
                // The IdP may have rotated its keys: rediscover once, then verify again.
                tracing::info!(error = %e, "ID token signature did not verify; refreshing JWKS");
                let fresh = self.client(true).await.map_err(discovery)?;
                verify(&fresh).map_err(refused)?
            }
            Err(e) => return Err(refused(e)),
        };
        let jwt = serde_json::to_value(id_token)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let auth_time = check_times(&jwt, actiond_runtime::clock::now_utc().timestamp(), asked)
            .map_err(|e| LoginRefused::new("token_time", format!("ID token refused: {e}")))?
            .and_then(|t| chrono::DateTime::from_timestamp(t, 0));
        let email = claims.email().map(|e| e.as_str().to_owned());
        let name = claims
            .name()
            .and_then(|n| n.get(None))
            .map(|n| n.as_str().to_owned());
        let mut extra = claims.additional_claims().other.clone();
        if let Some(e) = &email {
            extra.insert("email".into(), Value::String(e.clone()));
        }
        let mut claims_json = Value::Object(extra);
        if claims_json.to_string().len() > 16 * 1024 {
            tracing::warn!("ID token claims larger than 16 KiB; keeping none for authorization");
            claims_json = Value::Object(Map::new());
        }
        Ok(Identity {
            issuer: claims.issuer().as_str().to_owned(),
            subject: claims.subject().as_str().to_owned(),
            email,
            name,
            claims: claims_json,
            auth_time,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_790_000_000;

    fn jwt(claims: Value) -> String {
        format!(
            "e30.{}.sig",
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims).unwrap())
        )
    }

    #[test]
    fn max_age_requires_a_recent_auth_time() {
        let asked = Some(MaxAgeAsked {
            max_age: Duration::from_secs(300),
            login_age_secs: 120.0,
        });
        let token = |auth_time: Option<i64>| {
            let mut c = serde_json::json!({"iat": NOW});
            if let Some(t) = auth_time {
                c["auth_time"] = t.into();
            }
            jwt(c)
        };
        // Signed in after the login began (at the IdP, two minutes ago), or within max_age
        // (and the skew) before it.
        for t in [NOW - 1, NOW - 120 - 300, NOW - 120 - 360] {
            assert_eq!(check_times(&token(Some(t)), NOW, asked), Ok(Some(t)), "{t}");
        }
        // An IdP that ignored max_age and reused an hour-old sign-in.
        let e = check_times(&token(Some(NOW - 3600)), NOW, asked).unwrap_err();
        assert!(
            matches!(e, TimeRefused::TooOld { max_secs: 360, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("ignored max_age"), "{e}");
        // No auth_time although max_age was sent.
        let e = check_times(&token(None), NOW, asked).unwrap_err();
        assert_eq!(e.field(), "auth_time");
        assert!(e.to_string().contains("max_age"), "{e}");
        // Without max_age, neither is required.
        assert_eq!(check_times(&token(None), NOW, None), Ok(None));
        assert_eq!(
            check_times(&token(Some(NOW - 3600)), NOW, None),
            Ok(Some(NOW - 3600))
        );
    }
}
