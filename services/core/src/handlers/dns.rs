//! `dns.record.update`: replace one RRset through the PowerDNS HTTP API, in one of the
//! tenant's allowed zones.
//!
//! Tenant CEL rules compare `params.zone`, `params.name` and `params.records` as sent, so every
//! name and record has exactly one accepted spelling: `PROD.example.com` or
//! `prod.example.com.` would otherwise slip past `params.zone == "prod.example.com"`.
//!
//! For the same reason `params.zone` must be the zone that will change: the most specific of
//! the allowed zones that contains `params.name` ([`most_specific_zone`]). A DNS server that
//! hosts `example.com` and `inner.example.com` answers `www.inner.example.com` from the inner
//! zone; a record written into the outer zone under that name is never served, and a rule on
//! `params.zone == "inner.example.com"` would not have seen the request. And an NS record
//! below a zone's apex is a delegation (RFC 1034 §4.2.1: the name and everything under it are
//! handed to other name servers, beyond every later rule on this zone): it is refused unless
//! the handler's settings say `allow_delegations: true`.

use super::card::{Card, CardInput, Fact, str_of};
use super::spec::{Spec, listed, param_str};
use crate::FieldError;
use crate::text::reveal_invisible;
use serde_json::{Map, Value, json};

/// The registry entry of `dns.record.update`.
pub(super) static SPEC: Spec = Spec {
    action: "dns.record.update",
    description: "Replace the records of one DNS name and type in an allowed zone.",
    honours_idempotency_key: false,
    history_sum_param: None,
    default_risky: &["zone", "name", "type", "records"],
    editable: &["ttl", "records"],
    default_summary: "Set {type} records of {name} in zone {zone} to {records} (TTL {ttl}s)",
    settings: &["credential", "zones", "server_id", "allow_delegations"],
    credential_required: true,
    params_schema,
    check_params,
    check_settings,
    derive_target,
    placeholder: super::spec::no_placeholder,
    card,
    card_covers: &["zone", "name", "type", "records", "ttl"],
    limits,
    ..Spec::BASE
};

/// Record types the handler accepts.
const RECORD_TYPES: [&str; 6] = ["A", "AAAA", "CNAME", "TXT", "MX", "NS"];

fn params_schema() -> Value {
    json!({
        "type": "object", "additionalProperties": false,
        "required": ["zone", "name", "type", "records"],
        "properties": {
            "zone": {"type": "string", "description": "zone name, lowercase without a trailing dot, e.g. example.com"},
            "name": {"type": "string", "description": "record name inside the zone, lowercase without a trailing dot, e.g. www.example.com"},
            "type": {"type": "string", "enum": RECORD_TYPES},
            "ttl": {"type": "integer", "minimum": 60, "maximum": 86400, "default": 3600},
            "records": {"type": "array", "minItems": 1, "maxItems": 20, "items": {"type": "string", "minLength": 1, "maxLength": 255},
                "description": "record contents by type: A 192.0.2.1; AAAA 2001:db8::1 (RFC 5952 form); CNAME/NS target.example.com. (lowercase, trailing dot); MX \"10 mail.example.com.\"; TXT text without control characters"}
        }
    })
}

fn check_params(obj: &Map<String, Value>, settings: &Value, errs: &mut Vec<FieldError>) {
    check_zone_and_name(obj, settings, errs);
    let rtype = obj
        .get("type")
        .and_then(Value::as_str)
        .filter(|t| RECORD_TYPES.contains(t));
    if obj.contains_key("type") && rtype.is_none() {
        errs.push(FieldError::new(
            "params.type",
            "must be one of A, AAAA, CNAME, TXT, MX, NS",
        ));
    }
    if rtype == Some("NS")
        && let (Some(zone), Some(name)) = (
            obj.get("zone").and_then(Value::as_str),
            obj.get("name").and_then(Value::as_str),
        )
        && is_delegation("NS", zone, name)
        && !allows_delegations(settings)
    {
        errs.push(FieldError::new("params.type", DELEGATION_REFUSED));
    }
    if let Some(v) = obj.get("ttl")
        && !v.as_i64().is_some_and(|t| (60..=86_400).contains(&t))
    {
        errs.push(FieldError::new(
            "params.ttl",
            "must be an integer between 60 and 86400 (seconds)",
        ));
    }
    if let Some(v) = obj.get("records") {
        match v.as_array() {
            Some(a) if !a.is_empty() && a.len() <= 20 => {
                for (i, r) in a.iter().enumerate() {
                    if let Some(rule) = check_record(rtype, r) {
                        errs.push(FieldError::new(format!("params.records[{i}]"), rule));
                    }
                }
            }
            _ => errs.push(FieldError::new(
                "params.records",
                "must be 1 to 20 non-empty strings of at most 255 characters",
            )),
        }
    }
}

