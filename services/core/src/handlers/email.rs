//! `email.send`: a text email through the operator's SMTP relay, from the tenant's address, to
//! recipients in the tenant's allowed domains, built from a template *named* in the tenant
//! document. The agent picks the template and fills its `{placeholders}` with plain text; it
//! never writes a header, a subject line or HTML.

use super::card::{Card, CardInput, Fact, emails, str_of};
use super::dns::is_canonical_dns_name;
use super::spec::{Spec, check_token, listed};
use crate::FieldError;
use crate::text::reveal_invisible;
use serde_json::{Map, Value, json};

/// The registry entry of `email.send`.
pub(super) static SPEC: Spec = Spec {
    action: "email.send",
    description: "Send a text email built from one of the tenant's named templates to recipients in its allowed domains.",
    honours_idempotency_key: false,
    history_sum_param: None,
    default_risky: &["recipients", "variables"],
    editable: &["recipients", "variables"],
    default_summary: "Email {recipients} using template {template}",
    settings: &[
        "credential",
        "from",
        "recipient_domains",
        "templates",
        "max_recipients",
    ],
    credential_required: false,
    params_schema,
    check_params,
    check_settings,
    derive_target,
    placeholder: super::spec::no_placeholder,
    card,
    card_covers: &["recipients", "template", "variables"],
    limits,
    ..Spec::BASE
};

/// Default of the `max_recipients` setting.
const DEFAULT_MAX_RECIPIENTS: usize = 10;
/// Longest variable value, in characters.
const MAX_VARIABLE_CHARS: usize = 2000;
/// The rule broken by a CR or LF in a value that could reach a header.
const NO_CRLF: &str = "must not contain CR, LF or other control characters (header injection)";
/// Local-part characters that mail relays may read as a route to another host: `%` (the
/// "percent hack", `eve%evil.example@acme.example` is delivered to `eve@evil.example` by a relay
/// that honours it, as Postfix does by default for its own domains) and `!` (UUCP bang paths).
/// An address holding one could leave the tenant's `recipient_domains` after policy allowed it.
const ROUTING_CHARS: [char; 2] = ['%', '!'];
/// The rule broken by a recipient whose local part holds one of [`ROUTING_CHARS`].
const NO_ROUTING: &str = "must not contain % or ! before the @: relays may route such an address to another domain (percent hack, bang path), past recipient_domains";

/// The rule broken by a header-bound value that holds an encoded word or the start of one.
pub const NO_ENCODED_WORD: &str = "must not contain \"=?\" or \"?=\": a MIME encoded word (RFC 2047, =?charset?B|Q?text?=) in the Subject is decoded by the recipient's mail client into text the approver and the policy never read";

/// Whether `s` holds what could be, or join with a neighbour to form, a MIME encoded word
/// (RFC 2047 §2, `=?charset?encoding?encoded-text?=`, any case): its opening `=?` or its
/// closing `?=`. Mail clients decode encoded words in a Subject, so text that carries one shows
/// the recipient something other than what it says.
pub fn has_encoded_word_delimiter(s: &str) -> bool {
    s.contains("=?") || s.contains("?=")
}

/// Decodes the MIME encoded words of a header value (RFC 2047: `B` base64, `Q` quoted-printable
/// -like, either case; UTF-8, US-ASCII and ISO-8859-1 charsets; whitespace between two adjacent
/// encoded words dropped, as RFC 2047 §6.2 says) as a mail client shows them. `None` when `s`
/// holds no encoded word. Words in another charset, or that do not decode, are left as written.
pub fn decode_encoded_words(s: &str) -> Option<String> {
    let mut out = String::new();
    let mut rest = s;
    let mut found = false;
    let mut pending_ws = String::new();
    let mut last_was_word = false;
    while !rest.is_empty() {
        if let Some((decoded, len)) = rest.starts_with("=?").then(|| encoded_word(rest)).flatten() {
            if !last_was_word {
                out.push_str(&pending_ws);
            }
            pending_ws.clear();
            out.push_str(&decoded);
            rest = &rest[len..];
            found = true;
            last_was_word = true;
            continue;
        }
        let Some(c) = rest.chars().next() else { break };
        if c == ' ' || c == '\t' {
            pending_ws.push(c);
        } else {
            out.push_str(&pending_ws);
            pending_ws.clear();
            out.push(c);
            last_was_word = false;
        }
        rest = &rest[c.len_utf8()..];
    }
    out.push_str(&pending_ws);
    found.then_some(out)
}

