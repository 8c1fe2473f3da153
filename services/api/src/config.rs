//! `actiond api`'s flags and environment variables.

use crate::{DEFAULT_MAX_WAITS_PER_AGENT, DEFAULT_SUBMIT_WORKERS};
use std::net::SocketAddr;

/// Command-line / environment configuration of `actiond api`.
#[derive(Debug, Clone, clap::Args)]
pub struct ApiArgs {
    /// Address the agent-facing HTTP listener binds.
    #[arg(long, env = "ACTIOND_API_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Address of the admin listener (/metrics, /healthz, /readyz).
    #[arg(
        long,
        env = "ACTIOND_API_ADMIN_LISTEN",
        default_value = "127.0.0.1:9180"
    )]
    pub admin_listen: SocketAddr,
    /// Postgres URL of the api role.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: String,
    /// Pool size.
    #[arg(long, env = "ACTIOND_API_POOL_SIZE", default_value_t = 16)]
    pub pool_size: usize,
    /// Submission workers. Each stores what waits when it becomes free, one batch per tenant,
    /// two tenants' batches at a time (each holding one pooled connection while it runs), up
    /// to 64 submissions in one statement and one commit; a lone submission is stored at
    /// once, as before.
    #[arg(long, env = "ACTIOND_API_SUBMIT_WORKERS", default_value_t = DEFAULT_SUBMIT_WORKERS)]
    pub submit_workers: usize,
    /// Public origins agents reach the API by (`https://actiond.example.com`,
    /// `http://10.0.0.5:8080`, `:*` for any port), comma-separated. `/mcp` accepts only their
    /// `Host` and `Origin` values (DNS-rebinding protection); default: loopback only.
    #[arg(
        long = "public-origin",
        env = "ACTIOND_API_PUBLIC_ORIGINS",
        value_delimiter = ','
    )]
    pub public_origins: Vec<String>,
    /// YAML file of the issuers whose workload JWTs identify agents (issuer, jwks_uri or
    /// discovery, audience, algorithms, max_token_lifetime); see docs/agents.md, "Agent identity
    /// by JWT". Without it only static agent tokens are accepted.
    #[arg(long, env = "ACTIOND_API_JWT_ISSUERS_FILE")]
    pub jwt_issuers_file: Option<std::path::PathBuf>,
    /// Connection limits of the agent-facing listener.
    #[command(flatten)]
    pub edge: actiond_runtime::http::EdgeArgs,
    /// How long, in milliseconds, a looked-up live agent is reused for the same token or
    /// workload identity without reading Postgres; any change to an agent empties the cache at
    /// once (LISTEN/NOTIFY). 0 reads the agent on every request.
    #[arg(long, env = "ACTIOND_API_AGENT_CACHE_MS", default_value_t = 5000)]
    pub agent_cache_ms: u64,
    /// Long-polls (`GET /v1/proposals/{id}?wait=N`, `check_proposal` with `wait_seconds`) one
    /// agent may hold at once; past it a wait is answered at once with the current state, so
    /// one agent cannot hold the connections and tasks every other agent needs.
    #[arg(long, env = "ACTIOND_API_MAX_WAITS_PER_AGENT", default_value_t = DEFAULT_MAX_WAITS_PER_AGENT as u32, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub max_waits_per_agent: u32,
}
