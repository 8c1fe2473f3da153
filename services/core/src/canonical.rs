//! Strict JSON parsing and RFC 8785 (JSON Canonicalization Scheme) output.
//!
//! `params` are canonicalized **once**, at submission; the exact string is stored and every
//! later hash is computed from that stored string (design, "The grant"). The guide's failure
//! mode "grant does not match this proposal" is what happens otherwise.
//!
//! The strict parser rejects what RFC 8785 / I-JSON (RFC 7493) leave undefined or lossy:
//! - duplicate object keys anywhere (`{"amount":10,"amount":5000}`): serde_json would keep the
//!   last one silently;
//! - integers beyond ±(2^53−1) (`Number.MAX_SAFE_INTEGER`), including integral doubles such as
//!   `1e21`: the serializer would round them silently (a money amount that large is a unit
//!   mistake: amounts are integers in minor units);
//! - U+0000 in any string value or object key (`"a\u0000b"`): Postgres `text` and `jsonb`
//!   cannot store it, so it would otherwise fail late as a server error;
//! - non-finite numbers, lone surrogates, invalid UTF-8, trailing data, nesting deeper than 128
//!   (these four are rejected by serde_json itself).
//!
//! No Unicode normalization is applied: RFC 8785 §3.2.2 preserves strings as given.

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use sha2::{Digest, Sha256};
use std::cell::RefCell;
use std::fmt::Write as _;

/// `Number.MAX_SAFE_INTEGER` (2^53−1): the largest integer every JSON peer represents exactly
/// (RFC 7493 §2.2).
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// What to do about an integer past [`MAX_SAFE_INTEGER`]. Not just "send it as a string": the
/// handlers' schemas take amounts as integers, so a string amount is refused there too; only
/// a `bigint` parameter of `db.statement.execute` takes a larger value, as a string.
const UNSAFE_HINT: &str = "check the value and its unit (amounts are integers in minor units, e.g. cents); \
     only a bigint statement parameter takes a larger value, as a string of its digits";

/// The rule of a lone UTF-16 surrogate escape (`"\uD800"` without its pair), in place of
/// serde_json's "lone leading surrogate in hex escape".
const LONE_SURROGATE_RULE: &str = "a \\uD800–\\uDFFF escape is half of a UTF-16 surrogate pair and is not a character alone: \
     send the character itself (UTF-8), or both halves in order (\\uD83D\\uDE00 for U+1F600)";

/// Rule of a string value or object key containing U+0000, which Postgres `text` and `jsonb`
/// cannot store.
const NUL_RULE: &str = "must not contain the NUL character (U+0000)";

/// A rejection of JSON input. `path` is the dotted path to the offending value ("" for the
/// document root), `rule` the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {rule}", if path.is_empty() { "body" } else { path.as_str() })]
pub struct CanonicalError {
    /// Dotted path (`params.items[2].amount`), empty for the root.
    pub path: String,
    /// What was wrong.
    pub rule: String,
}

#[derive(Clone)]
enum Seg {
    Key(String),
    Index(usize),
}

/// The most segments a reported path shows: a body nested 128 deep would otherwise name a
/// path of ~1 KB (`[0][0][0]…`) in every error message.
const MAX_PATH_SEGMENTS: usize = 8;

/// Formats a path from segments: `a.b[2].c`; keys that are not identifiers are quoted. A path
/// deeper than [`MAX_PATH_SEGMENTS`] shows its first segments, then `…` and its depth
/// (`[0][0][0][0][0][0][0][0]… (depth 129)`).
fn format_path(segs: &[Seg]) -> String {
    let mut out = String::new();
    for s in segs.iter().take(MAX_PATH_SEGMENTS) {
        match s {
            Seg::Key(k) => {
                let plain = !k.is_empty()
                    && k.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                if plain {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(k);
                } else {
                    let _ = write!(out, "[{}]", Value::String(k.clone()));
                }
            }
            Seg::Index(i) => {
                let _ = write!(out, "[{i}]");
            }
        }
    }
    if segs.len() > MAX_PATH_SEGMENTS {
        let _ = write!(out, "… (depth {})", segs.len());
    }
    out
}