/// One encoded word at the start of `s`: its decoded text and its length in bytes.
fn encoded_word(s: &str) -> Option<(String, usize)> {
    let body = s.strip_prefix("=?")?;
    let mut parts = body.splitn(3, '?');
    let charset = parts.next()?;
    let encoding = parts.next()?;
    let tail = parts.next()?;
    let end = tail.find("?=")?;
    let text = &tail[..end];
    if charset.is_empty() || text.contains(char::is_whitespace) {
        return None;
    }
    let len = 2 + charset.len() + 1 + encoding.len() + 1 + end + 2;
    let bytes = match encoding {
        "B" | "b" => {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .or_else(|_| base64::engine::general_purpose::STANDARD_NO_PAD.decode(text))
                .ok()?
        }
        "Q" | "q" => {
            let mut b = Vec::new();
            let raw = text.as_bytes();
            let mut i = 0;
            while i < raw.len() {
                match raw[i] {
                    b'_' => b.push(b' '),
                    b'=' => {
                        let hex = std::str::from_utf8(raw.get(i + 1..i + 3)?).ok()?;
                        b.push(u8::from_str_radix(hex, 16).ok()?);
                        i += 2;
                    }
                    x => b.push(x),
                }
                i += 1;
            }
            b
        }
        _ => return None,
    };
    let charset = charset
        .split('*')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    let decoded = match charset.as_str() {
        "utf-8" | "utf8" | "us-ascii" => String::from_utf8_lossy(&bytes).into_owned(),
        "iso-8859-1" | "latin1" => bytes.iter().map(|&b| char::from(b)).collect(),
        _ => return None,
    };
    Some((decoded, len))
}

/// True when the local part of `s` (before its last `@`) holds a routing character.
fn has_routing_local_part(s: &str) -> bool {
    s.rsplit_once('@')
        .is_some_and(|(local, _)| local.contains(ROUTING_CHARS))
}

fn params_schema() -> Value {
    json!({
        "type": "object", "additionalProperties": false,
        "required": ["recipients", "template"],
        "properties": {
            "recipients": {"type": "array", "minItems": 1, "items": {"type": "string"},
                "description": "email addresses (local@domain) in the tenant's allowed recipient domains"},
            "template": {"type": "string", "description": "name of one of the tenant's email templates"},
            "variables": {"type": "object", "additionalProperties": {"type": "string", "maxLength": MAX_VARIABLE_CHARS},
                "description": "plain-text values for the template's {placeholders}; exactly the ones it uses"}
        }
    })
}

/// True for `local@domain` with a dot-atom local part (RFC 5322 §3.4.1, without quoted
/// strings or comments, and without `%` or `!`, which relays may read as a route to another
/// domain) and a canonical lowercase domain.
pub fn is_email_address(s: &str) -> bool {
    let Some((local, domain)) = s.rsplit_once('@') else {
        return false;
    };
    !local.is_empty()
        && local.len() <= 64
        && !local.starts_with('.')
        && !local.ends_with('.')
        && !local.contains("..")
        && local
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "#$&'*+-/=?^_`{|}~.".contains(c))
        && is_canonical_dns_name(domain)
        && domain.contains('.')
}

/// The `{placeholder}` names a template text uses, in order of first use.
pub fn placeholders(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find('{') {
        let after = &rest[start + 1..];
        let Some(end) = after.find('}') else { break };
        let name = &after[..end];
        if is_placeholder_name(name) && !out.iter().any(|n| n == name) {
            out.push(name.to_owned());
        }
        rest = &after[end + 1..];
    }
    out
}

fn is_placeholder_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// Replaces every `{name}` of `text` with its variable (plain text, never markup).
fn fill(text: &str, vars: &Map<String, Value>) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return out;
        };
        let name = &after[..end];
        match vars.get(name).and_then(Value::as_str) {
            Some(v) if is_placeholder_name(name) => out.push_str(v),
            _ => out.push_str(&rest[start..start + end + 2]),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

/// An email as it will be sent: from the approved settings and the validated params.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedEmail {
    /// The tenant's `from` address.
    pub from: String,
    /// The recipients, as proposed.
    pub to: Vec<String>,
    /// The template's subject with its placeholders filled.
    pub subject: String,
    /// The template's text body with its placeholders filled.
    pub body: String,
}

