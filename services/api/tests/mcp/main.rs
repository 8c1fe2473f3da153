//! `/mcp` and `actiond mcp-stdio` driven by MCP clients nobody here wrote: the official
//! TypeScript SDK over Streamable HTTP and the official Python SDK through the stdio bridge;
//! plus the attacks that must write nothing, and REST/MCP parity. Each test has its own database.
//!
//! Needs: Postgres at 127.0.0.1:5432 (or `ACTIOND_TEST_DATABASE_URL`),
//! `npm ci --prefix services/api/e2e`,
//! `python3 -m venv services/api/e2e/.venv && services/api/e2e/.venv/bin/pip install -r services/api/e2e/requirements.txt`,
//! and `cargo build -p actiond` (for `actiond mcp-stdio`).

#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test harness: a failed step stops the test loudly"
)]

mod jwt;
mod support;
mod tasks;

use actiond_api::mcp::McpConfig;
use actiond_api::mcp::stdio::Bridge;
use serde_json::{Value, json};
use std::time::Duration;
use support::*;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_sdk_over_streamable_http() {
    require_node_client();
    let env = Env::start().await;
    let artifacts = e2e_dir().join("artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let transcript = artifacts.join("ts-client-transcript.json");
    let mut cmd = Command::new("node");
    cmd.arg("ts_client.mjs")
        .current_dir(e2e_dir())
        .env("ACTIOND_MCP_URL", format!("{}/mcp", env.base))
        .env("ACTIOND_TOKEN", &env.token)
        .env("ACTIOND_TRANSCRIPT", &transcript);
    let mut script = Script::spawn(cmd);
    let id = drive_refund_flow(&env, &mut script).await;
    let events = script.wait_success().await;

    let tools = events.iter().find(|e| e["event"] == "tools").unwrap();
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["propose_action", "check_proposal"]);
    std::fs::write(
        artifacts.join("tools.json"),
        serde_json::to_string_pretty(&tools["tools"]).unwrap(),
    )
    .unwrap();
    let connected = events.iter().find(|e| e["event"] == "connected").unwrap();
    assert_eq!(
        connected["capabilities"],
        json!({"tools": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}}),
        "tools and the Tasks extension only: no resources, prompts or list_changed"
    );
    let invalid = events.iter().find(|e| e["event"] == "invalid").unwrap();
    assert_eq!(invalid["result"]["status"], 400);
    let unknown = events
        .iter()
        .find(|e| e["event"] == "unknown_tool")
        .unwrap();
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap()
            .contains("exactly two tools")
    );
    let replayed = events.iter().find(|e| e["event"] == "replayed").unwrap();
    assert_eq!(replayed["result"]["proposal_id"], id.to_string());

    // One row: the invalid proposal, the replay and the unknown tool wrote nothing.
    assert_eq!(env.proposal_count().await, 1);
    let row = env
        .sql
        .query_one("SELECT action, target, params_json, idempotency_key, session_id FROM proposals WHERE id = $1", &[&id])
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "billing.refund.issue");
    assert_eq!(row.get::<_, String>(1), "pi_ts_1042");
    assert_eq!(
        row.get::<_, String>(2),
        r#"{"amount":12000,"currency":"USD","payment_id":"pi_ts_1042","reason":"requested_by_customer"}"#
    );
    assert_eq!(
        row.get::<_, Option<String>>(3).as_deref(),
        Some("ts-e2e-refund-1042")
    );
    assert_eq!(
        row.get::<_, Option<String>>(4).as_deref(),
        Some("ts-e2e-session")
    );

    // The transcript has every exchange, with the token redacted; the server never handed out a
    // session id (stateless).
    let text = std::fs::read_to_string(&transcript).unwrap();
    assert!(
        !text.contains(&env.token),
        "the transcript must not contain the token"
    );
    let exchanges: Vec<Value> = serde_json::from_str(&text).unwrap();
    assert!(
        exchanges
            .iter()
            .all(|x| x["response"]["session_id"].is_null())
    );
    assert!(
        exchanges
            .iter()
            .any(|x| x["request"]["body"]["method"] == "tools/call")
    );
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_through_actiond_mcp_stdio() {
    let python = require_python_client().await;
    let actiond = require_actiond_binary().await;
    let env = Env::start().await;
    let (mut script, dir) = env.python_on_stdio(&python, &actiond, "py_client.py");
    let id = drive_refund_flow(&env, &mut script).await;
    let events = script.wait_success().await;
    let connected = events.iter().find(|e| e["event"] == "connected").unwrap();
    // mcp 2.3.0 probes server/discover and speaks the stateless 2026-07-28 revision, so the
    // bridge's per-request headers (MCP-Protocol-Version, Mcp-Method, Mcp-Name) are exercised.
    assert_eq!(connected["protocol_version"], "2026-07-28");
    let unknown = events
        .iter()
        .find(|e| e["event"] == "unknown_tool")
        .unwrap();
    assert_eq!(unknown["error"]["code"], -32602);
    assert_eq!(env.proposal_count().await, 1);
    let target: String = env
        .sql
        .query_one("SELECT target FROM proposals WHERE id = $1", &[&id])
        .await
        .unwrap()
        .get(0);
    assert_eq!(target, "pi_py_2077");
    std::fs::remove_dir_all(&dir).unwrap();
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_tools_bad_tokens_and_foreign_hosts_write_nothing() {
    let env = Env::start().await;
    let ok = RawCall {
        base: &env.base,
        token: Some(&env.token),
        host: None,
        origin: None,
    };
    assert_eq!(env.proposal_count().await, 0);
    // The first scrape already shows every counter at zero for its bounded label values.
    let first = env.metrics.render();
    for series in [
        r#"actiond_api_mcp_tool_calls_total{tool="unknown"} 0"#,
        r#"actiond_api_mcp_tool_calls_total{tool="propose_action"} 0"#,
        r#"actiond_api_submissions_total{result="created"} 0"#,
        r#"actiond_api_auth_failures_total{reason="jwt_signature"} 0"#,
    ] {
        assert!(first.contains(series), "{series} missing from:\n{first}");
    }

    // Any other tool name: a JSON-RPC error at call time, whatever the arguments.
    for (i, name) in [
        "shell_exec",
        "dns_update",
        "",
        "propose_action ",
        "PROPOSE_ACTION",
    ]
    .into_iter()
    .enumerate()
    {
        let (status, _, body) = ok
            .post(&tools_call(i as u64 + 1, name, refund_args("pi_attack")))
            .await;
        assert_eq!(status, 200, "{name:?}: {body}");
        assert_eq!(body["error"]["code"], -32602, "{name:?}: {body}");
        assert!(body.get("result").is_none());
    }
    // Counted under one bounded label; the agent-chosen names never become label values.
    let scrape = env.metrics.render();
    assert!(
        scrape.contains(r#"actiond_api_mcp_tool_calls_total{tool="unknown"} 5"#),
        "{scrape}"
    );
    assert!(!scrape.contains("shell_exec"), "{scrape}");
    // Nor are there resources or prompts to read.
    for (i, method) in [
        "resources/list",
        "prompts/list",
        "resources/read",
        "prompts/get",
    ]
    .into_iter()
    .enumerate()
    {
        let req = json!({"jsonrpc": "2.0", "id": 100 + i, "method": method, "params": {"uri": "file:///etc/passwd", "name": "x"}});
        let (_, _, body) = ok.post(&req.to_string()).await;
        assert!(body["error"]["code"].is_i64(), "{method}: {body}");
    }

    // No token, a wrong token, a non-bearer scheme: 401 before anything else.
    let valid_call = tools_call(7, "propose_action", refund_args("pi_attack"));
    let wrong = new_token();
    for token in [None, Some(wrong.as_str()), Some("")] {
        let (status, headers, body) = RawCall { token, ..ok }.post(&valid_call).await;
        assert_eq!(status, 401, "{body}");
        // RFC 9728 §5.1: the 401 points MCP clients at the protected-resource metadata.
        assert_eq!(
            headers["www-authenticate"],
            format!(
                "Bearer realm=\"actiond\", resource_metadata=\"{}/.well-known/oauth-protected-resource\"",
                env.base
            )
        );
        assert_eq!(body["type"], "urn:actiond:problem:unauthorized");
    }
    let basic = reqwest::Client::new()
        .post(format!("{}/mcp", env.base))
        .header("authorization", format!("Basic {}", env.token))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(valid_call.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(basic.status().as_u16(), 401);

    // DNS rebinding: a foreign Host (or Origin) is refused even with a valid token.
    for (host, origin) in [
        (Some("attacker.example"), None),
        (Some("attacker.example:80"), None),
        (None, Some("http://attacker.example")),
        (None, Some("null")),
    ] {
        let (status, _, body) = RawCall { host, origin, ..ok }.post(&valid_call).await;
        assert_eq!(status, 403, "{host:?} {origin:?}: {body}");
    }
    // Duplicate keys are refused as on REST.
    let dup = r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"propose_action","arguments":{"action":"billing.refund.issue","params":{"payment_id":"pi_attack","amount":100,"amount":12000,"currency":"USD"}}}}"#;
    let (status, _, body) = ok.post(dup).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], -32700, "{body}");
    assert!(
        body["error"]["data"]["errors"][0]["field"]
            .as_str()
            .unwrap()
            .ends_with("params.amount"),
        "{body}"
    );
    // No sessions, no standalone stream.
    let get = reqwest::Client::new()
        .get(format!("{}/mcp", env.base))
        .header("authorization", format!("Bearer {}", env.token))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(get.status().as_u16(), 405);

    assert_eq!(
        env.proposal_count().await,
        0,
        "nothing above may write a proposal"
    );
    assert_eq!(env.proposal_event_count().await, 0);

    // The control: the same call, properly sent, writes exactly one row.
    let (status, _, body) = ok.post(&valid_call).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["isError"], false, "{body}");
    assert_eq!(body["result"]["structuredContent"]["state"], "pending");
    assert_eq!(env.proposal_count().await, 1);
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_and_mcp_share_one_submission_path() {
    let env = Env::start().await;
    let mcp_token = env.another_agent("mcp-bot").await;
    let body = json!({
        "action": "billing.refund.issue",
        "params": {"currency": "EUR", "payment_id": "pi_same", "amount": 2500, "order_id": "o-77"},
        "reason": "duplicate charge",
        "source_text": "Ticket: charged twice",
        "session": "s-1",
    });
    let rest = reqwest::Client::new()
        .post(format!("{}/v1/proposals", env.base))
        .header("authorization", format!("Bearer {}", env.token))
        .header("content-type", "application/json")
        .header("idempotency-key", "same-key")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(rest.status().as_u16(), 202);
    let rest: Value = rest.json().await.unwrap();
    let mut args = body.clone();
    args["idempotency_key"] = json!("same-key");
    let mcp = RawCall {
        base: &env.base,
        token: Some(&mcp_token),
        host: None,
        origin: None,
    };
    let (status, _, answer) = mcp.post(&tools_call(1, "propose_action", args)).await;
    assert_eq!(status, 200);
    let sc = &answer["result"]["structuredContent"];
    assert_eq!(sc["state"], rest["state"]);

    let cols = "action, target, params_json, params_sha256, request_sha256, agent_reason, source_text, session_id, idempotency_key, state";
    let row = |id: &str| {
        let sql = env.sql.clone();
        let q = format!("SELECT {cols} FROM proposals WHERE id = $1");
        let id = uuid::Uuid::parse_str(id).unwrap();
        async move {
            let r = sql.query_one(&q, &[&id]).await.unwrap();
            (0..r.len())
                .map(|i| r.get::<_, Option<String>>(i))
                .collect::<Vec<_>>()
        }
    };
    let rest_id = rest["proposal_id"].as_str().unwrap();
    let mcp_id = sc["proposal_id"].as_str().unwrap();
    assert_eq!(
        row(rest_id).await,
        row(mcp_id).await,
        "the same input stores the same row"
    );
    let events = |id: &str| {
        let sql = env.sql.clone();
        let id = uuid::Uuid::parse_str(id).unwrap();
        async move {
            sql.query(
                "SELECT kind, split_part(actor, ':', 1), from_state, to_state, params_sha256, detail::text FROM audit_events
                 WHERE proposal_id = $1 ORDER BY id",
                &[&id],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| (0..r.len()).map(|i| r.get::<_, Option<String>>(i)).collect::<Vec<_>>())
            .collect::<Vec<_>>()
        }
    };
    let rest_events = events(rest_id).await;
    assert_eq!(rest_events.len(), 1);
    assert_eq!(rest_events, events(mcp_id).await, "the same audit events");

    // The same invalid input gives the same field errors (MCP as a tool error the model reads).
    let bad = json!({"action": "billing.refund.issue", "params": {"payment_id": "pi_same", "amount": 200000, "currency": "usd", "extra": 1}});
    let rest_bad: Value = reqwest::Client::new()
        .post(format!("{}/v1/proposals", env.base))
        .header("authorization", format!("Bearer {}", env.token))
        .header("content-type", "application/json")
        .body(bad.to_string())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let (_, _, mcp_bad) = mcp.post(&tools_call(2, "propose_action", bad)).await;
    assert_eq!(mcp_bad["result"]["isError"], true);
    assert_eq!(
        mcp_bad["result"]["structuredContent"]["errors"],
        rest_bad["errors"]
    );
    assert_eq!(
        mcp_bad["result"]["structuredContent"]["detail"],
        rest_bad["detail"]
    );
    assert!(
        mcp_bad["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("params.amount")
    );
    // A malformed id names the field and the rule (a UUID), as GET /v1/proposals/{id} does.
    let (_, _, not_uuid) = mcp
        .post(&tools_call(
            3,
            "check_proposal",
            json!({"proposal_id": "not-a-uuid"}),
        ))
        .await;
    assert_eq!(not_uuid["result"]["isError"], true, "{not_uuid}");
    let err = &not_uuid["result"]["structuredContent"]["errors"][0];
    assert_eq!(err["field"], "proposal_id", "{not_uuid}");
    assert!(
        err["rule"]
            .as_str()
            .unwrap_or_default()
            .starts_with("must be a UUID"),
        "{not_uuid}"
    );
    assert_eq!(env.proposal_count().await, 2);
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_bridge_forwards_and_answers_refusals() {
    let env = Env::start().await;
    let run = |token: String| {
        let base = env.base.clone();
        async move {
            let (client, server) = tokio::io::duplex(64 * 1024);
            let (out_read, out_write) = tokio::io::duplex(64 * 1024);
            let bridge = Bridge::new(&base, &token).unwrap();
            let task = tokio::spawn(bridge.serve(server, out_write));
            (client, BufReader::new(out_read).lines(), task)
        }
    };

    // A handshake-era session through the bridge.
    let (mut input, mut output, task) = run(env.token.clone()).await;
    let send = |v: Value| format!("{v}\n");
    input
        .write_all(
            send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bridge-test", "version": "0"}}}))
            .as_bytes(),
        )
        .await
        .unwrap();
    let init: Value = serde_json::from_str(&output.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(
        init["result"]["capabilities"],
        json!({"tools": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}})
    );
    input
        .write_all(
            send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).as_bytes(),
        )
        .await
        .unwrap();
    input
        .write_all(send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})).as_bytes())
        .await
        .unwrap();
    let list: Value = serde_json::from_str(&output.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(list["id"], 2);
    assert_eq!(list["result"]["tools"].as_array().unwrap().len(), 2);
    // The bridge passes the tenant's own list through: acme enables refunds only.
    let propose = &list["result"]["tools"][0];
    assert_eq!(
        propose["inputSchema"]["properties"]["action"]["enum"],
        json!(["billing.refund.issue"])
    );
    assert!(
        !propose["description"]
            .as_str()
            .unwrap()
            .contains("dns.record.update")
    );
    input
        .write_all(tools_call(3, "shell_exec", json!({"command": "id"})).as_bytes())
        .await
        .unwrap();
    input.write_all(b"\n").await.unwrap();
    let refused: Value = serde_json::from_str(&output.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(refused["id"], 3);
    assert_eq!(refused["error"]["code"], -32602);
    // A line that is not JSON has no id to answer: rmcp's stdio transport ignores it (as the
    // other official SDKs do) and the session goes on.
    input.write_all(b"{not json\n").await.unwrap();
    input
        .write_all(send(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"})).as_bytes())
        .await
        .unwrap();
    let after: Value = serde_json::from_str(&output.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(after["id"], 4, "{after}");
    assert!(after["result"]["tools"].is_array(), "{after}");
    drop(input);
    task.await.unwrap().unwrap();
    assert!(output.next_line().await.unwrap().is_none());

    // A wrong token: the request is answered with an error naming HTTP 401, not left hanging;
    // a refused first message ends rmcp's HTTP session, so the bridge then exits with an error
    // naming HTTP 401 (the process exits non-zero with that line).
    let (mut input, mut output, task) = run(new_token()).await;
    input
        .write_all(tools_call(1, "propose_action", refund_args("pi_bridge")).as_bytes())
        .await
        .unwrap();
    input.write_all(b"\n").await.unwrap();
    let denied: Value = serde_json::from_str(&output.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(denied["id"], 1);
    assert_eq!(denied["error"]["data"]["http_status"], 401, "{denied}");
    let ended = task.await.unwrap().unwrap_err().to_string();
    assert!(ended.contains("HTTP 401"), "{ended}");
    assert!(output.next_line().await.unwrap().is_none());
    drop(input);
    assert_eq!(env.proposal_count().await, 0);
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn public_origins_replace_loopback() {
    let env = Env::start().await;
    let config = McpConfig::from_public_origins(&["https://actiond.example.com"]).unwrap();
    let app = actiond_api::router_with_mcp(
        actiond_api::AppState::new(env.db.clone(), &actiond_runtime::Metrics::new("api")),
        &config,
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let call = RawCall {
        base: &base,
        token: Some(&env.token),
        host: Some("actiond.example.com"),
        origin: None,
    };
    assert_eq!(call.post(&list).await.0, 200);
    let with_origin = RawCall {
        origin: Some("https://actiond.example.com"),
        ..call
    };
    assert_eq!(with_origin.post(&list).await.0, 200);
    assert_eq!(
        RawCall {
            origin: Some("http://actiond.example.com"),
            ..call
        }
        .post(&list)
        .await
        .0,
        403
    );
    assert_eq!(
        RawCall { host: None, ..call }.post(&list).await.0,
        403,
        "loopback is no longer listed"
    );
    assert_eq!(
        RawCall {
            host: Some("attacker.example"),
            ..call
        }
        .post(&list)
        .await
        .0,
        403
    );
    env.finish().await;
}

/// `globex` enables only DNS updates in its own zones; `initech` enables nothing.
const GLOBEX_YAML: &str = r#"
tenant: globex
policy:
  default: escalate
handlers:
  dns.record.update:
    credential: pdns
    zones: [globex.example, staging.globex.example]
approvers:
  subjects: [globex-ops]
"#;
const INITECH_YAML: &str = r#"
tenant: initech
policy:
  default: escalate
approvers:
  subjects: [initech-ops]
"#;

/// `tools/list` over real HTTP as the agent with `token`: `propose_action`'s description and
/// its `action` enum.
async fn listed(base: &str, token: &str) -> (String, Value) {
    let call = RawCall {
        base,
        token: Some(token),
        host: None,
        origin: None,
    };
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let (status, _, body) = call.post(&list).await;
    assert_eq!(status, 200, "{body}");
    let tools = body["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["propose_action", "check_proposal"], "{body}");
    (
        tools[0]["description"].as_str().unwrap().to_owned(),
        tools[0]["inputSchema"]["properties"]["action"]["enum"].clone(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_tenant_sees_only_its_own_actions() {
    let env = Env::start().await;
    let globex = env.agent_of_tenant("globex", GLOBEX_YAML, "dns-bot").await;
    let initech = env
        .agent_of_tenant("initech", INITECH_YAML, "idle-bot")
        .await;

    let (desc, actions) = listed(&env.base, &env.token).await;
    assert_eq!(actions, json!(["billing.refund.issue"]));
    assert!(desc.contains("billing.refund.issue: "), "{desc}");
    assert!(desc.contains("currency one of USD, EUR"), "{desc}");
    assert!(desc.contains("amount at most 100000"), "{desc}");
    for foreign in ["dns.record.update", "globex.example", "webhook.post"] {
        assert!(!desc.contains(foreign), "acme sees {foreign}: {desc}");
    }

    let (desc, actions) = listed(&env.base, &globex).await;
    assert_eq!(actions, json!(["dns.record.update"]));
    assert!(
        desc.contains("zone one of globex.example, staging.globex.example"),
        "{desc}"
    );
    for foreign in [
        "billing.refund.issue",
        "currency one of",
        "amount at most",
        "pdns",
    ] {
        assert!(!desc.contains(foreign), "globex sees {foreign}: {desc}");
    }

    let (desc, actions) = listed(&env.base, &initech).await;
    assert_eq!(actions, json!([]));
    assert!(desc.contains("not enabled any action for you"), "{desc}");
    for foreign in [
        "billing.refund.issue:",
        "dns.record.update:",
        "webhook.post:",
    ] {
        assert!(!desc.contains(foreign), "initech sees {foreign}: {desc}");
    }

    // The OpenAPI side: GET /v1/openapi.yaml describes the same actions, limits and enum.
    for (token, enum_, has, foreign) in [
        (
            &env.token,
            json!(["billing.refund.issue"]),
            "amount at most 100000",
            "dns.record.update",
        ),
        (
            &globex,
            json!(["dns.record.update"]),
            "zone one of globex.example",
            "billing.refund.issue",
        ),
        (
            &initech,
            json!([]),
            "not enabled any action for you",
            "billing.refund.issue:",
        ),
    ] {
        let (enum_seen, desc) = tenant_openapi(&env.base, token).await;
        assert_eq!(enum_seen, enum_);
        assert!(desc.contains(has), "{desc}");
        assert!(!desc.contains(foreign), "{desc}");
    }
    let anonymous = reqwest::get(format!("{}/v1/openapi.yaml", env.base))
        .await
        .unwrap();
    assert_eq!(anonymous.status().as_u16(), 401);

    // Listing writes nothing.
    assert_eq!(env.proposal_count().await, 0);
    env.finish().await;
}

/// `GET /v1/openapi.yaml` as the agent with `token`: the actions `ProposalRequest` names (its
/// branches' `action` consts) and the description of `POST /v1/proposals`.
async fn tenant_openapi(base: &str, token: &str) -> (Value, String) {
    let resp = reqwest::Client::new()
        .get(format!("{base}/v1/openapi.yaml"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(resp.headers()["content-type"], "application/yaml");
    let spec: Value = serde_yaml_ng::from_str(&resp.text().await.unwrap()).unwrap();
    (
        // The enabled actions: the `const` of each `oneOf` branch (the last branch, any other
        // name, has none: such a request is stored and blocked by policy).
        Value::Array(
            spec["components"]["schemas"]["ProposalRequest"]["oneOf"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|b| b["properties"]["action"].get("const").cloned())
                .collect(),
        ),
        spec["paths"]["/v1/proposals"]["post"]["description"]
            .as_str()
            .unwrap()
            .to_owned(),
    )
}

/// Proposes a refund as `token`; the proposal id (it stays `pending`: no policy worker runs).
async fn propose_as(env: &Env, token: &str, payment: &str) -> String {
    let v: Value = reqwest::Client::new()
        .post(format!("{}/v1/proposals", env.base))
        .bearer_auth(token)
        .json(&refund_args(payment))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v["proposal_id"].as_str().unwrap().to_owned()
}

/// `GET /v1/proposals/{id}?wait=N` as `token`: (status, state, seconds it took).
async fn long_poll(base: String, token: String, id: String, wait: u64) -> (u16, String, f64) {
    let started = std::time::Instant::now();
    let resp = reqwest::Client::new()
        .get(format!("{base}/v1/proposals/{id}?wait={wait}"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let v: Value = resp.json().await.unwrap();
    (
        status,
        v["state"].as_str().unwrap_or_default().to_owned(),
        started.elapsed().as_secs_f64(),
    )
}

/// One agent holding its cap of long-polls gets the current state at once for the next one;
/// another agent's long-poll is still held: one caller cannot take every held wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(
    clippy::disallowed_methods,
    reason = "lets the long-polls take their slots; nothing outside the api shows that they have"
)]
async fn long_polls_are_capped_per_agent() {
    let env = Env::start_with(|s| s.with_max_waits_per_agent(2)).await;
    let id = propose_as(&env, &env.token, "pi_wait").await;
    let other = env.another_agent("other-bot").await;
    let other_id = propose_as(&env, &other, "pi_other").await;
    let held: Vec<_> = (0..2)
        .map(|_| {
            tokio::spawn(long_poll(
                env.base.clone(),
                env.token.clone(),
                id.clone(),
                3,
            ))
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Past the cap: answered at once with the current state.
    let (status, state, secs) = long_poll(env.base.clone(), env.token.clone(), id.clone(), 3).await;
    assert_eq!((status, state.as_str()), (200, "pending"));
    assert!(
        secs < 1.0,
        "the third long-poll of one agent was held {secs} s"
    );
    // MCP's check_proposal shares the cap.
    let call = RawCall {
        base: &env.base,
        token: Some(&env.token),
        host: None,
        origin: None,
    };
    let started = std::time::Instant::now();
    let (status, _, body) = call
        .post(&tools_call(
            7,
            "check_proposal",
            json!({"proposal_id": id, "wait_seconds": 3}),
        ))
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(started.elapsed() < Duration::from_secs(1), "{body}");
    // Another agent is not held up by the first one's cap.
    let (status, state, secs) = long_poll(env.base.clone(), other, other_id, 2).await;
    assert_eq!((status, state.as_str()), (200, "pending"));
    assert!(
        secs >= 1.9,
        "the other agent's long-poll was held ({secs} s)"
    );
    for h in held {
        let (status, state, secs) = h.await.unwrap();
        assert_eq!((status, state.as_str()), (200, "pending"));
        assert!(secs >= 2.9, "held for the whole wait ({secs} s)");
    }
    // Released: the agent may hold a long-poll again.
    let (_, _, secs) = long_poll(env.base.clone(), env.token.clone(), id, 1).await;
    assert!(secs >= 0.9, "{secs}");
    env.finish().await;
}
