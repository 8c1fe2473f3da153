//! The rules for decisions by people, as pure functions (the store applies them inside the
//! decision's transaction with the proposal row locked, with every age measured by the
//! database clock; the web app and the break-glass CLI use the same ones to decide who may
//! decide):
//! - in time: an escalated proposal older than the tenant's `escalation_ttl` is never decided
//!   (it expires instead);
//! - who may decide: the document's `approvers` (subjects, claim values) under one pinned
//!   issuer (`approvers.issuer`, else the web's configured issuer); a subject of any other
//!   issuer matches nothing;
//! - entitled now: an Approve counts only with claims younger than `approvers.max_claims_age`
//!   and, where a handler sets `reauth_within`, an ID-token `auth_time` that recent (OpenID
//!   Connect Core 1.0 §3.1.2.1 `max_age`); a Deny never needs either;
//! - re-typed values: a handler's `confirm: [amount|target]` makes the approver type the value
//!   again, compared with the stored params;
//! - what they decide on: the intent hash they were shown (a prefix of at least 8 hex
//!   characters) and, where shown, the document version — anything else is stale;
//! - no self-approval: the agent's recorded owner never approves its proposals;
//! - how many people: `approvals_required: N` distinct persons — subjects of the pinned issuer,
//!   whatever the channel (a break-glass `--as SUB` and a web login of SUB count once);
//!   break-glass supplies at most one of them (its `--as` subject is self-asserted);
//! - stages (a handler's `approvals: {stages}`): an Approve counts only in the open stage,
//!   from a person whose `approvers.claim` holds that stage's group, before the stage's due
//!   time; a person approves in one stage only; break-glass cannot show a group, so it cannot
//!   approve a staged proposal (it may deny).

use crate::external_time::{TimeBound, TimeRefused};
use crate::tenant::HandlerEntry;
use crate::tenant::claim_matches;
pub use crate::tenant::{may_decide, may_decide_by_subject, pinned_issuer};
pub use crate::vocab::ConfirmField;
use crate::vocab::minor_unit_exponent;
use serde_json::Value;
use std::time::Duration;

/// Approve or deny.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Approve.
    Approve,
    /// Deny (final).
    Deny,
}

impl Verdict {
    /// The stored name (`approve` / `deny`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approve => "approve",
            Self::Deny => "deny",
        }
    }
}

