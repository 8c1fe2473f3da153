//! The executor's Prometheus metrics.

use actiond_runtime::Metrics;
use prometheus::{HistogramVec, IntCounterVec};

/// Metrics of the executor.
#[derive(Clone)]
pub struct ExecutorMetrics {
    pub(crate) grants_spent: IntCounterVec,
    pub(crate) grants_rejected: IntCounterVec,
    pub(crate) executions: IntCounterVec,
    pub(crate) swept: IntCounterVec,
    pub(crate) handler_seconds: HistogramVec,
    pub(crate) signatures_verified: IntCounterVec,
    pub(crate) effect_read_backs: IntCounterVec,
    pub(crate) settled: IntCounterVec,
    pub(crate) effect_mismatches: IntCounterVec,
}

impl ExecutorMetrics {
    /// Registers the executor metrics.
    pub fn new(m: &Metrics) -> Self {
        let metrics = Self {
            grants_spent: m.counter_vec("grants_spent_total", "Grants spent, by issuer kind", &["issuer"]),
            grants_rejected: m.counter_vec(
                "grants_rejected_total",
                "Grants refused, by reason: missing, untrusted_key, unknown_version, bad_signature, intent_mismatch, policy_changed, replayed, expired, agent_frozen, agent_revoked",
                &["reason"],
            ),
            executions: m.counter_vec("executions_total", "Handler runs by action and outcome", &["action", "outcome"]),
            swept: m.counter_vec("executor_swept_total", "Rows moved by the sweeper", &["to_state"]),
            handler_seconds: m.histogram_vec("handler_seconds", "Handler run time", &["action"]),
            signatures_verified: m.counter_vec(
                "grant_signatures_verified_total",
                "Grant signatures checked, by method: batch (accepted by one batch verification of a claim's grants), single (the only grant to check), fallback (checked one by one after their batch verification failed, which only a bad signature makes it do)",
                &["method"],
            ),
            effect_read_backs: m.counter_vec(
                "effect_read_backs_total",
                "Effects read back from the provider after a run or to settle outcome_unknown, by action and verdict: matches, differs, absent (both end effect_mismatch after a run), unread (the provider could not be read)",
                &["action", "verdict"],
            ),
            effect_mismatches: m.counter_vec(
                "effect_mismatches_total",
                "Proposals that ended effect_mismatch (the effect read back from the provider is not what was approved), by action; alerted on",
                &["action"],
            ),
            settled: m.counter_vec(
                "outcome_unknown_settled_total",
                "outcome_unknown proposals settled by reading the provider back, by the state recorded: succeeded, failed, effect_mismatch",
                &["to_state"],
            ),
        };
        // Present at zero from the first scrape for the bounded values: the registry's actions
        // and their outcomes, the sweeper's target states.
        for kind in actiond_core::handlers::HandlerKind::ALL {
            for outcome in ["succeeded", "failed", "outcome_unknown", "effect_mismatch"] {
                metrics
                    .executions
                    .with_label_values(&[kind.action(), outcome]);
            }
        }
        for kind in actiond_core::handlers::HandlerKind::ALL {
            metrics.handler_seconds.with_label_values(&[kind.action()]);
        }
        for to_state in ["outcome_unknown", "expired"] {
            metrics.swept.with_label_values(&[to_state]);
        }
        for kind in actiond_core::handlers::HandlerKind::ALL {
            if crate::handlers::handler(kind).read_back.is_some() {
                for verdict in ["matches", "differs", "absent", "unread"] {
                    metrics
                        .effect_read_backs
                        .with_label_values(&[kind.action(), verdict]);
                }
            }
        }
        for kind in actiond_core::handlers::HandlerKind::ALL {
            if crate::handlers::handler(kind).read_back.is_some() {
                metrics
                    .effect_mismatches
                    .with_label_values(&[kind.action()]);
            }
        }
        for to_state in ["succeeded", "failed", "effect_mismatch"] {
            metrics.settled.with_label_values(&[to_state]);
        }
        for reason in crate::refusal::METRIC_LABELS {
            metrics.grants_rejected.with_label_values(&[reason]);
        }
        for issuer in [
            actiond_core::grant::KeyKind::Policy,
            actiond_core::grant::KeyKind::Approver,
            actiond_core::grant::KeyKind::BreakGlass,
        ] {
            metrics.grants_spent.with_label_values(&[issuer.as_str()]);
        }
        for method in ["batch", "single", "fallback"] {
            metrics.signatures_verified.with_label_values(&[method]);
        }
        metrics
    }
}
