//! How a proposal reads on a page or in a notice: its one-sentence summary, the risky params
//! and the handler settings that apply, its values as shown, and the time left on its
//! escalation.

use actiond_core::handlers::HandlerKind;
use actiond_core::tenant::TenantDocument;
use actiond_core::text::reveal_invisible;
use chrono::{DateTime, Utc};
use serde_json::Value;

/// How a proposal reads: the one-sentence summary (escaped later, invisible characters shown),
/// the risky param names and the handler settings that apply.
pub(crate) struct Described {
    pub(crate) sentence: String,
    pub(crate) risky: Vec<String>,
    pub(crate) kind: Option<HandlerKind>,
    pub(crate) approvals_required: u32,
}

/// Describes a proposal with the tenant document version that escalated it.
pub(crate) fn describe(
    doc: Option<&TenantDocument>,
    action: &str,
    params: &Value,
    target: &str,
) -> Described {
    let entry = doc.and_then(|d| d.handler(action));
    match HandlerKind::lookup(action) {
        Some(kind) => Described {
            sentence: reveal_invisible(
                &kind.summary(entry.and_then(|e| e.summary.as_deref()), params, target),
                false,
            ),
            risky: entry.map(|e| e.risky.clone()).unwrap_or_else(|| {
                kind.default_risky()
                    .iter()
                    .map(|s| (*s).to_owned())
                    .collect()
            }),
            kind: Some(kind),
            approvals_required: entry.map_or(1, |e| e.approvals_required),
        },
        None => Described {
            sentence: reveal_invisible(&format!("Unknown action {action} on {target}"), false),
            risky: params
                .as_object()
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default(),
            kind: None,
            approvals_required: 1,
        },
    }
}

/// A param value as shown: strings as they are (invisible characters revealed, newlines
/// included), everything else as pretty JSON.
pub(crate) fn show_value(v: &Value) -> String {
    match v {
        Value::String(s) => reveal_invisible(s, false),
        other => reveal_invisible(
            &serde_json::to_string_pretty(other).unwrap_or_default(),
            true,
        ),
    }
}

/// Seconds until the escalation TTL of `doc` runs out for a proposal created at `created`
/// (negative: past it).
pub(crate) fn ttl_left_secs(
    doc: &TenantDocument,
    created: DateTime<Utc>,
    now: DateTime<Utc>,
) -> i64 {
    let ttl = chrono::Duration::from_std(doc.policy.escalation_ttl).unwrap_or_default();
    (created + ttl - now).num_seconds()
}
