//! The classifier hook: an operator-run HTTP service that policy may ask about a proposal after
//! the tenant's rules have decided. Its answer can only *raise* the effect (allow → escalate or
//! block, escalate → block), never lower it; no answer in time, an error or a malformed answer
//! counts as `escalate` (fail closed). No I/O here: the tenant's reference to a classifier
//! ([`ClassifierRef`], `policy.classifier` in the tenant document), the wire shapes, and the
//! pure function that combines the rules' effect with what came back ([`combine`]).
//!
//! Wire protocol (one POST per proposal, `Content-Type: application/json`):
//!
//! ```json
//! {"proposal_id": "…uuid…", "tenant": "acme", "agent": "support-bot",
//!  "action": "billing.refund.issue", "target": "pi_123", "params": {…},
//!  "source_text": "…untrusted…", "agent_reason": "…", "effect": "allow"}
//! ```
//!
//! Answer: a 2xx with a JSON object `{"effect": "allow"|"escalate"|"block", "reason": "…"}`
//! (`reason` optional, at most [`MAX_REASON_CHARS`] characters; longer is cut). Anything else
//! (another status, not JSON, an unknown effect, over [`MAX_ANSWER_BYTES`]) is malformed.

use crate::vocab::Effect;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Default time budget of one classifier call.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(300);
/// Shortest allowed `timeout`.
pub const MIN_TIMEOUT: Duration = Duration::from_millis(10);
/// Longest allowed `timeout`: the call runs inside policy's claim transaction.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest answer body read (bytes).
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// Longest classifier reason kept (characters).
pub const MAX_REASON_CHARS: usize = 500;

/// `policy.classifier` of a tenant document: which operator-configured classifier to ask, and
/// how long to wait.
///
/// ```yaml
/// policy:
///   classifier: {endpoint: injection-guard, timeout: 300ms}
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClassifierRef {
    /// A name of the policy service's `--classifier NAME=URL` configuration (never a URL: the
    /// tenant admin chooses among endpoints the operator set up).
    pub endpoint: String,
    /// Time budget of one call, from [`MIN_TIMEOUT`] to [`MAX_TIMEOUT`].
    #[serde(serialize_with = "ser_ms")]
    pub timeout: Duration,
}

fn ser_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&crate::ids::format_duration(*d))
}

/// Whether `name` is a valid endpoint name: `^[a-z0-9][a-z0-9_.-]{0,63}$`.
pub fn valid_endpoint_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '-' | '.'))
}

/// The request body sent to a classifier (see the module docs).
#[derive(Debug, Serialize)]
pub struct ClassifierRequest<'a> {
    /// The proposal.
    pub proposal_id: uuid::Uuid,
    /// Its tenant.
    pub tenant: &'a str,
    /// The proposing agent's name.
    pub agent: &'a str,
    /// Action name.
    pub action: &'a str,
    /// Target the handler derived.
    pub target: &'a str,
    /// The params (canonical JSON, parsed).
    pub params: serde_json::Value,
    /// The source text the agent was acting on (untrusted).
    pub source_text: Option<&'a str>,
    /// The agent's reason (untrusted).
    pub agent_reason: Option<&'a str>,
    /// What the tenant's rules decided.
    pub effect: Effect,
}

/// A well-formed answer.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassifierAnswer {
    /// The classifier's effect.
    pub effect: Effect,
    /// Its reason, if it gave one.
    #[serde(default)]
    pub reason: Option<String>,
}

