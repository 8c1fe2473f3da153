//! `docs/tenant-document.md` checked against the parser: every YAML example in the tenant
//! documentation parses with [`TenantDocument::parse`], and every field name the parser accepts
//! is written on that page. The field names are asked of the parser itself: an unknown key put
//! into each mapping of the documented example is refused with the list of the keys that
//! mapping takes ("unknown field; expected one of: …"), so a field added to the parser without
//! its line in the document fails here.

use super::TenantDocument;
use serde_json::{Map, Value};
use std::collections::BTreeSet;
use std::path::PathBuf;

/// The pages whose YAML blocks are all tenant documents or fragments of one.
const PAGES: [&str; 3] = ["tenant-document.md", "approvals.md", "audit.md"];
/// The page that must name every field.
const REFERENCE: &str = "tenant-document.md";
/// The key put into each mapping to make the parser list the keys it takes.
const PROBE: &str = "zz_probe_field";

fn docs_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs")
}

fn read(page: &str) -> String {
    let path = docs_dir().join(page);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The ```yaml blocks of a Markdown page, with the line each starts on.
fn yaml_blocks(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        match current.as_mut() {
            None if line.trim_start() == "```yaml" => current = Some((i + 1, String::new())),
            None => {}
            Some(_) if line.trim_start() == "```" => out.extend(current.take()),
            Some((_, body)) => {
                body.push_str(line);
                body.push('\n');
            }
        }
    }
    out
}

/// `over` merged into `base`: mappings key by key, anything else replaced.
fn merge(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Object(b), Value::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(k) {
                    Some(slot) => merge(slot, v),
                    None => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (slot, v) => *slot = v.clone(),
    }
}

fn to_value(page: &str, line: usize, yaml: &str) -> Value {
    serde_yaml_ng::from_str(yaml)
        .unwrap_or_else(|e| panic!("docs/{page} line {line}: the YAML example does not read: {e}"))
}

fn parse_value(v: &Value) -> Result<TenantDocument, crate::FieldErrors> {
    let yaml = serde_yaml_ng::to_string(v).unwrap_or_default();
    TenantDocument::parse(&yaml)
}

