//! The api's Prometheus counters.

use crate::jwt;
use actiond_runtime::Metrics;
use prometheus::IntCounterVec;

/// Counters of the api.
#[derive(Clone)]
pub struct ApiMetrics {
    /// Proposals by result (`created`, `existing`, `invalid`, `key_reused`, `too_many_escalations`).
    pub submissions: IntCounterVec,
    /// Authentication failures by reason (`missing`, `invalid`).
    pub auth_failures: IntCounterVec,
    /// MCP tool calls by tool: `propose_action`, `check_proposal`, or `unknown` (the name itself
    /// is agent-controlled and never becomes a label value).
    pub mcp_tool_calls: IntCounterVec,
    /// Agent lookups of authenticated requests by where the answer came from (`cache`,
    /// `database`).
    pub agent_lookups: IntCounterVec,
}

/// The bounded label values of [`ApiMetrics::submissions`].
pub const SUBMISSION_RESULTS: [&str; 5] = [
    "created",
    "existing",
    "invalid",
    "key_reused",
    "too_many_escalations",
];
/// The bounded label values of [`ApiMetrics::auth_failures`].
pub const AUTH_FAILURE_REASONS: [&str; 11] = [
    "missing",
    "invalid",
    "jwt_not_configured",
    "jwt_malformed",
    "jwt_algorithm",
    "jwt_issuer",
    "jwt_key",
    "jwt_signature",
    "jwt_time",
    "jwt_audience",
    "jwt_claims",
];
/// The bounded label values of [`ApiMetrics::mcp_tool_calls`].
pub const MCP_TOOL_LABELS: [&str; 3] = ["propose_action", "check_proposal", "unknown"];

impl ApiMetrics {
    /// Registers the api's counters, each pre-set to zero for every bounded label value so the
    /// first scrape shows them (a rate over a series that appears late misses its first rise).
    pub(crate) fn new(m: &Metrics) -> Self {
        let metrics = Self {
            submissions: m.counter_vec(
                "api_submissions_total",
                "Proposal submissions by result",
                &["result"],
            ),
            mcp_tool_calls: m.counter_vec(
                "api_mcp_tool_calls_total",
                "MCP tools/call by tool (unknown names counted as unknown)",
                &["tool"],
            ),
            auth_failures: m.counter_vec(
                "api_auth_failures_total",
                "Rejected bearer tokens",
                &["reason"],
            ),
            agent_lookups: m.counter_vec(
                "api_agent_lookups_total",
                "Agent lookups of requests by source (cache, database)",
                &["source"],
            ),
        };
        for s in ["cache", "database"] {
            metrics.agent_lookups.with_label_values(&[s]);
        }
        for r in SUBMISSION_RESULTS {
            metrics.submissions.with_label_values(&[r]);
        }
        for r in AUTH_FAILURE_REASONS
            .into_iter()
            .chain([jwt::Rejection::NoAgent.label()])
        {
            metrics.auth_failures.with_label_values(&[r]);
        }
        for t in MCP_TOOL_LABELS {
            metrics.mcp_tool_calls.with_label_values(&[t]);
        }
        metrics
    }
}
