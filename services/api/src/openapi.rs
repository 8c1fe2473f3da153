//! The OpenAPI description as served: `GET /openapi.yaml` and, per tenant, `GET /v1/openapi.yaml`.
//!
//! Both are built from the embedded document ([`crate::OPENAPI_YAML`]) with the params of each
//! action typed from the handler registry itself ([`HandlerKind::params_schema`]), so the
//! description cannot drift from what the API checks: `ProposalRequest` gets a `oneOf` with
//! one branch per action (`action` a `const`, `params` that handler's schema) and, in the
//! static document, a last branch for any other action name (stored, then blocked by policy
//! with "no handler").
//!
//! The per-tenant document is the static one with these changes:
//!
//! - `paths./v1/proposals.post.description` is the `propose_action` description of the MCP
//!   tool list ([`crate::mcp::tools::propose_description`]): the actions the tenant's handler
//!   registry enables, each with its params and the tenant's own limits (currencies, zones,
//!   maximum amount), or an explanation that nothing is enabled;
//! - `components.schemas.ProposalRequest.properties.action` has no `enum`: the `oneOf` keeps
//!   only the enabled actions' branches, with the tenant's refund limits
//!   (`max_amount`, `currencies`) written into the params schema, plus the branch for any other
//!   name (stored, then blocked by policy), which is what the API does with it.

use actiond_core::handlers::HandlerKind;
use actiond_core::tenant::TenantDocument;
use serde_json::{Value, json};
use std::sync::OnceLock;

/// The static document, typed from the handler registry, as YAML (built once).
pub fn static_yaml() -> &'static str {
    static DOC: OnceLock<String> = OnceLock::new();
    DOC.get_or_init(|| {
        match base().and_then(|v| serde_yaml_ng::to_string(&v).map_err(|e| e.to_string())) {
            Ok(text) => text,
            Err(e) => {
                // A build defect caught by the tests; serve the embedded text rather than nothing.
                tracing::error!(error = %e, "openapi.yaml");
                crate::OPENAPI_YAML.to_owned()
            }
        }
    })
}

/// The embedded document with every registry action's params typed (see the module docs).
fn base() -> Result<Value, String> {
    let mut spec: Value =
        serde_yaml_ng::from_str(crate::OPENAPI_YAML).map_err(|e| format!("openapi.yaml: {e}"))?;
    let all: Vec<&str> = HandlerKind::ALL.iter().map(|k| k.action()).collect();
    let mut branches: Vec<Value> = HandlerKind::ALL
        .iter()
        .map(|k| action_branch(*k, None))
        .collect();
    branches.push(json!({
        "title": "any other action",
        "description": "Not in the handler registry: stored as submitted, then blocked by policy (no handler).",
        "properties": {"action": {"not": {"enum": all}}, "params": {"type": "object"}}
    }));
    request_schema(&mut spec)?.insert("oneOf".into(), json!(branches));
    Ok(spec)
}

/// The `oneOf` branch of one action: `action` its name, `params` its handler's schema, with
/// the tenant's limits when `settings` are given.
fn action_branch(kind: HandlerKind, settings: Option<&Value>) -> Value {
    let params = match settings {
        Some(settings) => kind.params_schema_for(settings),
        None => kind.params_schema(),
    };
    json!({
        "title": kind.action(),
        "properties": {"action": {"const": kind.action()}, "params": params}
    })
}

fn request_schema(spec: &mut Value) -> Result<&mut serde_json::Map<String, Value>, String> {
    spec.pointer_mut("/components/schemas/ProposalRequest")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| "openapi.yaml: no components.schemas.ProposalRequest".to_owned())
}