impl ClassifierAnswer {
    /// Parses an answer body. Errors: a short description of what was wrong (for the audit).
    pub fn parse(body: &[u8]) -> Result<Self, String> {
        if body.len() > MAX_ANSWER_BYTES {
            return Err(format!("answer over {MAX_ANSWER_BYTES} bytes"));
        }
        let shape = |e: String| {
            format!("answer is not {{\"effect\": allow|escalate|block, \"reason\"?: text}}: {e}")
        };
        // An object only: serde would also read a struct from a JSON array.
        let v: serde_json::Value =
            serde_json::from_slice(body).map_err(|e| shape(e.to_string()))?;
        if !v.is_object() {
            return Err(shape("not a JSON object".into()));
        }
        let mut a: Self = serde_json::from_value(v).map_err(|e| shape(e.to_string()))?;
        if let Some(r) = &mut a.reason
            && r.chars().count() > MAX_REASON_CHARS
        {
            *r = r.chars().take(MAX_REASON_CHARS).collect();
        }
        Ok(a)
    }
}

/// What happened when the classifier was asked; the bounded label of
/// `policy_classifier_calls_total{outcome}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It answered an effect at or below the rules' effect: the decision stands.
    Agreed(ClassifierAnswer),
    /// It answered a more severe effect: the decision rises to it.
    Raised(ClassifierAnswer),
    /// It answered a less severe effect: ignored (a classifier never lowers).
    LowerIgnored(ClassifierAnswer),
    /// No answer within the tenant's timeout.
    Timeout,
    /// Connection failure or a non-2xx status (the text says which).
    Error(String),
    /// A 2xx whose body is not a valid answer (the text says why).
    Malformed(String),
    /// The tenant names an endpoint this policy service has not been configured with.
    Unconfigured,
}

impl Outcome {
    /// Classifies a well-formed `answer` against the rules' `effect`.
    pub fn of_answer(effect: Effect, answer: ClassifierAnswer) -> Self {
        match answer.effect.cmp(&effect) {
            std::cmp::Ordering::Greater => Self::Raised(answer),
            std::cmp::Ordering::Less => Self::LowerIgnored(answer),
            std::cmp::Ordering::Equal => Self::Agreed(answer),
        }
    }

    /// The metric label: `agreed`, `raised`, `lower_ignored`, `timeout`, `error`, `malformed`
    /// or `unconfigured`.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Agreed(_) => "agreed",
            Self::Raised(_) => "raised",
            Self::LowerIgnored(_) => "lower_ignored",
            Self::Timeout => "timeout",
            Self::Error(_) => "error",
            Self::Malformed(_) => "malformed",
            Self::Unconfigured => "unconfigured",
        }
    }

    /// The answer, when one was well-formed.
    pub fn answer(&self) -> Option<&ClassifierAnswer> {
        match self {
            Self::Agreed(a) | Self::Raised(a) | Self::LowerIgnored(a) => Some(a),
            _ => None,
        }
    }
}

/// The decision after the classifier: the final effect, and the reason to record when it
/// differs from the rules' (else `None`: the rules' rule and reason stand).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Combined {
    /// The effect that is recorded.
    pub effect: Effect,
    /// `Some((rule, reason))` when the classifier changed the effect.
    pub changed: Option<(String, String)>,
}

