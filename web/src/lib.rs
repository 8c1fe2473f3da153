//! actiond-web: the approval app (design, "web (approvals)").
//!
//! People log in through OpenID Connect (authorization code + PKCE S256 + `state` + `nonce`,
//! discovery from the issuer URL, ID-token algorithms from configuration only) and decide one
//! escalated proposal at a time. Approvers are identified by (issuer, subject), never by email;
//! which tenants a person approves for is computed on every request from the ID-token claims
//! kept in the session and the tenants' *current* documents (`approvers:`), so a document
//! change takes effect at once and a group removal at the next login (sessions are short).
//!
//! - [`WebArgs`]: configuration (flags and `ACTIOND_WEB_*` variables; secrets from files only).
//! - [`serve`] / [`run`]: the process; [`router`]: the HTTP routes, for tests to mount.
//! - `oidc`: the OpenID Connect client; `session`: Postgres-backed sessions, cookies, CSRF;
//!   `authz`: tenant authorization from claims; `pages`: queue, history and decision pages;
//!   `notify`: escalation notices (Slack-compatible webhook, SMTP email); `devlogin`: the
//!   loopback-only dev login with a one-time code; `headers`: security headers.
//!
//! Routes: `GET /queue`, `GET /history`, `GET /p/{id}`, `POST /p/{id}/decide`, `GET /login`,
//! `GET /login/oidc`, `GET /oidc/callback`, `POST /logout`, `GET|POST /dev-login`,
//! `GET|POST /passkeys`, `POST /passkeys/challenge` (`passkey`: passkey-signed approvals),
//! `GET /static/app.css`, `GET /static/passkey.js`. No state change on GET except starting a login.

mod admin;
mod authz;
mod card;
mod devlogin;
mod error;
mod fact_text;
mod fatigue;
mod freeze;
mod headers;
mod notify;
mod oidc;
mod pages;
mod params_view;
mod passkey;
mod session;
mod staging;
mod views;

pub use notify::{escape_for_chat, notification_text};

use actiond_core::grant::GrantSigner;
use actiond_core::ids::parse_duration;
use actiond_runtime::credentials::CredentialsDir;
use actiond_store::Db;
use actiond_store::policy_cache::PolicyCache;
use actiond_store::web_sessions::Clock;
use anyhow::Context as _;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use url::Url;

/// Issuer recorded for people who logged in through the dev login (never a real IdP's).
pub const DEV_ISSUER: &str = "urn:actiond:dev-login";