/// Renders the email `params` describe with `settings` (the handler entry's own settings);
/// `None` when the template is missing (params are validated at submission, so only a changed
/// document gets here).
pub fn render(params: &Value, settings: &Value) -> Option<RenderedEmail> {
    let name = params.get("template")?.as_str()?;
    let tpl = settings.get("templates")?.get(name)?;
    let empty = Map::new();
    let vars = params
        .get("variables")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    Some(RenderedEmail {
        from: settings.get("from")?.as_str()?.to_owned(),
        to: params
            .get("recipients")?
            .as_array()?
            .iter()
            .filter_map(|r| r.as_str().map(str::to_owned))
            .collect(),
        subject: fill(tpl.get("subject")?.as_str()?, vars),
        body: fill(tpl.get("body")?.as_str()?, vars),
    })
}

fn check_params(obj: &Map<String, Value>, settings: &Value, errs: &mut Vec<FieldError>) {
    if let Some(v) = obj.get("recipients") {
        check_recipients(v, settings, errs);
    }
    let Some(t) = obj.get("template") else { return };
    check_token(errs, "template", t, 64);
    let Some(tpl) = t
        .as_str()
        .and_then(|name| settings.get("templates")?.get(name))
    else {
        if t.as_str().is_some() {
            errs.push(FieldError::new(
                "params.template",
                "is not one of this tenant's email templates",
            ));
        }
        return;
    };
    let text = |k: &str| tpl.get(k).and_then(Value::as_str).unwrap_or_default();
    // Each placeholder once, whether the subject, the body or both use it (a missing variable
    // used in both was named twice).
    let mut used = placeholders(text("subject"));
    for name in placeholders(text("body")) {
        if !used.contains(&name) {
            used.push(name);
        }
    }
    let empty = Map::new();
    let vars = match obj.get("variables") {
        None => &empty,
        Some(Value::Object(m)) => m,
        Some(_) => {
            errs.push(FieldError::new(
                "params.variables",
                "must be an object of strings",
            ));
            return;
        }
    };
    for name in &used {
        if !vars.contains_key(name) {
            errs.push(FieldError::new(
                format!("params.variables.{name}"),
                "is required by the template",
            ));
        }
    }
    // Values that reach the Subject header: the placeholders of the template's subject.
    let header_bound = placeholders(text("subject"));
    // An encoded word assembled from pieces none of which holds a whole delimiter
    // (`{a}{b}{c}` with "=", "?UTF-8?B?…?", "="): the subject as rendered is checked too.
    if decode_encoded_words(text("subject")).is_none()
        && decode_encoded_words(&fill(text("subject"), vars)).is_some()
        && !header_bound
            .iter()
            .filter_map(|k| vars.get(k).and_then(Value::as_str))
            .any(has_encoded_word_delimiter)
    {
        errs.push(FieldError::new(
            "params.variables",
            format!("the subject they fill {NO_ENCODED_WORD}"),
        ));
    }
    for (k, v) in vars {
        let f = super::spec::field(k).replacen("params", "params.variables", 1);
        if !used.contains(k) {
            errs.push(FieldError::new(f, "is not a placeholder of the template"));
        } else if let Some(s) = v.as_str() {
            if s.chars().any(char::is_control) {
                errs.push(FieldError::new(f, NO_CRLF));
            } else if header_bound.contains(k) && has_encoded_word_delimiter(s) {
                errs.push(FieldError::new(f, NO_ENCODED_WORD));
            } else if s.chars().count() > MAX_VARIABLE_CHARS {
                errs.push(FieldError::new(
                    f,
                    format!("must be at most {MAX_VARIABLE_CHARS} characters"),
                ));
            }
        } else {
            errs.push(FieldError::new(f, "must be a string"));
        }
    }
}