/// Why a person's decision is refused. The texts are safe to show to that person; each names
/// the rule ([`ApprovalRefusal::rule`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApprovalRefusal {
    /// The shown intent hash is missing or not at least 8 hex characters.
    #[error("the intent hash shown must be given (at least 16 hex characters)")]
    ShownIntentMissing,
    /// The shown intent hash is not a prefix of the proposal's.
    #[error("the proposal shown is not this proposal's current intent; reload it and decide again")]
    StaleIntent,
    /// The shown document version is not the one that escalated the proposal.
    #[error("the policy version shown is not the one that escalated it; reload")]
    StaleDocVersion,
    /// The provider preview shown with the page is not the one stored now (the preview was
    /// read after the page was shown, so the person approved without it).
    #[error(
        "preview: the provider preview shown is not the one read since; reload it and decide again"
    )]
    StalePreview,
    /// The person is not an approver of the tenant under its current document (`approvers`:
    /// the pinned issuer, `subjects`, `claim` and `values`; break-glass by `subjects` only),
    /// as read in the decision's transaction: a document that removed them after the page or
    /// the command started decides.
    #[error(
        "you are not an approver of tenant {tenant} now: its current document (version {version}) does not list you under approvers"
    )]
    NotAnApprover {
        /// The tenant.
        tenant: String,
        /// The tenant's current document version, the one that was checked.
        version: i32,
    },
    /// The approver owns the proposing agent.
    #[error("you own the agent that proposed this; someone else must approve it")]
    SelfApproval,
    /// The proposal records no document version (policy never decided it).
    #[error("proposal has no policy version")]
    NoDocVersion,
    /// Break-glass already supplied an approval of this proposal.
    #[error(
        "break-glass can supply only one approval per proposal; the others must come from the approval web app"
    )]
    BreakGlassLimit,
    /// The escalation TTL passed (by the database clock) before this decision; the proposal
    /// expired with it.
    #[error("this request expired at {at} (escalation_ttl); nothing will run")]
    Expired {
        /// When it expired, as the database clock says (`YYYY-MM-DD HH:MM:SS UTC`).
        at: String,
    },
    /// This person (subject of the pinned issuer) already decided this proposal, on some
    /// channel.
    #[error("you already decided on this proposal (as {subject}); another person must decide")]
    SamePerson {
        /// The subject.
        subject: String,
    },
    /// The claims the session holds are older than `approvers.max_claims_age`.
    #[error(
        "your sign-in details are older than approvers.max_claims_age ({max_secs} s); sign in again, then approve"
    )]
    ClaimsTooOld {
        /// `approvers.max_claims_age` in seconds.
        max_secs: u64,
    },
    /// The session that holds the claims is dated in the future by more than
    /// [`CLOCK_SKEW`](crate::external_time::CLOCK_SKEW), by the database clock: only a writer
    /// of the sessions table (the web app's login, the database owner) dates one so, and such
    /// claims would stay "fresh" past `approvers.max_claims_age` until that future comes.
    #[error(
        "your sign-in details are dated {ahead_secs} s in the future, more than the {skew_secs} s clock skew allowed (approvers.max_claims_age cannot judge them); sign in again, then approve"
    )]
    ClaimsAhead {
        /// Seconds ahead of the database clock.
        ahead_secs: u64,
        /// The allowed skew in seconds.
        skew_secs: u64,
        /// `approvers.max_claims_age` in seconds.
        max_secs: u64,
    },
    /// The handler's `reauth_within` needs a more recent authentication (ID token `auth_time`).
    #[error(
        "this action needs a sign-in within the last {within_secs} s (reauth_within); sign in again, then approve"
    )]
    ReauthRequired {
        /// The handler's `reauth_within` in seconds.
        within_secs: u64,
    },
    /// The handler's `reauth_within` applies and the session's `auth_time` lies in the future
    /// by more than [`CLOCK_SKEW`](crate::external_time::CLOCK_SKEW), by the database clock: an
    /// identity provider's clock ran ahead or it stated the time in another unit. Such a
    /// session never counts as a recent sign-in.
    #[error(
        "this action needs a sign-in within the last {within_secs} s (reauth_within), and your session's sign-in time (auth_time) lies {ahead_secs} s in the future, more than the {skew_secs} s clock skew allowed; sign in again (tell your operator if this repeats: the identity provider's clock is wrong), then approve"
    )]
    AuthTimeAhead {
        /// Seconds ahead of the database clock.
        ahead_secs: u64,
        /// The allowed skew in seconds.
        skew_secs: u64,
        /// The handler's `reauth_within` in seconds.
        within_secs: u64,
    },
    /// A `confirm:` value was not typed.
    #[error("confirm_{field}: type the {field} shown to approve")]
    ConfirmMissing {
        /// Which value.
        field: ConfirmField,
    },
    /// The approver's claims do not hold the open stage's group.
    #[error(
        "stage {stage} of {of} waits for {approvers}; you are not in {approvers}, so your approval cannot count"
    )]
    NotInStage {
        /// The open stage (1-based).
        stage: i32,
        /// How many stages the proposal has.
        of: i32,
        /// The stage's group (a value of `approvers.claim`).
        approvers: String,
    },
    /// The open stage's `within` passed (database clock) before this decision; the decision
    /// moved the stage on (`then`) and decided nothing.
    #[error(
        "stage {stage} ({approvers}) ran out of time before your decision; {then}. Reload the page"
    )]
    StageTimedOut {
        /// The stage that timed out.
        stage: i32,
        /// Its group.
        approvers: String,
        /// What happened instead ("it went to stage 2 (finance)" or "the request expired").
        then: String,
    },
    /// Break-glass cannot approve a staged proposal (its `--as` carries no group).
    #[error(
        "break-glass cannot approve a staged proposal: a stage's group comes from the identity provider's claims; approve in the approval web app (deny still works)"
    )]
    BreakGlassStaged,
    /// A `confirm:` value was typed but differs from the stored params.
    #[error("confirm_{field}: the {field} typed is not the proposal's {field}")]
    ConfirmMismatch {
        /// Which value.
        field: ConfirmField,
    },
    /// The handler (`require_passkey`) or the tenant (`approvers.require_passkey`) needs an
    /// Approve signed with a passkey, and none was given (break-glass can never give one).
    #[error(
        "approving this needs your passkey: register one on the Passkeys page (/passkeys), then approve again from the decision page"
    )]
    PasskeyRequired,
    /// A passkey assertion was given but refused (unknown or used challenge, another
    /// proposal's, another passkey's, bad signature, counter not increasing).
    #[error("the passkey signature was refused: {why}")]
    PasskeyRefused {
        /// Why, naming the field.
        why: String,
    },
}