/// Configuration of `actiond web`. Non-secret settings come from flags or `ACTIOND_WEB_*`
/// variables; secrets only from files in the credentials directory:
/// `grant_signing_key` (base64 PKCS#8 Ed25519), `oidc_client_secret`, and notification webhook
/// URLs as `<tenant>.<name>`.
#[derive(Debug, Clone, clap::Args)]
pub struct WebArgs {
    /// Address the web listener binds.
    #[arg(long, env = "ACTIOND_WEB_LISTEN", default_value = "127.0.0.1:8081")]
    pub listen: SocketAddr,
    /// Address of the admin listener (`/metrics`, `/healthz`, `/readyz`); none when absent.
    #[arg(long, env = "ACTIOND_WEB_ADMIN_LISTEN")]
    pub admin_listen: Option<SocketAddr>,
    /// Public base URL people reach the app at (links in notices, the OIDC redirect URI).
    /// Must be https unless it is a loopback address. Default: `http://<listen>`.
    #[arg(long, env = "ACTIOND_WEB_PUBLIC_URL")]
    pub public_url: Option<Url>,
    /// Postgres URL of the web role (its value is never printed: it may hold a password).
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: String,
    /// Connections in this process's pool.
    #[arg(long, env = "ACTIOND_WEB_POOL_SIZE", default_value_t = 8)]
    pub pool_size: usize,
    /// Apply database migrations at start (normally `actiond migrate` does it).
    #[arg(long, env = "ACTIOND_WEB_MIGRATE")]
    pub migrate: bool,
    /// OIDC issuer URL, exactly as the IdP writes it in `iss` (discovery at
    /// `<issuer>/.well-known/openid-configuration`).
    #[arg(long, env = "ACTIOND_WEB_OIDC_ISSUER")]
    pub oidc_issuer: Option<String>,
    /// OIDC client id. The client secret is the credential file `oidc_client_secret`.
    #[arg(long, env = "ACTIOND_WEB_OIDC_CLIENT_ID")]
    pub oidc_client_id: Option<String>,
    /// Scopes requested besides `openid`, space separated (add `groups` where the IdP needs it).
    #[arg(long, env = "ACTIOND_WEB_OIDC_SCOPES", default_value = "email profile")]
    pub oidc_scopes: String,
    /// ID-token signing algorithms accepted, comma separated. `none` and HMAC are refused.
    #[arg(
        long,
        env = "ACTIOND_WEB_OIDC_ALGS",
        default_value = "RS256",
        value_delimiter = ','
    )]
    pub oidc_algs: Vec<String>,
    /// Key id written into grants this service signs (must start with `web-`).
    #[arg(long, env = "ACTIOND_WEB_GRANT_KEY_ID", default_value = "web-1")]
    pub grant_key_id: String,
    /// Directory of credential files; default `$CREDENTIALS_DIRECTORY`.
    #[arg(long, env = "ACTIOND_WEB_CREDENTIALS_DIR")]
    pub credentials_dir: Option<PathBuf>,
    /// A session ends after this long without a request.
    #[arg(long, env = "ACTIOND_WEB_SESSION_IDLE", default_value = "15m", value_parser = parse_duration)]
    pub session_idle: Duration,
    /// A session ends this long after login, whatever its use.
    #[arg(long = "session-max", env = "ACTIOND_WEB_SESSION_MAX", default_value = "8h", value_parser = parse_duration)]
    pub session_absolute: Duration,
    /// Enables the dev login (no identity provider). Refused unless the listener is loopback;
    /// each login needs the one-time code printed on stderr.
    #[arg(long, env = "ACTIOND_WEB_DEV_LOGIN")]
    pub dev_login: bool,
    /// SMTP relay `host:port` for email notices (plain SMTP on a trusted network/loopback).
    #[arg(long, env = "ACTIOND_WEB_SMTP_RELAY")]
    pub smtp_relay: Option<String>,
    /// PEM file of the passkey attestation roots this deployment trusts (authenticator makers'
    /// root certificates, e.g. from the FIDO Metadata Service). Needed by tenants whose
    /// `approvers.passkey_attestation` is `required`: without it their registrations are refused.
    #[arg(long, env = "ACTIOND_WEB_PASSKEY_ATTESTATION_ROOTS")]
    pub passkey_attestation_roots: Option<std::path::PathBuf>,
    /// Sender address of email notices.
    #[arg(
        long,
        env = "ACTIOND_WEB_SMTP_FROM",
        default_value = "actiond@localhost"
    )]
    pub smtp_from: String,
    /// How often escalations are looked for.
    #[arg(long, env = "ACTIOND_WEB_NOTIFY_INTERVAL", default_value = "5s", value_parser = parse_duration)]
    pub notify_interval: Duration,
    /// Allow notification webhooks to loopback, private and link-local addresses.
    #[arg(long, env = "ACTIOND_WEB_NOTIFY_ALLOW_PRIVATE")]
    pub notify_allow_private: bool,
    /// Connection limits of the approval app's listener.
    #[command(flatten)]
    pub edge: actiond_runtime::http::EdgeArgs,
}

/// Counters of the web service.
#[derive(Clone)]
pub struct WebMetrics {
    decisions: IntCounterVec,
    /// Seconds from the decision page being shown to the decision, by tenant and verdict
    /// (never by person or agent: those stay in Postgres, on the Approvers page).
    decision_seconds: HistogramVec,
    logins: IntCounterVec,
    notifications: IntCounterVec,
    csrf_rejections: IntCounterVec,
}

