//! `dns.record.update` against the PowerDNS HTTP API: one RRset replaced (`changetype:
//! REPLACE`) in a zone of the approved settings, the read-only lookup previews use, and the
//! read-back that asks PowerDNS over DNS what it now serves ([`super::dns_served`]).

use super::{Execution, Handler, Outcome, credential, dns_served, send_with};
use actiond_core::effect::{EffectRecord, Verdict};
use actiond_core::handlers::dns::{
    allowed_zones, allows_delegations, is_delegation, most_specific_zone,
};
use serde_json::{Value, json};

/// The executor's entry of `dns.record.update`.
pub(super) static HANDLER: Handler = Handler {
    run: |ex| Box::pin(update(ex)),
    preview: Some(|ex| Box::pin(preview(ex))),
    read_back: Some(|ex| Box::pin(read_back(ex))),
};

/// The zone, record name and type of a DNS proposal, as PowerDNS spells them.
struct Rrset {
    /// Zone without the trailing dot.
    zone: String,
    /// Record name with its trailing dot (`www.example.com.`).
    name: String,
    /// Record type (`A`, `TXT`, …).
    rtype: String,
}

impl Rrset {
    fn from_params(p: &Value) -> Self {
        let s = |k: &str| {
            p.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .trim_end_matches('.')
                .to_ascii_lowercase()
        };
        Self {
            zone: s("zone"),
            name: format!("{}.", s("name")),
            rtype: p
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        }
    }
}

/// Checks `set` against the approved settings as submission did (the settings of the document
/// version the grant names, which may differ from the submission's): the zone is allowed, it is
/// the most specific allowed zone that contains the name, and an NS record below the apex (a
/// delegation) is allowed by `allow_delegations`. `Err` is the reason, before anything is sent.
fn check_rrset(settings: &Value, set: &Rrset) -> Result<(), String> {
    let zone = set.zone.as_str();
    let zones = allowed_zones(settings);
    if !zones.contains(&zone) {
        return Err(format!(
            "zone {zone} is not allowed by the approved settings"
        ));
    }
    let name = set.name.trim_end_matches('.');
    match most_specific_zone(name, zones) {
        Some(z) if z == zone => {}
        Some(z) => {
            return Err(format!(
                "{name} belongs to the allowed zone {z}, not {zone}: nothing was sent"
            ));
        }
        None => {
            return Err(format!(
                "{name} is not inside zone {zone}: nothing was sent"
            ));
        }
    }
    if is_delegation(&set.rtype, zone, name) && !allows_delegations(settings) {
        return Err(format!(
            "NS at {name} is a delegation below the apex of {zone}, and the approved settings do not allow delegations: nothing was sent"
        ));
    }
    Ok(())
}

/// The zone's API URL and the API key, after checking the record set against the approved
/// settings ([`check_rrset`]); `Err` is the outcome to record.
fn zone_endpoint(ex: &Execution<'_>, set: &Rrset) -> Result<(url::Url, String), Outcome> {
    let Some(base) = &ex.destinations.pdns_base_url else {
        return Err(Outcome::Failed(
            "no PowerDNS API is configured on this executor (--pdns-base-url)".into(),
        ));
    };
    check_rrset(ex.settings, set).map_err(Outcome::Failed)?;
    let zone = set.zone.as_str();
    let server = ex
        .settings
        .get("server_id")
        .and_then(Value::as_str)
        .unwrap_or("localhost");
    let path = format!(
        "api/v1/servers/{}/zones/{}.",
        url::form_urlencoded::byte_serialize(server.as_bytes()).collect::<String>(),
        url::form_urlencoded::byte_serialize(zone.as_bytes()).collect::<String>()
    );
    let url = base
        .join(&path)
        .map_err(|_| Outcome::Failed("bad PowerDNS base URL".into()))?;
    match credential(ex)? {
        Some(key) => Ok((url, key)),
        None => Err(Outcome::Failed(
            "dns.record.update needs a credential".into(),
        )),
    }
}

/// A record's content in PowerDNS's zone-file syntax. TXT text becomes one or more quoted
/// character-strings (RFC 1035 §5.1: `"` and `\` escaped, at most 255 bytes each); other types
/// are validated at submission to their one accepted spelling and pass as they are.
pub(crate) fn content(rtype: &str, record: &str) -> String {
    if rtype != "TXT" {
        return record.to_owned();
    }
    let mut parts: Vec<String> = Vec::new();
    let mut cur = String::new();
    let mut cur_bytes = 0;
    for c in record.chars() {
        if cur_bytes + c.len_utf8() > 255 {
            parts.push(std::mem::take(&mut cur));
            cur_bytes = 0;
        }
        cur_bytes += c.len_utf8();
        if c == '"' || c == '\\' {
            cur.push('\\');
        }
        cur.push(c);
    }
    parts.push(cur);
    parts
        .iter()
        .map(|p| format!("\"{p}\""))
        .collect::<Vec<_>>()
        .join(" ")
}

