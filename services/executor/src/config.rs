//! `actiond executor`'s flags and environment variables.

use crate::handlers;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Command-line / environment configuration of `actiond executor`.
#[derive(Debug, Clone, clap::Args)]
pub struct ExecutorArgs {
    /// Postgres URL of the executor role.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: String,
    /// Admin listener (/metrics, /healthz, /readyz).
    #[arg(
        long,
        env = "ACTIOND_EXECUTOR_ADMIN_LISTEN",
        default_value = "127.0.0.1:9182"
    )]
    pub admin_listen: SocketAddr,
    /// Directory of provider credentials (`<tenant>.<name>` files); default
    /// `$CREDENTIALS_DIRECTORY`.
    #[arg(long, env = "ACTIOND_EXECUTOR_CREDENTIALS_DIR")]
    pub credentials_dir: Option<PathBuf>,
    /// Directory of trusted grant public keys (`<key_id>.pub`, base64 of 32 bytes); default
    /// `<credentials dir>/trusted_keys`. A `breakglass-*.pub` here enables the break-glass CLI.
    #[arg(long, env = "ACTIOND_EXECUTOR_TRUSTED_KEYS_DIR")]
    pub trusted_keys_dir: Option<PathBuf>,
    /// This executor's id in leases and audit events (default: host-pid).
    #[arg(long, env = "ACTIOND_EXECUTOR_ID")]
    pub id: Option<String>,
    /// Proposals claimed per round.
    #[arg(long, env = "ACTIOND_EXECUTOR_BATCH", default_value_t = 16)]
    pub batch: i64,
    /// Handlers running at once.
    #[arg(long, env = "ACTIOND_EXECUTOR_CONCURRENCY", default_value_t = 16)]
    pub concurrency: usize,
    /// Seconds a claimed proposal whose checks failed for a passing reason (a database or pool
    /// error) is leased to this executor before any claim takes it again. A claim itself
    /// takes no lease: it locks its rows for its transaction.
    #[arg(long, env = "ACTIOND_EXECUTOR_CLAIM_LEASE_SECS", default_value_t = 30)]
    pub claim_lease_secs: u64,
    /// Margin added to the handler timeout for the execution lease, milliseconds.
    #[arg(long, env = "ACTIOND_EXECUTOR_LEASE_MARGIN_MS", default_value_t = 5000)]
    pub lease_margin_ms: u64,
    /// Poll interval without NOTIFY, milliseconds.
    #[arg(long, env = "ACTIOND_EXECUTOR_POLL_MS", default_value_t = 1000)]
    pub poll_ms: u64,
    /// Sweep interval (lease and grant expiry), milliseconds.
    #[arg(long, env = "ACTIOND_EXECUTOR_SWEEP_MS", default_value_t = 2000)]
    pub sweep_ms: u64,
    /// Hosts a URL from a tenant document may reach, for `webhook.post` and every handler whose
    /// settings name a URL (comma-separated `host` or `host:port`).
    #[arg(long, env = "ACTIOND_WEBHOOK_ALLOWED_HOSTS", value_delimiter = ',')]
    pub webhook_allowed_hosts: Vec<String>,
    /// Base URL of the Stripe-style billing API for `billing.refund.issue`.
    #[arg(long, env = "ACTIOND_BILLING_BASE_URL")]
    pub billing_base_url: Option<url::Url>,
    /// Base URL of the PowerDNS HTTP API for `dns.record.update`.
    #[arg(long, env = "ACTIOND_PDNS_BASE_URL")]
    pub pdns_base_url: Option<url::Url>,
    /// DNS address (`ip:port`, UDP) of the PowerDNS server behind `--pdns-base-url`: after a
    /// `dns.record.update` runs, the executor asks it over DNS what it now serves (the API's
    /// 204 alone does not prove a record is served). Without it the effect is not read back.
    #[arg(long, env = "ACTIOND_PDNS_DNS_ADDR")]
    pub pdns_dns_addr: Option<std::net::SocketAddr>,
    /// How long an `outcome_unknown` proposal waits before the executor reads its provider back
    /// to settle it (`succeeded`, `failed` or `effect_mismatch`, never a second run),
    /// milliseconds: a request cut off by a timeout may still land at the provider meanwhile.
    #[arg(
        long,
        env = "ACTIOND_EXECUTOR_SETTLE_AFTER_MS",
        default_value_t = 60_000
    )]
    pub settle_after_ms: u64,
    /// SMTP relay for `email.send` (`host:port`; STARTTLS whenever the relay offers it, and
    /// required whenever a credential is sent).
    #[arg(long, env = "ACTIOND_SMTP_RELAY", value_parser = handlers::email::parse_relay)]
    pub smtp_relay: Option<(String, u16)>,
    /// Send an `email.send` credential (and the message) to a relay that does not offer
    /// STARTTLS, in clear. Off by default: without it such a relay gets neither.
    #[arg(long, env = "ACTIOND_SMTP_ALLOW_PLAINTEXT")]
    pub smtp_allow_plaintext: bool,
    /// Allow private, loopback and link-local destinations (single-machine setups, tests).
    #[arg(long, env = "ACTIOND_ALLOW_PRIVATE_DESTINATIONS")]
    pub allow_private_destinations: bool,
    /// Pool size.
    #[arg(long, env = "ACTIOND_EXECUTOR_POOL_SIZE", default_value_t = 8)]
    pub pool_size: usize,
}
