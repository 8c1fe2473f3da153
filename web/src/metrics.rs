//! The web service's Prometheus counters.

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts};

/// Counters of the web service.
#[derive(Clone)]
pub struct WebMetrics {
    pub(crate) decisions: IntCounterVec,
    /// Seconds from the decision page being shown to the decision, by tenant and verdict
    /// (never by person or agent: those stay in Postgres, on the Approvers page).
    pub(crate) decision_seconds: HistogramVec,
    pub(crate) logins: IntCounterVec,
    pub(crate) notifications: IntCounterVec,
    pub(crate) csrf_rejections: IntCounterVec,
}

impl WebMetrics {
    /// Makes the bounded series the dashboard and the alerts read present at 0 from the first
    /// scrape (a rate of a series that does not exist yet is "No data", not 0): decisions by
    /// verdict and result, logins by method and the common results, notices by channel,
    /// CSRF refusals by reason. The per-tenant decision times appear with a tenant's first
    /// decision.
    fn present_at_zero(&self) {
        for verdict in ["approve", "deny"] {
            for result in [
                "approved",
                "denied",
                "recorded",
                "stage-complete",
                "already",
                "refused",
            ] {
                self.decisions.with_label_values(&[verdict, result]);
            }
        }
        for result in ["amended", "refused"] {
            self.decisions.with_label_values(&["amend", result]);
        }
        for result in [
            "ok",
            "idp_error",
            "malformed",
            "unknown_state",
            "foreign_browser",
        ] {
            self.logins.with_label_values(&["oidc", result]);
        }
        for result in ["ok", "bad_code"] {
            self.logins.with_label_values(&["dev", result]);
        }
        for channel in ["webhook", "email"] {
            self.notifications.with_label_values(&[channel, "sent"]);
        }
        for reason in ["missing", "mismatch", "origin", "sec-fetch-site"] {
            self.csrf_rejections.with_label_values(&[reason]);
        }
    }

    pub(crate) fn new(m: &actiond_runtime::Metrics) -> anyhow::Result<Self> {
        let vec = |name: &str, help: &str, labels: &[&str]| {
            IntCounterVec::new(Opts::new(name, help), labels).map(|c| m.register(c))
        };
        let metrics = Self {
            decisions: vec(
                "web_decisions_total",
                "Decisions submitted by people, by verdict and result",
                &["verdict", "result"],
            )?,
            decision_seconds: {
                let h = HistogramVec::new(
                    HistogramOpts::new(
                        "web_decision_seconds",
                        "Seconds from the decision page being rendered to the decision, by tenant and verdict",
                    )
                    .buckets(vec![
                        1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0,
                    ]),
                    &["tenant", "verdict"],
                )?;
                m.register(h)
            },
            logins: vec(
                "web_logins_total",
                "Login attempts by method and result",
                &["method", "result"],
            )?,
            notifications: vec(
                "web_notifications_total",
                "Escalation notices by channel and result",
                &["channel", "result"],
            )?,
            csrf_rejections: vec(
                "web_csrf_rejections_total",
                "POSTs refused for a missing or wrong CSRF token or a foreign origin",
                &["reason"],
            )?,
        };
        metrics.present_at_zero();
        Ok(metrics)
    }
}