fn check_recipients(v: &Value, settings: &Value, errs: &mut Vec<FieldError>) {
    let max = settings
        .get("max_recipients")
        .and_then(Value::as_u64)
        .map_or(DEFAULT_MAX_RECIPIENTS, |n| n as usize);
    let Some(list) = v.as_array().filter(|a| !a.is_empty() && a.len() <= max) else {
        errs.push(FieldError::new(
            "params.recipients",
            format!("must be a list of 1 to {max} email addresses (this tenant's max_recipients)"),
        ));
        return;
    };
    let domains = settings.get("recipient_domains").and_then(Value::as_array);
    for (i, r) in list.iter().enumerate() {
        let f = format!("params.recipients[{i}]");
        match r.as_str() {
            Some(s) if s.chars().any(char::is_control) => errs.push(FieldError::new(f, NO_CRLF)),
            Some(s) if has_routing_local_part(s) => errs.push(FieldError::new(f, NO_ROUTING)),
            Some(s) if is_email_address(s) => {
                let domain = s.rsplit_once('@').map(|x| x.1).unwrap_or_default();
                if !domains.is_some_and(|d| d.iter().any(|x| x.as_str() == Some(domain))) {
                    errs.push(FieldError::new(
                        f,
                        format!("domain {domain} is not one of this tenant's recipient_domains"),
                    ));
                }
            }
            _ => errs.push(FieldError::new(
                f,
                "must be an email address like name@example.com (lowercase domain)",
            )),
        }
    }
    let mut seen: Vec<&str> = list.iter().filter_map(Value::as_str).collect();
    seen.sort_unstable();
    if seen.windows(2).any(|w| w[0] == w[1]) {
        errs.push(FieldError::new(
            "params.recipients",
            "must not list an address twice",
        ));
    }
}

fn check_settings(path: &str, settings: &Map<String, Value>, errs: &mut Vec<FieldError>) {
    if !settings
        .get("from")
        .and_then(Value::as_str)
        .is_some_and(is_email_address)
    {
        errs.push(FieldError::new(
            format!("{path}.from"),
            "is required: an email address like agent@example.com",
        ));
    }
    let domains_ok = settings
        .get("recipient_domains")
        .and_then(Value::as_array)
        .is_some_and(|a| {
            !a.is_empty()
                && a.iter()
                    .all(|d| d.as_str().is_some_and(is_canonical_dns_name))
        });
    if !domains_ok {
        errs.push(FieldError::new(
            format!("{path}.recipient_domains"),
            "is required: a non-empty list of lowercase domain names",
        ));
    }
    if let Some(m) = settings.get("max_recipients")
        && !m.as_u64().is_some_and(|n| (1..=100).contains(&n))
    {
        errs.push(FieldError::new(
            format!("{path}.max_recipients"),
            "must be an integer from 1 to 100",
        ));
    }
    check_templates(path, settings.get("templates"), errs);
}

fn check_templates(path: &str, v: Option<&Value>, errs: &mut Vec<FieldError>) {
    let Some(m) = v.and_then(Value::as_object).filter(|m| !m.is_empty()) else {
        errs.push(FieldError::new(
            format!("{path}.templates"),
            "is required: a mapping of template name to {subject, body}",
        ));
        return;
    };
    for (name, t) in m {
        let p = format!("{path}.templates.{name}");
        if name.is_empty()
            || name.len() > 64
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            errs.push(FieldError::new(
                &p,
                "the name must match ^[A-Za-z0-9_-]{1,64}$",
            ));
        }
        let text = |k: &str| t.get(k).and_then(Value::as_str);
        match text("subject") {
            Some(s) if !s.is_empty() && s.len() <= 200 && !s.chars().any(char::is_control) => {}
            _ => errs.push(FieldError::new(
                format!("{p}.subject"),
                "must be one line of 1 to 200 characters",
            )),
        }
        match text("body") {
            Some(b) if !b.is_empty() && b.len() <= 20_000 => {}
            _ => errs.push(FieldError::new(
                format!("{p}.body"),
                "must be plain text of 1 to 20000 characters",
            )),
        }
        if let Some(o) = t.as_object()
            && let Some(k) = o.keys().find(|k| !matches!(k.as_str(), "subject" | "body"))
        {
            errs.push(FieldError::new(
                format!("{p}.{k}"),
                "unknown setting; expected subject, body (text only, never HTML)",
            ));
        }
    }
}

/// The target is the recipient list, as proposed.
fn derive_target(params: &Value, _settings: &Value) -> String {
    params
        .get("recipients")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}

