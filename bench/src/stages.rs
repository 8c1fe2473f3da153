//! Per-stage latencies from the audit log: every state change writes an audit event in its own
//! transaction, stamped with that transaction's start (`now()`, the database clock), so the
//! stages are read from the events' `to_state`, whatever the queue tables look like:
//!
//! - submit → decided: `pending` → `approved` (the policy worker's batch);
//! - decided → claimed: `approved` → `executing` (an executor claimed, verified and spent the
//!   grant);
//! - claimed → succeeded: `executing` → `succeeded` (the handler ran, the outcome recorded);
//! - created → succeeded: the whole allow path.

use serde_json::{Value, json};

/// Latency distribution of one stage in milliseconds.
#[derive(Debug, Clone, Default)]
pub struct Dist {
    /// Sorted samples.
    pub ms: Vec<f64>,
}

impl Dist {
    /// A distribution of samples in milliseconds, in any order.
    pub fn new(mut ms: Vec<f64>) -> Self {
        ms.sort_by(f64::total_cmp);
        Self { ms }
    }

    /// The `p`-quantile (0..=1), nearest rank; 0 when empty.
    pub fn pct(&self, p: f64) -> f64 {
        if self.ms.is_empty() {
            return 0.0;
        }
        let i = ((self.ms.len() as f64 - 1.0) * p).round() as usize;
        self.ms[i.min(self.ms.len() - 1)]
    }

    /// The largest sample; 0 when empty.
    pub fn max(&self) -> f64 {
        self.ms.last().copied().unwrap_or_default()
    }

    /// `{"n", "p50_ms", "p99_ms", "max_ms"}`.
    pub fn json(&self) -> Value {
        json!({
            "n": self.ms.len(),
            "p50_ms": round(self.pct(0.5), 2),
            "p99_ms": round(self.pct(0.99), 2),
            "max_ms": round(self.max(), 2),
        })
    }
}

/// Rounds to `d` decimals (for printing in JSON).
pub fn round(x: f64, d: i32) -> f64 {
    let f = 10f64.powi(d);
    (x * f).round() / f
}

/// The four stages, in order: (name, distribution).
pub type Stages = Vec<(&'static str, Dist)>;

/// Reads the stage latencies of `tenant`'s proposals submitted at or after `since` (seconds
/// since the Unix epoch, database clock) from their audit events.
pub async fn read(c: &tokio_postgres::Client, tenant: &str, since: f64) -> Stages {
    let rows = c
        .query(
            "SELECT extract(epoch FROM min(at) FILTER (WHERE to_state = 'pending'))::float8,
                    extract(epoch FROM min(at) FILTER (WHERE to_state = 'approved'))::float8,
                    extract(epoch FROM min(at) FILTER (WHERE to_state = 'executing'))::float8,
                    extract(epoch FROM min(at) FILTER (WHERE to_state = 'succeeded'))::float8
             FROM audit_events WHERE tenant_id = $1 AND proposal_id IS NOT NULL
             GROUP BY proposal_id
             HAVING min(at) FILTER (WHERE to_state = 'pending') >= to_timestamp($2)",
            &[
                &tenant as &(dyn tokio_postgres::types::ToSql + Sync),
                &since,
            ],
        )
        .await
        .expect("reading audit events");
    let mut d: [Vec<f64>; 4] = Default::default();
    for r in rows {
        let t: [Option<f64>; 4] = [r.get(0), r.get(1), r.get(2), r.get(3)];
        let pairs = [(0, 1), (1, 2), (2, 3), (0, 3)];
        for (k, (a, b)) in pairs.into_iter().enumerate() {
            if let (Some(a), Some(b)) = (t[a], t[b]) {
                d[k].push((b - a) * 1000.0);
            }
        }
    }
    let [a, b, c, e] = d;
    vec![
        ("submit→decided", Dist::new(a)),
        ("decided→claimed", Dist::new(b)),
        ("claimed→succeeded", Dist::new(c)),
        ("created→succeeded", Dist::new(e)),
    ]
}
