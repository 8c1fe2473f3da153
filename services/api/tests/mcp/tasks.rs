//! MCP Tasks (`io.modelcontextprotocol/tasks`, protocol 2026-07-28) over raw HTTP: a
//! `propose_action` call that declares the extension becomes a task whose id is the proposal
//! id; `tasks/get` follows the proposal; `tasks/cancel` withdraws it only before approval; an
//! agent never reaches another agent's or tenant's task; a call without the extension is
//! unchanged.

use crate::support::*;
use serde_json::{Value, json};

/// The revision whose requests carry their client capabilities in `_meta`.
const V2026: &str = "2026-07-28";
/// The Tasks extension's identifier.
const TASKS: &str = "io.modelcontextprotocol/tasks";

/// One 2026-07-28 request to `/mcp` as `token`, declaring the Tasks extension when `tasks`.
/// Returns the HTTP status and the JSON-RPC answer.
async fn call(base: &str, token: &str, tasks: bool, method: &str, params: Value) -> (u16, Value) {
    let extensions = if tasks { json!({TASKS: {}}) } else { json!({}) };
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": V2026,
        "io.modelcontextprotocol/clientInfo": {"name": "actiond-tasks-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {"extensions": extensions},
    });
    let name = params
        .get("name")
        .or_else(|| params.get("taskId"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    let mut req = reqwest::Client::new()
        .post(format!("{base}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", V2026)
        .header("mcp-method", method)
        .header("authorization", format!("Bearer {token}"))
        .body(body.to_string());
    if let Some(n) = name {
        req = req.header("mcp-name", n);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    let v = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"));
    (status, v)
}

async fn propose_task(env: &Env, token: &str, payment: &str) -> Value {
    let params = json!({"name": "propose_action", "arguments": refund_args(payment)});
    let (status, v) = call(&env.base, token, true, "tools/call", params).await;
    assert_eq!(status, 200, "{v}");
    v["result"].clone()
}

async fn get(env: &Env, token: &str, task: &str) -> Value {
    let (status, v) = call(&env.base, token, true, "tasks/get", json!({"taskId": task})).await;
    assert_eq!(status, 200, "{v}");
    v
}

async fn cancel(env: &Env, token: &str, task: &str) -> Value {
    let (status, v) = call(
        &env.base,
        token,
        true,
        "tasks/cancel",
        json!({"taskId": task}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    v
}

async fn state_of(env: &Env, id: &str) -> String {
    let id = uuid::Uuid::parse_str(id).unwrap();
    env.sql
        .query_one("SELECT state FROM proposals WHERE id = $1", &[&id])
        .await
        .unwrap()
        .get(0)
}

async fn withdrawn_events(env: &Env) -> Vec<(String, String, String)> {
    env.sql
        .query(
            "SELECT proposal_id::text, actor, from_state FROM audit_events
             WHERE kind = 'proposal.withdrawn' ORDER BY id",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_follows_its_proposal_and_is_withdrawn_only_before_approval() {
    let env = Env::start().await;
    let agent_id: String = env
        .sql
        .query_one(
            "SELECT id::text FROM agents WHERE name = 'support-bot'",
            &[],
        )
        .await
        .unwrap()
        .get(0);

    // The server advertises the extension; the tool list is the same two tools.
    let (_, listed) = call(&env.base, &env.token, true, "tools/list", json!({})).await;
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["propose_action", "check_proposal"]);

    // With the extension: a task, whose id is the proposal's.
    let created = propose_task(&env, &env.token, "pi_task_1").await;
    assert_eq!(created["resultType"], "task", "{created}");
    assert_eq!(created["status"], "working", "{created}");
    assert!(
        created["statusMessage"]
            .as_str()
            .unwrap()
            .contains("has NOT happened"),
        "{created}"
    );
    let task = created["taskId"].as_str().unwrap().to_owned();
    assert_eq!(state_of(&env, &task).await, "pending");

    // Without it: today's result, unchanged.
    let plain = call(
        &env.base,
        &env.token,
        false,
        "tools/call",
        json!({"name": "propose_action", "arguments": refund_args("pi_task_plain")}),
    )
    .await
    .1;
    assert_eq!(plain["result"]["isError"], false, "{plain}");
    assert_eq!(plain["result"]["structuredContent"]["state"], "pending");
    assert!(plain["result"].get("taskId").is_none(), "{plain}");
    // … and `tasks/*` need the extension declared (-32021 naming it).
    let (_, undeclared) = call(
        &env.base,
        &env.token,
        false,
        "tasks/get",
        json!({"taskId": task}),
    )
    .await;
    assert_eq!(undeclared["error"]["code"], -32021, "{undeclared}");

    // tasks/get follows the proposal: pending, then escalated, both "has NOT happened".
    let g = get(&env, &env.token, &task).await;
    assert_eq!(g["result"]["status"], "working", "{g}");
    assert!(
        g["result"]["statusMessage"]
            .as_str()
            .unwrap()
            .starts_with("pending: The action has NOT happened"),
        "{g}"
    );
    escalate(&env.sql, uuid::Uuid::parse_str(&task).unwrap()).await;
    let g = get(&env, &env.token, &task).await;
    let message = g["result"]["statusMessage"].as_str().unwrap();
    assert!(
        message.starts_with("escalated: The action has NOT happened"),
        "{g}"
    );
    assert!(message.contains(ESCALATION_REASON), "{g}");

    // Attack: another agent of the tenant, and an agent of another tenant, cannot read or
    // cancel it: the same "unknown task" as an id never issued, and nothing changes.
    let mallory = env.another_agent("mallory-bot").await;
    let other_tenant = env
        .agent_of_tenant(
            "globex",
            &TENANT_YAML.replace("tenant: acme", "tenant: globex"),
            "globex-bot",
        )
        .await;
    let never = uuid::Uuid::now_v7().to_string();
    for (token, id) in [
        (mallory.as_str(), task.as_str()),
        (other_tenant.as_str(), task.as_str()),
        (env.token.as_str(), never.as_str()),
    ] {
        for answer in [get(&env, token, id).await, cancel(&env, token, id).await] {
            assert_eq!(answer["error"]["code"], -32602, "{answer}");
            let m = answer["error"]["message"].as_str().unwrap();
            assert!(m.starts_with(&format!("unknown task: {id}")), "{m}");
        }
    }
    assert_eq!(state_of(&env, &task).await, "escalated");
    assert!(withdrawn_events(&env).await.is_empty());

    // Bad task ids are refused naming the field.
    for params in [json!({"taskId": "nope"}), json!({})] {
        let (_, v) = call(&env.base, &env.token, true, "tasks/cancel", params).await;
        assert_eq!(v["error"]["code"], -32602, "{v}");
        assert_eq!(
            v["error"]["data"]["errors"][0]["field"], "params.taskId",
            "{v}"
        );
    }

    // Its own agent withdraws it while escalated: recorded, final, the task is cancelled.
    let ack = cancel(&env, &env.token, &task).await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    assert_eq!(state_of(&env, &task).await, "withdrawn");
    assert_eq!(
        withdrawn_events(&env).await,
        [(
            task.clone(),
            format!("agent:{agent_id}"),
            "escalated".to_owned()
        )]
    );
    let g = get(&env, &env.token, &task).await;
    assert_eq!(g["result"]["status"], "cancelled", "{g}");
    assert!(
        g["result"]["statusMessage"]
            .as_str()
            .unwrap()
            .contains("did NOT happen"),
        "{g}"
    );
    // check_proposal says the same; a second cancel is refused.
    let checked = call(
        &env.base,
        &env.token,
        false,
        "tools/call",
        json!({"name": "check_proposal", "arguments": {"proposal_id": task}}),
    )
    .await
    .1;
    assert_eq!(checked["result"]["structuredContent"]["state"], "withdrawn");
    let again = cancel(&env, &env.token, &task).await;
    assert_eq!(again["error"]["data"]["state"], "withdrawn", "{again}");
    assert_eq!(withdrawn_events(&env).await.len(), 1);

    // Approved: an agent cannot withdraw it; the refusal says why, and nothing changes.
    let second = propose_task(&env, &env.token, "pi_task_2").await;
    let task2 = second["taskId"].as_str().unwrap().to_owned();
    let id2 = uuid::Uuid::parse_str(&task2).unwrap();
    escalate(&env.sql, id2).await;
    env.sql
        .execute(
            "UPDATE proposals SET state = 'approved', decision_reason = $2 WHERE id = $1",
            &[&id2, &APPROVAL_COMMENT],
        )
        .await
        .unwrap();
    let refused = cancel(&env, &env.token, &task2).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert_eq!(refused["error"]["data"]["state"], "approved", "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("an agent cannot withdraw an approved action"),
        "{refused}"
    );
    assert_eq!(state_of(&env, &task2).await, "approved");
    let g = get(&env, &env.token, &task2).await;
    assert_eq!(g["result"]["status"], "working", "{g}");
    assert!(
        g["result"]["statusMessage"]
            .as_str()
            .unwrap()
            .starts_with("approved: Approved but NOT performed yet"),
        "{g}"
    );

    // Once it ran, the task is completed and carries check_proposal's result.
    env.sql
        .execute(
            "UPDATE proposals SET state = 'executing', lease_owner = 't', lease_until = now() + interval '1 minute' WHERE id = $1",
            &[&id2],
        )
        .await
        .unwrap();
    env.sql
        .execute(
            "UPDATE proposals SET state = 'succeeded', outcome = 'succeeded', finished_at = now(), lease_owner = NULL, lease_until = NULL WHERE id = $1",
            &[&id2],
        )
        .await
        .unwrap();
    let g = get(&env, &env.token, &task2).await;
    assert_eq!(g["result"]["status"], "completed", "{g}");
    let result = &g["result"]["result"];
    assert_eq!(result["isError"], false, "{g}");
    assert_eq!(result["structuredContent"]["state"], "succeeded", "{g}");
    assert_eq!(result["structuredContent"]["proposal_id"], task2, "{g}");
    let refused = cancel(&env, &env.token, &task2).await;
    assert_eq!(refused["error"]["data"]["state"], "succeeded", "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("final"),
        "{refused}"
    );
    assert_eq!(withdrawn_events(&env).await.len(), 1);
    env.finish().await;
}

/// The official Python SDK (mcp 2.3, protocol 2026-07-28) through `actiond mcp-stdio`, with a
/// client extension for Tasks: the raw task handle, `tasks/get` while escalated, a withdrawal,
/// then a second proposal the extension follows to its final `check_proposal` result, with a
/// refused cancellation once it is approved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_follows_and_withdraws_tasks() {
    let python = require_python_client().await;
    let actiond = require_actiond_binary().await;
    let env = Env::start().await;
    let (mut script, dir) = env.python_on_stdio(&python, &actiond, "py_tasks_client.py");
    let mut run = None;
    loop {
        let event = script.next_event().await;
        match event["event"].as_str().unwrap_or("") {
            "connected" => assert_eq!(event["protocol_version"], V2026),
            "task" => {
                let task = &event["task"];
                assert_eq!(task["resultType"], "task", "{event}");
                assert_eq!(task["status"], "working", "{event}");
                let id = task["taskId"].as_str().unwrap();
                assert_eq!(state_of(&env, id).await, "pending");
                escalate(&env.sql, uuid::Uuid::parse_str(id).unwrap()).await;
                script.command("escalated").await;
            }
            "got" => {
                assert_eq!(event["task"]["status"], "working", "{event}");
                let m = event["task"]["statusMessage"].as_str().unwrap();
                assert!(
                    m.starts_with("escalated: The action has NOT happened"),
                    "{m}"
                );
            }
            "withdrawn" => {
                assert_eq!(event["ack"]["resultType"], "complete", "{event}");
                assert_eq!(event["task"]["status"], "cancelled", "{event}");
                let id = event["task"]["taskId"].as_str().unwrap();
                assert_eq!(state_of(&env, id).await, "withdrawn");
                let events = withdrawn_events(&env).await;
                assert_eq!(events.len(), 1);
                assert_eq!(events[0].0, id);
                assert_eq!(events[0].2, "escalated");
            }
            "task2" => {
                // A person approves; the client tries to cancel and must be refused.
                let id = uuid::Uuid::parse_str(event["task_id"].as_str().unwrap()).unwrap();
                escalate(&env.sql, id).await;
                env.sql
                    .execute(
                        "UPDATE proposals SET state = 'approved', decision_reason = $2 WHERE id = $1",
                        &[&id, &APPROVAL_COMMENT],
                    )
                    .await
                    .unwrap();
                run = Some(id);
            }
            "cancel_refused" => {
                let e = &event["error"];
                assert_eq!(e["code"], -32602, "{event}");
                assert_eq!(e["data"]["state"], "approved", "{event}");
                let id = run.expect("cancel before task2");
                assert_eq!(state_of(&env, &id.to_string()).await, "approved");
                // Then it runs.
                env.sql
                    .execute(
                        "UPDATE proposals SET state = 'executing', lease_owner = 't', lease_until = now() + interval '1 minute' WHERE id = $1",
                        &[&id],
                    )
                    .await
                    .unwrap();
                env.sql
                    .execute(
                        "UPDATE proposals SET state = 'succeeded', outcome = 'succeeded', finished_at = now(), lease_owner = NULL, lease_until = NULL WHERE id = $1",
                        &[&id],
                    )
                    .await
                    .unwrap();
            }
            "followed" => {
                let states: Vec<&str> = event["states"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(Value::as_str)
                    .collect();
                assert_eq!(states.last(), Some(&"completed"), "{event}");
                assert!(states.contains(&"approved"), "{event}");
            }
            "final" => {
                assert_eq!(event["is_error"], false, "{event}");
                assert_eq!(event["result"]["state"], "succeeded", "{event}");
                assert_eq!(event["result"]["outcome"], "succeeded", "{event}");
            }
            "done" => break,
            _ => {}
        }
    }
    script.wait_success().await;
    assert_eq!(env.proposal_count().await, 2);
    assert_eq!(withdrawn_events(&env).await.len(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
    env.finish().await;
}
