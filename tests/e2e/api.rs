//! The agent-facing API: validation errors name the field, idempotency, limits, isolation.

use crate::support::{Api, Options, Stack, refund};
use std::time::Duration;

fn no_workers() -> Options {
    Options {
        policy: false,
        executor: false,
        ..Options::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_clear_problem_and_nothing_is_stored() {
    let s = Stack::with("bad_input_problem", no_workers()).await;
    let cases: &[(&str, u16, &str)] = &[
        (
            r#"{"action":"billing.refund.issue","params":{"payment_id":"pi","amount":10,"amount":5000,"currency":"USD"}}"#,
            400,
            "params.amount",
        ),
        (
            r#"{"action":"billing.refund.issue","params":{"payment_id":"pi","amount":9007199254740993,"currency":"USD"}}"#,
            400,
            "params.amount",
        ),
        (
            r#"{"action":"billing.refund.issue","params":{"payment_id":"pi","amount":"50.00","currency":"USD"}}"#,
            400,
            "params.amount",
        ),
        (
            r#"{"action":"billing.refund.issue","params":{"payment_id":"pi","amount":500,"currency":"USD","url":"http://x"}}"#,
            400,
            "params.url",
        ),
        (
            r#"{"action":"billing.refund.issue","params":{"payment_id":"pi","amount":500,"currency":"USD"},"target":"pi_other"}"#,
            400,
            "target",
        ),
        (
            r#"{"action":"billing.refund.issue","params":{"payment_id":"pi","amount":500,"currency":"USD"},"priority":"high"}"#,
            400,
            "priority",
        ),
        (
            r#"{"action":"dns.record.update","params":{"zone":"evil.com","name":"www.evil.com","type":"A","records":["1.2.3.4"]}}"#,
            400,
            "params.zone",
        ),
        (r#"{"action":"x","params":{"s":"\uD800"}}"#, 400, "params.s"),
        (r#"{"action":"x","params":[]}"#, 400, "params"),
        (r#"{"params":{}}"#, 400, "action"),
        (r#"[1,2]"#, 400, "body"),
        (
            r#"{"action":"x","params":{},"reason":"a\u0000b"}"#,
            400,
            "reason",
        ),
        (r#"{"action":5,"params":{}}"#, 400, "action"),
        // A spelling the policy rules would not match (`params.zone == "prod.example.com"`).
        (
            r#"{"action":"dns.record.update","params":{"zone":"PROD.example.com","name":"www.prod.example.com","type":"A","records":["192.0.2.1"]}}"#,
            400,
            "params.zone",
        ),
        (
            r#"{"action":"dns.record.update","params":{"zone":"prod.example.com.","name":"www.prod.example.com","type":"A","records":["192.0.2.1"]}}"#,
            400,
            "params.zone",
        ),
        (
            r#"{"action":"dns.record.update","params":{"zone":"prod.example.com","name":"www.prod.example.com","type":"A","records":["not-an-ip"]}}"#,
            400,
            "params.records[0]",
        ),
        (r#"{"action":"x","params":{}} trailing"#, 400, "body"),
    ];
    for (body, status, field) in cases {
        let (st, v) = s.post(body, None).await;
        assert_eq!(st, *status, "{body}: {v}");
        let fields: Vec<&str> = v["errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["field"].as_str().unwrap())
            .collect();
        assert!(
            fields.contains(field),
            "{body}: expected field {field}, got {v}"
        );
        assert!(
            v["type"]
                .as_str()
                .unwrap()
                .starts_with("urn:actiond:problem:")
        );
        assert!(!v["detail"].as_str().unwrap().is_empty());
    }
    // Nesting past the limit: the path names where, but is capped (not ~1 KB of `[0]`).
    let deep = format!(
        r#"{{"action":"x","params":{{"a":{}1{}}}}}"#,
        "[".repeat(300),
        "]".repeat(300)
    );
    let (st, v) = s.post(&deep, None).await;
    assert_eq!(st, 400, "{v}");
    let field = v["errors"][0]["field"].as_str().unwrap_or_default();
    assert!(
        field.starts_with("params.a[0][0]") && field.contains("… (depth "),
        "{v}"
    );
    let detail = v["detail"].as_str().unwrap_or_default();
    assert!(detail.len() < 300, "{} bytes: {detail}", detail.len());
    let c = s.tdb.db.client().await.unwrap();
    let n: i64 = c
        .query_one("SELECT count(*) FROM proposals", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 0, "no bad proposal was stored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn body_limit_auth_and_content_type() {
    let s = Stack::with("body_limit_auth", no_workers()).await;
    let big = format!(
        r#"{{"action":"x","params":{{"pad":"{}"}}}}"#,
        "a".repeat(70 * 1024)
    );
    let (st, v) = s.post(&big, None).await;
    assert_eq!(st, 413, "{v}");
    // Judged before the body is read: a declared length over the limit gets its 413, and a
    // request without a token its 401, while the body has not come (the server's body timeout
    // is 10 s; before, both answers waited for it and the 413 came as a 400 timeout).
    let addr = s.api_url.trim_start_matches("http://").to_owned();
    let raw = |head: String| {
        let addr = addr.clone();
        async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut c = tokio::net::TcpStream::connect(&addr).await.unwrap();
            c.write_all(head.as_bytes()).await.unwrap();
            let mut buf = vec![0u8; 4096];
            let n = tokio::time::timeout(Duration::from_secs(5), c.read(&mut buf))
                .await
                .expect("answered before the body came")
                .unwrap();
            String::from_utf8_lossy(&buf[..n]).into_owned()
        }
    };
    let head = raw(format!(
        "POST /v1/proposals HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: 99999999\r\n\r\n",
        s.token
    ))
    .await;
    assert!(head.starts_with("HTTP/1.1 413"), "{head}");
    assert!(head.contains("65536"), "{head}");
    let head = raw(format!(
        "POST /v1/proposals HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{"
    ))
    .await;
    assert!(head.starts_with("HTTP/1.1 401"), "{head}");
    let (st, _) = s.post_as("actiond_forged", &refund("pi", 100), None).await;
    assert_eq!(st, 401);
    let r = s
        .http
        .post(format!("{}/v1/proposals", s.api_url))
        .body(refund("pi", 100))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert!(r.headers().get("www-authenticate").is_some());
    let r = s
        .http
        .post(format!("{}/v1/proposals", s.api_url))
        .bearer_auth(&s.token)
        .header("content-type", "text/plain")
        .body(refund("pi", 100))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 415);
    // A compressed body is refused naming the encoding (it was read as JSON and failed at
    // "line 1 column 1").
    let r = s
        .http
        .post(format!("{}/v1/proposals", s.api_url))
        .bearer_auth(&s.token)
        .header("content-type", "application/json")
        .header("content-encoding", "gzip")
        .body(vec![0x1f_u8, 0x8b, 0x08, 0x00])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 415);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(
        v["detail"],
        "Content-Encoding: \"gzip\" is not accepted: send the body uncompressed (no Content-Encoding, or identity)",
        "{v}"
    );
    // Two Idempotency-Key headers: which one was meant is unknowable, so neither is used.
    let r = s
        .http
        .post(format!("{}/v1/proposals", s.api_url))
        .bearer_auth(&s.token)
        .header("content-type", "application/json")
        .header("idempotency-key", "a")
        .header("idempotency-key", "b")
        .body(refund("pi", 100))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["errors"][0]["field"], "Idempotency-Key", "{v}");
    assert_eq!(v["errors"][0]["rule"], "must be sent once", "{v}");
    // None of the refusals above stored anything.
    let stored: i64 = s
        .tdb
        .db
        .client()
        .await
        .unwrap()
        .query_one("SELECT count(*) FROM proposals", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(stored, 0, "a refused request stored a proposal");
    // A frozen agent (an approver stopped it from the web app) is refused with 403 at once,
    // and proposes again once unfrozen.
    s.freeze_agent().await;
    let (st, v) = s.post(&refund("pi_frozen", 100), None).await;
    assert_eq!(st, 403, "{v}");
    assert_eq!(
        v["type"].as_str().map(|t| t.ends_with("agent_frozen")),
        Some(true),
        "{v}"
    );
    assert!(
        v["detail"]
            .as_str()
            .unwrap()
            .starts_with("this agent is frozen"),
        "{v}"
    );
    // The operator sees the freeze in `agent list` and lifts it with `agent unfreeze` (an
    // owner who is not an approver cannot reach the web app's button).
    let env = s.cli_env().await;
    let (ok, out, err) = actiond_testkit::cli(&["agent", "list", "--tenant", "acme"], &env);
    let support = out
        .lines()
        .find(|l| l.starts_with("support-bot "))
        .unwrap_or_default();
    assert!(ok && support.contains("  frozen  "), "{out}{err}");
    let unfreeze = [
        "agent",
        "unfreeze",
        "--tenant",
        "acme",
        "--name",
        "support-bot",
    ];
    let (ok, out, err) = actiond_testkit::cli(&unfreeze, &env);
    assert!(ok && out.contains("unfrozen"), "{out}{err}");
    assert_eq!(s.post(&refund("pi_thawed", 100), None).await.0, 202);
    let (ok, _, err) = actiond_testkit::cli(&unfreeze, &env);
    assert!(!ok && err.contains("is not frozen"), "{err}");
    let unfrozen: i64 = s
        .tdb
        .db
        .client()
        .await
        .unwrap()
        .query_one(
            "SELECT count(*) FROM audit_events WHERE kind = 'agent.unfrozen' AND actor = 'operator:cli'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(unfrozen, 1);
    // A revoked token stops working at once.
    let (ok, _, err) = actiond_testkit::cli(
        &[
            "agent",
            "revoke",
            "--tenant",
            "acme",
            "--name",
            "support-bot",
        ],
        &s.cli_env().await,
    );
    assert!(ok, "{err}");
    let (st, _) = s.post(&refund("pi", 100), None).await;
    assert_eq!(st, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_key_under_100_parallel_requests() {
    let s = Stack::with("idempotency_parallel", no_workers()).await;
    let body = refund("pi_idem", 12000);
    let futs = (0..100).map(|_| s.post(&body, Some("key-1")));
    let results = futures_util::future::join_all(futs).await;
    let mut ids = std::collections::HashSet::new();
    for (st, v) in &results {
        assert_eq!(*st, 202, "{v}");
        ids.insert(v["proposal_id"].as_str().unwrap().to_owned());
    }
    assert_eq!(ids.len(), 1, "one proposal for one key");
    // Same key, different body → 422; nothing new stored.
    let (st, v) = s.post(&refund("pi_idem", 12001), Some("key-1")).await;
    assert_eq!(st, 422, "{v}");
    // Same key, same body with different key order → the same request.
    let reordered = r#"{"params":{"currency":"USD","amount":12000,"payment_id":"pi_idem"},"reason":"test","action":"billing.refund.issue"}"#;
    let (st, v) = s.post(reordered, Some("key-1")).await;
    assert_eq!(st, 202, "{v}");
    assert!(ids.contains(v["proposal_id"].as_str().unwrap()));
    let c = s.tdb.db.client().await.unwrap();
    let n: i64 = c
        .query_one("SELECT count(*) FROM proposals", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_read_only_their_own_proposals_and_long_poll() {
    let s = Stack::with(
        "agents_read_own",
        Options {
            executor: false,
            ..Options::default()
        },
    )
    .await;
    let id = s.propose(&refund("pi_mine", 12000)).await;
    let (_, other_token) = actiond_testkit::agent(&s.tdb.db, "acme", "other-bot", None).await;
    let (st, _) = s.get(&other_token, &id.to_string(), "").await;
    assert_eq!(st, 404, "another agent of the same tenant cannot read it");
    // A second tenant's agent cannot read it either.
    let doc = crate::support::TENANT
        .replace("tenant: acme", "tenant: globex")
        .replace("RECEIVER", &s.recv.url)
        .replace("WEBHOOK_PATH", "hook");
    actiond_store::tenants::apply(&s.tdb.db, &doc, "test")
        .await
        .unwrap();
    let (_, globex_token) = actiond_testkit::agent(&s.tdb.db, "globex", "bot", None).await;
    let (st, _) = s.get(&globex_token, &id.to_string(), "").await;
    assert_eq!(st, 404);
    // A malformed id is a 400 naming the field and the rule, not "proposal not found".
    let (st, v) = s.get(&s.token, "not-a-uuid", "").await;
    assert_eq!(st, 400, "{v}");
    let detail = v["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("proposal_id") && detail.contains("UUID"),
        "{v}"
    );
    // Long-poll from pending returns as soon as policy decides.
    let started = std::time::Instant::now();
    let (st, v) = s
        .get(&s.token, &id.to_string(), "?wait=20&state=pending")
        .await;
    assert_eq!(st, 200);
    assert_eq!(v["state"], "escalated", "{v}");
    assert!(started.elapsed() < Duration::from_secs(15));
    let (st, v) = s.get(&s.token, &id.to_string(), "?wait=61").await;
    assert_eq!(st, 400, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_escalations_are_capped_per_agent() {
    let s = Stack::new("open_escalations_capped").await;
    // The test tenant keeps the default cap of 20.
    let mut last = 0;
    for i in 0..20 {
        let id = s.propose(&refund(&format!("pi_cap{i}"), 12000)).await;
        s.wait_state(id, "escalated", Duration::from_secs(20)).await;
        last = i;
    }
    assert_eq!(last, 19);
    let (st, v) = s.post(&refund("pi_cap_over", 12000), None).await;
    assert_eq!(st, 429, "{v}");
    assert!(
        v["detail"]
            .as_str()
            .unwrap()
            .contains("20 proposals waiting")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_document_is_served() {
    let s = Stack::with("openapi_served", no_workers()).await;
    for (path, auth) in [("/openapi.yaml", false), ("/v1/openapi.yaml", true)] {
        let mut req = s.http.get(format!("{}{path}", s.api_url));
        if auth {
            req = req.bearer_auth(&s.token);
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status().as_u16(), 200, "{path}");
        // The whole text parses as YAML (a generator or fuzzer reads all of it).
        let text = r.text().await.unwrap();
        let doc: serde_json::Value = serde_yaml_ng::from_str(&text)
            .unwrap_or_else(|e| panic!("{path} is not valid YAML: {e}"));
        assert_eq!(doc["openapi"], "3.1.0", "{path}");
        assert!(doc["paths"]["/v1/proposals/{id}"].is_object(), "{path}");
        assert_eq!(
            doc["servers"][0]["url"], "/",
            "{path}: no host is hard-coded"
        );
    }
}

/// One request over real HTTP to the api process and what must come back.
struct Case {
    name: &'static str,
    method: &'static str,
    path: &'static str,
    headers: &'static [(&'static str, &'static str)],
    body: &'static str,
    status: u16,
    /// `application/problem+json` or `application/json`.
    content_type: &'static str,
    /// JSON pointer into the body and the value it must hold.
    check: (&'static str, serde_json::Value),
}

const JSON: (&str, &str) = ("content-type", "application/json");
const RPC_ACCEPT: (&str, &str) = ("accept", "application/json, text/event-stream");
const PROBLEM: &str = "application/problem+json";
const RPC: &str = "application/json";
const PING: &str = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;

fn problem_cases() -> Vec<Case> {
    use serde_json::json;
    let c = |name, method, path, headers, body, status, content_type, check| Case {
        name,
        method,
        path,
        headers,
        body,
        status,
        content_type,
        check,
    };
    vec![
        c(
            "405 on REST",
            "PUT",
            "/v1/proposals",
            &[],
            "",
            405,
            PROBLEM,
            ("/type", json!("urn:actiond:problem:method_not_allowed")),
        ),
        c(
            "404 route",
            "GET",
            "/nope",
            &[],
            "",
            404,
            PROBLEM,
            ("/status", json!(404)),
        ),
        c(
            "duplicate ?wait",
            "GET",
            "/v1/proposals/01a23135-e7df-7346-b8d7-3696e78a5ed5?wait=1&wait=2",
            &[],
            "",
            400,
            PROBLEM,
            ("/errors/0/field", json!("wait")),
        ),
        c(
            "unknown ?state",
            "GET",
            "/v1/proposals/01a23135-e7df-7346-b8d7-3696e78a5ed5?state=bogus",
            &[],
            "",
            400,
            PROBLEM,
            ("/errors/0/field", json!("state")),
        ),
        // A misspelt parameter (`?wiat=30`) was ignored: the call answered at once, as if no
        // wait had been asked for.
        c(
            "unknown query parameter",
            "GET",
            "/v1/proposals/01a23135-e7df-7346-b8d7-3696e78a5ed5?wiat=30",
            &[],
            "",
            400,
            PROBLEM,
            ("/errors/0/field", json!("wiat")),
        ),
        c(
            "unknown query parameter on the tenant's document",
            "GET",
            "/v1/openapi.yaml?format=json",
            &[],
            "",
            400,
            PROBLEM,
            ("/errors/0/field", json!("format")),
        ),
        c(
            "syntax error inside params",
            "POST",
            "/v1/proposals",
            &[JSON],
            r#"{"action":"billing.refund.issue","params":{"payment_id":"pi","amount":12,}}"#,
            400,
            PROBLEM,
            ("/errors/0/field", json!("params")),
        ),
        c(
            "syntax error in a nested string",
            "POST",
            "/v1/proposals",
            &[JSON],
            r#"{"action":"x","params":{"a":"b"#,
            400,
            PROBLEM,
            ("/errors/0/field", json!("params.a")),
        ),
        c(
            "not JSON at all",
            "POST",
            "/v1/proposals",
            &[JSON],
            "garbage",
            400,
            PROBLEM,
            ("/errors/0/field", json!("body")),
        ),
        c(
            "405 on /mcp",
            "GET",
            "/mcp",
            &[RPC_ACCEPT],
            "",
            405,
            PROBLEM,
            ("/type", json!("urn:actiond:problem:method_not_allowed")),
        ),
        c(
            "415 on /mcp",
            "POST",
            "/mcp",
            &[("content-type", "text/plain"), RPC_ACCEPT],
            PING,
            415,
            PROBLEM,
            ("/type", json!("urn:actiond:problem:unsupported_media_type")),
        ),
        c(
            "406 on /mcp",
            "POST",
            "/mcp",
            &[JSON, ("accept", "text/html")],
            PING,
            406,
            PROBLEM,
            ("/type", json!("urn:actiond:problem:not_acceptable")),
        ),
        c(
            "403 foreign Host on /mcp",
            "POST",
            "/mcp",
            &[JSON, RPC_ACCEPT, ("host", "attacker.example")],
            PING,
            403,
            PROBLEM,
            ("/status", json!(403)),
        ),
        c(
            // rmcp compares only what precedes the last colon: this passed as 127.0.0.1.
            "400 a Host whose port is not a number on /mcp",
            "POST",
            "/mcp",
            &[JSON, RPC_ACCEPT, ("host", "127.0.0.1:8080.evil.com")],
            PING,
            400,
            PROBLEM,
            ("/errors/0/field", json!("Host")),
        ),
        c(
            "Accept */* on /mcp",
            "POST",
            "/mcp",
            &[JSON, ("accept", "*/*")],
            PING,
            200,
            RPC,
            ("/id", json!(1)),
        ),
        c(
            "no Accept, no Content-Type on /mcp",
            "POST",
            "/mcp",
            &[],
            PING,
            200,
            RPC,
            ("/result", json!({})),
        ),
        c(
            "Content-Type in capitals on /mcp",
            "POST",
            "/mcp",
            &[("content-type", "Application/JSON; charset=utf-8")],
            PING,
            200,
            RPC,
            ("/id", json!(1)),
        ),
        c(
            "parse error on /mcp",
            "POST",
            "/mcp",
            &[JSON],
            "{bad",
            400,
            RPC,
            ("/error/code", json!(-32700)),
        ),
        c(
            "id null on /mcp",
            "POST",
            "/mcp",
            &[JSON],
            r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            400,
            RPC,
            ("/error/code", json!(-32600)),
        ),
        c(
            "jsonrpc 1.0 on /mcp",
            "POST",
            "/mcp",
            &[JSON],
            r#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#,
            400,
            RPC,
            ("/id", json!(3)),
        ),
        c(
            "batch under 2025-03-26 with a malformed member: refused whole",
            "POST",
            "/mcp",
            &[JSON, ("mcp-protocol-version", "2025-03-26")],
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2}]"#,
            400,
            RPC,
            ("/0/error/data/index", json!(1)),
        ),
        c(
            "batch without a version header (2025-03-26)",
            "POST",
            "/mcp",
            &[JSON],
            r#"[{"jsonrpc":"2.0","id":7,"method":"ping"}]"#,
            200,
            RPC,
            ("/0/id", json!(7)),
        ),
        c(
            "batch under 2025-06-18",
            "POST",
            "/mcp",
            &[JSON, ("mcp-protocol-version", "2025-06-18")],
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
            400,
            RPC,
            ("/error/code", json!(-32600)),
        ),
        c(
            "tools/call whose arguments are not an object on /mcp",
            "POST",
            "/mcp",
            &[JSON],
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"propose_action","arguments":"x"}}"#,
            200,
            RPC,
            ("/error/data/errors/0/field", json!("params.arguments")),
        ),
        c(
            "tools/call without a tool name on /mcp",
            "POST",
            "/mcp",
            &[JSON],
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":5}}"#,
            200,
            RPC,
            ("/error/code", json!(-32602)),
        ),
        c(
            "initialize without clientInfo on /mcp",
            "POST",
            "/mcp",
            &[JSON],
            r#"{"jsonrpc":"2.0","id":6,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}}"#,
            200,
            RPC,
            ("/error/data/errors/0/field", json!("params.clientInfo")),
        ),
        c(
            "initialize with a capability that is not an object on /mcp",
            "POST",
            "/mcp",
            &[JSON],
            r#"{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"roots":5},"clientInfo":{"name":"x","version":"1"}}}"#,
            200,
            RPC,
            (
                "/error/data/errors/0/field",
                json!("params.capabilities.roots"),
            ),
        ),
        c(
            "a batch member with unreadable params is answered in place",
            "POST",
            "/mcp",
            &[JSON],
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"check_proposal","arguments":[]}}]"#,
            200,
            RPC,
            ("/1/error/code", json!(-32602)),
        ),
        c(
            "a second Authorization header",
            "GET",
            "/v1/proposals/01a23135-e7df-7346-b8d7-3696e78a5ed5",
            &[("authorization", "Bearer actiond_someone_else")],
            "",
            401,
            PROBLEM,
            (
                "/detail",
                json!("Authorization: send exactly one Authorization header, not several"),
            ),
        ),
        c(
            "batch of notifications",
            "POST",
            "/mcp",
            &[JSON],
            r#"[{"jsonrpc":"2.0","method":"notifications/initialized"}]"#,
            202,
            "",
            ("", json!(null)),
        ),
    ]
}

/// Every refusal the api makes is a problem document (RFC 9457) or, on `/mcp`, the JSON-RPC
/// error the spec names; table-driven over real HTTP against the api process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_problems_or_json_rpc_errors() {
    let s = Stack::with("refusals_problems", no_workers()).await;
    for case in problem_cases() {
        let method = reqwest::Method::from_bytes(case.method.as_bytes()).unwrap();
        let mut req = s
            .http
            .request(method, format!("{}{}", s.api_url, case.path))
            .bearer_auth(&s.token);
        for (k, v) in case.headers {
            req = req.header(*k, *v);
        }
        if !case.body.is_empty() {
            req = req.body(case.body);
        }
        let r = req.send().await.unwrap();
        let name = case.name;
        assert_eq!(r.status().as_u16(), case.status, "{name}");
        if case.status == 405 {
            assert!(r.headers().contains_key("allow"), "{name}: Allow");
        }
        let ct = r
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        let text = r.text().await.unwrap();
        assert_eq!(ct, case.content_type, "{name}: {text}");
        if case.content_type.is_empty() {
            assert!(text.is_empty(), "{name}: {text}");
            continue;
        }
        let body: serde_json::Value = serde_json::from_str(&text).unwrap();
        let (pointer, want) = &case.check;
        assert_eq!(body.pointer(pointer), Some(want), "{name}: {body}");
    }
}

/// A 503 (the database refuses connections) carries the request's own `X-Request-Id` in its
/// body, as every other problem does, so the id a client quotes finds the request's log lines.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_503_quotes_the_request_id_the_client_sent() {
    let s = Stack::with("unavailable_request_id", no_workers()).await;
    // Connected to the server's own database: a database cannot refuse its own session.
    let admin = actiond_store::tls::connect(&actiond_testkit::server_url())
        .await
        .unwrap();
    let name = &s.tdb.name;
    admin
        .batch_execute(&format!(
            "ALTER DATABASE {name} ALLOW_CONNECTIONS false; \
             SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = '{name}' AND pid <> pg_backend_pid()"
        ))
        .await
        .unwrap();
    let url = format!("{}/v1/proposals/{}", s.api_url, uuid::Uuid::new_v4());
    let (h, token) = (s.http.clone(), s.token.clone());
    let (header, body) = actiond_testkit::eventually(Duration::from_secs(20), "a 503", || {
        let (h, url, token) = (h.clone(), url.clone(), token.clone());
        async move {
            let r = h
                .get(&url)
                .bearer_auth(&token)
                .header("x-request-id", "trace-503")
                .send()
                .await
                .ok()?;
            if r.status().as_u16() != 503 {
                return None;
            }
            let header = r.headers().get("x-request-id")?.to_str().ok()?.to_owned();
            Some((header, r.json::<serde_json::Value>().await.ok()?))
        }
    })
    .await;
    admin
        .batch_execute(&format!("ALTER DATABASE {name} ALLOW_CONNECTIONS true"))
        .await
        .unwrap();
    assert_eq!(header, "trace-503");
    assert_eq!(body["request_id"], "trace-503", "{body}");
    assert_eq!(body["type"], "urn:actiond:problem:unavailable", "{body}");
}

/// One api process with an agent cache of `cache_ms` ms.
async fn start_api(s: &Stack, name: &str, cache_ms: u64) -> Api {
    s.spawn_api(
        name,
        &[("ACTIOND_API_AGENT_CACHE_MS", cache_ms.to_string())],
    )
    .await
}

/// Status of a submission (202 while the agent is live and not frozen).
async fn submit_to(s: &Stack, api: &Api, payment: &str) -> u16 {
    s.http
        .post(format!("{}/v1/proposals", api.url))
        .bearer_auth(&s.token)
        .header("content-type", "application/json")
        .body(refund(payment, 100))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// Status of a status read (a proposal that does not exist: 404 once the token is accepted,
/// 401 when it is not).
async fn read_from(s: &Stack, api: &Api) -> u16 {
    s.http
        .get(format!("{}/v1/proposals/{}", api.url, uuid::Uuid::new_v4()))
        .bearer_auth(&s.token)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// `actiond_api_agent_lookups_total{source}` of one api process.
async fn lookups(s: &Stack, api: &Api, source: &str) -> u64 {
    let text = s
        .http
        .get(&api.metrics)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let prefix = format!("actiond_api_agent_lookups_total{{source=\"{source}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {prefix} in {text}"))
}

/// Submissions use the api's agent cache (a long lifetime here, 10 minutes), yet a freeze, an
/// unfreeze and a revocation made by another process take effect on the very next request in
/// both of two api processes: each empties its cache when the database notifies the change,
/// and a submission's insert re-checks the agent in its own statement, so a change whose
/// notification is still on its way wins as well.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_cache_forgets_a_revoked_or_frozen_agent_at_once_in_every_api() {
    let s = Stack::with(
        "agent_cache_revocation",
        Options {
            api: false,
            ..no_workers()
        },
    )
    .await;
    let apis = [
        start_api(&s, "api-a", 600_000).await,
        start_api(&s, "api-b", 600_000).await,
    ];
    let mut n = 0;
    let mut payment = || {
        n += 1;
        format!("pi_cache_{n}")
    };
    // Each process answers from its cache once its LISTEN is up (a lookup before that reads
    // the database and stores nothing).
    for api in &apis {
        for _ in 0..200 {
            assert_eq!(submit_to(&s, api, &payment()).await, 202);
            if lookups(&s, api, "cache").await > 0 {
                break;
            }
            actiond_testkit::poll_pause(Duration::from_millis(50)).await;
        }
        assert!(
            lookups(&s, api, "cache").await > 0,
            "the cache never answered"
        );
    }
    let c = s.tdb.db.client().await.unwrap();
    for round in 0..5 {
        for api in &apis {
            let before = lookups(&s, api, "cache").await;
            assert_eq!(submit_to(&s, api, &payment()).await, 202);
            assert_eq!(submit_to(&s, api, &payment()).await, 202);
            assert!(
                lookups(&s, api, "cache").await > before,
                "round {round}: cache unused"
            );
        }
        s.freeze_agent().await;
        for api in &apis {
            let st = submit_to(&s, api, &payment()).await;
            assert_eq!(
                st, 403,
                "round {round}: a frozen agent's proposal was accepted"
            );
        }
        let thaw =
            "UPDATE agents SET frozen_at = NULL, frozen_by = NULL WHERE name = 'support-bot'";
        c.execute(thaw, &[]).await.unwrap();
        for api in &apis {
            let st = submit_to(&s, api, &payment()).await;
            assert_eq!(st, 202, "round {round}: an unfrozen agent was refused");
        }
    }
    for api in &apis {
        assert_eq!(submit_to(&s, api, &payment()).await, 202);
    }
    let (ok, _, err) = actiond_testkit::cli(
        &[
            "agent",
            "revoke",
            "--tenant",
            "acme",
            "--name",
            "support-bot",
        ],
        &s.cli_env().await,
    );
    assert!(ok, "{err}");
    for api in &apis {
        let st = submit_to(&s, api, &payment()).await;
        assert_eq!(st, 401, "a revoked agent's proposal was accepted");
        assert_eq!(read_from(&s, api).await, 401, "a revoked token could read");
    }
    let stored: i64 = c
        .query_one(
            "SELECT count(*) FROM proposals WHERE params_json LIKE '%pi_cache_%'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        stored,
        i64::from(n) - 12,
        "only the accepted submissions were stored"
    );
}

/// The api validates a submission against the tenant document it saw last, without reading the
/// latest version first; the insert checks in its own statement that it is still the latest.
/// So a document applied between two submissions governs the second one at once: a lower
/// `max_amount` refuses it (400 naming the param, nothing stored), a raised one accepts what
/// the old one refused, and a removed handler stores the action as one without a handler.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_document_applied_between_two_submissions_governs_the_second_at_once() {
    let s = Stack::with("doc_applied_between", no_workers()).await;
    let doc = |max: &str| {
        crate::support::TENANT
            .replace("RECEIVER", &s.recv.url)
            .replace("WEBHOOK_PATH", "hook")
            .replace("max_amount: 100000", max)
    };
    let stored = || async {
        let c = s.tdb.superuser().await;
        c.query_one("SELECT count(*) FROM proposals", &[])
            .await
            .unwrap()
            .get::<_, i64>(0)
    };
    // The api has now seen version 1 (max_amount 100000).
    s.propose(&refund("pi_v1", 90000)).await;
    assert_eq!(stored().await, 1);
    actiond_store::tenants::apply(&s.tdb.db, &doc("max_amount: 1000"), "test")
        .await
        .unwrap();
    let (st, v) = s.post(&refund("pi_v2", 90000), None).await;
    assert_eq!(st, 400, "validated against version 2 at once: {v}");
    assert!(v.to_string().contains("params.amount"), "{v}");
    assert_eq!(stored().await, 1, "nothing stored");
    let id = s.propose(&refund("pi_v2_small", 900)).await;
    // Raised again: what version 2 refused is accepted, and no earlier copy answers.
    actiond_store::tenants::apply(&s.tdb.db, &doc("max_amount: 200000"), "test")
        .await
        .unwrap();
    s.propose(&refund("pi_v3", 150000)).await;
    // The refund handler removed: the action is stored as one without a handler (policy
    // blocks it), not validated against the removed handler's settings.
    let without = doc("max_amount: 1").replace(
        "  billing.refund.issue:\n    credential: payments\n    max_amount: 1\n",
        "",
    );
    assert!(!without.contains("billing.refund.issue:"), "{without}");
    actiond_store::tenants::apply(&s.tdb.db, &without, "test")
        .await
        .unwrap();
    s.propose(&refund("pi_v4", 150000)).await;
    assert_eq!(stored().await, 4);
    let c = s.tdb.superuser().await;
    let targets: Vec<String> = c
        .query("SELECT target FROM proposals ORDER BY created_at", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(targets, ["pi_v1", "pi_v2_small", "pi_v3", ""], "{id}");
}
