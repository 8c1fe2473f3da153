//! The policy worker's Prometheus metrics.

use actiond_runtime::Metrics;
use prometheus::{GaugeVec, HistogramVec, IntCounterVec};

/// The `outcome` label values of `policy_classifier_calls_total`.
pub const CLASSIFIER_OUTCOMES: [&str; 7] = [
    "agreed",
    "raised",
    "lower_ignored",
    "timeout",
    "error",
    "malformed",
    "unconfigured",
];

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
    /// Registers the policy metrics; the series with bounded labels only
    /// (`grants_issued_total{issuer="policy"}`, the one issuer this process counts) are
    /// present at 0 from the first scrape. The per-tenant ones follow
    /// ([`PolicyMetrics::touch_tenant`]).
    pub fn new(m: &Metrics) -> Self {
        let metrics = Self::register(m);
        metrics.grants_issued.with_label_values(&["policy"]);
        // A histogram without labels has its one series only once it is asked for.
        metrics.eval_seconds.with_label_values::<&str>(&[]);
        metrics
    }

    /// Makes the counters of `tenant` present at 0 (a no-op for series that exist): its
    /// decisions by effect, no-handler attempts, expirations, evaluation failures by cause,
    /// classifier calls by outcome, and budget escalations for each action one of its `budgets` covers. Called at every
    /// scrape for every tenant with a document, so a panel or an alert on a tenant's rate sees
    /// 0 rather than "No data" until the first event.
    pub fn touch_tenant(&self, tenant: &str, budgets: &[actiond_core::tenant::Budget]) {
        for effect in ["allow", "escalate", "block"] {
            self.decisions.with_label_values(&[tenant, effect]);
        }
        self.no_handler.with_label_values(&[tenant]);
        self.expired.with_label_values(&[tenant]);
        for cause in ["error", "budget"] {
            self.eval_failures.with_label_values(&[tenant, cause]);
        }
        for outcome in CLASSIFIER_OUTCOMES {
            self.classifier_calls.with_label_values(&[tenant, outcome]);
        }
        for b in budgets {
            self.budget_escalations
                .with_label_values(&[tenant, b.action.as_str()]);
        }
    }

    fn register(m: &Metrics) -> Self {
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
