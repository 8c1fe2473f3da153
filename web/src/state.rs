//! The web service's shared state, built from its configuration.

use crate::config::NotifyConfig;
use crate::devcode::DevLogin;
use crate::{DEV_ISSUER, WebArgs, WebMetrics, fatigue, oidc};
use actiond_core::grant::GrantSigner;
use actiond_runtime::credentials::CredentialsDir;
use actiond_store::Db;
use actiond_store::policy_cache::PolicyCache;
use actiond_store::web_sessions::Clock;
use anyhow::Context as _;
use std::sync::Arc;
use std::time::Duration;
use url::Url;

/// Shared state of the web service.
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

/// The contents of an [`AppState`]; opaque outside this crate.
pub struct Inner {
    pub(crate) db: Db,
    pub(crate) signer: GrantSigner,
    /// Signs when a decision page was rendered (time-on-page measurement).
    pub(crate) form_clock: fatigue::FormClock,
    pub(crate) oidc: Option<oidc::Oidc>,
    pub(crate) dev: Option<DevLogin>,
    pub(crate) public_url: Url,
    pub(crate) origin: String,
    pub(crate) secure_cookies: bool,
    pub(crate) session_idle: Duration,
    pub(crate) session_absolute: Duration,
    pub(crate) docs: PolicyCache,
    pub(crate) clock: Clock,
    pub(crate) metrics: WebMetrics,
    pub(crate) registry: actiond_runtime::Metrics,
    pub(crate) creds: Option<CredentialsDir>,
    pub(crate) notify: NotifyConfig,
    /// DER certificates of `--passkey-attestation-roots` (empty: none configured).
    pub(crate) attestation_roots: Vec<Vec<u8>>,
}

impl std::ops::Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

fn is_loopback_url(u: &Url) -> bool {
    match u.host() {
        Some(url::Host::Ipv4(a)) => a.is_loopback(),
        Some(url::Host::Ipv6(a)) => a.is_loopback(),
        Some(url::Host::Domain(d)) => d == "localhost",
        None => false,
    }
}

impl AppState {
    /// The issuer whose subjects are persons for tenants that pin none (`approvers.issuer`):
    /// the configured OIDC issuer, else the dev login's [`DEV_ISSUER`].
    pub(crate) fn person_issuer(&self) -> &str {
        self.oidc.as_ref().map_or(DEV_ISSUER, |o| o.issuer())
    }

    /// Builds the state from configuration: connects the pool, reads the grant signing key and
    /// the OIDC client secret from the credentials directory, checks the dev-login rule.
    /// OIDC discovery happens lazily at the first login, so the IdP may start later.
    pub async fn build(args: &WebArgs) -> anyhow::Result<Self> {
        let public_url = match &args.public_url {
            Some(u) => u.clone(),
            None => Url::parse(&format!("http://{}/", args.listen))
                .context("default public URL from --listen")?,
        };
        if !matches!(public_url.scheme(), "http" | "https") || public_url.host().is_none() {
            anyhow::bail!("--public-url must be an absolute http(s) URL");
        }
        let loopback_public = is_loopback_url(&public_url);
        if public_url.scheme() != "https" && !loopback_public {
            anyhow::bail!(
                "--public-url must be https unless it is a loopback address (cookies are Secure)"
            );
        }
        let origin = public_url.origin().ascii_serialization();
        let secure_cookies = public_url.scheme() == "https";
        if args.dev_login && !args.listen.ip().is_loopback() {
            anyhow::bail!(
                "--dev-login is refused: the web listener {} is not a loopback address; use OIDC SSO",
                args.listen
            );
        }
        if !args.grant_key_id.starts_with("web-") {
            anyhow::bail!(
                "--grant-key-id must start with web- (got {:?})",
                args.grant_key_id
            );
        }
        let creds = CredentialsDir::resolve(args.credentials_dir.as_deref()).ok();
        let creds_ref = creds.as_ref().context(
            "no credentials directory: pass --credentials-dir or run under systemd LoadCredential= ($CREDENTIALS_DIRECTORY); it must hold grant_signing_key",
        )?;
        let key = creds_ref.read("grant_signing_key")?;
        let signer = GrantSigner::from_pkcs8_b64(&args.grant_key_id, &key)
            .context("credential grant_signing_key")?;
        tracing::info!(
            key_id = %args.grant_key_id,
            public_key = %signer.public_b64(),
            "web grant signing key loaded; executors must trust this public key under this key id"
        );
        let oidc = match (&args.oidc_issuer, &args.oidc_client_id) {
            (Some(issuer), Some(client_id)) => {
                let secret = creds_ref.read("oidc_client_secret")?;
                let redirect = public_url
                    .join("oidc/callback")
                    .context("redirect URI from --public-url")?;
                Some(oidc::Oidc::new(
                    issuer,
                    client_id,
                    &secret,
                    redirect,
                    &args.oidc_algs,
                    &args.oidc_scopes,
                )?)
            }
            (None, None) => None,
            _ => anyhow::bail!("--oidc-issuer and --oidc-client-id go together"),
        };
        let dev = if args.dev_login {
            Some(DevLogin::new(&public_url))
        } else {
            None
        };
        if oidc.is_none() && dev.is_none() {
            anyhow::bail!(
                "no way to log in: configure --oidc-issuer and --oidc-client-id, or --dev-login on loopback"
            );
        }
        let db = Db::connect(&args.database_url, args.pool_size)?;
        if args.migrate {
            db.migrate().await.context("migrations")?;
        }
        let attestation_roots = match &args.passkey_attestation_roots {
            None => Vec::new(),
            Some(p) => {
                let text = std::fs::read_to_string(p)
                    .with_context(|| format!("--passkey-attestation-roots {}", p.display()))?;
                actiond_core::passkey_attestation::roots_from_pem(&text).map_err(|e| {
                    anyhow::anyhow!("--passkey-attestation-roots {}: {e}", p.display())
                })?
            }
        };
        let registry = actiond_runtime::Metrics::new("web");
        let metrics = WebMetrics::new(&registry)?;
        Ok(Self(Arc::new(Inner {
            attestation_roots,
            db,
            signer,
            form_clock: fatigue::FormClock::from_secret(&key),
            oidc,
            dev,
            public_url,
            origin,
            secure_cookies,
            session_idle: args.session_idle,
            session_absolute: args.session_absolute,
            docs: PolicyCache::default(),
            clock: Clock::default(),
            metrics,
            registry,
            creds,
            notify: NotifyConfig {
                smtp_relay: args.smtp_relay.clone(),
                smtp_from: args.smtp_from.clone(),
                interval: args.notify_interval,
                allow_private: args.notify_allow_private,
            },
        })))
    }

    /// The dev login's current one-time code, when the dev login is on (it is also printed on
    /// stderr at start and after every use). For embedding, e.g. `actiond dev`.
    pub fn dev_login_code(&self) -> Option<String> {
        self.dev.as_ref().map(DevLogin::current)
    }

    /// This instance's metrics in the Prometheus text format (what `/metrics` serves).
    pub fn metrics_text(&self) -> String {
        self.registry.render()
    }

    /// The database pool.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// The clock session and login timeouts are judged by: the database clock, shifted only
    /// when a test calls [`Clock::advance`] to reach a timeout without waiting for it.
    pub fn session_clock(&self) -> &Clock {
        &self.clock
    }
}