/// Combines the rules' `effect` with the classifier's `outcome` for endpoint `endpoint`:
/// a raise wins, a lower is ignored, and every failure counts as `escalate` (so allow →
/// escalate; escalate and block stand). The recorded rule is `classifier:ENDPOINT` or
/// `classifier-unavailable:ENDPOINT`.
pub fn combine(effect: Effect, endpoint: &str, outcome: &Outcome) -> Combined {
    let failed = |why: String| {
        if effect < Effect::Escalate {
            Combined {
                effect: Effect::Escalate,
                changed: Some((
                    format!("classifier-unavailable:{endpoint}"),
                    format!("The classifier {endpoint} {why}, so a person decides."),
                )),
            }
        } else {
            Combined {
                effect,
                changed: None,
            }
        }
    };
    match outcome {
        Outcome::Raised(a) => Combined {
            effect: a.effect,
            changed: Some((
                format!("classifier:{endpoint}"),
                match &a.reason {
                    Some(r) if !r.trim().is_empty() => format!("Classifier {endpoint}: {r}"),
                    _ => format!(
                        "The classifier {endpoint} raised this to {}.",
                        a.effect.as_str()
                    ),
                },
            )),
        },
        Outcome::Agreed(_) | Outcome::LowerIgnored(_) => Combined {
            effect,
            changed: None,
        },
        Outcome::Timeout => failed("did not answer in time".into()),
        Outcome::Error(_) => failed("could not be reached".into()),
        Outcome::Malformed(_) => failed("gave an answer that could not be read".into()),
        Outcome::Unconfigured => failed("is not configured on the policy service".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Effect::{Allow, Block, Escalate};

    fn ans(e: Effect) -> ClassifierAnswer {
        ClassifierAnswer {
            effect: e,
            reason: Some("looks injected".into()),
        }
    }

    #[test]
    fn raises_never_lowers_and_fails_closed() {
        // (rules' effect, outcome, final effect, changed)
        let cases: Vec<(Effect, Outcome, Effect, bool)> = vec![
            (Allow, Outcome::of_answer(Allow, ans(Allow)), Allow, false),
            (
                Allow,
                Outcome::of_answer(Allow, ans(Escalate)),
                Escalate,
                true,
            ),
            (Allow, Outcome::of_answer(Allow, ans(Block)), Block, true),
            (
                Escalate,
                Outcome::of_answer(Escalate, ans(Allow)),
                Escalate,
                false,
            ),
            (
                Escalate,
                Outcome::of_answer(Escalate, ans(Block)),
                Block,
                true,
            ),
            (Block, Outcome::of_answer(Block, ans(Allow)), Block, false),
            (Allow, Outcome::Timeout, Escalate, true),
            (Allow, Outcome::Error("503".into()), Escalate, true),
            (Allow, Outcome::Malformed("x".into()), Escalate, true),
            (Allow, Outcome::Unconfigured, Escalate, true),
            (Escalate, Outcome::Timeout, Escalate, false),
            (Block, Outcome::Malformed("x".into()), Block, false),
        ];
        for (effect, outcome, want, changed) in cases {
            let c = combine(effect, "guard", &outcome);
            assert_eq!(c.effect, want, "{effect:?} + {outcome:?}");
            assert_eq!(c.changed.is_some(), changed, "{effect:?} + {outcome:?}");
        }
        assert_eq!(
            Outcome::of_answer(Escalate, ans(Allow)).label(),
            "lower_ignored"
        );
        let c = combine(Allow, "guard", &Outcome::of_answer(Allow, ans(Block)));
        assert_eq!(
            c.changed,
            Some((
                "classifier:guard".into(),
                "Classifier guard: looks injected".into()
            ))
        );
    }

    #[test]
    fn answers_are_parsed_strictly() {
        assert_eq!(
            ClassifierAnswer::parse(br#"{"effect":"block"}"#).unwrap(),
            ClassifierAnswer {
                effect: Block,
                reason: None
            }
        );
        for bad in [
            &br#"{"effect":"deny"}"#[..],
            br#"{"effect":"Allow"}"#,
            br#"{"verdict":"allow"}"#,
            br#"{"effect":"allow","extra":1}"#,
            br#"["allow"]"#,
            b"allow",
            b"",
        ] {
            assert!(
                ClassifierAnswer::parse(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        let long = format!(r#"{{"effect":"escalate","reason":"{}"}}"#, "x".repeat(900));
        let a = ClassifierAnswer::parse(long.as_bytes()).unwrap();
        assert_eq!(a.reason.unwrap().len(), MAX_REASON_CHARS);
        assert!(ClassifierAnswer::parse(&vec![b' '; MAX_ANSWER_BYTES + 1]).is_err());
    }

    #[test]
    fn endpoint_names() {
        assert!(valid_endpoint_name("injection-guard"));
        for bad in ["", "Guard", "http://x", "-a", &"a".repeat(65)] {
            assert!(!valid_endpoint_name(bad), "{bad}");
        }
    }
}