/// Rule of an NS record below the zone apex when the settings do not allow delegations.
pub const DELEGATION_REFUSED: &str = "NS below the zone apex is a delegation: it hands params.name and every name under it to other name servers, beyond this zone's rules; refused unless the handler's settings say allow_delegations: true";

/// True when a record of type `rtype` named `name` in `zone` is a delegation: an NS record
/// anywhere but at the zone's apex (RFC 1034 §4.2.1). Names are canonical (lowercase, no
/// trailing dot).
pub fn is_delegation(rtype: &str, zone: &str, name: &str) -> bool {
    rtype == "NS" && name != zone
}

/// The handler setting `allow_delegations` (default false).
pub fn allows_delegations(settings: &Value) -> bool {
    settings.get("allow_delegations").and_then(Value::as_bool) == Some(true)
}

/// True when the canonical `name` is `zone` itself or a name under it (label-wise: `wexample.com`
/// is not under `example.com`).
pub fn in_zone(name: &str, zone: &str) -> bool {
    name == zone
        || name
            .strip_suffix(zone)
            .is_some_and(|head| head.ends_with('.'))
}

/// The most specific of `zones` that contains the canonical `name` ([`in_zone`]): the zone a
/// server hosting all of them answers `name` from (RFC 1034 §4.3.2, the closest enclosing zone),
/// so the one whose records a change of `name` must go to. `None` when no zone contains it.
pub fn most_specific_zone<'a>(
    name: &str,
    zones: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    zones
        .into_iter()
        .filter(|z| in_zone(name, z))
        .max_by_key(|z| z.len())
}