/// The card: who receives it, the template, the variables (and what a mail client would
/// show of an encoded word).
fn card(c: &CardInput<'_>) -> Card {
    let params = c.params;
    let mut to = Vec::new();
    emails(params.get("recipients").unwrap_or(&Value::Null), &mut to);
    let n = to.len();
    let vars = params.get("variables").unwrap_or(&Value::Null);
    let count = vars.as_object().map_or(0, |m| m.len());
    // What the recipient's mail client would show of a value holding MIME encoded words
    // (refused at submission; a proposal stored before that rule still shows it plainly).
    let decoded: Vec<Fact> = vars
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| {
            let shown = decode_encoded_words(v.as_str()?)?;
            let mut f = Fact::new(
                &format!("Mail clients show {}", reveal_invisible(k, false)),
                reveal_invisible(&shown, false),
                true,
            );
            f.warn = true;
            f.note = "a MIME encoded word: the recipient reads this, not the text above".into();
            Some(f)
        })
        .collect();
    Card {
        facts: vec![
            Fact::new("To", to.join(", "), c.is_hot("recipients")),
            Fact::new(
                "Template",
                reveal_invisible(str_of(params, "template"), false),
                c.is_hot("template"),
            ),
            Fact::new(
                "Filled with",
                format!("{count} variable{}", if count == 1 { "" } else { "s" }),
                c.is_hot("variables"),
            )
            .values(vars),
        ]
        .into_iter()
        .chain(decoded)
        .collect(),
        approve_label: format!(
            "Approve email to {n} recipient{}",
            if n == 1 { "" } else { "s" }
        ),
    }
}

/// For agents: the recipient domains, how many recipients, and the named templates with the
/// variables each takes (never their text).
fn limits(s: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(d) = listed(s, "recipient_domains") {
        out.push(format!("recipients in the domains {d}"));
    }
    if let Some(n) = s.get("max_recipients").and_then(Value::as_u64) {
        out.push(format!("at most {n} recipients"));
    }
    if let Some(t) = s.get("templates").and_then(Value::as_object) {
        let names: Vec<String> = t
            .iter()
            .map(|(name, tpl)| {
                let text = |k: &str| tpl.get(k).and_then(Value::as_str).unwrap_or_default();
                let mut vars = placeholders(text("subject"));
                for v in placeholders(text("body")) {
                    if !vars.contains(&v) {
                        vars.push(v);
                    }
                }
                format!("{name} (variables: {})", vars.join(", "))
            })
            .collect();
        out.push(format!("template one of {}", names.join(", ")));
    }
    out
}

#[cfg(test)]
mod encoded_word_tests {
    use super::*;

    #[test]
    fn encoded_words_decode_as_a_mail_client_shows_them() {
        // "\u{202E}moc.lapyap" and a phishing line, base64 and Q, any case.
        assert_eq!(
            decode_encoded_words("Re: =?UTF-8?B?4oCuUGF5IG5vdw==?= ok").as_deref(),
            Some("Re: \u{202E}Pay now ok")
        );
        assert_eq!(
            decode_encoded_words("=?utf-8?q?Verify_your_account=3A?= =?UTF-8?b?IGhlcmU=?=")
                .as_deref(),
            Some("Verify your account: here")
        );
        assert_eq!(decode_encoded_words("plain text ?= =? x"), None);
        for bad in ["=?UTF-8?B?x?=", "a=?", "?=b", "=?utf-8?q?x?="] {
            assert!(has_encoded_word_delimiter(bad), "{bad}");
        }
        assert!(!has_encoded_word_delimiter("Is 2+2=4? Yes = right?"));
    }

    fn errors(subject: &str, vars: Value) -> Vec<String> {
        let settings = json!({"templates": {"t": {"subject": subject, "body": "Hi {name}"}}});
        let params = json!({"template": "t", "variables": vars});
        let mut errs = Vec::new();
        check_params(
            params.as_object().unwrap_or(&Map::new()),
            &settings,
            &mut errs,
        );
        errs.iter()
            .map(|e| format!("{}: {}", e.field, e.rule))
            .collect()
    }

    #[test]
    fn encoded_words_in_header_bound_values_are_refused() {
        let e = errors(
            "Re: {ticket}",
            json!({"ticket": "=?UTF-8?B?4oCu?=", "name": "x"}),
        );
        assert_eq!(e, [format!("params.variables.ticket: {NO_ENCODED_WORD}")]);
        // The body is not a header: the same text there is plain text.
        assert!(
            errors(
                "Re: {ticket}",
                json!({"ticket": "T-1", "name": "=?UTF-8?B?4oCu?="})
            )
            .is_empty()
        );
        // Assembled from pieces that each hold no whole delimiter.
        let e = errors(
            "{a}{b}{c}",
            json!({"a": "=", "b": "?UTF-8?B?4oCuUGF5?", "c": "=", "name": "x"}),
        );
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].starts_with("params.variables: the subject they fill must not"),
            "{e:?}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::HandlerKind;
    use super::*;

    fn settings() -> Value {
        json!({
            "from": "support@acme.example",
            "recipient_domains": ["acme.example", "partner.example"],
            "max_recipients": 2,
            "templates": {"ticket-reply": {"subject": "Re: ticket {ticket}", "body": "Hello {name},\n\nYour ticket {ticket} is closed.\n"}}
        })
    }