struct Strict<'a> {
    path: &'a RefCell<Vec<Seg>>,
}

impl<'a> Strict<'a> {
    fn err<E: de::Error>(&self, rule: impl std::fmt::Display) -> E {
        // The path is encoded into the message and recovered by `parse_strict`.
        E::custom(format!(
            "\u{0}{}\u{0}{rule}",
            format_path(&self.path.borrow())
        ))
    }
}

impl<'de> DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'_> {
    type Value = Value;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an I-JSON value")
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(b.into())
    }
    fn visit_str<E: de::Error>(self, s: &str) -> Result<Value, E> {
        if s.contains('\u{0}') {
            return Err(self.err(NUL_RULE));
        }
        Ok(s.into())
    }
    fn visit_string<E: de::Error>(self, s: String) -> Result<Value, E> {
        if s.contains('\u{0}') {
            return Err(self.err(NUL_RULE));
        }
        Ok(s.into())
    }
    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Value, E> {
        if n > MAX_SAFE_INTEGER {
            return Err(self.err(format!(
                "integer {n} is outside ±9007199254740991 (2^53−1), the largest every JSON reader keeps exactly; {UNSAFE_HINT}"
            )));
        }
        Ok(n.into())
    }
    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Value, E> {
        if n.unsigned_abs() > MAX_SAFE_INTEGER {
            return Err(self.err(format!(
                "integer {n} is outside ±9007199254740991 (2^53−1), the largest every JSON reader keeps exactly; {UNSAFE_HINT}"
            )));
        }
        Ok(n.into())
    }
    fn visit_f64<E: de::Error>(self, x: f64) -> Result<Value, E> {
        // `1e21` and integer literals wider than u64 arrive here.
        if x.fract() == 0.0 && x.abs() > MAX_SAFE_INTEGER as f64 {
            return Err(self.err(format!(
                "number {x} is an integer outside ±9007199254740991 (2^53−1), the largest every JSON reader keeps exactly; {UNSAFE_HINT}"
            )));
        }
        Number::from_f64(x)
            .map(Value::Number)
            .ok_or_else(|| self.err("number is not finite"))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Value, A::Error> {
        let mut v = Vec::new();
        loop {
            self.path.borrow_mut().push(Seg::Index(v.len()));
            match a.next_element_seed(Strict { path: self.path })? {
                Some(x) => v.push(x),
                None => {
                    self.path.borrow_mut().pop();
                    break;
                }
            }
            self.path.borrow_mut().pop();
        }
        Ok(Value::Array(v))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Value, A::Error> {
        let mut o = Map::new();
        while let Some(k) = m.next_key::<String>()? {
            self.path.borrow_mut().push(Seg::Key(k.clone()));
            if k.contains('\u{0}') {
                return Err(self.err(NUL_RULE));
            }
            if o.contains_key(&k) {
                return Err(self.err("duplicate key"));
            }
            let v = m.next_value_seed(Strict { path: self.path })?;
            self.path.borrow_mut().pop();
            o.insert(k, v);
        }
        Ok(Value::Object(o))
    }
}

/// Parses `raw` strictly (see the module doc). Errors carry the path of the offending value.
///
/// The caller caps the length of `raw` first (the API's body limit is 64 KiB).
pub fn parse_strict(raw: &[u8]) -> Result<Value, CanonicalError> {
    let path = RefCell::new(Vec::new());
    let mut de = serde_json::Deserializer::from_slice(raw);
    let result = Strict { path: &path }
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v));
    // serde_json appends " at line L column C" to the rule; it helps find the spot.
    result.map_err(|e| {
        let msg = e.to_string();
        // A lone `\uD800` before the closing quote is "unexpected end of hex escape".
        let lone = msg.contains("hex escape") && has_surrogate_escape(raw);
        decode_error(&msg, &path, lone)
    })
}

/// Whether `raw` holds a `\uD800`–`\uDFFF` escape (either case).
fn has_surrogate_escape(raw: &[u8]) -> bool {
    raw.windows(4).any(|w| {
        w[0] == b'\\'
            && w[1] == b'u'
            && (w[2] | 0x20) == b'd'
            && matches!(w[3] | 0x20, b'8'..=b'9' | b'a'..=b'f')
    })
}