/// The allowed zones of the handler's settings (`zones`), as strings.
pub fn allowed_zones(settings: &Value) -> Vec<&str> {
    settings
        .get("zones")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// `zone` must be canonical and one of the tenant's zones; `name` canonical, inside it, and not
/// inside a more specific allowed zone.
fn check_zone_and_name(obj: &Map<String, Value>, settings: &Value, errs: &mut Vec<FieldError>) {
    let zone = obj.get("zone").and_then(Value::as_str);
    if let Some(v) = obj.get("zone") {
        match v.as_str() {
            Some(z) if is_canonical_dns_name(z) => {
                let allowed = settings.get("zones").and_then(Value::as_array);
                if !allowed.is_some_and(|a| a.iter().any(|x| x.as_str() == Some(z))) {
                    errs.push(FieldError::new(
                        "params.zone",
                        "is not one of this tenant's allowed zones",
                    ));
                }
            }
            Some(z) if is_dns_name(z) => {
                errs.push(FieldError::new("params.zone", NON_CANONICAL_NAME));
            }
            _ => errs.push(FieldError::new(
                "params.zone",
                "must be a DNS name like example.com",
            )),
        }
    }
    if let Some(v) = obj.get("name") {
        match v.as_str() {
            Some(n) if is_canonical_dns_name(n) => {
                if let Some(z) = zone.filter(|z| is_canonical_dns_name(z)) {
                    if !in_zone(n, z) {
                        errs.push(FieldError::new("params.name", "must be inside params.zone"));
                    } else if let Some(inner) =
                        most_specific_zone(n, allowed_zones(settings)).filter(|inner| *inner != z)
                    {
                        errs.push(FieldError::new(
                            "params.zone",
                            format!(
                                "must be {inner}: the most specific allowed zone that contains params.name is the one that changes (a record of {inner} written into {z} is never served, and {inner}'s rules would not see it)"
                            ),
                        ));
                    }
                }
            }
            Some(n) if is_dns_name(n) => {
                errs.push(FieldError::new("params.name", NON_CANONICAL_NAME));
            }
            _ => errs.push(FieldError::new(
                "params.name",
                "must be a DNS name like www.example.com",
            )),
        }
    }
}

fn check_settings(path: &str, settings: &Map<String, Value>, errs: &mut Vec<FieldError>) {
    if settings
        .get("allow_delegations")
        .is_some_and(|v| !v.is_boolean())
    {
        errs.push(FieldError::new(
            format!("{path}.allow_delegations"),
            "must be true or false (default false: NS records below a zone's apex are refused)",
        ));
    }
    match settings.get("zones") {
        None | Some(Value::Null) => errs.push(FieldError::new(
            format!("{path}.zones"),
            "is required: a list of lowercase zone names without a trailing dot",
        )),
        Some(v) => {
            let ok = v.as_array().is_some_and(|a| {
                !a.is_empty()
                    && a.iter()
                        .all(|z| z.as_str().is_some_and(is_canonical_dns_name))
            });
            if !ok {
                errs.push(FieldError::new(
                    format!("{path}.zones"),
                    "must be a non-empty list of lowercase zone names without a trailing dot",
                ));
            }
        }
    }
}

/// The target is `zone/name`. Validation admits only canonical names (lowercase, no trailing
/// dot), so it is built from exactly the strings policy rules see as `params.zone`/`params.name`.
fn derive_target(params: &Value, _settings: &Value) -> String {
    format!(
        "{}/{}",
        param_str(params, "zone"),
        param_str(params, "name")
    )
}

/// Rule for a DNS name in another spelling than the one accepted (see [`is_canonical_dns_name`]).
const NON_CANONICAL_NAME: &str = "must be lowercase without a trailing dot, e.g. prod.example.com";

/// True for a DNS name in its one accepted spelling: [`is_dns_name`], lowercase, and without a
/// trailing dot. Policy rules compare names as strings, so `PROD.example.com` and
/// `prod.example.com.` are refused rather than normalized behind the rules' back.
pub fn is_canonical_dns_name(s: &str) -> bool {
    is_dns_name(s) && !s.ends_with('.') && !s.bytes().any(|b| b.is_ascii_uppercase())
}

/// True for a lowercase, fully qualified host name with its trailing dot (`mail.example.com.`),
/// the form PowerDNS expects for CNAME, NS and MX targets.
fn is_fqdn_target(s: &str) -> bool {
    s.strip_suffix('.').is_some_and(is_canonical_dns_name)
}

/// Checks one `records` entry against the record `type` (`None` when the type is missing or
/// invalid: only the generic string rule applies). Returns the broken rule.
///
/// Every type has a single accepted spelling, so policy rules on `params.records` cannot be
/// sidestepped by writing the same record differently:
/// - A: dotted-quad IPv4 (`192.0.2.1`, no leading zeros);
/// - AAAA: IPv6 in RFC 5952 form (`2001:db8::1`: lowercase, zeros compressed);
/// - CNAME, NS: a lowercase host name with its trailing dot (`target.example.com.`);
/// - MX: `<preference 0-65535> <host>`, host as for CNAME (`10 mail.example.com.`);
/// - TXT: text without control characters (no `\n`, `\r`, `\0`, …).
fn check_record(rtype: Option<&str>, r: &Value) -> Option<&'static str> {
    let Some(s) = r.as_str().filter(|s| !s.is_empty() && s.len() <= 255) else {
        return Some("must be a non-empty string of at most 255 characters");
    };
    let ok = match rtype? {
        "A" => s
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|a| a.to_string() == s),
        "AAAA" => s
            .parse::<std::net::Ipv6Addr>()
            .is_ok_and(|a| a.to_string() == s),
        "CNAME" | "NS" => is_fqdn_target(s),
        "MX" => s.split_once(' ').is_some_and(|(pref, host)| {
            !pref.is_empty()
                && pref.bytes().all(|b| b.is_ascii_digit())
                && (pref == "0" || !pref.starts_with('0'))
                && pref.parse::<u16>().is_ok()
                && is_fqdn_target(host)
        }),
        "TXT" => !s.chars().any(char::is_control),
        _ => true,
    };
    if ok {
        return None;
    }
    Some(match rtype? {
        "A" => "must be an IPv4 address like 192.0.2.1 for type A",
        "AAAA" => "must be an IPv6 address in RFC 5952 form like 2001:db8::1 for type AAAA",
        "CNAME" | "NS" => {
            "must be a lowercase host name with a trailing dot, like target.example.com., for type CNAME or NS"
        }
        "MX" => {
            "must be \"<preference 0-65535> <host>\" with a lowercase host and trailing dot, like \"10 mail.example.com.\", for type MX"
        }
        _ => "must be printable text without control characters (no \\n, \\r or NUL) for type TXT",
    })
}