impl ApprovalRefusal {
    /// A stable name of the rule that refused (the audit event's `detail.rule`).
    pub fn rule(&self) -> &'static str {
        match self {
            Self::ShownIntentMissing => "shown_intent_missing",
            Self::StaleIntent => "stale_intent",
            Self::StaleDocVersion => "stale_doc_version",
            Self::StalePreview => "stale_preview",
            Self::NotAnApprover { .. } => "not_an_approver",
            Self::SelfApproval => "self_approval",
            Self::NoDocVersion => "no_doc_version",
            Self::BreakGlassLimit => "breakglass_limit",
            Self::Expired { .. } => "escalation_ttl",
            Self::SamePerson { .. } => "same_person",
            Self::ClaimsTooOld { .. } => "max_claims_age",
            Self::ClaimsAhead { .. } => "claims_future",
            Self::ReauthRequired { .. } => "reauth_within",
            Self::AuthTimeAhead { .. } => "auth_time_future",
            Self::ConfirmMissing { .. } => "confirm_missing",
            Self::ConfirmMismatch { .. } => "confirm_mismatch",
            Self::NotInStage { .. } => "stage_group",
            Self::StageTimedOut { .. } => "stage_within",
            Self::BreakGlassStaged => "breakglass_stages",
            Self::PasskeyRequired => "passkey_required",
            Self::PasskeyRefused { .. } => "passkey_refused",
        }
    }

    /// The OIDC `max_age` (seconds) of the sign-in that would lift this refusal, when signing
    /// in again is the way out (`max_claims_age`, `reauth_within`).
    pub fn sign_in_max_age(&self) -> Option<u64> {
        match self {
            Self::ClaimsTooOld { max_secs } | Self::ClaimsAhead { max_secs, .. } => Some(*max_secs),
            Self::ReauthRequired { within_secs } | Self::AuthTimeAhead { within_secs, .. } => {
                Some(*within_secs)
            }
            _ => None,
        }
    }
}

/// Whether an Approve of `params` needs a passkey: the tenant asks for it on every Approve, or
/// the handler sets `require_passkey` (only above `passkey_over`, when set, by `amount`; an
/// amount that is missing or not an integer counts as above).
pub fn passkey_required(tenant_wide: bool, handler: &HandlerEntry, params: &Value) -> bool {
    if tenant_wide {
        return true;
    }
    if !handler.require_passkey {
        return false;
    }
    match handler.passkey_over {
        None => true,
        Some(over) => params
            .get("amount")
            .and_then(Value::as_i64)
            .is_none_or(|a| a > over),
    }
}

/// How many hex characters of the intent hash every channel shows and asks for: `approvals
/// list`, `approvals show`, `actiond dev`'s hints and `--intent` (at least this many).
pub const INTENT_PREFIX_LEN: usize = 16;