/// The per-tenant document for `tenant`, whose latest tenant document is `doc` (`None`: none
/// applied yet, which reads as "nothing enabled"). Errors: the embedded static document does
/// not parse (a build defect), as text for the log.
pub fn for_tenant(tenant: &str, doc: Option<&TenantDocument>) -> Result<String, String> {
    let mut spec = base()?;
    let enabled: Vec<(&str, HandlerKind, &Value)> = doc
        .map(|d| {
            d.handlers
                .iter()
                .map(|(name, e)| (name.as_str(), e.kind, &e.settings))
                .collect()
        })
        .unwrap_or_default();
    let actions: Vec<&str> = enabled.iter().map(|(n, _, _)| *n).collect();
    if let Some(desc) = spec.pointer_mut("/info/description") {
        let text = desc.as_str().unwrap_or_default().to_owned();
        *desc = json!(format!(
            "{text}\nThis description is for the agents of tenant {tenant}: it lists only the actions this tenant enables, with its limits.\n"
        ));
    }
    let post = spec
        .pointer_mut("/paths/~1v1~1proposals/post")
        .ok_or("openapi.yaml: no POST /v1/proposals")?;
    post["description"] = json!(crate::mcp::tools::propose_description(doc));
    let request = request_schema(&mut spec)?;
    let mut branches: Vec<Value> = enabled
        .iter()
        .map(|(_, kind, settings)| action_branch(*kind, Some(settings)))
        .collect();
    // What the API does with any other name (a registry action this tenant does not enable
    // included): stores it as submitted and policy blocks it, so it is valid input, never run.
    branches.push(json!({
        "title": "any other action",
        "description": "Not enabled for this tenant: stored as submitted, then blocked by policy (no handler); it never runs.",
        "properties": {"action": {"not": {"enum": actions}}, "params": {"type": "object"}}
    }));
    request.insert("oneOf".into(), json!(branches));
    let action = request
        .get_mut("properties")
        .and_then(|p| p.get_mut("action"))
        .ok_or("openapi.yaml: no ProposalRequest.action")?;
    if let Some(a) = action.as_object_mut() {
        a.remove("enum");
    }
    action["description"] = json!(if actions.is_empty() {
        "No action is enabled for this tenant: any name is stored and then blocked by policy, never run (see the operation's description)."
    } else {
        "One of the actions this tenant enables (see the operation's description for params and limits); any other name is stored and then blocked by policy, never run."
    });
    serde_yaml_ng::to_string(&spec).map_err(|e| format!("openapi.yaml: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(handlers: &str) -> TenantDocument {
        TenantDocument::parse(&format!(
            "tenant: acme\npolicy:\n  default: escalate\nhandlers:\n{handlers}"
        ))
        .unwrap()
    }

    fn parsed(text: &str) -> Value {
        serde_yaml_ng::from_str(text).unwrap()
    }

    #[test]
    fn lists_only_the_tenants_actions_with_their_limits() {
        let d = doc(
            "  billing.refund.issue:\n    credential: payments\n    max_amount: 20000\n    currencies: [EUR]\n",
        );
        let spec = parsed(&for_tenant("acme", Some(&d)).unwrap());
        let action = &spec["components"]["schemas"]["ProposalRequest"]["properties"]["action"];
        assert!(action.get("enum").is_none(), "{action}");
        let branches = spec["components"]["schemas"]["ProposalRequest"]["oneOf"]
            .as_array()
            .unwrap();
        assert_eq!(branches.len(), 2, "{branches:?}");
        assert_eq!(
            branches[1]["properties"]["action"]["not"]["enum"],
            json!(["billing.refund.issue"])
        );
        let desc = spec["paths"]["/v1/proposals"]["post"]["description"]
            .as_str()
            .unwrap();
        assert!(desc.contains("billing.refund.issue"), "{desc}");
        assert!(desc.contains("currency one of EUR"), "{desc}");
        assert!(desc.contains("amount at most 20000"), "{desc}");
        assert!(!desc.contains("dns.record.update"), "{desc}");
        assert!(!desc.contains("webhook.post"), "{desc}");
        // The refund's params carry the tenant's limits in the schema too.
        let branches = spec["components"]["schemas"]["ProposalRequest"]["oneOf"]
            .as_array()
            .unwrap();
        assert_eq!(branches.len(), 2, "the refund and any other action");
        let params = &branches[0]["properties"]["params"]["properties"];
        assert_eq!(params["amount"]["maximum"], json!(20000));
        assert_eq!(params["currency"]["enum"], json!(["EUR"]));
        // Everything else is the static document, unchanged.
        let stat = parsed(static_yaml());
        assert_eq!(
            spec["paths"]["/v1/proposals/{id}"],
            stat["paths"]["/v1/proposals/{id}"]
        );
        assert_eq!(spec["openapi"], stat["openapi"]);
    }

    /// Collects every `$ref` under `v`.
    fn refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    match (k.as_str(), x) {
                        ("$ref", Value::String(r)) => out.push(r),
                        _ => refs(x, out),
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
            _ => {}
        }
    }

    /// The served documents parse as YAML (the whole text, not its first line), are OpenAPI
    /// 3.1 with a relative server, every `$ref` resolves, and each registry action's params are
    /// typed by its handler's schema. (`scripts/test.d/50-api-contract.sh` also runs
    /// openapi-spec-validator and schemathesis against a live api.)
    #[test]
    fn served_documents_parse_and_their_refs_resolve() {
        let d = doc("  billing.refund.issue:\n    credential: payments\n    max_amount: 20000\n");
        for text in [
            static_yaml().to_owned(),
            for_tenant("acme", Some(&d)).unwrap(),
            for_tenant("none", None).unwrap(),
        ] {
            let spec = parsed(&text);
            assert_eq!(spec["openapi"], "3.1.0");
            assert_eq!(
                spec["servers"],
                json!([{"url": "/"}]),
                "no host is hard-coded"
            );
            let mut all = Vec::new();
            refs(&spec, &mut all);
            assert!(!all.is_empty());
            for r in all {
                let pointer = r.strip_prefix('#').unwrap();
                assert!(spec.pointer(pointer).is_some(), "{r} does not resolve");
            }
        }
        let spec = parsed(static_yaml());
        let branches = spec["components"]["schemas"]["ProposalRequest"]["oneOf"]
            .as_array()
            .unwrap();
        assert_eq!(branches.len(), HandlerKind::ALL.len() + 1);
        for (kind, branch) in HandlerKind::ALL.iter().zip(branches) {
            assert_eq!(branch["properties"]["action"]["const"], kind.action());
            assert_eq!(branch["properties"]["params"], kind.params_schema());
        }
        // Optional strings accept null (the API reads null as absent).
        let session = &spec["components"]["schemas"]["ProposalRequest"]["properties"]["session"];
        assert_eq!(session["type"], json!(["string", "null"]));
    }

    #[test]
    fn nothing_enabled_is_an_explained_empty_list() {
        for d in [None, Some(doc("  {}\n"))] {
            let spec = parsed(&for_tenant("empty", d.as_ref()).unwrap());
            let action = &spec["components"]["schemas"]["ProposalRequest"]["properties"]["action"];
            assert!(action.get("enum").is_none(), "{action}");
            assert!(
                action["description"]
                    .as_str()
                    .unwrap()
                    .contains("No action")
            );
            let desc = spec["paths"]["/v1/proposals"]["post"]["description"]
                .as_str()
                .unwrap();
            assert!(
                desc.contains(crate::mcp::tools::NO_ACTIONS.trim()),
                "{desc}"
            );
        }
    }
}