/// True for a DNS name made of LDH labels (RFC 1123), at most 253 characters; a trailing dot
/// is allowed.
pub fn is_dns_name(s: &str) -> bool {
    let s = s.strip_suffix('.').unwrap_or(s);
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        })
}

/// The card: the record, the change (the preview's "before → after" when there is one),
/// warnings for NS and MX changes and long TTLs.
fn card(c: &CardInput<'_>) -> Card {
    let (params, preview) = (c.params, c.preview);
    let name = reveal_invisible(str_of(params, "name"), false);
    let rtype = reveal_invisible(str_of(params, "type"), false);
    let records: Vec<String> = params
        .get("records")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|r| reveal_invisible(r.as_str().unwrap_or_default(), false))
                .collect()
        })
        .unwrap_or_default();
    let change = if preview.is_empty() || preview == "preview unavailable" {
        format!("(now: unknown) → {}", records.join(", "))
    } else {
        preview.lines().next().unwrap_or_default().to_owned()
    };
    let mut facts = vec![
        Fact::new("Record", format!("{name} {rtype}"), c.is_hot("name")).note(format!(
            "zone {}",
            reveal_invisible(str_of(params, "zone"), false)
        )),
        Fact::new("Change", change, c.is_hot("records")),
    ];
    if matches!(rtype.as_str(), "NS" | "MX") {
        let mut w = Fact::new(
            "Warning",
            if rtype == "NS" {
                "NS change: moves who answers for this name".into()
            } else {
                "MX change: moves where this domain's email goes".into()
            },
            false,
        );
        w.warn = true;
        facts.push(w);
    }
    let ttl = params.get("ttl").and_then(Value::as_i64).unwrap_or(3600);
    let mut t = Fact::new("TTL", format!("{ttl} s"), c.is_hot("ttl"));
    if ttl > 3600 {
        t.note = format!(
            "long TTL: a mistake stays cached for up to {} h",
            ttl / 3600
        );
        t.warn = true;
    }
    facts.push(t);
    Card {
        facts,
        approve_label: format!("Approve DNS change of {name}"),
    }
}

