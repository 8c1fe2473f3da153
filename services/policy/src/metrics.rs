//! The policy worker's Prometheus metrics.

use actiond_runtime::Metrics;
use prometheus::{GaugeVec, HistogramVec, IntCounterVec};

/// Metrics of the policy worker.
#[derive(Clone)]
pub struct PolicyMetrics {
    pub(crate) decisions: IntCounterVec,
    pub(crate) no_handler: IntCounterVec,
    pub(crate) grants_issued: IntCounterVec,
    pub(crate) eval_failures: IntCounterVec,
    pub(crate) expired: IntCounterVec,
    pub(crate) eval_seconds: HistogramVec,
    pub(crate) oldest_age: GaugeVec,
    pub(crate) depth: GaugeVec,
    pub(crate) budget_use: GaugeVec,
    pub(crate) budget_escalations: IntCounterVec,
    pub(crate) classifier_calls: IntCounterVec,
    pub(crate) classifier_seconds: HistogramVec,
}

impl PolicyMetrics {
    /// Registers the policy metrics.
    pub fn new(m: &Metrics) -> Self {
        Self {
            decisions: m.counter_vec("policy_decisions_total", "Decisions by tenant and effect", &["tenant", "effect"]),
            no_handler: m.counter_vec(
                "policy_no_handler_total",
                "Proposals for actions missing from the tenant's handler registry (read the agent's transcript)",
                &["tenant"],
            ),
            grants_issued: m.counter_vec("grants_issued_total", "Grants issued by issuer", &["issuer"]),
            eval_failures: m.counter_vec("policy_eval_failures_total", "Rule evaluations that failed closed", &["tenant", "cause"]),
            expired: m.counter_vec("policy_expired_total", "Pending/escalated proposals expired by escalation_ttl", &["tenant"]),
            eval_seconds: m.histogram_vec("policy_eval_seconds", "Time to evaluate one proposal's rules", &[]),
            oldest_age: m.gauge_vec(
                "queue_oldest_age_seconds",
                "Age of the oldest proposal per tenant and state (pending, escalated, approved)",
                &["tenant", "state"],
            ),
            depth: m.gauge_vec(
                "queue_depth",
                "Proposals per tenant and live state, counted up to 1000 (a scrape never counts a whole backlog)",
                &["tenant", "state"],
            ),
            budget_use: m.gauge_vec(
                "budget_use_ratio",
                "Use of the most-used budget of each tenant and action in its window (used / max; the busiest agent for per-agent budgets; 1 = at the limit)",
                &["tenant", "action"],
            ),
            budget_escalations: m.counter_vec(
                "policy_budget_escalations_total",
                "Proposals the rules allowed that a budget escalated",
                &["tenant", "action"],
            ),
            classifier_calls: m.counter_vec(
                "policy_classifier_calls_total",
                "Classifier calls by tenant and outcome (agreed, raised, lower_ignored, timeout, error, malformed, unconfigured)",
                &["tenant", "outcome"],
            ),
            classifier_seconds: m.histogram_vec(
                "policy_classifier_seconds",
                "Duration of one classifier call",
                &["tenant"],
            ),
        }
    }
}
