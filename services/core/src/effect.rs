//! The effect, read back (issue 34, point 3). After a handler reports success the executor
//! reads the provider again with the same handler code and records what it found as a
//! `proposal.effect` audit event; the same read-back, under the spent grant's idempotency key,
//! settles an `outcome_unknown` proposal without running anything a second time. This module
//! is the shared vocabulary (no I/O): the verdict, the state it leads to, the event's detail
//! and the words the card, the history and the CLI use.

use crate::state::ProposalState;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What the read-back found, compared with what was approved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The provider shows the approved effect (the refund in the approved amount and
    /// currency, not failed or cancelled; the DNS name serving exactly the approved records).
    Matches,
    /// The provider shows an effect under this grant, but not the approved one (another
    /// amount, a failed refund, other records served).
    Differs,
    /// The provider shows no trace of it (no refund under the grant's key; the approved
    /// records are not served).
    Absent,
    /// The provider could not be read (down, not configured): nothing is concluded.
    Unread,
}

impl Verdict {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Matches => "matches",
            Self::Differs => "differs",
            Self::Absent => "absent",
            Self::Unread => "unread",
        }
    }

    /// The state of a run whose handler reported success, after this read-back: `succeeded`
    /// when it matches (or could not be read: the provider's own answer stands),
    /// `effect_mismatch` when the provider shows something else or nothing.
    pub fn after_success(self) -> ProposalState {
        match self {
            Self::Matches | Self::Unread => ProposalState::Succeeded,
            Self::Differs | Self::Absent => ProposalState::EffectMismatch,
        }
    }

    /// The state that settles an `outcome_unknown` proposal: `succeeded` when the provider
    /// shows the approved effect, `failed` when it shows none, `effect_mismatch` when it shows
    /// another; `None` while the provider cannot be read (the proposal stays
    /// `outcome_unknown` and is asked again later).
    pub fn settles(self) -> Option<ProposalState> {
        match self {
            Self::Matches => Some(ProposalState::Succeeded),
            Self::Absent => Some(ProposalState::Failed),
            Self::Differs => Some(ProposalState::EffectMismatch),
            Self::Unread => None,
        }
    }
}

/// What one read-back found: the detail of a `proposal.effect` event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EffectRecord {
    /// The comparison with what was approved.
    pub verdict: Verdict,
    /// The provider's state in one line for people (the card's "after").
    pub after: String,
    /// Why it does not match (or could not be read); empty when it matches.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// What the provider answered, as data (refund id and status, the served records, …).
    #[serde(default)]
    pub evidence: Value,
    /// True when this read-back settled an `outcome_unknown` proposal (the sweep).
    #[serde(default)]
    pub settled: bool,
}

impl EffectRecord {
    /// The one line the card, the history and `approvals show` print after "after": the
    /// provider's state, then whether it is what was approved.
    pub fn line(&self) -> String {
        match self.verdict {
            Verdict::Matches => format!("{} (matches what was approved)", self.after),
            Verdict::Unread => format!("not read back: {}", self.reason),
            Verdict::Differs | Verdict::Absent => {
                format!("{} (NOT what was approved: {})", self.after, self.reason)
            }
        }
    }
}

/// Why the effect of `action` (with its approved `settings` and `params`) is not read back,
/// for the card and `approvals show` when a run has no `proposal.effect` event (a handler, or
/// a configuration, without a read-back says so plainly rather than nothing), and for the
/// executor, which then reads nothing back. `None` when the executor reads it back (its
/// `proposal.effect` event says what it found).
pub fn not_readable(action: &str, settings: &Value, params: &Value) -> Option<String> {
    match action {
        "email.send" => Some(
            "not readable: SMTP gives only the relay's acceptance, not delivery, and no mailbox can be read back".to_owned(),
        ),
        "webhook.post" if settings.get("read_back_url").is_none() => Some(
            "not readable: this webhook's settings declare no read_back_url, so only the receiver's HTTP answer is known".to_owned(),
        ),
        "db.statement.execute" => crate::handlers::db_statement::statement(params, settings)
            .filter(|st| st.read_back.is_none())
            .map(|_| {
                format!(
                    "not readable: statement {} declares no read_back query, so only the rows it reported are known",
                    params.get("statement").and_then(Value::as_str).unwrap_or_default()
                )
            }),
        _ => None,
    }
}

/// The card's words for `effect_mismatch`, also the agent's (REST and MCP) and the docs'.
pub const EFFECT_MISMATCH_WORDS: &str = "It ran, but what the provider shows afterwards is not what was approved. It will not be re-run: a person must check it at the provider.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_lead_to_states() {
        use ProposalState::*;
        assert_eq!(Verdict::Matches.after_success(), Succeeded);
        assert_eq!(Verdict::Unread.after_success(), Succeeded);
        assert_eq!(Verdict::Differs.after_success(), EffectMismatch);
        assert_eq!(Verdict::Absent.after_success(), EffectMismatch);
        assert_eq!(Verdict::Matches.settles(), Some(Succeeded));
        assert_eq!(Verdict::Absent.settles(), Some(Failed));
        assert_eq!(Verdict::Differs.settles(), Some(EffectMismatch));
        assert_eq!(Verdict::Unread.settles(), None);
        for v in [
            Verdict::Matches,
            Verdict::Differs,
            Verdict::Absent,
            Verdict::Unread,
        ] {
            if let Some(s) = v.settles() {
                assert!(OutcomeUnknown.can_become(s), "{s}");
            }
            assert!(Executing.can_become(v.after_success()));
        }
    }

    #[test]
    fn smtp_and_a_webhook_without_read_back_url_say_they_are_not_readable() {
        let none = serde_json::json!({});
        assert!(
            not_readable("email.send", &none, &none)
                .unwrap()
                .starts_with("not readable: SMTP gives only the relay's acceptance")
        );
        assert!(not_readable("webhook.post", &none, &none).is_some());
        let rb = serde_json::json!({"read_back_url": "https://hooks.example/received"});
        assert_eq!(not_readable("webhook.post", &rb, &none), None);
        assert_eq!(not_readable("billing.refund.issue", &none, &none), None);
        let st = |rb: Value| {
            let mut s = serde_json::json!({"sql": "UPDATE t SET v = 1 WHERE id = $1",
                "params": [{"name": "id", "type": "bigint"}], "max_rows": 1});
            if !rb.is_null() {
                s["read_back"] = rb;
            }
            serde_json::json!({"statements": {"one": s}})
        };
        let p = serde_json::json!({"statement": "one", "values": {"id": 1}});
        assert_eq!(
            not_readable("db.statement.execute", &st(Value::Null), &p).as_deref(),
            Some(
                "not readable: statement one declares no read_back query, so only the rows it reported are known"
            )
        );
        let rb = serde_json::json!({"sql": "SELECT v FROM t WHERE id = $1", "expect": {"v": 1}});
        assert_eq!(not_readable("db.statement.execute", &st(rb), &p), None);
    }

    #[test]
    fn the_record_reads_as_one_line_and_round_trips() {
        let r = EffectRecord {
            verdict: Verdict::Absent,
            after: "www.inner.example.com A: (no records served)".into(),
            reason: "the approved records 192.0.2.9 are not served".into(),
            evidence: serde_json::json!({"served": []}),
            settled: false,
        };
        assert_eq!(
            r.line(),
            "www.inner.example.com A: (no records served) (NOT what was approved: the approved records 192.0.2.9 are not served)"
        );
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["verdict"], "absent");
        assert_eq!(serde_json::from_value::<EffectRecord>(v).unwrap(), r);
    }
}
