//! One issuer's JSON Web Key Set (RFC 7517 §5), cached.
//!
//! Keys are looked up by `kid`. A `kid` the cache does not know fetches the set again, but at
//! most once per refresh interval per issuer, so a flood of tokens with invented `kid`s costs
//! the issuer one request per interval. Fetched keys are used for at most `max_age` before the
//! next lookup fetches them again; when a fetch fails the keys already held stay in use (an
//! issuer's outage does not lock every agent out) and the failure is logged.

use super::config::KeySource;
use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde_json::Value;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tokio::sync::Mutex;

/// Largest JWKS or discovery document read, in bytes.
pub const MAX_DOCUMENT_BYTES: usize = 256 * 1024;
/// Timeout of one JWKS or discovery request.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(5);

/// A verification key from the set, with the `alg` it is restricted to, if the JWK says.
#[derive(Clone)]
pub struct CachedKey {
    /// The public key.
    pub key: DecodingKey,
    /// The JWK's `alg` (RFC 7517 §4.4), when present.
    pub alg: Option<KeyAlgorithm>,
}

impl CachedKey {
    /// Whether a token signed with `alg` may use this key: the JWK's `alg`, if given, must
    /// name exactly that algorithm, and the key's family must be the algorithm's.
    pub fn allows(&self, alg: Algorithm) -> bool {
        let named = self.alg.is_none_or(|k| k.to_string() == format!("{alg:?}"));
        named && self.key.family() == alg.family()
    }
}

#[derive(Default)]
struct State {
    keys: HashMap<String, CachedKey>,
    fetched_at: Option<Instant>,
    last_attempt: Option<Instant>,
}

/// The cached key set of one issuer.
pub struct KeySet {
    issuer: String,
    source: KeySource,
    refresh_interval: Duration,
    max_age: Duration,
    http: reqwest::Client,
    state: Mutex<State>,
}

impl KeySet {
    /// An empty cache; the first lookup fetches.
    pub fn new(
        issuer: String,
        source: KeySource,
        refresh_interval: Duration,
        max_age: Duration,
        http: reqwest::Client,
    ) -> Self {
        Self {
            issuer,
            source,
            refresh_interval,
            max_age,
            http,
            state: Mutex::new(State::default()),
        }
    }

    /// The key named `kid`, fetching the set when the cache is older than `max_age` or does
    /// not know `kid` — at most once per refresh interval. `None`: no such key.
    pub async fn key(&self, kid: &str) -> Option<CachedKey> {
        let mut st = self.state.lock().await;
        let fresh = st.fetched_at.is_some_and(|t| t.elapsed() < self.max_age);
        if fresh && let Some(k) = st.keys.get(kid) {
            return Some(k.clone());
        }
        let may_fetch = st
            .last_attempt
            .is_none_or(|t| t.elapsed() >= self.refresh_interval);
        if may_fetch {
            st.last_attempt = Some(Instant::now());
            match self.fetch().await {
                Ok(keys) => {
                    st.keys = keys;
                    st.fetched_at = Some(Instant::now());
                }
                Err(e) => {
                    tracing::error!(issuer = %self.issuer, error = %e, "JWKS fetch failed; keeping the keys held");
                }
            }
        }
        st.keys.get(kid).cloned()
    }

    async fn get_json(&self, url: &url::Url) -> Result<Value, String> {
        let mut resp = self
            .http
            .get(url.clone())
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| format!("GET {url}: {e}"))?;
        if !resp.status().is_success() {
            return Err(format!("GET {url}: HTTP {}", resp.status()));
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| format!("GET {url}: {e}"))? {
            body.extend_from_slice(&chunk);
            if body.len() > MAX_DOCUMENT_BYTES {
                return Err(format!("GET {url}: larger than {MAX_DOCUMENT_BYTES} bytes"));
            }
        }
        serde_json::from_slice(&body).map_err(|e| format!("GET {url}: not JSON: {e}"))
    }

    /// The JWKS URL: configured, or read from the discovery document (whose `issuer` must be
    /// exactly the configured issuer, OpenID Connect Discovery 1.0 §4.3).
    async fn jwks_uri(&self) -> Result<url::Url, String> {
        match &self.source {
            KeySource::JwksUri(u) => Ok(u.clone()),
            KeySource::Discovery(u) => {
                let doc = self.get_json(u).await?;
                if doc.get("issuer").and_then(Value::as_str) != Some(self.issuer.as_str()) {
                    return Err(format!(
                        "{u}: issuer is not {:?} (OpenID Connect Discovery §4.3)",
                        self.issuer
                    ));
                }
                let raw = doc
                    .get("jwks_uri")
                    .and_then(Value::as_str)
                    .ok_or_else(|| format!("{u}: no jwks_uri"))?;
                super::config::fetchable(&format!("{u}: jwks_uri"), raw)
            }
        }
    }

    /// Fetches the set. Keys without `kid`, for encryption (`use: enc`), of an unknown type or
    /// that do not parse are skipped, and so are symmetric (`oct`) keys.
    async fn fetch(&self) -> Result<HashMap<String, CachedKey>, String> {
        let url = self.jwks_uri().await?;
        let doc = self.get_json(&url).await?;
        let Some(list) = doc.get("keys").and_then(Value::as_array) else {
            return Err(format!("{url}: not a JWK Set (no keys array)"));
        };
        let mut keys = HashMap::new();
        for raw in list {
            let Ok(jwk) = serde_json::from_value::<Jwk>(raw.clone()) else {
                continue;
            };
            let Some(kid) = jwk.common.key_id.clone() else {
                continue;
            };
            // A symmetric key in a public key set is never a workload's key.
            if matches!(jwk.algorithm, AlgorithmParameters::OctetKey(_)) {
                continue;
            }
            if matches!(jwk.common.public_key_use, Some(ref u) if *u != PublicKeyUse::Signature) {
                continue;
            }
            if let Ok(key) = DecodingKey::from_jwk(&jwk) {
                keys.insert(
                    kid,
                    CachedKey {
                        key,
                        alg: jwk.common.key_algorithm,
                    },
                );
            }
        }
        tracing::info!(issuer = %self.issuer, keys = keys.len(), "JWKS fetched");
        Ok(keys)
    }
}
