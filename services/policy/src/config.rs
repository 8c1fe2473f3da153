//! `actiond policy`'s flags and environment variables.

use std::net::SocketAddr;
use std::path::PathBuf;

/// Command-line / environment configuration of `actiond policy`.
#[derive(Debug, Clone, clap::Args)]
pub struct PolicyArgs {
    /// Postgres URL of the policy role.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: String,
    /// Admin listener (/metrics with queue-age gauges, /healthz, /readyz).
    #[arg(
        long,
        env = "ACTIOND_POLICY_ADMIN_LISTEN",
        default_value = "127.0.0.1:9181"
    )]
    pub admin_listen: SocketAddr,
    /// Directory holding `grant_signing_key` (base64 PKCS#8 Ed25519); default
    /// `$CREDENTIALS_DIRECTORY`.
    #[arg(long, env = "ACTIOND_POLICY_CREDENTIALS_DIR")]
    pub credentials_dir: Option<PathBuf>,
    /// Key id written into grants; must start with `policy-`.
    #[arg(long, env = "ACTIOND_POLICY_KEY_ID", default_value = "policy-1")]
    pub key_id: String,
    /// Proposals claimed per transaction.
    #[arg(long, env = "ACTIOND_POLICY_BATCH", default_value_t = 64)]
    pub batch: i64,
    /// Poll interval when no NOTIFY arrives (the fallback for lost notifications).
    #[arg(long, env = "ACTIOND_POLICY_POLL_MS", default_value_t = 1000)]
    pub poll_ms: u64,
    /// Evaluation budget per proposal, milliseconds; an overrun fails closed (see
    /// `Decision::budget_exceeded`: block when the document has a block rule, else escalate). A
    /// batch is evaluated in turn on one blocking thread, each proposal within this budget. An
    /// evaluation past it stops at its next operation
    /// (`actiond_core::policy::decide_within`).
    #[arg(long, env = "ACTIOND_POLICY_EVAL_BUDGET_MS", default_value_t = 100)]
    pub eval_budget_ms: u64,
    /// How often stale `pending`/`escalated` rows are expired.
    #[arg(long, env = "ACTIOND_POLICY_SWEEP_MS", default_value_t = 5000)]
    pub sweep_ms: u64,
    /// Pool size.
    #[arg(long, env = "ACTIOND_POLICY_POOL_SIZE", default_value_t = 4)]
    pub pool_size: usize,
    /// Claim loops per process (each holds at most one transaction).
    #[arg(long, env = "ACTIOND_POLICY_CONCURRENCY", default_value_t = 2)]
    pub concurrency: usize,
    /// Classifier endpoints tenants may name in `policy.classifier`, as NAME=URL (repeatable;
    /// comma-separated in the environment). A tenant naming an unknown one escalates.
    #[arg(
        long = "classifier",
        env = "ACTIOND_POLICY_CLASSIFIERS",
        value_name = "NAME=URL",
        value_delimiter = ','
    )]
    pub classifiers: Vec<String>,
}