/// Normalizes the intent hash a person was shown: trimmed, lowercase, at least
/// [`INTENT_PREFIX_LEN`] hex characters.
pub fn shown_intent(shown: &str) -> Result<String, ApprovalRefusal> {
    let s = shown.trim().to_ascii_lowercase();
    if s.len() < INTENT_PREFIX_LEN || !s.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(ApprovalRefusal::ShownIntentMissing);
    }
    Ok(s)
}

/// Checks that what the person saw is what they decide on: `shown_intent` (normalized by
/// [`shown_intent`]) is a prefix of `intent_hash`, and `shown_doc_version`, when the channel
/// shows one, is `doc_version`.
pub fn check_shown(
    intent_hash: &str,
    doc_version: Option<i32>,
    shown_intent: &str,
    shown_doc_version: Option<i32>,
) -> Result<(), ApprovalRefusal> {
    if !intent_hash.starts_with(shown_intent) {
        return Err(ApprovalRefusal::StaleIntent);
    }
    match shown_doc_version {
        Some(v) if Some(v) != doc_version => Err(ApprovalRefusal::StaleDocVersion),
        _ => Ok(()),
    }
}

/// The agent's recorded owner can never approve its proposals (they may deny them).
pub fn check_not_owner(
    owner: Option<&str>,
    subject: &str,
    verdict: Verdict,
) -> Result<(), ApprovalRefusal> {
    if verdict == Verdict::Approve && owner == Some(subject) {
        return Err(ApprovalRefusal::SelfApproval);
    }
    Ok(())
}

/// Break-glass supplies at most one approval per proposal: `prior_breakglass_approvals` is
/// how many it already supplied.
pub fn check_breakglass(
    breakglass: bool,
    verdict: Verdict,
    prior_breakglass_approvals: i64,
) -> Result<(), ApprovalRefusal> {
    if breakglass && verdict == Verdict::Approve && prior_breakglass_approvals > 0 {
        return Err(ApprovalRefusal::BreakGlassLimit);
    }
    Ok(())
}

/// How old, by the database clock, what a web approver's session vouches for is, in seconds:
/// the claims (read at login) and the last authentication at the identity provider (ID-token
/// `auth_time`; `None` when the token had none). Break-glass has neither.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Freshness {
    /// Seconds since the claims were read.
    pub claims_age: f64,
    /// Seconds since `auth_time`, when known.
    pub auth_age: Option<f64>,
}

/// An Approve from the web counts only with claims younger than `max_claims_age` (and not dated
/// in the future by more than [`CLOCK_SKEW`](crate::external_time::CLOCK_SKEW):
/// [`ApprovalRefusal::ClaimsAhead`]) and, when the
/// handler sets `reauth_within`, an `auth_time` at most that old and not in the future by more
/// than [`CLOCK_SKEW`](crate::external_time::CLOCK_SKEW) (a future `auth_time` would make the
/// session "fresh" until that future comes: [`ApprovalRefusal::AuthTimeAhead`]). A Deny never needs either
/// (it is the safe direction); break-glass (`fresh` = `None`) has no ID token, and its use is
/// itself audited and alerted on.
pub fn check_fresh(
    verdict: Verdict,
    fresh: Option<Freshness>,
    max_claims_age: Duration,
    reauth_within: Option<Duration>,
) -> Result<(), ApprovalRefusal> {
    let Some(f) = fresh else { return Ok(()) };
    if verdict == Verdict::Deny {
        return Ok(());
    }
    match TimeBound::new("claims", max_claims_age).check_age(f.claims_age) {
        Ok(()) => {}
        Err(TimeRefused::Ahead {
            ahead_secs,
            skew_secs,
            ..
        }) => {
            return Err(ApprovalRefusal::ClaimsAhead {
                ahead_secs,
                skew_secs,
                max_secs: max_claims_age.as_secs(),
            });
        }
        Err(_) => {
            return Err(ApprovalRefusal::ClaimsTooOld {
                max_secs: max_claims_age.as_secs(),
            });
        }
    }
    if let Some(w) = reauth_within {
        let reauth = || ApprovalRefusal::ReauthRequired {
            within_secs: w.as_secs(),
        };
        let age = f.auth_age.ok_or_else(reauth)?;
        match TimeBound::new("auth_time", w).check_age(age) {
            Ok(()) => {}
            Err(TimeRefused::Ahead {
                ahead_secs,
                skew_secs,
                ..
            }) => {
                return Err(ApprovalRefusal::AuthTimeAhead {
                    ahead_secs,
                    skew_secs,
                    within_secs: w.as_secs(),
                });
            }
            Err(_) => return Err(reauth()),
        }
    }
    Ok(())
}