/// Reads any serde data format (the tenant document's YAML, for one) with the same strict rules
/// as [`parse_strict`]: duplicate keys anywhere, unsafe integers and non-finite numbers are
/// refused, with the path of the offending value.
pub fn deserialize_strict<'de, D>(d: D) -> Result<Value, CanonicalError>
where
    D: Deserializer<'de>,
    D::Error: std::fmt::Display,
{
    let path = RefCell::new(Vec::new());
    Strict { path: &path }
        .deserialize(d)
        .map_err(|e| decode_error(&e.to_string(), &path, false))
}

/// The error of a failed strict parse; `lone_surrogate` when the input's failure is a
/// surrogate escape without its pair (serde_json words that several ways).
fn decode_error(msg: &str, path: &RefCell<Vec<Seg>>, lone_surrogate: bool) -> CanonicalError {
    if let Some(pos) = msg.find('\u{0}') {
        let rest = &msg[pos + 1..];
        let mut parts = rest.splitn(2, '\u{0}');
        let p = parts.next().unwrap_or_default().to_owned();
        let rule = parts.next().unwrap_or_default();
        CanonicalError {
            path: p,
            rule: rule.to_owned(),
        }
    } else if lone_surrogate || msg.contains("surrogate") {
        // Keep serde_json's " at line L column C": it finds the spot.
        let at = msg.find(" at line ").map_or("", |i| &msg[i..]);
        CanonicalError {
            path: format_path(&path.borrow()),
            rule: format!("{LONE_SURROGATE_RULE}{at}"),
        }
    } else {
        CanonicalError {
            path: format_path(&path.borrow()),
            rule: msg.to_owned(),
        }
    }
}

/// RFC 8785 canonical form of a JSON value, as a string.
///
/// Errors only on values that cannot be represented (non-finite numbers), which
/// [`parse_strict`] never produces.
pub fn canonicalize(v: &Value) -> Result<String, CanonicalError> {
    serde_json_canonicalizer::to_string(v).map_err(|e| CanonicalError {
        path: String::new(),
        rule: e.to_string(),
    })
}

