//! actiond-api: the agent-facing service (`actiond api`).
//!
//! - `POST /v1/proposals` → `202 {proposal_id, state: "pending"}`
//! - `GET /v1/proposals/{id}[?wait=SECONDS]` → the proposing agent's view, long-polled (an
//!   agent holds at most `--max-waits-per-agent` long-polls at once, REST and MCP together;
//!   past it a wait is answered at once with the current state, see [`WaitSlots`])
//! - `GET /openapi.yaml` → the OpenAPI 3.1 document
//! - `GET /v1/openapi.yaml` → the same, for the calling agent's tenant: only the actions it
//!   enables, with its limits ([`openapi`])
//! - `POST /mcp` → the MCP endpoint (tools `propose_action`, `check_proposal`; see [`mcp`])
//! - `GET /.well-known/oauth-protected-resource` → RFC 9728 protected-resource metadata naming
//!   the trusted JWT issuers; every 401 points at it (`WWW-Authenticate: Bearer
//!   resource_metadata="…"`, RFC 9728 §5.1) so MCP clients can discover where to get a token
//!
//! Tenant and agent come from the bearer token only: a static agent token, or a workload JWT
//! from a trusted issuer ([`jwt`]). The api holds no secrets and no grant key.

pub mod config;
pub mod error;
pub mod jwt;
pub mod mcp;
pub mod openapi;
pub mod problem;
pub mod resource;
pub mod submit;

mod metrics;
mod routes;
mod run;

pub use config::ApiArgs;
pub use metrics::{AUTH_FAILURE_REASONS, ApiMetrics, MCP_TOOL_LABELS, SUBMISSION_RESULTS};
pub use routes::*;
pub use run::run;
pub use submit::{SubmitRequest, SubmitResponse};