/// PowerDNS's refusal as one clean line: the `error` of its JSON answer, else the body.
fn refusal_reason(_status: u16, body: &str) -> String {
    let text = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v.get("error").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_else(|| body.to_owned());
    format!(
        "PowerDNS refused the change: {}",
        text.replace(['\r', '\n'], " ")
    )
}

/// Replaces the RRset with the approved records.
pub(super) async fn update(ex: &Execution<'_>) -> Outcome {
    let p = ex.params;
    let set = Rrset::from_params(p);
    let (url, key) = match zone_endpoint(ex, &set) {
        Ok(x) => x,
        Err(o) => return o,
    };
    let records: Vec<Value> = p
        .get("records")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(|c| json!({"content": content(&set.rtype, c), "disabled": false}))
                .collect()
        })
        .unwrap_or_default();
    let body = json!({"rrsets": [{
        "name": set.name,
        "type": set.rtype,
        "ttl": p.get("ttl").and_then(Value::as_i64).unwrap_or(3600),
        "changetype": "REPLACE",
        "records": records,
    }]});
    let req = ex
        .http
        .patch(url)
        .header("x-api-key", key)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&body).unwrap_or_default());
    send_with(req, refusal_reason).await
}

/// Reads the RRset the proposal would replace, as it is now: `(ttl, contents)`, or `None` when
/// it does not exist. Read-only (one GET of the zone).
pub(crate) async fn current(ex: &Execution<'_>) -> Result<Option<(i64, Vec<String>)>, String> {
    let set = Rrset::from_params(ex.params);
    let (url, key) = zone_endpoint(ex, &set).map_err(|o| o.detail().to_owned())?;
    let resp = ex
        .http
        .get(url)
        .header("x-api-key", key)
        .send()
        .await
        .map_err(|e| format!("could not reach PowerDNS: {e}"))?;
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap_or_default();
    if !(200..300).contains(&status) {
        return Err(refusal_reason(
            status,
            &text.chars().take(500).collect::<String>(),
        ));
    }
    let zone: Value =
        serde_json::from_str(&text).map_err(|e| format!("PowerDNS answered non-JSON: {e}"))?;
    let found = zone.get("rrsets").and_then(Value::as_array).and_then(|a| {
        a.iter()
            .find(|r| r["name"] == set.name.as_str() && r["type"] == set.rtype.as_str())
    });
    Ok(found.map(|r| {
        let mut recs: Vec<String> = r["records"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x["content"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        recs.sort();
        (r["ttl"].as_i64().unwrap_or_default(), recs)
    }))
}

/// `www.prod.example.com A: 192.0.2.7 → 203.0.113.9` (TTL too when it changes). Binding: the
/// RRset PowerDNS holds now (TTL and sorted contents, `null` when absent). Warnings: a change
/// that leaves an address record empty, and NS or MX changed at the zone's apex.
async fn preview(ex: &Execution<'_>) -> Result<super::Read, String> {
    let p = ex.params;
    let name = p.get("name").and_then(Value::as_str).unwrap_or_default();
    let rtype = p.get("type").and_then(Value::as_str).unwrap_or_default();
    let ttl = p.get("ttl").and_then(Value::as_i64).unwrap_or(3600);
    let mut new: Vec<String> = p
        .get("records")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(|r| content(rtype, r))
                .collect()
        })
        .unwrap_or_default();
    new.sort();
    let now = current(ex).await?;
    let binding =
        json!({"rrset": now.as_ref().map(|(t, recs)| json!({"ttl": t, "records": recs}))});
    let warnings = warnings(
        &Rrset::from_params(p),
        now.as_ref().map(|(_, r)| r.as_slice()),
        &new,
    );
    let (old_ttl, old) = match now {
        Some((t, recs)) => (Some(t), recs.join(", ")),
        None => (None, "(no records)".to_owned()),
    };
    let mut line = format!("{name} {rtype}: {old} → {}", new.join(", "));
    if old_ttl.is_some_and(|t| t != ttl) {
        line.push_str(&format!(" (TTL {}s → {ttl}s)", old_ttl.unwrap_or_default()));
    }
    if old_ttl.is_some() && old == new.join(", ") {
        line.push_str(" (records unchanged)");
    }
    Ok(super::Read {
        text: line,
        binding,
        warnings,
    })
}

