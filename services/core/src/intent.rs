//! The intent hash: what a grant is bound to.
//!
//! `intent_hash = SHA-256( JCS([tenant_id, agent_id, action, target, params_json]) )`, with
//! `params_json` the stored RFC 8785 string *as a JSON string* and ids in lowercase
//! (design, "The grant"). It is always computed from the stored row, never from a
//! re-serialization of the params.

use crate::canonical::{canonicalize, sha256_hex};
use serde_json::Value;

/// The five stored fields an intent hash covers.
#[derive(Debug, Clone, Copy)]
pub struct Intent<'a> {
    /// Tenant id (lowercased before hashing).
    pub tenant_id: &'a str,
    /// Agent id, a UUID in its hyphenated form (lowercased before hashing).
    pub agent_id: &'a str,
    /// Action name exactly as submitted (`billing.refund.issue`).
    pub action: &'a str,
    /// Target as derived by the handler (`zone/name`, a payment id).
    pub target: &'a str,
    /// The stored canonical params string.
    pub params_json: &'a str,
}

impl Intent<'_> {
    /// Lowercase hex SHA-256 (64 characters).
    pub fn hash(&self) -> String {
        let arr = Value::Array(vec![
            Value::String(self.tenant_id.to_lowercase()),
            Value::String(self.agent_id.to_lowercase()),
            Value::String(self.action.to_owned()),
            Value::String(self.target.to_owned()),
            Value::String(self.params_json.to_owned()),
        ]);
        // An array of strings always canonicalizes; the fallback keeps this infallible.
        let jcs = canonicalize(&arr).unwrap_or_default();
        sha256_hex(jcs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::parse_strict;

    #[test]
    fn reordered_keys_give_the_same_intent_hash() {
        let p1 = canonicalize(&parse_strict(br#"{"zone":"a","ttl":300}"#).unwrap()).unwrap();
        let p2 = canonicalize(&parse_strict(br#"{"ttl":300,"zone":"a"}"#).unwrap()).unwrap();
        let h = |p: &str| {
            Intent {
                tenant_id: "Acme",
                agent_id: "A1",
                action: "dns.record.update",
                target: "a/www",
                params_json: p,
            }
            .hash()
        };
        assert_eq!(h(&p1), h(&p2));
        assert_eq!(h(&p1).len(), 64);
        let other = Intent {
            tenant_id: "acme",
            agent_id: "a1",
            action: "dns.record.update",
            target: "a/www",
            params_json: &p1,
        };
        assert_eq!(other.hash(), h(&p1), "ids are lowercased");
        let tampered = Intent {
            params_json: r#"{"ttl":301,"zone":"a"}"#,
            ..other
        };
        assert_ne!(tampered.hash(), h(&p1));
    }
}