/// The values an approver must type again for these params: every field of `confirm`, except
/// that `amount` is skipped when `confirm_over` is set and `params.amount` is not above it.
pub fn confirm_required(
    confirm: &[ConfirmField],
    confirm_over: Option<i64>,
    params: &Value,
) -> Vec<ConfirmField> {
    confirm
        .iter()
        .copied()
        .filter(|f| match (f, confirm_over) {
            (ConfirmField::Amount, Some(over)) => params
                .get("amount")
                .and_then(Value::as_i64)
                .is_none_or(|a| a > over),
            _ => true,
        })
        .collect()
}

/// Reads an amount typed in major units of `currency` (`120`, `120.0`, `120.00`; at most the
/// currency's ISO 4217 exponent of decimals; no sign, no grouping) as integer minor units.
pub fn parse_major_units(typed: &str, currency: &str) -> Option<i64> {
    let t = typed.trim();
    let exp = minor_unit_exponent(currency) as usize;
    let (int, frac) = t.split_once('.').unwrap_or((t, ""));
    let digits = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    if int.is_empty() || int.len() > 15 || !digits(int) || !digits(frac) || frac.len() > exp {
        return None;
    }
    if t.contains('.') && frac.is_empty() {
        return None;
    }
    let padded = format!("{frac:0<exp$}");
    let minor: i64 = format!("{int}{padded}").parse().ok()?;
    Some(minor)
}

/// The values typed again by the approver (form fields `confirm_amount`, `confirm_target`; CLI
/// `--confirm`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Retyped {
    /// The amount, in major units.
    pub amount: Option<String>,
    /// The target.
    pub target: Option<String>,
}

/// Compares every required value ([`confirm_required`]) with the stored params and target: the
/// amount as a number in the currency's minor units, the target exactly (surrounding blanks
/// ignored). A Deny needs nothing typed.
pub fn check_confirm(
    verdict: Verdict,
    required: &[ConfirmField],
    params: &Value,
    target: &str,
    typed: &Retyped,
) -> Result<(), ApprovalRefusal> {
    if verdict == Verdict::Deny {
        return Ok(());
    }
    for &field in required {
        let given = match field {
            ConfirmField::Amount => typed.amount.as_deref(),
            ConfirmField::Target => typed.target.as_deref(),
        }
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or(ApprovalRefusal::ConfirmMissing { field })?;
        let same = match field {
            ConfirmField::Amount => {
                let cur = params.get("currency").and_then(Value::as_str).unwrap_or("");
                let stored = params.get("amount").and_then(Value::as_i64);
                stored.is_some() && parse_major_units(given, cur) == stored
            }
            ConfirmField::Target => given == target,
        };
        if !same {
            return Err(ApprovalRefusal::ConfirmMismatch { field });
        }
    }
    Ok(())
}

/// Whether a person with these ID-token `claims` is in approver group `group`: the tenant's
/// `approvers.claim` (a string or a list of strings) holds it.
pub fn in_group(claims: &Value, claim: &str, group: &str) -> bool {
    claim_matches(claims, claim, &[group.to_owned()])
}

/// Where the approvals of a proposal stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tally {
    /// Enough distinct people approved: issue the grant.
    Complete,
    /// More distinct approvers are needed.
    NeedsMore {
        /// Approvals so far.
        have: i64,
        /// Approvals required.
        need: i64,
    },
}

