//! The small vocabulary every part of the domain shares, with no dependency on any of them:
//! policy effects ([`Effect`]), the handlers of the registry ([`HandlerKind`]; what each one
//! does is in [`crate::handlers`]), the kinds of field a handler or a person names
//! ([`ConfirmField`], [`MoneyFields`]) and how a refused value is quoted ([`got`]).
//!
//! This module imports nothing from the rest of the crate, so the modules that use these words
//! (`policy`, `tenant`, `approval`, `classifier`, `handlers`) need not import each other for
//! them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A policy outcome, ordered by severity (`Allow < Escalate < Block`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// Approve automatically; the policy worker issues the grant.
    Allow,
    /// A person must decide.
    Escalate,
    /// Final refusal.
    Block,
}

impl Effect {
    /// Parses `allow` / `escalate` / `block`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "allow" => Some(Self::Allow),
            "escalate" => Some(Self::Escalate),
            "block" => Some(Self::Block),
            _ => None,
        }
    }
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Escalate => "escalate",
            Self::Block => "block",
        }
    }
}

impl std::str::FromStr for Effect {
    type Err = crate::UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s).ok_or_else(|| crate::UnknownName::new("effect", s))
    }
}

impl std::fmt::Display for Effect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A handler of the compiled registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HandlerKind {
    /// `webhook.post`: POST a JSON body to the tenant's one configured URL.
    WebhookPost,
    /// `billing.refund.issue`: a Stripe-style refund (`POST /v1/refunds`, `Idempotency-Key`).
    BillingRefundIssue,
    /// `dns.record.update`: replace one RRset through the PowerDNS HTTP API.
    DnsRecordUpdate,
    /// `email.send`: a text email from a named template through the operator's SMTP relay.
    EmailSend,
    /// `db.statement.execute`: a named SQL statement run as the tenant's role of a target
    /// database, with a cap on rows touched.
    DbStatementExecute,
    /// `ticket.comment.add`: post a comment to a ticket of the tenant's ticket system.
    TicketCommentAdd,
}

/// The params of a handler that carry money: an integer amount in minor units of an ISO 4217
/// currency code (`billing.refund.issue`: `amount`, `currency`). Documents may set
/// `confirm: [amount]`, `confirm_over` and staged amount limits only for a handler that has
/// them; the card, the queue and the params table show the amount in major units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MoneyFields {
    /// The integer param in minor units.
    pub amount: &'static str,
    /// The string param holding the ISO 4217 code.
    pub currency: &'static str,
}

/// The ISO 4217 minor-unit exponent of `currency`: 0 (JPY, KRW, …), 3 (BHD, KWD, …) or 2 (every
/// other code).
pub fn minor_unit_exponent(currency: &str) -> u32 {
    match currency {
        "BIF" | "CLP" | "DJF" | "GNF" | "ISK" | "JPY" | "KMF" | "KRW" | "PYG" | "RWF" | "UGX"
        | "UYI" | "VND" | "VUV" | "XAF" | "XOF" | "XPF" => 0,
        "BHD" | "IQD" | "JOD" | "KWD" | "LYD" | "OMR" | "TND" => 3,
        _ => 2,
    }
}

/// Formats integer minor units as a decimal amount with the ISO 4217 exponent of `currency`
/// (2 unless listed: 0 for JPY, KRW, …; 3 for BHD, KWD, …): `12000, "USD"` → `"120.00"`.
pub fn format_minor_units(amount: i64, currency: &str) -> String {
    let exp = minor_unit_exponent(currency);
    if exp == 0 {
        return amount.to_string();
    }
    let sign = if amount < 0 { "-" } else { "" };
    let a = amount.unsigned_abs();
    let div = 10u64.pow(exp);
    format!(
        "{sign}{}.{:0width$}",
        a / div,
        a % div,
        width = exp as usize
    )
}

/// A parameter an approver must type again before an Approve counts (`confirm:` of a handler).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ConfirmField {
    /// `params.amount`, typed in major units of `params.currency` (`120.00` for 12000 USD).
    Amount,
    /// The proposal's target, typed exactly.
    Target,
}

impl ConfirmField {
    /// The name in tenant documents and forms (`amount`, `target`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Amount => "amount",
            Self::Target => "target",
        }
    }

    /// Parses a name of a tenant document's `confirm:` list.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "amount" => Some(Self::Amount),
            "target" => Some(Self::Target),
            _ => None,
        }
    }
}

impl std::fmt::Display for ConfirmField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The given value for an error message, as JSON (`"Allow"`, `1`, `[…]`), cut to 40
/// characters.
pub fn got(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() <= 40 {
        s
    } else {
        let mut t: String = s.chars().take(39).collect();
        t.push('…');
        t
    }
}