    #[test]
    fn a_valid_email_renders_as_text() {
        let h = HandlerKind::EmailSend;
        let p = json!({"recipients": ["ann@acme.example"], "template": "ticket-reply", "variables": {"ticket": "T-1", "name": "Ann <b>"}});
        assert!(h.validate_params(&p, &settings()).is_ok());
        assert_eq!(h.derive_target(&p, &settings()), "ann@acme.example");
        let r = render(&p, &settings()).unwrap();
        assert_eq!(r.subject, "Re: ticket T-1");
        assert_eq!(r.body, "Hello Ann <b>,\n\nYour ticket T-1 is closed.\n");
        assert_eq!(r.from, "support@acme.example");
    }

    #[test]
    fn every_refusal_names_its_field() {
        let h = HandlerKind::EmailSend;
        let cases = [
            (
                json!({"recipients": ["eve@evil.example"], "template": "ticket-reply", "variables": {"ticket": "1", "name": "x"}}),
                "params.recipients[0]",
                "domain evil.example is not one of this tenant's recipient_domains",
            ),
            (
                json!({"recipients": ["ann@acme.example\r\nBcc: eve@evil.example"], "template": "ticket-reply", "variables": {"ticket": "1", "name": "x"}}),
                "params.recipients[0]",
                NO_CRLF,
            ),
            (
                json!({"recipients": ["ann@acme.example"], "template": "ticket-reply", "variables": {"ticket": "1\r\nBcc: eve@evil.example", "name": "x"}}),
                "params.variables.ticket",
                NO_CRLF,
            ),
            (
                json!({"recipients": ["eve%evil.example@acme.example"], "template": "ticket-reply", "variables": {"ticket": "1", "name": "x"}}),
                "params.recipients[0]",
                NO_ROUTING,
            ),
            (
                json!({"recipients": ["evil.example!eve@acme.example"], "template": "ticket-reply", "variables": {"ticket": "1", "name": "x"}}),
                "params.recipients[0]",
                NO_ROUTING,
            ),
            (
                json!({"recipients": ["ann@acme.example"], "template": "wire-transfer", "variables": {}}),
                "params.template",
                "is not one of this tenant's email templates",
            ),
            (
                json!({"recipients": ["ann@acme.example"], "template": "ticket-reply", "variables": {"ticket": "1"}}),
                "params.variables.name",
                "is required by the template",
            ),
            // Used in the subject and the body: named once.
            (
                json!({"recipients": ["ann@acme.example"], "template": "ticket-reply", "variables": {"name": "x"}}),
                "params.variables.ticket",
                "is required by the template",
            ),
            (
                json!({"recipients": ["ann@acme.example"], "template": "ticket-reply", "variables": {"ticket": "1", "name": "x", "html": "<a>"}}),
                "params.variables.html",
                "is not a placeholder of the template",
            ),
            (
                json!({"recipients": ["a@acme.example", "b@acme.example", "c@acme.example"], "template": "ticket-reply", "variables": {"ticket": "1", "name": "x"}}),
                "params.recipients",
                "must be a list of 1 to 2 email addresses (this tenant's max_recipients)",
            ),
            (
                json!({"recipients": ["Ann <ann@acme.example>"], "template": "ticket-reply", "variables": {"ticket": "1", "name": "x"}}),
                "params.recipients[0]",
                "must be an email address like name@example.com (lowercase domain)",
            ),
        ];
        for (p, field, rule) in cases {
            let e = h.validate_params(&p, &settings()).unwrap_err();
            assert_eq!(e.0.len(), 1, "{p}: {e}");
            assert_eq!(
                (e.0[0].field.as_str(), e.0[0].rule.as_str()),
                (field, rule),
                "{p}"
            );
        }
    }

    #[test]
    fn settings_are_checked() {
        let errs = HandlerKind::EmailSend.validate_settings(
            "handlers[\"email.send\"]",
            json!({"from": "x", "recipient_domains": [], "templates": {"a": {"subject": "s\nBcc: x", "body": "b", "html": "<p>"}}})
                .as_object()
                .unwrap(),
        );
        let fields: Vec<_> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "handlers[\"email.send\"].from",
                "handlers[\"email.send\"].recipient_domains",
                "handlers[\"email.send\"].templates.a.subject",
                "handlers[\"email.send\"].templates.a.html"
            ]
        );
    }
}