/// The tally after `have` distinct approvals (one per person: subject of the pinned issuer) of a handler that
/// requires `required` (`approvals_required`).
pub fn tally(have: i64, required: u32) -> Tally {
    let need = i64::from(required);
    if have < need {
        Tally::NeedsMore { have, need }
    } else {
        Tally::Complete
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tenant::Approvers;
    use serde_json::json;

    fn approvers(issuer: Option<&str>) -> Approvers {
        Approvers {
            issuer: issuer.map(str::to_owned),
            claim: "groups".into(),
            values: vec!["acme-approvers".into()],
            subjects: vec!["ops".into()],
            admins: Vec::new(),
            max_claims_age: Duration::from_secs(3600),
            require_passkey: false,
            ..Approvers::default()
        }
    }

    #[test]
    fn subject_or_claim_value_may_decide_under_the_pinned_issuer() {
        let a = approvers(None);
        let idp = "https://idp";
        assert!(may_decide(&a, idp, "https://idp", "ops", &json!({})));
        let groups = json!({"groups": ["acme-approvers"]});
        assert!(may_decide(&a, idp, "https://idp", "x", &groups));
        let one = json!({"groups": "acme-approvers"});
        assert!(may_decide(&a, idp, "https://idp", "x", &one));
        let other = json!({"groups": ["other"]});
        assert!(!may_decide(&a, idp, "https://idp", "x", &other));
        // Unpinned: the deployment's issuer is the pin; another issuer's "ops" is nobody.
        assert!(!may_decide(&a, idp, "https://idp2", "ops", &json!({})));
        assert!(!may_decide(&a, idp, "https://idp2", "x", &groups));
        let pinned = approvers(Some("https://idp/"));
        assert!(may_decide(
            &pinned,
            "https://web",
            "https://idp",
            "ops",
            &json!({})
        ));
        assert!(!may_decide(
            &pinned,
            "https://idp",
            "https://evil",
            "ops",
            &json!({})
        ));
        assert!(!may_decide(
            &pinned,
            "https://web",
            "https://web",
            "ops",
            &json!({})
        ));
        assert_eq!(pinned_issuer(&pinned, "https://web"), "https://idp/");
        assert_eq!(pinned_issuer(&a, "https://web"), "https://web");
        assert!(may_decide_by_subject(&a, "ops"));
        assert!(!may_decide_by_subject(&a, "acme-approvers"));
    }

    #[test]
    fn approve_needs_fresh_claims_and_auth_deny_never_does() {
        let hour = Duration::from_secs(3600);
        let ten_min = Some(Duration::from_secs(600));
        let f = |claims_age: f64, auth_age: Option<f64>| {
            Some(Freshness {
                claims_age,
                auth_age,
            })
        };
        use Verdict::{Approve, Deny};
        type Case = (
            Verdict,
            Option<Freshness>,
            Option<Duration>,
            Result<(), ApprovalRefusal>,
        );
        let cases: [Case; 17] = [
            (Approve, f(10.0, Some(10.0)), None, Ok(())),
            (Approve, f(3599.0, None), None, Ok(())),
            // Claims dated ahead: within the skew they count, past it never (a session row
            // dated hours ahead would stay "fresh" until then); a Deny is never refused.
            (Approve, f(-59.0, None), None, Ok(())),
            (
                Approve,
                f(-3.0 * 3600.0, Some(1.0)),
                None,
                Err(ApprovalRefusal::ClaimsAhead {
                    ahead_secs: 10800,
                    skew_secs: 60,
                    max_secs: 3600,
                }),
            ),
            (Deny, f(-3.0 * 3600.0, None), None, Ok(())),
            (
                Approve,
                f(3601.0, Some(1.0)),
                None,
                Err(ApprovalRefusal::ClaimsTooOld { max_secs: 3600 }),
            ),
            (Deny, f(99_999.0, None), ten_min, Ok(())),
            (Approve, f(10.0, Some(599.0)), ten_min, Ok(())),
            (
                Approve,
                f(10.0, Some(601.0)),
                ten_min,
                Err(ApprovalRefusal::ReauthRequired { within_secs: 600 }),
            ),
            (
                Approve,
                f(10.0, None),
                ten_min,
                Err(ApprovalRefusal::ReauthRequired { within_secs: 600 }),
            ),
            (Deny, f(10.0, Some(601.0)), ten_min, Ok(())),
            (Approve, None, ten_min, Ok(())),
            // A stored auth_time in the future: within the skew it counts, beyond it never
            // (hours ahead, or milliseconds read as seconds: ~55,000 years ahead).
            (Approve, f(10.0, Some(-60.0)), ten_min, Ok(())),
            (
                Approve,
                f(10.0, Some(-3.0 * 3600.0)),
                ten_min,
                Err(ApprovalRefusal::AuthTimeAhead {
                    ahead_secs: 10_800,
                    skew_secs: 60,
                    within_secs: 600,
                }),
            ),
            (
                Approve,
                f(10.0, Some(-1.7e12)),
                ten_min,
                Err(ApprovalRefusal::AuthTimeAhead {
                    ahead_secs: 1_700_000_000_000,
                    skew_secs: 60,
                    within_secs: 600,
                }),
            ),
            (
                Approve,
                f(10.0, Some(f64::NAN)),
                ten_min,
                Err(ApprovalRefusal::ReauthRequired { within_secs: 600 }),
            ),
            (Deny, f(10.0, Some(-1.7e12)), ten_min, Ok(())),
        ];
        for (verdict, fresh, reauth, want) in cases {
            assert_eq!(
                check_fresh(verdict, fresh, hour, reauth),
                want,
                "{verdict:?} {fresh:?} {reauth:?}"
            );
        }
        assert_eq!(
            ApprovalRefusal::ClaimsTooOld { max_secs: 3600 }.sign_in_max_age(),
            Some(3600)
        );
        assert_eq!(ApprovalRefusal::StaleIntent.sign_in_max_age(), None);
    }

    #[test]
    fn retyped_values_must_match_the_stored_params() {
        let params = json!({"amount": 120_050, "currency": "USD"});
        let req = [ConfirmField::Amount];
        let typed = |a: &str| Retyped {
            amount: Some(a.into()),
            target: None,
        };
        let mismatch = Err(ApprovalRefusal::ConfirmMismatch {
            field: ConfirmField::Amount,
        });
        let cases: [(&str, Result<(), ApprovalRefusal>); 9] = [
            ("1200.50", Ok(())),
            (" 1200.5 ", Ok(())),
            ("1200.05", mismatch.clone()),
            ("120050", mismatch.clone()),
            ("1200.500", mismatch.clone()),
            ("1,200.50", mismatch.clone()),
            ("-1200.50", mismatch.clone()),
            ("1200.", mismatch.clone()),
            (
                "",
                Err(ApprovalRefusal::ConfirmMissing {
                    field: ConfirmField::Amount,
                }),
            ),
        ];
        for (t, want) in cases {
            assert_eq!(
                check_confirm(Verdict::Approve, &req, &params, "pi_1", &typed(t)),
                want,
                "{t:?}"
            );
        }
        assert_eq!(
            check_confirm(Verdict::Deny, &req, &params, "pi_1", &Retyped::default()),
            Ok(())
        );
        let yen = json!({"amount": 5000, "currency": "JPY"});
        assert_eq!(
            check_confirm(Verdict::Approve, &req, &yen, "t", &typed("5000")),
            Ok(())
        );
        assert_eq!(
            check_confirm(Verdict::Approve, &req, &yen, "t", &typed("50.00")),
            mismatch
        );
        let target = [ConfirmField::Target];
        let t = Retyped {
            amount: None,
            target: Some(" pi_1 ".into()),
        };
        assert_eq!(
            check_confirm(Verdict::Approve, &target, &params, "pi_1", &t),
            Ok(())
        );
        assert_eq!(
            check_confirm(Verdict::Approve, &target, &params, "pi_2", &t),
            Err(ApprovalRefusal::ConfirmMismatch {
                field: ConfirmField::Target
            })
        );
    }

    #[test]
    fn confirm_over_skips_small_amounts() {
        let both = [ConfirmField::Amount, ConfirmField::Target];
        let small = json!({"amount": 50_000});
        let large = json!({"amount": 50_001});
        assert_eq!(
            confirm_required(&both, Some(50_000), &small),
            [ConfirmField::Target]
        );
        assert_eq!(confirm_required(&both, Some(50_000), &large), both);
        assert_eq!(confirm_required(&both, None, &small), both);
        assert_eq!(confirm_required(&both, Some(1), &json!({})), both);
    }

    #[test]
    fn the_shown_intent_must_be_a_long_enough_prefix() {
        assert_eq!(
            shown_intent(" ABCDEF1234567890 ").unwrap(),
            "abcdef1234567890"
        );
        assert_eq!(
            shown_intent("abcdef123456789"),
            Err(ApprovalRefusal::ShownIntentMissing)
        );
        assert_eq!(
            shown_intent("abcdefgh12345678"),
            Err(ApprovalRefusal::ShownIntentMissing)
        );
        assert_eq!(check_shown("abcdef1234", Some(2), "abcdef12", None), Ok(()));
        assert_eq!(
            check_shown("abcdef1234", Some(2), "abcdef12", Some(2)),
            Ok(())
        );
        assert_eq!(
            check_shown("abcdef1234", Some(2), "abcdef13", None),
            Err(ApprovalRefusal::StaleIntent)
        );
        assert_eq!(
            check_shown("abcdef1234", Some(3), "abcdef12", Some(2)),
            Err(ApprovalRefusal::StaleDocVersion)
        );
    }

    #[test]
    fn the_owner_may_deny_but_never_approve() {
        assert_eq!(
            check_not_owner(Some("alice"), "alice", Verdict::Approve),
            Err(ApprovalRefusal::SelfApproval)
        );
        assert_eq!(
            check_not_owner(Some("alice"), "alice", Verdict::Deny),
            Ok(())
        );
        assert_eq!(
            check_not_owner(Some("alice"), "bob", Verdict::Approve),
            Ok(())
        );
        assert_eq!(check_not_owner(None, "bob", Verdict::Approve), Ok(()));
    }

    #[test]
    fn break_glass_supplies_at_most_one_approval() {
        assert_eq!(check_breakglass(true, Verdict::Approve, 0), Ok(()));
        assert_eq!(
            check_breakglass(true, Verdict::Approve, 1),
            Err(ApprovalRefusal::BreakGlassLimit)
        );
        assert_eq!(check_breakglass(true, Verdict::Deny, 1), Ok(()));
        assert_eq!(check_breakglass(false, Verdict::Approve, 3), Ok(()));
    }

    #[test]
    fn a_stage_group_is_a_value_of_the_claim() {
        let c = json!({"groups": ["team-leads", "x"], "role": "finance"});
        assert!(in_group(&c, "groups", "team-leads"));
        assert!(!in_group(&c, "groups", "finance"));
        assert!(in_group(&c, "role", "finance"));
        assert!(!in_group(&json!({}), "groups", "team-leads"));
        let r = ApprovalRefusal::NotInStage {
            stage: 1,
            of: 2,
            approvers: "team-leads".into(),
        };
        assert_eq!(r.rule(), "stage_group");
        assert_eq!(
            r.to_string(),
            "stage 1 of 2 waits for team-leads; you are not in team-leads, so your approval cannot count"
        );
    }

    #[test]
    fn n_distinct_approvals_complete_the_tally() {
        assert_eq!(tally(1, 2), Tally::NeedsMore { have: 1, need: 2 });
        assert_eq!(tally(2, 2), Tally::Complete);
        assert_eq!(tally(1, 1), Tally::Complete);
    }
}
