//! [`SubmitError`]: every way the API refuses or fails a request, on both paths (REST and MCP).
//!
//! Call sites say *what* went wrong; they never choose an HTTP status or a message for the
//! model. The enum is mapped exactly twice, each time by an exhaustive `match` (adding a variant
//! does not compile until both are decided):
//!
//! - to an RFC 9457 `application/problem+json` response (status, type, title, detail, headers):
//!   `impl From<SubmitError> for Problem` in [`crate::problem`];
//! - to an MCP tool result with `isError: true` (what the model should do next):
//!   [`crate::mcp::tools::tool_result`].
//!
//! Rejections of input carry [`FieldError`]s, each naming the field (a dotted path, or the
//! header name) and the rule it broke.

use actiond_core::FieldError;
use actiond_store::StoreError;

/// Why a request was refused, or that it failed.
#[derive(Debug)]
pub enum SubmitError {
    /// The request broke input rules; each error names the field and the rule (400).
    Invalid(Vec<FieldError>),
    /// No usable bearer token: `detail` tells the agent what to send (401).
    Unauthorized {
        /// What is wrong with the token, readable by the agent's operator.
        detail: &'static str,
    },
    /// The resource (`what`: "proposal", "route") does not exist or is not the agent's (404).
    NotFound {
        /// What was looked for.
        what: &'static str,
    },
    /// The agent's tenant has no document applied yet (409).
    TenantNotConfigured,
    /// An approver froze this agent; its new proposals are refused until its owner or a tenant
    /// admin unfreezes it (403).
    AgentFrozen,
    /// The agent's tenant moved to another cell (`actiond tenant export`): nothing of it is
    /// stored here any more; the agent sends its proposals to that cell (409).
    TenantMoved {
        /// The cell it moved to, as the operator named it.
        moved_to: String,
        /// When it was frozen here (RFC 3339).
        moved_at: String,
    },
    /// The body is larger than `limit` bytes (413).
    BodyTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// The body is not sent as `application/json` (415).
    UnsupportedMediaType,
    /// The body is sent with a `Content-Encoding` other than `identity` (415, RFC 9110
    /// §15.5.16): bodies are not decompressed. Holds the encoding as sent (at most 64
    /// characters).
    UnsupportedContentEncoding(String),
    /// The idempotency key was already used with a different request body (422).
    IdempotencyKeyReused,
    /// The agent already has `cap` proposals waiting for a person (429, retry after a minute).
    TooManyOpenEscalations {
        /// The tenant's cap of open escalations per agent.
        cap: i64,
    },
    /// The database failed or is unreachable (503 when retrying may help, 500 otherwise; the
    /// detail goes to the log only).
    Store(StoreError),
}

impl SubmitError {
    /// One invalid field: `field` is its dotted path (or header name), `rule` what it must be.
    pub fn field(field: &str, rule: impl Into<String>) -> Self {
        Self::Invalid(vec![FieldError::new(field, rule)])
    }
}

impl From<StoreError> for SubmitError {
    fn from(e: StoreError) -> Self {
        Self::Store(e)
    }
}
