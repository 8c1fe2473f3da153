//! `actiond web`'s flags and environment variables.

use actiond_core::ids::parse_duration;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use url::Url;

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

/// Notification settings from the operator's configuration.
#[derive(Debug, Clone)]
pub(crate) struct NotifyConfig {
    pub(crate) smtp_relay: Option<String>,
    pub(crate) smtp_from: String,
    pub(crate) interval: Duration,
    pub(crate) allow_private: bool,
}
