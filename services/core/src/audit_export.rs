//! Lines of an audit export (`actiond audit export`): one JSON object per line, either plain
//! JSON Lines or CloudEvents 1.0 JSON (structured mode). Pure: formatting and parsing only.
//!
//! Every seal line comes before the first event it covers, so a reader verifies in one pass
//! per section. Event lines carry the event exactly as hashed ([`ChainEvent`]) plus
//! `chain_hash` and `seal_id` (the seal's per-tenant sequence number).

use crate::audit_chain::{ChainEvent, Seal};
use serde_json::{Map, Value, json};

/// Output format of an export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `{"record":"event", …}` / `{"record":"seal", …}` per line.
    Jsonl,
    /// CloudEvents 1.0 JSON envelopes, types `dev.actiond.audit.event` and
    /// `dev.actiond.audit.seal`, the record in `data`.
    CloudEvents,
}

impl Format {
    /// `jsonl` or `cloudevents`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "jsonl" => Some(Self::Jsonl),
            "cloudevents" => Some(Self::CloudEvents),
            _ => None,
        }
    }
}

/// CloudEvents `type` of an event line.
pub const CE_EVENT_TYPE: &str = "dev.actiond.audit.event";
/// CloudEvents `type` of a seal line.
pub const CE_SEAL_TYPE: &str = "dev.actiond.audit.seal";

fn source(tenant: &str) -> String {
    format!("urn:actiond:audit:{tenant}")
}

fn object(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// One event line (without the newline).
pub fn event_line(format: Format, e: &ChainEvent, chain_hash: &str, seal_id: i64) -> String {
    let mut data = object(serde_json::to_value(e).unwrap_or(Value::Null));
    data.insert("chain_hash".into(), json!(chain_hash));
    data.insert("seal_id".into(), json!(seal_id));
    let v = match format {
        Format::Jsonl => {
            let mut m = Map::new();
            m.insert("record".into(), json!("event"));
            m.extend(data);
            Value::Object(m)
        }
        Format::CloudEvents => {
            let mut m = Map::new();
            m.insert("specversion".into(), json!("1.0"));
            m.insert(
                "id".into(),
                json!(format!("{}/event/{}", e.tenant_id, e.id)),
            );
            m.insert("source".into(), json!(source(&e.tenant_id)));
            m.insert("type".into(), json!(CE_EVENT_TYPE));
            m.insert("time".into(), json!(e.at));
            if let Some(p) = &e.proposal_id {
                m.insert("subject".into(), json!(p));
            }
            m.insert("datacontenttype".into(), json!("application/json"));
            m.insert("data".into(), Value::Object(data));
            Value::Object(m)
        }
    };
    v.to_string()
}

/// One seal line (without the newline).
pub fn seal_line(format: Format, s: &Seal) -> String {
    let data = object(serde_json::to_value(s).unwrap_or(Value::Null));
    let p = &s.payload;
    let v = match format {
        Format::Jsonl => {
            let mut m = Map::new();
            m.insert("record".into(), json!("seal"));
            m.extend(data);
            Value::Object(m)
        }
        Format::CloudEvents => json!({
            "specversion": "1.0",
            "id": format!("{}/seal/{}", p.tenant_id, p.seq),
            "source": source(&p.tenant_id),
            "type": CE_SEAL_TYPE,
            "time": p.sealed_at,
            "datacontenttype": "application/json",
            "data": Value::Object(data),
        }),
    };
    v.to_string()
}

/// A parsed export line.
#[derive(Debug, Clone)]
pub enum Record {
    /// An event with its chain hash and seal id.
    Event(ChainEvent, String, i64),
    /// A seal.
    Seal(Seal),
}

/// Parses one line of either format (duplicate keys refused). The error says what is wrong.
pub fn parse_line(line: &str) -> Result<Record, String> {
    let v = crate::canonical::parse_strict(line.as_bytes())
        .map_err(|e| format!("not a valid JSON line: {e}"))?;
    let (kind, body) = if v.get("specversion").is_some() {
        let kind = match v.get("type").and_then(Value::as_str) {
            Some(CE_EVENT_TYPE) => "event",
            Some(CE_SEAL_TYPE) => "seal",
            _ => return Err("CloudEvent of an unknown type".into()),
        };
        (kind, v.get("data").cloned().unwrap_or(Value::Null))
    } else {
        let kind = match v.get("record").and_then(Value::as_str) {
            Some("event") => "event",
            Some("seal") => "seal",
            _ => return Err("record is neither event nor seal".into()),
        };
        (kind, v)
    };
    if kind == "seal" {
        let s: Seal = serde_json::from_value(body).map_err(|e| format!("bad seal: {e}"))?;
        return Ok(Record::Seal(s));
    }
    let hash = body
        .get("chain_hash")
        .and_then(Value::as_str)
        .ok_or("event without chain_hash")?
        .to_owned();
    let seal = body
        .get("seal_id")
        .and_then(Value::as_i64)
        .ok_or("event without seal_id")?;
    let e: ChainEvent = serde_json::from_value(body).map_err(|e| format!("bad event: {e}"))?;
    Ok(Record::Event(e, hash, seal))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_both_formats() {
        let e = ChainEvent {
            id: 7,
            tenant_id: "acme".into(),
            proposal_id: Some("0190f0f0-0000-7000-8000-000000000000".into()),
            at: "2026-12-01T00:00:00.000001Z".into(),
            kind: "proposal.decided".into(),
            actor: "policy".into(),
            from_state: Some("pending".into()),
            to_state: Some("approved".into()),
            intent_hash: None,
            params_sha256: None,
            detail: json!({"rule": "small", "x": 0.1}),
        };
        for f in [Format::Jsonl, Format::CloudEvents] {
            let l = event_line(f, &e, "ab", 3);
            match parse_line(&l).unwrap() {
                Record::Event(back, h, s) => {
                    assert_eq!(back, e);
                    assert_eq!((h.as_str(), s), ("ab", 3));
                }
                Record::Seal(_) => panic!("not a seal"),
            }
        }
        assert!(parse_line(r#"{"record":"event","id":1,"id":2}"#).is_err());
    }
}