/// The facts of a DNS change a tired person misses: the name left without an address (an A or
/// AAAA RRset that had records and would have none), NS or MX changed at the zone's apex.
fn warnings(set: &Rrset, old: Option<&[String]>, new: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let name = set.name.trim_end_matches('.');
    let had = old.is_some_and(|o| !o.is_empty());
    if matches!(set.rtype.as_str(), "A" | "AAAA") && had && new.is_empty() {
        out.push(format!(
            "this change removes every {} record of {name}: it may leave the name without an address",
            set.rtype
        ));
    }
    let changes = old.unwrap_or_default() != new;
    if matches!(set.rtype.as_str(), "NS" | "MX") && name == set.zone && changes {
        out.push(format!(
            "this change replaces the {} records of the zone apex {name}",
            set.rtype
        ));
    }
    out
}

/// The approved records in the form a DNS answer is compared in: names lowercase, TXT as its
/// text (sorted).
fn approved_records(p: &Value) -> Vec<String> {
    let rtype = p.get("type").and_then(Value::as_str).unwrap_or_default();
    let mut recs: Vec<String> = p
        .get("records")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(|r| match rtype {
                    "TXT" | "A" | "AAAA" => r.to_owned(),
                    _ => r.to_ascii_lowercase(),
                })
                .collect()
        })
        .unwrap_or_default();
    recs.sort();
    recs
}

/// What PowerDNS serves for the approved name and type, asked over DNS at the operator's
/// `--pdns-dns-addr` (not the API: a 204 proves the change was stored, not that it is served),
/// compared with the approved records. The API's copy of the RRset in the approved zone goes
/// into the evidence beside it, so "stored but not served" reads as such.
async fn read_back(ex: &Execution<'_>) -> EffectRecord {
    let set = Rrset::from_params(ex.params);
    let unread = |reason: String| EffectRecord {
        verdict: Verdict::Unread,
        after: String::new(),
        reason,
        evidence: Value::Null,
        settled: false,
    };
    let Some(addr) = ex.destinations.pdns_dns_addr else {
        return unread(
            "no PowerDNS DNS address is configured on this executor (--pdns-dns-addr)".into(),
        );
    };
    let served = match dns_served::query(
        addr,
        &set.name,
        &set.rtype,
        std::time::Duration::from_secs(3),
    )
    .await
    {
        Ok(s) => s,
        Err(e) => return unread(e),
    };
    let stored = current(ex).await.ok().flatten();
    compare_served(ex.params, &set, &served, stored)
}

