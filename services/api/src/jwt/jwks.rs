//! One issuer's JSON Web Key Set (RFC 7517 §5), cached.
//!
//! Keys are looked up by `kid`, and a lookup never waits for a fetch it does not need:
//!
//! - A known `kid` is answered from the cache at once. Past `max_age` the set is fetched again
//!   in the background while the keys held keep answering (at most once per refresh
//!   interval), so one slow or hanging issuer never holds up its agents.
//! - An unknown `kid` starts a fetch — at most one per refresh interval per issuer, and only
//!   one at a time (single flight) — and waits for the fetch in flight, if any, at most
//!   [`FETCH_WAIT`]. A flood of tokens with invented `kid`s costs the issuer one request per
//!   interval and holds up no one else.
//! - Keys stay trusted for at most `max_age + max_stale` after the last fetch that returned
//!   them: an issuer that cannot be reached (or that an attacker keeps unreachable so that a
//!   key it removed stays in use) does not extend that. Past it the keys are dropped and every
//!   token of the issuer is refused until a fetch succeeds. A failed fetch is logged.
//!
//! Nothing here holds a lock across an await: the cache is a short `std::sync::Mutex`, the
//! fetch runs on its own task (a caller that gives up does not cancel it).

use super::config::KeySource;
use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Largest JWKS or discovery document read, in bytes.
pub const MAX_DOCUMENT_BYTES: usize = 256 * 1024;
/// Timeout of one JWKS or discovery request.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest a lookup of an unknown `kid` waits for the fetch in flight (discovery and the set:
/// two requests).
pub const FETCH_WAIT: Duration = Duration::from_secs(10);

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
    fetching: bool,
}

/// The cached key set of one issuer.
pub struct KeySet {
    inner: Arc<Inner>,
}

struct Inner {
    issuer: String,
    source: KeySource,
    refresh_interval: Duration,
    max_age: Duration,
    max_stale: Duration,
    http: reqwest::Client,
    state: Mutex<State>,
    /// Bumped (under the `state` lock) each time a fetch ends, successful or not.
    done: watch::Sender<u64>,
}

impl KeySet {
    /// An empty cache; the first lookup fetches. Keys are fetched again after `max_age` and
    /// trusted for at most `max_age + max_stale` after the fetch that last returned them.
    pub fn new(
        issuer: String,
        source: KeySource,
        refresh_interval: Duration,
        max_age: Duration,
        max_stale: Duration,
        http: reqwest::Client,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                issuer,
                source,
                refresh_interval,
                max_age,
                max_stale,
                http,
                state: Mutex::new(State::default()),
                done: watch::channel(0).0,
            }),
        }
    }

    /// The key named `kid` (see the module documentation). `None`: no such key, or the keys
    /// are older than `max_age + max_stale` and no fetch has succeeded since.
    pub async fn key(&self, kid: &str) -> Option<CachedKey> {
        let mut done = {
            let mut st = self.inner.lock();
            let (usable, fresh) = self.inner.age_bounds(&st);
            if let Some(k) = st.keys.get(kid).filter(|_| usable).cloned() {
                if !fresh {
                    Inner::start_fetch(&self.inner, &mut st);
                }
                return Some(k);
            }
            Inner::start_fetch(&self.inner, &mut st);
            if !st.fetching {
                return None;
            }
            // Subscribed under the lock: the end of the fetch in flight is the next change.
            self.inner.done.subscribe()
        };
        let _ = tokio::time::timeout(FETCH_WAIT, done.changed()).await;
        let st = self.inner.lock();
        let (usable, _) = self.inner.age_bounds(&st);
        st.keys.get(kid).filter(|_| usable).cloned()
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// (keys may still be used, keys are younger than `max_age`).
    fn age_bounds(&self, st: &State) -> (bool, bool) {
        match st.fetched_at.map(|t| t.elapsed()) {
            Some(age) => (age < self.max_age + self.max_stale, age < self.max_age),
            None => (false, false),
        }
    }

    /// Starts a fetch on its own task unless one is in flight or the last attempt is younger
    /// than the refresh interval.
    fn start_fetch(this: &Arc<Self>, st: &mut State) {
        let allowed = st
            .last_attempt
            .is_none_or(|t| t.elapsed() >= this.refresh_interval);
        if st.fetching || !allowed {
            return;
        }
        st.fetching = true;
        st.last_attempt = Some(Instant::now());
        let me = this.clone();
        tokio::spawn(async move {
            let result = me.fetch().await;
            let mut st = me.lock();
            match result {
                Ok(keys) => {
                    st.keys = keys;
                    st.fetched_at = Some(Instant::now());
                }
                Err(e) => {
                    let (usable, _) = me.age_bounds(&st);
                    if usable {
                        tracing::error!(issuer = %me.issuer, error = %e, "JWKS fetch failed; keeping the keys held");
                    } else {
                        st.keys.clear();
                        tracing::error!(issuer = %me.issuer, error = %e, "JWKS fetch failed; no keys of this issuer are trusted until one succeeds");
                    }
                }
            }
            st.fetching = false;
            me.done.send_modify(|n| *n = n.wrapping_add(1));
        });
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
