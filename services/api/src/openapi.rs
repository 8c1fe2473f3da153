//! The OpenAPI description as one agent's tenant sees it: `GET /v1/openapi.yaml`.
//!
//! The static document ([`crate::OPENAPI_YAML`], `GET /openapi.yaml`) describes the API for
//! every tenant. The per-tenant one is the same document with two changes, so it stays exactly
//! as valid as the static one:
//!
//! - `paths./v1/proposals.post.description` is the `propose_action` description of the MCP
//!   tool list ([`crate::mcp::tools::propose_description`]): the actions the tenant's handler
//!   registry enables, each with its params and the tenant's own limits (currencies, zones,
//!   maximum amount), or an explanation that nothing is enabled;
//! - `components.schemas.ProposalRequest.properties.action` gets an `enum` of exactly those
//!   actions (empty when none: no value is valid, JSON Schema 2020-12 §6.1.2).

use actiond_core::tenant::TenantDocument;
use serde_json::{Value, json};

/// The per-tenant document for `tenant`, whose latest tenant document is `doc` (`None`: none
/// applied yet, which reads as "nothing enabled"). Errors: the embedded static document does
/// not parse (a build defect), as text for the log.
pub fn for_tenant(tenant: &str, doc: Option<&TenantDocument>) -> Result<String, String> {
    let mut spec: Value =
        serde_yaml_ng::from_str(crate::OPENAPI_YAML).map_err(|e| format!("openapi.yaml: {e}"))?;
    let actions: Vec<&str> = doc
        .map(|d| d.handlers.keys().map(String::as_str).collect())
        .unwrap_or_default();
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
    let action = spec
        .pointer_mut("/components/schemas/ProposalRequest/properties/action")
        .ok_or("openapi.yaml: no ProposalRequest.action")?;
    action["enum"] = json!(actions);
    action["description"] = json!(if actions.is_empty() {
        "No action is enabled for this tenant: any value is refused (see the operation's description)."
    } else {
        "One of the actions this tenant enables (see the operation's description for params and limits)."
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
        assert_eq!(action["enum"], json!(["billing.refund.issue"]));
        let desc = spec["paths"]["/v1/proposals"]["post"]["description"]
            .as_str()
            .unwrap();
        assert!(desc.contains("billing.refund.issue"), "{desc}");
        assert!(desc.contains("currency one of EUR"), "{desc}");
        assert!(desc.contains("amount at most 20000"), "{desc}");
        assert!(!desc.contains("dns.record.update"), "{desc}");
        assert!(!desc.contains("webhook.post"), "{desc}");
        // Everything else is the static document, unchanged.
        let stat = parsed(crate::OPENAPI_YAML);
        assert_eq!(
            spec["paths"]["/v1/proposals/{id}"],
            stat["paths"]["/v1/proposals/{id}"]
        );
        assert_eq!(spec["openapi"], stat["openapi"]);
    }

    #[test]
    fn nothing_enabled_is_an_explained_empty_list() {
        for d in [None, Some(doc("  {}\n"))] {
            let spec = parsed(&for_tenant("empty", d.as_ref()).unwrap());
            let action = &spec["components"]["schemas"]["ProposalRequest"]["properties"]["action"];
            assert_eq!(action["enum"], json!([]));
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