fn describe(e: &crate::FieldErrors) -> String {
    e.0.iter()
        .map(|f| format!("{}: {}", f.field, f.rule))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The documented example, every fragment merged into it: the first whole document (one with
/// `tenant:`) of the reference page is the base; a fragment is checked merged into it.
fn documented_examples() -> (Value, Vec<(String, usize, Value)>) {
    let mut all = Vec::new();
    for page in PAGES {
        for (line, yaml) in yaml_blocks(&read(page)) {
            all.push((page.to_owned(), line, to_value(page, line, &yaml)));
        }
    }
    let base = all
        .iter()
        .find(|(p, _, v)| p == REFERENCE && v.get("tenant").is_some())
        .map(|(_, _, v)| v.clone())
        .unwrap_or_else(|| panic!("docs/{REFERENCE} has no whole example (a block with tenant:)"));
    (base, all)
}

#[test]
fn every_yaml_example_of_the_tenant_docs_parses_with_the_real_parser() {
    let (base, all) = documented_examples();
    assert!(all.len() >= 6, "only {} YAML examples found", all.len());
    for (page, line, v) in &all {
        let doc = if v.get("tenant").is_some() {
            v.clone()
        } else {
            let mut merged = base.clone();
            merge(&mut merged, v);
            merged
        };
        if let Err(e) = parse_value(&doc) {
            panic!(
                "docs/{page} line {line}: the example is refused by the tenant-document parser \
                 (a fragment is checked merged into the first whole example of docs/{REFERENCE}): {}",
                describe(&e)
            );
        }
    }
}

/// Paths (keys and indexes) of every mapping in `v`.
fn mapping_paths(v: &Value, at: &mut Vec<Value>, out: &mut Vec<Vec<Value>>) {
    match v {
        Value::Object(m) => {
            out.push(at.clone());
            for (k, child) in m {
                at.push(Value::String(k.clone()));
                mapping_paths(child, at, out);
                at.pop();
            }
        }
        Value::Array(a) => {
            for (i, child) in a.iter().enumerate() {
                at.push(Value::from(i));
                mapping_paths(child, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

fn mapping_at<'a>(v: &'a mut Value, path: &[Value]) -> Option<&'a mut Map<String, Value>> {
    let mut cur = v;
    for step in path {
        cur = match step {
            Value::String(k) => cur.get_mut(k.as_str())?,
            Value::Number(i) => cur.get_mut(usize::try_from(i.as_u64()?).ok()?)?,
            _ => return None,
        };
    }
    cur.as_object_mut()
}

/// The names a refusal lists: after "expected one of:", "expected" or "known:", up to the
/// first character that cannot be in a name.
fn listed_names(rule: &str) -> Vec<String> {
    let list = ["expected one of: ", "expected ", "known: "]
        .iter()
        .find_map(|m| rule.find(m).map(|i| &rule[i + m.len()..]));
    let mut names = Vec::new();
    for piece in list.unwrap_or_default().split(", ") {
        let name: String = piece
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '.')
            .collect();
        if !name.is_empty() {
            names.push(name.clone());
        }
        // "subject, body (text only, never HTML)": the list ends where a piece is more than a name.
        if name.len() < piece.trim_end().len() {
            break;
        }
    }
    names
}

/// Every field name the parser accepts in the mappings of `example`, asked of the parser.
fn field_names_the_parser_knows(example: &Value) -> BTreeSet<String> {
    let mut paths = Vec::new();
    mapping_paths(example, &mut Vec::new(), &mut paths);
    let mut names: BTreeSet<String> = super::handlers::COMMON_HANDLER_KEYS
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    for path in paths {
        let mut probed = example.clone();
        let Some(m) = mapping_at(&mut probed, &path) else {
            continue;
        };
        m.insert(PROBE.to_owned(), Value::from(1));
        let Err(errs) = parse_value(&probed) else {
            continue;
        };
        for e in errs.0.iter().filter(|e| e.field.contains(PROBE)) {
            names.extend(listed_names(&e.rule));
        }
    }
    names
}

#[test]
fn every_field_the_parser_knows_is_on_the_tenant_document_page() {
    let (base, all) = documented_examples();
    let mut example = base;
    for (_, _, v) in &all {
        if v.get("tenant").is_none() {
            merge(&mut example, v);
        }
    }
    let names = field_names_the_parser_knows(&example);
    // The probe must reach every section, or "every name is documented" would prove nothing.
    for expected in [
        "tenant",
        "escalation_ttl",
        "classifier",
        "endpoint",
        "when",
        "grant_lifetime",
        "max_amount",
        "server_id",
        "url",
        "templates",
        "subject",
        "max_rows",
        "on_timeout",
        "within",
        "max_claims_age",
        "webhook",
        "decided_after",
        "sum_of",
        "subjects",
        "webhook.post",
    ] {
        assert!(
            names.contains(expected),
            "the parser probe did not find {expected:?} (found {names:?})"
        );
    }
    let page = read(REFERENCE);
    let missing: Vec<&String> = names
        .iter()
        .filter(|n| !page.contains(&format!("`{n}`")) && !page.contains(&format!("{n}:")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/{REFERENCE} does not mention these fields the tenant-document parser accepts: \
         {missing:?}. Add each to the field tables there (as `name`)."
    );
}

#[test]
fn listed_names_reads_the_parsers_refusals() {
    assert_eq!(
        listed_names("unknown field; expected one of: values, subjects"),
        ["values", "subjects"]
    );
    assert_eq!(
        listed_names("unknown setting; expected subject, body (text only, never HTML)"),
        ["subject", "body"]
    );
    assert_eq!(
        listed_names("is not in the handler registry; known: billing.refund.issue, webhook.post"),
        ["billing.refund.issue", "webhook.post"]
    );
}
