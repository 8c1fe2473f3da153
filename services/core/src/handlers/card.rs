//! The decision card's words, per handler: a few plain facts ("120.00 USD", "30 email
//! addresses to hooks.partner.example — external", "A 192.0.2.7 → 203.0.113.9") and an
//! Approve label that says what it does. Each handler module builds its own [`Card`] from a
//! [`CardInput`]; the web app lays the facts out (and escapes them), the API and CLI need not
//! know them. Agent-written text keeps its invisible characters shown
//! ([`crate::text::reveal_invisible`]).

use crate::text::reveal_invisible;
use crate::vocab::format_minor_units;
use serde_json::Value;

/// What a handler's card is built from.
pub struct CardInput<'a> {
    /// The proposal's params (as stored).
    pub params: &'a Value,
    /// The handler's settings in the tenant document version shown (`null` when none).
    pub settings: &'a Value,
    /// The proposal's target, its invisible characters already shown.
    pub target: &'a str,
    /// The executor's preview text ("" when there is none yet).
    pub preview: &'a str,
    /// Whether a param set off the escalating rule (its fact is highlighted).
    pub hot: &'a dyn Fn(&str) -> bool,
}

impl CardInput<'_> {
    /// Whether `param` set off the rule.
    pub fn is_hot(&self, param: &str) -> bool {
        (self.hot)(param)
    }
}

/// One fact of the card: a label, a value in plain words, whether the value set off the rule,
/// and a note of context (a limit, a warning).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fact {
    /// What the fact is ("Amount", "To").
    pub label: String,
    /// The value in plain words.
    pub value: String,
    /// Whether the value set off the escalating rule.
    pub hot: bool,
    /// Context: a limit, the whole address, why it warns.
    pub note: String,
    /// Extra values behind "show all" (webhook addresses).
    pub more: Vec<String>,
    /// A warning (NS/MX change, long TTL, over a limit).
    pub warn: bool,
    /// The values themselves, shown under the value (a webhook body, an email's variables).
    pub values: Option<Value>,
}

impl Fact {
    /// A fact with a label, a value and whether it is hot.
    pub fn new(label: &str, value: String, hot: bool) -> Self {
        Fact {
            label: label.into(),
            value,
            hot,
            ..Fact::default()
        }
    }
    /// The fact with a note.
    pub fn note(mut self, n: String) -> Self {
        self.note = n;
        self
    }
    /// The fact with `v` shown under it.
    pub fn values(mut self, v: &Value) -> Self {
        self.values = Some(v.clone());
        self
    }
}

/// The facts of a card and its Approve label.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Card {
    /// The facts, in order.
    pub facts: Vec<Fact>,
    /// The Approve button's label ("Approve refund of 999.99 USD").
    pub approve_label: String,
}

/// Money in major units with its currency: "999.99 USD".
pub fn money(amount: i64, currency: &str) -> String {
    format!(
        "{} {}",
        format_minor_units(amount, currency),
        reveal_invisible(currency, false)
    )
}

/// A string param, or `""`.
pub(crate) fn str_of<'a>(p: &'a Value, k: &str) -> &'a str {
    p.get(k).and_then(Value::as_str).unwrap_or_default()
}

/// Every string in `v` that looks like an email address, in order.
pub(crate) fn emails(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => {
            for w in s.split(|c: char| c.is_whitespace() || ",;<>\"'".contains(c)) {
                if let Some((l, d)) = w.split_once('@')
                    && !l.is_empty()
                    && d.contains('.')
                    && !d.starts_with('.')
                {
                    out.push(reveal_invisible(w, false));
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| emails(x, out)),
        Value::Object(m) => m.values().for_each(|x| emails(x, out)),
        _ => {}
    }
}

/// True unless `host` is loopback, a private address or a `.internal`/`.local` name.
fn external(host: &str) -> bool {
    match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(a)) => !(a.is_private() || a.is_loopback() || a.is_link_local()),
        Ok(std::net::IpAddr::V6(a)) => !a.is_loopback(),
        Err(_) => !(host == "localhost" || host.ends_with(".internal") || host.ends_with(".local")),
    }
}

/// Where a URL goes: its host and "host — external" or "host — internal" (loopback,
/// private addresses, `.internal` and `.local` names). `target` must already have its
/// invisible characters revealed (a URL parser would silently drop some of them).
pub fn destination(target: &str) -> (String, String) {
    let host = url::Url::parse(target)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .unwrap_or_else(|| target.to_owned());
    let where_ = if external(&host) {
        "external"
    } else {
        "internal"
    };
    let shown = format!("{host} — {where_}");
    (host, shown)
}

/// A JSON body in plain words and every email address in it: "30 email addresses, 3
/// shown: a@x, b@x, c@x" (the addresses, for "show all"), or "2 fields" when it holds none.
pub fn body_summary(body: &Value) -> (String, Vec<String>) {
    let mut found = Vec::new();
    emails(body, &mut found);
    if found.is_empty() {
        let fields = body.as_object().map_or(0, |m| m.len());
        return (
            format!("{fields} field{}", if fields == 1 { "" } else { "s" }),
            found,
        );
    }
    let n = found.len();
    let shown: Vec<String> = found.iter().take(3).cloned().collect();
    let text = format!(
        "{n} email address{}, {} shown: {}",
        if n == 1 { "" } else { "es" },
        shown.len(),
        shown.join(", ")
    );
    (text, found)
}