impl WebMetrics {
    fn new(m: &actiond_runtime::Metrics) -> anyhow::Result<Self> {
        let vec = |name: &str, help: &str, labels: &[&str]| {
            IntCounterVec::new(Opts::new(name, help), labels).map(|c| m.register(c))
        };
        Ok(Self {
            decisions: vec(
                "web_decisions_total",
                "Decisions submitted by people, by verdict and result",
                &["verdict", "result"],
            )?,
            decision_seconds: {
                let h = HistogramVec::new(
                    HistogramOpts::new(
                        "web_decision_seconds",
                        "Seconds from the decision page being rendered to the decision, by tenant and verdict",
                    )
                    .buckets(vec![
                        1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0,
                    ]),
                    &["tenant", "verdict"],
                )?;
                m.register(h)
            },
            logins: vec(
                "web_logins_total",
                "Login attempts by method and result",
                &["method", "result"],
            )?,
            notifications: vec(
                "web_notifications_total",
                "Escalation notices by channel and result",
                &["channel", "result"],
            )?,
            csrf_rejections: vec(
                "web_csrf_rejections_total",
                "POSTs refused for a missing or wrong CSRF token or a foreign origin",
                &["reason"],
            )?,
        })
    }
}

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
    pub(crate) dev: Option<devlogin::DevLogin>,
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
    pub(crate) notify: notify::NotifyConfig,
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
            Some(devlogin::DevLogin::new(&public_url))
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
            notify: notify::NotifyConfig {
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
        self.dev.as_ref().map(devlogin::DevLogin::current)
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

/// The HTTP routes with security headers on every response.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/", get(pages::root))
        .route("/queue", get(pages::queue))
        .route("/history", get(pages::history))
        .route("/admin/shadow", get(admin::shadow))
        .route("/admin/approvers", get(admin::approvers))
        .route("/admin/agents", get(admin::agents))
        .route("/admin/agents/{id}/revoke", post(admin::revoke))
        .route("/agents/{id}/freeze", post(freeze::freeze))
        .route("/agents/{id}/unfreeze", post(freeze::unfreeze))
        .route("/p/{id}", get(pages::decision))
        .route("/p/{id}/decide", post(pages::decide))
        .route("/login", get(session::login_page))
        .route("/login/oidc", get(session::login_oidc))
        .route("/oidc/callback", get(session::callback))
        .route("/logout", post(session::logout))
        .route("/dev-login", get(devlogin::page).post(devlogin::submit))
        .route("/passkeys", get(passkey::page).post(passkey::register))
        .route("/passkeys/challenge", post(passkey::challenge))
        .route("/static/app.css", get(headers::stylesheet))
        .route("/static/passkey.js", get(headers::passkey_script))
        .fallback(pages::not_found)
        .layer(DefaultBodyLimit::max(16 * 1024))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            error::navigation_on_errors,
        ))
        .layer(axum::middleware::from_fn(error::problem_when_asked))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            headers::security_headers,
        ))
        .with_state(state)
}

/// Runs the web service on `listener` until `shutdown` resolves: the HTTP routes, the
/// escalation notifier, the session sweeper and, when configured, the admin listener.
/// `args.listen` is taken to be the listener's bound address, so the default public URL
/// (`http://<listen>`) names the port actually bound when `--listen` asked for port 0.
pub async fn serve(
    mut args: WebArgs,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    args.listen = listener.local_addr()?;
    let state = AppState::build(&args).await?;
    if let Some(admin) = args.admin_listen {
        let db = state.db.clone();
        let ready: actiond_runtime::ReadyCheck = Arc::new(move || {
            let db = db.clone();
            Box::pin(async move { db.ping().await })
        });
        let bound = actiond_runtime::serve_admin(
            admin,
            state.registry.clone(),
            ready,
            None,
            std::future::pending(),
        )
        .await?;
        tracing::info!(%bound, "admin listener");
    }
    serve_state_with(state, listener, (&args.edge).into(), shutdown).await
}

/// Serves an already built [`AppState`] on `listener` (with the notifier and session sweeper)
/// until `shutdown` resolves. For embedding (`actiond dev`) and tests.
pub async fn serve_state(
    state: AppState,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    serve_state_with(
        state,
        listener,
        actiond_runtime::http::Edge::default(),
        shutdown,
    )
    .await
}

/// [`serve_state`] with the listener's connection limits (`--http-*` flags).
pub async fn serve_state_with(
    state: AppState,
    listener: tokio::net::TcpListener,
    edge: actiond_runtime::http::Edge,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let bg = tokio::spawn(notify::background(state.clone()));
    tracing::info!(
        addr = %listener.local_addr()?,
        public_url = %state.public_url,
        oidc = state.oidc.is_some(),
        dev_login = state.dev.is_some(),
        "actiond web listening"
    );
    actiond_runtime::http::serve(
        listener,
        actiond_runtime::http::observe(router(state)),
        edge,
        shutdown,
    )
    .await;
    bg.abort();
    Ok(())
}

/// `actiond web`: binds `--listen` and serves until SIGINT/SIGTERM.
pub async fn run(args: WebArgs) -> anyhow::Result<()> {
    actiond_runtime::init_tracing();
    let listener = actiond_runtime::http::bind("http", args.listen).await?;
    serve(args, listener, actiond_runtime::shutdown_signal()).await
}