/// Lowercase hex SHA-256 of `bytes` (64 characters).
pub fn sha256_hex(bytes: impl AsRef<[u8]>) -> String {
    hex::encode(Sha256::digest(bytes.as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(s: &str) -> Result<String, CanonicalError> {
        canonicalize(&parse_strict(s.as_bytes())?)
    }

    #[test]
    fn numbers_follow_es6_serialization() {
        assert_eq!(
            canon("[50.0, 5e1, -0.0, 4.50, 2e-3, 1e-7]").unwrap(),
            "[50,50,0,4.5,0.002,1e-7]"
        );
        // 1e21 is canonically "1e+21" (checked in the vector test without the strict check),
        // but as a param it is an integer beyond 2^53 and is refused.
        let e = canon(r#"{"a":1e21}"#).unwrap_err();
        assert_eq!(e.path, "a");
    }

    #[test]
    fn keys_sort_by_utf16_code_units() {
        assert_eq!(
            canon(r#"{"\uFF61":1,"\uD83D\uDE00":2,"b":3,"a":4}"#).unwrap(),
            "{\"a\":4,\"b\":3,\"😀\":2,\"｡\":1}"
        );
    }

    #[test]
    fn a_deep_path_is_capped_with_its_depth() {
        let deep = format!("{{\"a\":{}1{}}}", "[".repeat(300), "]".repeat(300));
        let e = parse_strict(deep.as_bytes()).unwrap_err();
        assert!(e.path.starts_with("a[0][0][0][0][0][0][0]…"), "{}", e.path);
        assert!(
            e.path.ends_with(')') && e.path.contains("(depth "),
            "{}",
            e.path
        );
        assert!(e.path.len() < 60, "{}", e.path);
    }

    #[test]
    fn duplicate_keys_are_refused_with_their_path() {
        let e = parse_strict(br#"{"amount":10,"amount":5000}"#).unwrap_err();
        assert_eq!(e.path, "amount");
        assert!(e.rule.contains("duplicate key"), "{e}");
        let e = parse_strict(br#"{"params":{"x":[{"a":1},{"b":1,"b":2}]}}"#).unwrap_err();
        assert_eq!(e.path, "params.x[1].b");
    }

    #[test]
    fn unsafe_integers_are_refused() {
        assert!(parse_strict(b"9007199254740991").is_ok());
        let e = parse_strict(br#"{"n":9007199254740992}"#).unwrap_err();
        assert_eq!(e.path, "n");
        assert!(e.rule.contains("outside ±9007199254740991"), "{e}");
        // Not a bare "send it as a string": the handlers' schemas refuse a string amount.
        assert!(!e.rule.contains("send it as a string"), "{e}");
        assert!(e.rule.contains("minor units"), "{e}");
        assert!(e.rule.contains("only a bigint statement parameter"), "{e}");
        assert!(parse_strict(b"-9007199254740992").is_err());
        assert!(parse_strict(b"18446744073709551616").is_err());
    }

    #[test]
    fn lone_surrogates_and_garbage_are_refused() {
        let e = parse_strict(br#"{"s":"\uD800"}"#).unwrap_err();
        assert_eq!(e.path, "s");
        // Says what a lone surrogate is and what to send, and still where it is.
        assert!(e.rule.contains("half of a UTF-16 surrogate pair"), "{e}");
        assert!(e.rule.contains("at line 1 column"), "{e}");
        let e = parse_strict(br#"{"s":"a\uDE00"}"#).unwrap_err();
        assert!(e.rule.contains("half of a UTF-16 surrogate pair"), "{e}");
        assert!(parse_strict(br#""\uDE00x""#).is_err());
        assert!(parse_strict(b"{} x").is_err());
        assert!(parse_strict(b"\xEF\xBB\xBF{}").is_err());
        assert!(parse_strict(b"1e400").is_err());
        assert!(parse_strict(&[b'['; 200]).is_err());
    }

    #[test]
    fn no_unicode_normalization() {
        // "é" precomposed (U+00E9) and decomposed (e + U+0301) stay different.
        let a = canon("\"\u{e9}\"").unwrap();
        let b = canon("\"e\u{301}\"").unwrap();
        assert_ne!(a, b);
    }

    #[test]
    fn key_order_does_not_change_the_canonical_form() {
        assert_eq!(
            canon(r#"{"zone":"a","ttl":300}"#).unwrap(),
            canon(r#"{"ttl":300,"zone":"a"}"#).unwrap()
        );
    }

    #[test]
    fn nul_is_refused_in_values_and_keys_with_its_path() {
        let rule = "must not contain the NUL character (U+0000)";
        for (raw, path) in [
            (r#"{"reason":"a\u0000b"}"#, "reason"),
            (r#"{"params":{"note":"\u0000"}}"#, "params.note"),
            (r#"{"params":{"a\u0000":1}}"#, r#"params["a\u0000"]"#),
            (r#"{"params":{"x":["ok","\u0000"]}}"#, "params.x[1]"),
            (r#""\u0000""#, ""),
        ] {
            let e = parse_strict(raw.as_bytes()).unwrap_err();
            assert_eq!(e.path, path, "{raw}");
            assert!(e.rule.starts_with(rule), "{raw}: {e}");
        }
        // Raw NUL bytes are already invalid JSON (control characters must be escaped).
        assert!(parse_strict(b"{\"a\":\"x\0\"}").is_err());
        // Other escapes and U+0001 are still accepted.
        let v = parse_strict(br#"{"reason":"tab\tline\n\u0001","k\u00e9":"v"}"#).unwrap();
        assert_eq!(v["reason"], "tab\tline\n\u{1}");
        // The YAML reader (tenant documents) refuses it too.
        let e = deserialize_strict(serde_yaml_ng::Deserializer::from_str(
            "policy:\n  rules:\n    - reason: \"a\\0b\"\n",
        ))
        .unwrap_err();
        assert_eq!(e.path, "policy.rules[0].reason");
        assert!(e.rule.starts_with(rule), "{e}");
    }
}