/// For agents: the zones.
fn limits(s: &Value) -> Vec<String> {
    listed(s, "zones")
        .map(|z| format!("zone one of {z}"))
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::HandlerKind;
    use crate::FieldErrors;
    use serde_json::{Value, json};

    #[test]
    fn dns_zone_must_be_allowed_and_name_inside_it() {
        let h = HandlerKind::DnsRecordUpdate;
        let s = json!({"zones": ["example.com"]});
        let ok = json!({"zone":"example.com","name":"www.example.com","type":"A","records":["192.0.2.1"],"ttl":300});
        assert!(h.validate_params(&ok, &s).is_ok());
        assert_eq!(h.derive_target(&ok, &s), "example.com/www.example.com");
        let bad =
            json!({"zone":"evil.com","name":"www.example.com","type":"A","records":["192.0.2.1"]});
        assert!(h.validate_params(&bad, &s).is_err());
    }

    fn dns(zone: &str, name: &str, rtype: &str, records: Value) -> Value {
        json!({"zone": zone, "name": name, "type": rtype, "records": records})
    }

    fn rules_at(e: &FieldErrors, field: &str) -> Vec<String> {
        e.0.iter()
            .filter(|f| f.field == field)
            .map(|f| f.rule.clone())
            .collect()
    }

    #[test]
    fn dns_names_must_be_canonical_so_rules_cannot_be_bypassed() {
        let h = HandlerKind::DnsRecordUpdate;
        let s = json!({"zones": ["prod.example.com"]});
        let ok = dns(
            "prod.example.com",
            "www.prod.example.com",
            "A",
            json!(["192.0.2.1"]),
        );
        assert!(h.validate_params(&ok, &s).is_ok());
        assert_eq!(
            h.derive_target(&ok, &s),
            "prod.example.com/www.prod.example.com"
        );
        // The apex itself is inside the zone.
        let apex = dns(
            "prod.example.com",
            "prod.example.com",
            "A",
            json!(["192.0.2.1"]),
        );
        assert!(h.validate_params(&apex, &s).is_ok());

        for (zone, name, bad_field) in [
            ("PROD.example.com", "www.prod.example.com", "params.zone"),
            ("prod.example.com.", "www.prod.example.com", "params.zone"),
            ("Prod.Example.Com.", "www.prod.example.com", "params.zone"),
            ("prod.example.com", "WWW.prod.example.com", "params.name"),
            ("prod.example.com", "www.prod.example.com.", "params.name"),
        ] {
            let e = h
                .validate_params(&dns(zone, name, "A", json!(["192.0.2.1"])), &s)
                .unwrap_err();
            assert_eq!(
                rules_at(&e, bad_field),
                vec!["must be lowercase without a trailing dot, e.g. prod.example.com"],
                "{zone} {name}: {e}"
            );
            assert_eq!(e.0.len(), 1, "{zone} {name}: {e}");
        }
        let e = h
            .validate_params(&dns("prod example", "x", "A", json!(["192.0.2.1"])), &s)
            .unwrap_err();
        assert_eq!(
            rules_at(&e, "params.zone"),
            vec!["must be a DNS name like example.com"]
        );
        // A name outside the zone is still refused.
        let e = h
            .validate_params(
                &dns(
                    "prod.example.com",
                    "www.evilprod.example.com",
                    "A",
                    json!(["192.0.2.1"]),
                ),
                &s,
            )
            .unwrap_err();
        assert_eq!(
            rules_at(&e, "params.name"),
            vec!["must be inside params.zone"]
        );
    }

    #[test]
    fn dns_records_must_match_the_type() {
        let h = HandlerKind::DnsRecordUpdate;
        let s = json!({"zones": ["example.com"]});
        // NS at the apex: below it, NS is a delegation (its own test).
        let check = |rtype: &str, records: Value| {
            let name = if rtype == "NS" {
                "example.com"
            } else {
                "www.example.com"
            };
            h.validate_params(&dns("example.com", name, rtype, records), &s)
        };
        // Valid input of every type passes.
        for (rtype, records) in [
            ("A", json!(["192.0.2.1", "198.51.100.7"])),
            ("AAAA", json!(["2001:db8::1", "::1", "::ffff:192.0.2.1"])),
            ("CNAME", json!(["target.example.net."])),
            ("NS", json!(["ns1.example.net.", "ns2.example.net."])),
            (
                "MX",
                json!([
                    "10 mail.example.com.",
                    "0 mx.example.net.",
                    "65535 b.example."
                ]),
            ),
            (
                "TXT",
                json!(["v=spf1 -all", "\"quoted\" text with spaces", "é ✓"]),
            ),
        ] {
            assert!(check(rtype, records.clone()).is_ok(), "{rtype} {records}");
        }
        let cases: [(&str, &str, &str); 20] = [
            (
                "A",
                "192.0.2.256",
                "must be an IPv4 address like 192.0.2.1 for type A",
            ),
            (
                "A",
                "192.0.2.01",
                "must be an IPv4 address like 192.0.2.1 for type A",
            ),
            (
                "A",
                "2001:db8::1",
                "must be an IPv4 address like 192.0.2.1 for type A",
            ),
            (
                "A",
                "www.example.com",
                "must be an IPv4 address like 192.0.2.1 for type A",
            ),
            (
                "AAAA",
                "192.0.2.1",
                "must be an IPv6 address in RFC 5952 form like 2001:db8::1 for type AAAA",
            ),
            (
                "AAAA",
                "2001:DB8::1",
                "must be an IPv6 address in RFC 5952 form like 2001:db8::1 for type AAAA",
            ),
            (
                "AAAA",
                "2001:db8:0:0:0:0:0:1",
                "must be an IPv6 address in RFC 5952 form like 2001:db8::1 for type AAAA",
            ),
            (
                "CNAME",
                "target.example.net",
                "must be a lowercase host name with a trailing dot, like target.example.com., for type CNAME or NS",
            ),
            (
                "CNAME",
                "Target.example.net.",
                "must be a lowercase host name with a trailing dot, like target.example.com., for type CNAME or NS",
            ),
            (
                "CNAME",
                "192.0.2.1 x",
                "must be a lowercase host name with a trailing dot, like target.example.com., for type CNAME or NS",
            ),
            (
                "NS",
                ".",
                "must be a lowercase host name with a trailing dot, like target.example.com., for type CNAME or NS",
            ),
            (
                "MX",
                "mail.example.com.",
                "must be \"<preference 0-65535> <host>\" with a lowercase host and trailing dot, like \"10 mail.example.com.\", for type MX",
            ),
            (
                "MX",
                "65536 mail.example.com.",
                "must be \"<preference 0-65535> <host>\" with a lowercase host and trailing dot, like \"10 mail.example.com.\", for type MX",
            ),
            (
                "MX",
                "-1 mail.example.com.",
                "must be \"<preference 0-65535> <host>\" with a lowercase host and trailing dot, like \"10 mail.example.com.\", for type MX",
            ),
            (
                "MX",
                "010 mail.example.com.",
                "must be \"<preference 0-65535> <host>\" with a lowercase host and trailing dot, like \"10 mail.example.com.\", for type MX",
            ),
            (
                "MX",
                "10  mail.example.com.",
                "must be \"<preference 0-65535> <host>\" with a lowercase host and trailing dot, like \"10 mail.example.com.\", for type MX",
            ),
            (
                "MX",
                "10 mail.example.com",
                "must be \"<preference 0-65535> <host>\" with a lowercase host and trailing dot, like \"10 mail.example.com.\", for type MX",
            ),
            (
                "TXT",
                "line\nbreak",
                "must be printable text without control characters (no \\n, \\r or NUL) for type TXT",
            ),
            (
                "TXT",
                "cr\rhere",
                "must be printable text without control characters (no \\n, \\r or NUL) for type TXT",
            ),
            (
                "TXT",
                "nul\0here",
                "must be printable text without control characters (no \\n, \\r or NUL) for type TXT",
            ),
        ];
        for (rtype, bad, rule) in cases {
            let e = check(rtype, json!(["192.0.2.1", bad])).unwrap_err();
            let e = if rtype == "A" {
                e
            } else {
                // The first entry is valid only for A; check the second entry's error alone.
                let e2 = check(rtype, json!([bad])).unwrap_err();
                assert_eq!(
                    rules_at(&e2, "params.records[0]"),
                    vec![rule],
                    "{rtype} {bad:?}"
                );
                assert_eq!(e2.0.len(), 1, "{e2}");
                e
            };
            assert_eq!(
                rules_at(&e, "params.records[1]"),
                vec![rule],
                "{rtype} {bad:?}: {e}"
            );
        }
        // Generic string rules name the entry too; array-level rules name params.records.
        let e = check("TXT", json!(["ok", "", 5, "x".repeat(256)])).unwrap_err();
        let fields: Vec<_> = e.0.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "params.records[1]",
                "params.records[2]",
                "params.records[3]"
            ]
        );
        assert_eq!(
            e.0[0].rule,
            "must be a non-empty string of at most 255 characters"
        );
        assert!(check("TXT", json!(["x".repeat(255)])).is_ok());
        let e = check("A", json!([])).unwrap_err();
        assert_eq!(
            rules_at(&e, "params.records"),
            vec!["must be 1 to 20 non-empty strings of at most 255 characters"]
        );
        // An invalid type reports the type, not every record.
        let e = check("SRV", json!(["0 5 5060 sip.example.com."])).unwrap_err();
        let fields: Vec<_> = e.0.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(fields, ["params.type"]);
    }

    #[test]
    fn a_name_belongs_to_the_most_specific_allowed_zone() {
        use super::{in_zone, most_specific_zone};
        let zones = ["example.com", "inner.example.com", "deep.inner.example.com"];
        for (name, want) in [
            ("example.com", Some("example.com")),
            ("www.example.com", Some("example.com")),
            ("inner.example.com", Some("inner.example.com")),
            ("www.inner.example.com", Some("inner.example.com")),
            ("a.b.deep.inner.example.com", Some("deep.inner.example.com")),
            ("winner.example.com", Some("example.com")),
            ("example.net", None),
            ("wexample.com", None),
        ] {
            assert_eq!(most_specific_zone(name, zones), want, "{name}");
        }
        assert!(!in_zone("xinner.example.com", "inner.example.com"));
        let h = HandlerKind::DnsRecordUpdate;
        let s = json!({"zones": ["example.com", "inner.example.com"]});
        let e = h
            .validate_params(
                &dns(
                    "example.com",
                    "www.inner.example.com",
                    "A",
                    json!(["192.0.2.1"]),
                ),
                &s,
            )
            .unwrap_err();
        assert_eq!(e.0.len(), 1, "{e}");
        assert_eq!(e.0[0].field, "params.zone");
        assert!(
            e.0[0]
                .rule
                .starts_with("must be inner.example.com: the most specific allowed zone"),
            "{e}"
        );
        // The apex of the inner zone is the inner zone's too.
        assert!(
            h.validate_params(
                &dns(
                    "example.com",
                    "inner.example.com",
                    "A",
                    json!(["192.0.2.1"])
                ),
                &s
            )
            .is_err()
        );
        for (zone, name) in [
            ("inner.example.com", "www.inner.example.com"),
            ("inner.example.com", "inner.example.com"),
            ("example.com", "www.example.com"),
            ("example.com", "winner.example.com"),
        ] {
            let p = dns(zone, name, "A", json!(["192.0.2.1"]));
            assert!(h.validate_params(&p, &s).is_ok(), "{zone} {name}");
        }
    }

    #[test]
    fn an_ns_record_below_the_apex_is_a_delegation_refused_by_default() {
        let h = HandlerKind::DnsRecordUpdate;
        let ns = json!(["ns1.example.net."]);
        let s = json!({"zones": ["example.com"]});
        let e = h
            .validate_params(&dns("example.com", "sub.example.com", "NS", ns.clone()), &s)
            .unwrap_err();
        assert_eq!(rules_at(&e, "params.type"), vec![super::DELEGATION_REFUSED]);
        assert_eq!(e.0.len(), 1, "{e}");
        // The zone's own name servers are not a delegation inside it.
        assert!(
            h.validate_params(&dns("example.com", "example.com", "NS", ns.clone()), &s)
                .is_ok()
        );
        // An explicit setting allows them.
        let open = json!({"zones": ["example.com"], "allow_delegations": true});
        assert!(
            h.validate_params(&dns("example.com", "sub.example.com", "NS", ns), &open)
                .is_ok()
        );
    }
}