/// Compares what is served with the approved records (see [`read_back`]).
fn compare_served(
    p: &Value,
    set: &Rrset,
    served: &dns_served::Served,
    stored: Option<(i64, Vec<String>)>,
) -> EffectRecord {
    let name = set.name.trim_end_matches('.');
    let approved = approved_records(p);
    let after = if served.records.is_empty() {
        format!("{name} {}: nothing served ({})", set.rtype, served.rcode)
    } else {
        format!(
            "{name} {} served: {} (TTL {}s)",
            set.rtype,
            served.records.join(", "),
            served.ttl.unwrap_or_default()
        )
    };
    let (verdict, reason) = if served.records == approved {
        (Verdict::Matches, String::new())
    } else {
        let stored_note = match &stored {
            Some((_, recs)) if !recs.is_empty() => format!(
                "; the API holds {} in zone {}, which does not serve it",
                recs.join(", "),
                set.zone
            ),
            _ => String::new(),
        };
        let verdict = if served.records.is_empty() {
            Verdict::Absent
        } else {
            Verdict::Differs
        };
        (
            verdict,
            format!(
                "approved {}, served {}{stored_note}",
                approved.join(", "),
                if served.records.is_empty() {
                    "nothing".to_owned()
                } else {
                    served.records.join(", ")
                }
            ),
        )
    };
    EffectRecord {
        verdict,
        after,
        reason,
        evidence: json!({
            "name": set.name, "type": set.rtype, "zone": set.zone,
            "served": served.records, "ttl": served.ttl, "rcode": served.rcode,
            "authoritative": served.authoritative,
            "api_rrset": stored.map(|(ttl, recs)| json!({"ttl": ttl, "records": recs})),
        }),
        settled: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn txt_is_quoted_and_split_the_way_powerdns_wants() {
        assert_eq!(content("TXT", "v=spf1 -all"), "\"v=spf1 -all\"");
        assert_eq!(
            content("TXT", "say \"hi\" \\o/"),
            "\"say \\\"hi\\\" \\\\o/\""
        );
        let long = "é".repeat(200); // 400 bytes: two character-strings
        let c = content("TXT", &long);
        assert_eq!(c, format!("\"{}\" \"{}\"", "é".repeat(127), "é".repeat(73)));
        assert_eq!(content("A", "192.0.2.1"), "192.0.2.1");
    }

    #[test]
    fn the_approved_settings_decide_the_zone_and_delegations_again() {
        let rrset = |zone: &str, name: &str, rtype: &str| {
            Rrset::from_params(&json!({"zone": zone, "name": name, "type": rtype}))
        };
        let s = json!({"zones": ["example.com", "inner.example.com"]});
        assert_eq!(
            check_rrset(&s, &rrset("example.com", "www.example.com", "A")),
            Ok(())
        );
        assert_eq!(
            check_rrset(
                &s,
                &rrset("inner.example.com", "www.inner.example.com", "A")
            ),
            Ok(())
        );
        assert_eq!(
            check_rrset(&s, &rrset("example.com", "www.inner.example.com", "A")),
            Err("www.inner.example.com belongs to the allowed zone inner.example.com, not example.com: nothing was sent".into())
        );
        assert_eq!(
            check_rrset(&s, &rrset("example.net", "www.example.net", "A")),
            Err("zone example.net is not allowed by the approved settings".into())
        );
        assert!(
            check_rrset(&s, &rrset("example.com", "sub.example.com", "NS"))
                .is_err_and(|e| e.starts_with("NS at sub.example.com is a delegation"))
        );
        assert_eq!(
            check_rrset(&s, &rrset("example.com", "example.com", "NS")),
            Ok(())
        );
        let open = json!({"zones": ["example.com"], "allow_delegations": true});
        assert_eq!(
            check_rrset(&open, &rrset("example.com", "sub.example.com", "NS")),
            Ok(())
        );
    }

    #[test]
    fn warnings_name_a_lost_address_and_apex_ns_or_mx() {
        let set = |name: &str, rtype: &str| {
            Rrset::from_params(&json!({"zone": "example.com", "name": name, "type": rtype}))
        };
        let had = vec!["192.0.2.1".to_owned()];
        assert!(
            warnings(&set("www.example.com", "A"), Some(&had), &[])[0]
                .contains("removes every A record")
        );
        assert!(warnings(&set("www.example.com", "A"), Some(&had), &had).is_empty());
        let mx = vec!["10 mx.example.com.".to_owned()];
        assert!(
            warnings(&set("example.com", "MX"), Some(&had), &mx)[0]
                .contains("zone apex example.com")
        );
        assert!(warnings(&set("example.com", "MX"), Some(&mx), &mx).is_empty());
        assert!(warnings(&set("mail.example.com", "MX"), None, &mx).is_empty());
    }

    #[test]
    fn refusals_read_as_one_line() {
        assert_eq!(
            refusal_reason(422, r#"{"error": "Conflicts with\npre-existing RRset"}"#),
            "PowerDNS refused the change: Conflicts with pre-existing RRset"
        );
        assert_eq!(
            refusal_reason(500, "oops"),
            "PowerDNS refused the change: oops"
        );
    }

    #[test]
    fn served_records_are_compared_with_the_approved_ones() {
        let p = json!({"zone": "example.com", "name": "www.inner.example.com", "type": "A", "records": ["192.0.2.9"]});
        let set = Rrset::from_params(&p);
        let served = |recs: &[&str]| dns_served::Served {
            rcode: "No Error".into(),
            authoritative: true,
            records: recs.iter().map(|r| (*r).to_owned()).collect(),
            ttl: Some(300),
        };
        let ok = compare_served(&p, &set, &served(&["192.0.2.9"]), None);
        assert_eq!(ok.verdict, Verdict::Matches);
        assert_eq!(
            ok.after,
            "www.inner.example.com A served: 192.0.2.9 (TTL 300s)"
        );
        let hidden = compare_served(
            &p,
            &set,
            &served(&[]),
            Some((300, vec!["192.0.2.9".into()])),
        );
        assert_eq!(hidden.verdict, Verdict::Absent);
        assert_eq!(
            hidden.reason,
            "approved 192.0.2.9, served nothing; the API holds 192.0.2.9 in zone example.com, which does not serve it"
        );
        assert_eq!(
            compare_served(&p, &set, &served(&["192.0.2.7"]), None).verdict,
            Verdict::Differs
        );
    }
}
