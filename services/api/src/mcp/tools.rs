//! The two MCP tools, `propose_action` and `check_proposal`, and the rmcp server handler that
//! serves exactly them. The descriptions are written for the model: a proposal is only a
//! request, and "pending"/"escalated" mean nothing has happened yet.

use crate::error::SubmitError;
use crate::problem::Problem;
use crate::{AppState, MAX_WAIT_SECS, submit};
use actiond_core::policy::Effect;
use actiond_core::tenant::{HandlerEntry, TenantDocument};
use actiond_store::agents::Agent;
use actiond_store::proposals::{self, ProposalStatus, Withdrawal};
use axum::http::request::Parts;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, CreateTaskResult,
    GetTaskParams, GetTaskResult, Implementation, JsonObject, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};
use std::time::Duration;

/// Name of the tool that files a proposal.
pub const PROPOSE_ACTION: &str = "propose_action";
/// Name of the tool that reads (and waits on) a proposal.
pub const CHECK_PROPOSAL: &str = "check_proposal";
/// The whole tool list, in order.
pub const TOOL_NAMES: [&str; 2] = [PROPOSE_ACTION, CHECK_PROPOSAL];

/// Server instructions sent at `initialize`.
pub const INSTRUCTIONS: &str = "actiond is an approval gateway. You cannot perform side effects here: \
propose_action only files a request that policy and, when needed, a person must approve before \
actiond itself performs it. Never tell the user an action is done unless check_proposal says \
\"succeeded\". While a proposal is pending or escalated, tell the user it is awaiting approval.";

const PROPOSE_INTRO: &str = "Ask actiond for permission to perform an action with side effects \
(a refund, a DNS change, a webhook...). This tool does NOT perform the action: it only files a \
request (a proposal). actiond's policy then allows it, escalates it to a person, or blocks it; \
only after approval does actiond itself execute it.

The result gives a proposal_id and a state:
- \"pending\" or \"escalated\": the action has NOT happened. Tell the user it is awaiting approval \
(\"escalated\" means a person must approve it). Do not say it is done and do not propose it again; \
follow it with check_proposal.
- \"blocked\", \"denied\" or \"expired\": it has NOT happened and will not. The reason says why: \
tell the user, and do not just retry the same request.
- Only \"succeeded\" (from check_proposal) means the action was performed.
If the result is an error, nothing was filed unless it says otherwise: the error names the field \
and the rule it broke; fix that before proposing again.

Money is always integer minor units with an ISO 4217 currency: 50.00 USD is amount 5000, \
currency \"USD\". Send a new idempotency_key for each distinct request and the same key when \
you resend the same request (for example after a timeout), so it is filed once.

Actions your operator enabled for you (any other action name is refused):";

const CHECK_DESCRIPTION: &str = "Read the current state of a proposal you filed with \
propose_action, waiting up to wait_seconds (0-60) for it to change.

States:
- \"pending\" (policy has not decided yet) and \"escalated\" (waiting for a person to approve): \
the action has NOT happened. Tell the user it is awaiting approval; check again later with a wait.
- \"approved\" and \"executing\": approved, but not finished yet; check again for the outcome.
- \"succeeded\": the action was performed. \"failed\": it was attempted and failed. \
\"outcome_unknown\": it may or may not have happened and will not be re-run automatically \
(actiond may still settle it to succeeded or failed from the provider's records); tell the user \
to verify. \"effect_mismatch\": it ran, but what the provider shows afterwards is not what was \
approved; tell the user to verify.
- \"blocked\", \"denied\", \"expired\": final; the action did NOT happen. reason says why. Tell \
the user; do not just propose the same action again.
- \"amended\": final; a person approved it with an edit, so it will NOT run as filed. \
amended_to gives the new proposal's id, state and the changes; follow that id instead.
- \"withdrawn\": final; you withdrew it before approval; the action did NOT happen.
- \"stale\": final; it was approved, but what the provider holds changed after the approver's \
preview (reason names what), so it did NOT run. Tell the user; propose again only if it is \
still wanted.
Only the agent that filed a proposal can read it.";

/// Written in place of the action list when the tenant enables nothing (or has no document).
pub const NO_ACTIONS: &str = "\nNone: your operator has not enabled any action for you, so \
every proposal would be refused and nothing can be requested here yet. Tell the user that no \
actions are enabled for this agent; an operator must enable them in the tenant's handler \
registry. check_proposal still reads proposals filed earlier.";

/// The `propose_action` description for one tenant: the actions its handler registry enables
/// (sorted by name), each with its params and the tenant's own limits from the handler
/// settings (currencies, zones, maximum amount). `None` (no tenant document) and an empty
/// registry both read as "nothing enabled" ([`NO_ACTIONS`]).
pub fn propose_description(doc: Option<&TenantDocument>) -> String {
    let mut d = String::from(PROPOSE_INTRO);
    let entries: Vec<(&String, &HandlerEntry)> =
        doc.map(|d| d.handlers.iter().collect()).unwrap_or_default();
    if entries.is_empty() {
        d.push_str(NO_ACTIONS);
        return d;
    }
    // `handlers` is a BTreeMap, so the actions come sorted by name.
    for (action, entry) in entries {
        let k = entry.kind;
        d.push_str(&format!(
            "\n- {action}: {} params: {}",
            k.description(),
            params_summary(&k.params_schema())
        ));
        let limits = constraints(entry);
        if !limits.is_empty() {
            d.push_str(&format!(" Limits for you: {}.", limits.join("; ")));
        }
    }
    d
}

/// The limits an agent must respect, in words, from the handler entry: the handler's own
/// ([`actiond_core::handlers::HandlerKind::limits`]: only settings that constrain params; URLs,
/// headers and credential names stay with the operator), then the entry's `min_effect`.
fn constraints(entry: &HandlerEntry) -> Vec<String> {
    let mut out = entry.kind.limits(&entry.settings);
    if entry.min_effect == Effect::Escalate {
        out.push("always needs a person's approval".to_owned());
    }
    out
}

/// `{name: type (description), name?: ...}` from a handler's params schema.
fn params_summary(schema: &Value) -> String {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut parts = Vec::new();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, p) in props {
            let opt = if required.contains(&name.as_str()) {
                ""
            } else {
                "?"
            };
            let ty = match (
                p.get("enum").and_then(Value::as_array),
                p.get("type").and_then(Value::as_str),
            ) {
                (Some(vals), _) => vals
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join("|"),
                (None, Some("array")) => {
                    let item = p
                        .get("items")
                        .and_then(|i| i.get("type"))
                        .and_then(Value::as_str)
                        .unwrap_or("any");
                    format!("array of {item}")
                }
                (None, ty) => ty.unwrap_or("any").to_owned(),
            };
            match p.get("description").and_then(Value::as_str) {
                Some(desc) => parts.push(format!("{name}{opt}: {ty} ({desc})")),
                None => parts.push(format!("{name}{opt}: {ty}")),
            }
        }
    }
    format!("{{{}}}", parts.join(", "))
}

fn object(v: Value) -> JsonObject {
    match v {
        Value::Object(m) => m,
        _ => JsonObject::new(),
    }
}

/// The input schema of `propose_action`: the REST body fields plus `idempotency_key`, with
/// `action` an `enum` of exactly `actions` (JSON Schema 2020-12 §6.1.2). `None` leaves `action`
/// an unconstrained string (the registry-wide schema); `Some(&[])` is an empty `enum`, which no
/// value satisfies: the tenant enables nothing.
pub fn propose_schema(actions: Option<&[&str]>) -> JsonObject {
    let mut schema = json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["action", "params"],
        "properties": {
            "action": {
                "type": "string", "maxLength": actiond_core::ids::MAX_ACTION_LEN,
                "description": "The action to request, e.g. billing.refund.issue"
            },
            "params": {
                "type": "object",
                "description": "The action's parameters (see the list of actions). Money in integer minor units: 50.00 USD is 5000."
            },
            "target": {
                "type": "string", "maxLength": 512,
                "description": "Optional; best omitted. actiond derives the target from params (e.g. the payment id); a different value is refused."
            },
            "reason": {
                "type": "string", "maxLength": submit::MAX_REASON_CHARS,
                "description": "Why you propose this, in a sentence or two, for the person who may approve it."
            },
            "source_text": {
                "type": "string", "maxLength": submit::MAX_SOURCE_TEXT_CHARS,
                "description": "The user's request or the message/ticket text that led to this proposal, verbatim."
            },
            "session": {
                "type": "string", "maxLength": submit::MAX_SESSION_CHARS,
                "description": "Your conversation or session id, so approvers can see related proposals."
            },
            "idempotency_key": {
                "type": "string", "minLength": 1, "maxLength": 255,
                "description": "Optional; printable ASCII. The same key with the same arguments returns the same proposal instead of filing another; the same key with different arguments is refused."
            }
        }
    });
    if let Some(actions) = actions {
        let action = &mut schema["properties"]["action"];
        action["enum"] = json!(actions);
        action["description"] = json!(if actions.is_empty() {
            "No action is enabled for you: any value is refused (see the tool description)."
        } else {
            "One of the actions your operator enabled for you (see the tool description)."
        });
    }
    object(schema)
}

/// The input schema of `check_proposal`.
pub fn check_schema() -> JsonObject {
    object(json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["proposal_id"],
        "properties": {
            "proposal_id": {
                "type": "string", "format": "uuid",
                "description": "The proposal_id that propose_action returned."
            },
            "wait_seconds": {
                "type": "integer", "minimum": 0, "maximum": MAX_WAIT_SECS, "default": 0,
                "description": "Wait up to this many seconds for the state to change (0 answers at once)."
            }
        }
    }))
}

/// The complete tool list for one tenant: exactly `propose_action` and `check_proposal`, the
/// first describing only the actions `doc` enables (see [`propose_description`]).
pub fn tools(doc: Option<&TenantDocument>) -> Vec<Tool> {
    let actions: Vec<&str> = doc
        .map(|d| d.handlers.keys().map(String::as_str).collect())
        .unwrap_or_default();
    tools_with(propose_description(doc), propose_schema(Some(&actions)))
}

/// The tool list with `propose_action`'s description and schema given.
fn tools_with(description: String, schema: JsonObject) -> Vec<Tool> {
    vec![
        Tool::new(PROPOSE_ACTION, description, schema)
            .with_title("Propose an action for approval")
            .with_annotations(
                ToolAnnotations::with_title("Propose an action for approval")
                    .read_only(false)
                    .destructive(false)
                    .idempotent(false)
                    .open_world(false),
            ),
        Tool::new(CHECK_PROPOSAL, CHECK_DESCRIPTION, check_schema())
            .with_title("Check a proposal")
            .with_annotations(
                ToolAnnotations::with_title("Check a proposal")
                    .read_only(true)
                    .open_world(false),
            ),
    ]
}

/// The rmcp server handler behind `/mcp`: one per request (stateless), holding the api state.
#[derive(Clone)]
pub struct ActiondMcp {
    state: AppState,
}

impl ActiondMcp {
    /// A handler over the api state.
    pub fn new(state: AppState) -> Self {
        Self { state }
    }
}

/// The agent the HTTP layer authenticated for this request. Its absence means the route was
/// mounted without the authorization layer: refuse rather than guess.
fn agent_of(ctx: &RequestContext<RoleServer>) -> Result<Agent, McpError> {
    ctx.extensions
        .get::<Parts>()
        .and_then(|p| p.extensions.get::<Agent>())
        .cloned()
        .ok_or_else(|| McpError::internal_error("request is not authenticated", None))
}

impl ServerHandler for ActiondMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        )
        .with_server_info(
            Implementation::new("actiond", env!("CARGO_PKG_VERSION"))
                .with_title("actiond approval gateway")
                .with_description("Propose actions for approval and follow their state."),
        )
        .with_instructions(INSTRUCTIONS)
    }

    /// The tools as the calling agent's tenant sees them: the tenant is the authenticated
    /// agent's, never anything in the request.
    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let agent = agent_of(&context)?;
        let doc = self.tenant_document(&agent).await?;
        Ok(ListToolsResult::with_all_items(tools(doc.as_deref())))
    }

    /// Used by rmcp only to check `Mcp-Param-*` headers against a tool's input schema; it has
    /// no request, hence no tenant, so it answers with the registry-wide schema (`action` any
    /// string). Which actions a tenant may use is enforced by `submit`, not by this schema.
    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools_with(PROPOSE_INTRO.to_owned(), propose_schema(None))
            .into_iter()
            .find(|t| t.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let agent = agent_of(&context)?;
        // Unknown names are refused before anything else happens: nothing is read or written.
        let name = request.name.as_ref();
        if !TOOL_NAMES.contains(&name) {
            // An agent calling a tool it was never offered is worth reading its transcript for.
            let shown: String = name.chars().take(64).collect();
            self.state
                .metrics
                .mcp_tool_calls
                .with_label_values(&["unknown"])
                .inc();
            tracing::warn!(tenant = %agent.tenant_id, agent = %agent.id, tool = shown.as_str(), "MCP call to an unknown tool refused");
            return Err(McpError::invalid_params(
                format!(
                    "unknown tool {shown:?}: this server has exactly two tools, propose_action and check_proposal"
                ),
                None,
            ));
        }
        let args = request.arguments.unwrap_or_default();
        self.state
            .metrics
            .mcp_tool_calls
            .with_label_values(&[name])
            .inc();
        // The Tasks extension, when this request declares it (2026-07-28: per request, in
        // `_meta`): `propose_action` becomes a task the client follows with `tasks/get`.
        let as_task = name == PROPOSE_ACTION
            && context
                .client_capabilities()
                .is_some_and(|c| c.supports_tasks());
        if as_task {
            return Ok(self.propose_as_task(&agent, args).await);
        }
        let result = if name == PROPOSE_ACTION {
            self.propose(&agent, args).await
        } else {
            self.check(&agent, args).await
        };
        Ok(result.into())
    }

    /// `tasks/get`: the proposal behind the task, read for the calling agent only; another
    /// agent's or tenant's id is "unknown task" (-32602), exactly like an id never issued.
    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        let agent = agent_of(&context)?;
        let id = tasks::task_id(&request.task_id)?;
        match crate::wait_for_change(&self.state, &agent, id, Duration::ZERO, None).await {
            Ok(Some(status)) => Ok(GetTaskResult::new(tasks::detailed(&status))),
            Ok(None) => Err(tasks::unknown(&request.task_id)),
            Err(p) => Err(tasks::unavailable(p)),
        }
    }

    /// `tasks/cancel`: withdraws the proposal while nobody approved it (`pending`,
    /// `escalated` → `withdrawn`, with a `proposal.withdrawn` event naming the agent); refuses
    /// (-32602, `data.state`, `data.reason`) once it is approved, running or final.
    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let agent = agent_of(&context)?;
        let id = tasks::task_id(&request.task_id)?;
        let done = proposals::withdraw(
            &self.state.db,
            &agent.tenant_id,
            agent.id,
            id,
            "mcp tasks/cancel",
        )
        .await
        .map_err(|e| tasks::unavailable(SubmitError::Store(e)))?;
        match done {
            Withdrawal::Withdrawn(from) => {
                tracing::info!(tenant = %agent.tenant_id, agent = %agent.id, proposal = %id, from = %from, "proposal withdrawn by its agent (tasks/cancel)");
                Ok(())
            }
            Withdrawal::Refused(state) => Err(tasks::not_cancellable(&request.task_id, state)),
            Withdrawal::NotFound => Err(tasks::unknown(&request.task_id)),
        }
    }
}

/// `propose_action` as an MCP task (the Tasks extension, `io.modelcontextprotocol/tasks`,
/// SEP-2663, MCP 2026-07-28): the task id is the proposal id, and the task's status follows
/// the proposal's state.
///
/// | proposal state | task status | payload |
/// |---|---|---|
/// | `pending`, `escalated`, `approved`, `executing` | `working` | `statusMessage`: what the state means ("has NOT happened") |
/// | `succeeded`, `failed`, `outcome_unknown`, `effect_mismatch`, `blocked`, `denied`, `expired`, `stale`, `amended` (the result names the new proposal) | `completed` | `result`: the `check_proposal` result |
/// | `withdrawn` | `cancelled` | `statusMessage`: withdrawn, nothing happened |
pub mod tasks {
    use super::{McpError, ProposalStatus, SubmitError, Value, json, state_advice, status_result};
    use actiond_core::state::ProposalState;
    use rmcp::model::{DetailedTask, JsonObject, Task, TaskPayload};

    /// Suggested `tasks/get` interval: an approval takes a person, seconds to hours.
    pub const POLL_INTERVAL_MS: u64 = 5_000;

    /// The proposal id in a task id, or -32602 naming `params.taskId`.
    pub fn task_id(raw: &str) -> Result<uuid::Uuid, McpError> {
        uuid::Uuid::parse_str(raw).map_err(|_| {
            McpError::invalid_params(
                "Invalid params: params.taskId: must be a task id that propose_action returned (a UUID)",
                Some(json!({"errors": [{"field": "params.taskId", "rule": "must be a task id that propose_action returned (a UUID)"}]})),
            )
        })
    }

    /// -32602 for an id this agent never received: never issued, another agent's, another
    /// tenant's — the same answer, so an id reveals nothing.
    pub fn unknown(raw: &str) -> McpError {
        let shown: String = raw.chars().take(64).collect();
        McpError::invalid_params(
            format!("unknown task: {shown}: no proposal with this id was filed by this agent"),
            Some(json!({"taskId": shown})),
        )
    }

    /// -32602 for a cancellation that cannot be: the proposal is approved, running or final.
    pub fn not_cancellable(raw: &str, state: ProposalState) -> McpError {
        let reason = match state {
            ProposalState::Approved | ProposalState::Executing => format!(
                "the proposal is {state}: it was approved, and an agent cannot withdraw an approved action; only the approvers' side (an operator) can stop it"
            ),
            ProposalState::Withdrawn => "the proposal is already withdrawn".to_owned(),
            s => format!("the proposal is {s}, which is final: there is nothing left to withdraw"),
        };
        McpError::invalid_params(
            format!("task {raw} cannot be cancelled: {reason}"),
            Some(json!({"taskId": raw, "state": state.as_str(), "reason": reason})),
        )
    }

    /// -32603 when the store could not answer: the proposal is unchanged.
    pub fn unavailable(e: SubmitError) -> McpError {
        let p = crate::problem::Problem::from(e);
        McpError::internal_error(
            format!(
                "actiond could not read or change the proposal: {} The proposal is unchanged; try again later.",
                p.detail
            ),
            None,
        )
    }

    /// The task for a proposal (see the module table).
    pub fn detailed(s: &ProposalStatus) -> DetailedTask {
        let task = Task::new(
            s.proposal_id.to_string(),
            rmcp::model::TaskStatus::Working,
            s.created_at
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            s.updated_at
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        );
        let state = ProposalState::parse(&s.state);
        match state {
            Some(ProposalState::Withdrawn) => DetailedTask::new(
                task.with_status_message(
                    "Withdrawn by you before it was approved: the action did NOT happen and will not.",
                ),
                TaskPayload::Cancelled,
            ),
            Some(st) if st.is_answered() => {
                let result = match serde_json::to_value(status_result(s)) {
                    Ok(Value::Object(m)) => m,
                    _ => JsonObject::new(),
                };
                DetailedTask::new(
                    task.with_status_message(state_advice(&s.state, s.reason.as_deref())),
                    TaskPayload::Completed { result },
                )
            }
            _ => DetailedTask::new(
                task.with_status_message(format!(
                    "{}: {}",
                    s.state,
                    state_advice(&s.state, s.reason.as_deref())
                ))
                .with_poll_interval_ms(POLL_INTERVAL_MS),
                TaskPayload::Working,
            ),
        }
    }
}

impl ActiondMcp {
    /// The latest document of the agent's tenant (through the policy cache); `None` when the
    /// tenant has none. A store failure is an internal error: no tool list is better than a
    /// wrong one.
    async fn tenant_document(
        &self,
        agent: &Agent,
    ) -> Result<Option<std::sync::Arc<TenantDocument>>, McpError> {
        let read = async {
            let c = self.state.db.client().await?;
            self.state.docs.latest_of(&c, &agent.tenant_id).await
        };
        read.await.map_err(|e: actiond_store::StoreError| {
            tracing::error!(tenant = %agent.tenant_id, error = %e.detail(), "tenant document unreadable for tools/list");
            McpError::internal_error("the tenant's configuration could not be read", None)
        })
    }

    /// Files a proposal from `propose_action`'s arguments, exactly as `POST /v1/proposals`; a
    /// refusal is the tool result to answer with.
    async fn file(
        &self,
        agent: &Agent,
        mut args: JsonObject,
    ) -> Result<submit::SubmitResponse, CallToolResult> {
        let key = match args.remove("idempotency_key") {
            None | Some(Value::Null) => None,
            Some(Value::String(s))
                if !s.is_empty()
                    && s.len() <= 255
                    && s.chars().all(|c| (' '..='~').contains(&c)) =>
            {
                Some(s)
            }
            Some(_) => {
                return Err(tool_result(
                    Failed::Propose,
                    SubmitError::field(
                        "idempotency_key",
                        "must be 1 to 255 printable ASCII characters",
                    ),
                ));
            }
        };
        let req = match submit::SubmitRequest::from_value(Value::Object(args)) {
            Ok(r) => r,
            Err(p) => {
                self.state
                    .metrics
                    .submissions
                    .with_label_values(&["invalid"])
                    .inc();
                return Err(tool_result(Failed::Propose, p));
            }
        };
        submit::submit(&self.state, agent, req, key)
            .await
            .map_err(|p| tool_result(Failed::Propose, p))
    }

    async fn propose(&self, agent: &Agent, args: JsonObject) -> CallToolResult {
        match self.file(agent, args).await {
            Ok(resp) => {
                let message = if resp.replayed {
                    format!(
                        "An earlier proposal answers this request (same idempotency key, or the same action still open): {} is {}. {}",
                        resp.proposal_id,
                        resp.state,
                        state_advice(&resp.state, None)
                    )
                } else {
                    format!(
                        "Proposal {} filed; state \"pending\": the action has NOT happened. actiond's policy will allow, escalate or block it. Tell the user it is awaiting approval, and follow it with check_proposal.",
                        resp.proposal_id
                    )
                };
                CallToolResult::structured(json!({
                    "proposal_id": resp.proposal_id,
                    "state": resp.state,
                    "replayed": resp.replayed,
                    "message": message,
                }))
            }
            Err(refused) => refused,
        }
    }

    /// `propose_action` for a client that declared the Tasks extension: a filed proposal is
    /// answered with a task whose id is the proposal id ([`tasks`]); a refusal (nothing filed)
    /// is the same tool result as without the extension.
    async fn propose_as_task(&self, agent: &Agent, args: JsonObject) -> CallToolResponse {
        let resp = match self.file(agent, args).await {
            Ok(r) => r,
            Err(refused) => return refused.into(),
        };
        match crate::wait_for_change(
            &self.state,
            agent,
            resp.proposal_id,
            Duration::ZERO,
            None,
        )
        .await
        {
            Ok(Some(status)) => {
                CallToolResponse::Task(CreateTaskResult::new(tasks::detailed(&status).task))
            }
            // Filed a moment ago by this agent: unreadable only if the store failed; the
            // proposal exists, so say so rather than invite a second filing.
            Ok(None) | Err(_) => CallToolResult::structured(json!({
                "proposal_id": resp.proposal_id,
                "state": resp.state,
                "replayed": resp.replayed,
                "message": format!(
                    "Proposal {} filed; the action has NOT happened. Follow it with check_proposal.",
                    resp.proposal_id
                ),
            }))
            .into(),
        }
    }

    async fn check(&self, agent: &Agent, args: JsonObject) -> CallToolResult {
        let mut errs = Vec::new();
        for k in args.keys() {
            if k != "proposal_id" && k != "wait_seconds" {
                errs.push(actiond_core::FieldError::new(
                    k.clone(),
                    "unknown field; expected proposal_id, wait_seconds",
                ));
            }
        }
        let id = match args
            .get("proposal_id")
            .map(|v| v.as_str().map(uuid::Uuid::parse_str))
        {
            Some(Some(Ok(id))) => Some(id),
            None => {
                errs.push(actiond_core::FieldError::new(
                    "proposal_id",
                    "is required: the proposal_id (a UUID) that propose_action returned",
                ));
                None
            }
            Some(_) => {
                errs.push(actiond_core::FieldError::new(
                    "proposal_id",
                    "must be a UUID: the proposal_id that propose_action returned",
                ));
                None
            }
        };
        let wait = match args.get("wait_seconds") {
            None | Some(Value::Null) => 0,
            Some(v) => match v.as_u64() {
                Some(w) if w <= MAX_WAIT_SECS => w,
                _ => {
                    errs.push(actiond_core::FieldError::new(
                        "wait_seconds",
                        format!("must be an integer number of seconds from 0 to {MAX_WAIT_SECS}"),
                    ));
                    0
                }
            },
        };
        let Some(id) = id.filter(|_| errs.is_empty()) else {
            return tool_result(Failed::Check, SubmitError::Invalid(errs));
        };
        match crate::wait_for_change(&self.state, agent, id, Duration::from_secs(wait), None).await
        {
            Ok(Some(status)) => status_result(&status),
            Ok(None) => CallToolResult::structured_error(json!({
                "proposal_id": id,
                "message": "No proposal with this id was filed by this agent. Use the proposal_id that propose_action returned.",
            })),
            Err(p) => tool_result(Failed::Check, p),
        }
    }
}

/// What the state means for the user, in words a model should repeat faithfully.
fn state_advice(state: &str, reason: Option<&str>) -> String {
    let why = reason.map(|r| format!(" Reason: {r}")).unwrap_or_default();
    match state {
        "pending" => "The action has NOT happened: actiond's policy has not decided yet. Tell the user it is awaiting approval; check again with wait_seconds.".to_owned(),
        "escalated" => format!(
            "The action has NOT happened: it is waiting for a person to approve it.{why} Tell the user it is awaiting approval; do not propose it again."
        ),
        "approved" => format!("Approved but NOT performed yet: actiond will execute it shortly.{why} Check again for the outcome."),
        "executing" => "Approved and being executed now; the outcome is not known yet. Check again.".to_owned(),
        "succeeded" => format!("The action was performed and succeeded.{why}"),
        "failed" => format!("The action was attempted and failed.{why} Tell the user; do not retry on your own."),
        "outcome_unknown" => "The action may or may not have happened (the executor lost track of it); it will not be re-run automatically. actiond may still settle it from the provider's records: check again later, and tell the user to verify it.".to_owned(),
        "effect_mismatch" => format!("{} Tell the user to verify it; do not propose it again on your own.", actiond_core::effect::EFFECT_MISMATCH_WORDS),
        "amended" => format!("A person approved it with an edit: this proposal will NOT run as you filed it; the edited version is a new proposal (amended_to: its id, state and what changed), which you may follow with check_proposal.{why} Tell the user what the person changed."),
        "blocked" => format!("Blocked by policy: the action did NOT happen and will not.{why} Tell the user why; do not just retry the same request."),
        "denied" => format!("A person denied it: the action did NOT happen and will not.{why} Tell the user why; do not just retry the same request."),
        "expired" => format!("Expired before it was approved and performed: the action did NOT happen.{why} Propose again only if the user still wants it."),
        "stale" => format!("Approved, but NOT performed: what the provider holds changed after the approver's preview, so the approval no longer matched it.{why} Tell the user; propose again only if it is still wanted (a person will see the new state)."),
        "withdrawn" => "You withdrew it (tasks/cancel) before it was approved: the action did NOT happen and will not. Propose again only if the user still wants it.".to_owned(),
        _ => "Unknown state; treat the action as NOT performed.".to_owned(),
    }
}

fn status_result(s: &ProposalStatus) -> CallToolResult {
    let mut message = state_advice(&s.state, s.reason.as_deref());
    if let Some(to) = &s.amended_to {
        message = format!(
            "{message} New proposal {} is {}: {}",
            to.proposal_id,
            to.state,
            state_advice(&to.state, None)
        );
    }
    if let Some(from) = s.amended_from {
        message = format!("{message} This proposal is a person's edit of your proposal {from}.");
    }
    CallToolResult::structured(json!({
        "proposal_id": s.proposal_id,
        "action": s.action,
        "target": s.target,
        "state": s.state,
        "reason": s.reason,
        "outcome": s.outcome,
        "created_at": s.created_at,
        "updated_at": s.updated_at,
        "amended_from": s.amended_from,
        "amended_to": s.amended_to,
        "message": message,
    }))
}

/// What the model should do after a refusal or failure.
enum NextStep {
    /// Fix the named fields and propose again.
    FixFields,
    /// Nothing was filed; the detail says why.
    Refused,
    /// Unknown whether anything was filed: retry later with the same idempotency key.
    RetrySameKey,
}

/// Which tool failed: the next step differs. A failed `check_proposal` filed nothing and must
/// not tell the model to propose again (it would file the action a second time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failed {
    /// `propose_action`.
    Propose,
    /// `check_proposal`: a read; the proposal is unchanged whatever went wrong.
    Check,
}

/// The one place a [`SubmitError`] becomes an MCP tool result: `isError: true`, the problem
/// body (RFC 9457 fields, so `status` and the field errors are there) and a `message` telling
/// the model what happened and what to do next, for the `tool` that failed.
pub fn tool_result(tool: Failed, e: SubmitError) -> CallToolResult {
    let next = match &e {
        SubmitError::Invalid(_) => NextStep::FixFields,
        SubmitError::Unauthorized { .. }
        | SubmitError::NotFound { .. }
        | SubmitError::TenantNotConfigured
        | SubmitError::AgentFrozen
        | SubmitError::TenantMoved { .. }
        | SubmitError::BodyTooLarge { .. }
        | SubmitError::UnsupportedMediaType
        | SubmitError::UnsupportedContentEncoding(_)
        | SubmitError::IdempotencyKeyReused
        | SubmitError::TooManyOpenEscalations { .. } => NextStep::Refused,
        SubmitError::Store(_) => NextStep::RetrySameKey,
    };
    let p = Problem::from(e);
    let message = match (tool, next) {
        (Failed::Propose, NextStep::FixFields) => format!(
            "Refused as invalid; nothing was filed. {} Fix these fields and propose again.",
            p.detail
        ),
        (Failed::Propose, NextStep::RetrySameKey) => format!(
            "actiond could not handle the request: {} It is not known whether the proposal was filed: retry later with the same idempotency_key so it is filed once.",
            p.detail
        ),
        (Failed::Propose, NextStep::Refused) => format!("Refused; nothing was filed. {}", p.detail),
        (Failed::Check, NextStep::FixFields) => format!(
            "check_proposal refused as invalid: {} Fix these fields and check again. The proposal is unchanged; do not propose it again.",
            p.detail
        ),
        (Failed::Check, NextStep::RetrySameKey) => format!(
            "actiond could not read the proposal: {} Check again later. The proposal is unchanged; do not propose it again.",
            p.detail
        ),
        (Failed::Check, NextStep::Refused) => format!(
            "check_proposal refused: {} The proposal is unchanged.",
            p.detail
        ),
    };
    let mut v = serde_json::to_value(&p).unwrap_or_else(|_| json!({}));
    if let Value::Object(m) = &mut v {
        m.insert("message".into(), Value::String(message));
    }
    CallToolResult::structured_error(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_two_tools_without_list_changed() {
        let names: Vec<String> = tools(None).iter().map(|t| t.name.to_string()).collect();
        assert_eq!(names, TOOL_NAMES);
        let caps =
            serde_json::to_value(ServerCapabilities::builder().enable_tools().build()).unwrap();
        assert_eq!(caps, json!({"tools": {}}));
    }

    #[test]
    fn errors_become_tool_results_with_the_next_step() {
        let text = |e: SubmitError| {
            let r = tool_result(Failed::Propose, e);
            assert_eq!(r.is_error, Some(true));
            let v = r.structured_content.unwrap();
            (
                v["status"].as_u64().unwrap(),
                v["message"].as_str().unwrap().to_owned(),
            )
        };
        let (status, message) = text(SubmitError::field("params.amount", "must be an integer"));
        assert_eq!(status, 400);
        assert!(message.starts_with(
            "Refused as invalid; nothing was filed. params.amount: must be an integer"
        ));
        let (status, message) = text(SubmitError::IdempotencyKeyReused);
        assert_eq!(status, 422);
        assert!(message.starts_with("Refused; nothing was filed."));
        let (status, message) = text(SubmitError::Store(actiond_store::StoreError::Conflict(
            "x".into(),
        )));
        assert_eq!(status, 500);
        assert!(message.contains("retry later with the same idempotency_key"));
        // check_proposal filed nothing and must never say "propose again" (a model that obeys
        // would file the action a second time); before, it got propose_action's messages.
        let check = |e: SubmitError| {
            let r = tool_result(Failed::Check, e);
            assert_eq!(r.is_error, Some(true));
            r.structured_content.unwrap()["message"]
                .as_str()
                .unwrap()
                .to_owned()
        };
        for e in [
            SubmitError::field("proposal_id", "must be a UUID"),
            SubmitError::Store(actiond_store::StoreError::Conflict("x".into())),
            SubmitError::AgentFrozen,
        ] {
            let m = check(e);
            assert!(!m.contains("propose again."), "{m}");
            assert!(!m.contains("filed"), "{m}");
            assert!(!m.contains("idempotency_key"), "{m}");
            assert!(m.contains("The proposal is unchanged"), "{m}");
        }
        let m = check(SubmitError::field("proposal_id", "must be a UUID"));
        assert!(m.contains("proposal_id: must be a UUID"), "{m}");
    }

    fn doc(handlers: &str) -> TenantDocument {
        TenantDocument::parse(&format!(
            "tenant: t1\npolicy:\n  default: escalate\n{handlers}approvers:\n  subjects: [ops]\n"
        ))
        .unwrap()
    }

    #[test]
    fn tools_describe_only_the_tenants_actions_and_limits() {
        let d = doc(
            "handlers:\n  billing.refund.issue:\n    credential: payments\n    max_amount: 25000\n    currencies: [EUR]\n",
        );
        let tools = tools(Some(&d));
        let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
        assert_eq!(names, TOOL_NAMES);
        let desc = tools[0].description.as_deref().unwrap();
        assert!(desc.contains("billing.refund.issue: Refund part or all of a card payment"));
        assert!(desc.contains("currency one of EUR"));
        assert!(desc.contains("amount at most 25000"));
        assert!(!desc.contains("dns.record.update"));
        assert!(!desc.contains("webhook.post"));
        assert!(!desc.contains("payments"), "credential names stay private");
        assert_eq!(
            tools[0].input_schema["properties"]["action"]["enum"],
            json!(["billing.refund.issue"])
        );
    }

    #[test]
    fn email_and_statement_choices_are_listed_without_their_text() {
        let d = doc(concat!(
            "handlers:\n  email.send:\n    from: a@acme.example\n    recipient_domains: [acme.example]\n",
            "    templates:\n      reply: {subject: 'Re: {ticket}', body: 'Hi {name}, {ticket} is closed'}\n",
            "  db.statement.execute:\n    credential: orders\n    statements:\n",
            "      cancel_order: {sql: 'UPDATE orders SET status = 1 WHERE id = $1', params: [{name: order_id, type: bigint}], max_rows: 1}\n",
        ));
        let desc = propose_description(Some(&d));
        assert!(desc.contains("- email.send: Send a text email"), "{desc}");
        assert!(desc.contains("params: {recipients: array"), "{desc}");
        assert!(
            desc.contains("recipients in the domains acme.example"),
            "{desc}"
        );
        assert!(
            desc.contains("template one of reply (variables: ticket, name)"),
            "{desc}"
        );
        assert!(
            desc.contains("- db.statement.execute: Run one of the tenant's named SQL statements"),
            "{desc}"
        );
        assert!(
            desc.contains("statement one of cancel_order (values: order_id: bigint)"),
            "{desc}"
        );
        assert!(
            !desc.contains("UPDATE orders") && !desc.contains("Hi {name}"),
            "{desc}"
        );
        assert!(
            !desc.contains("orders;") && !desc.contains("credential"),
            "{desc}"
        );
    }

    #[test]
    fn nothing_enabled_is_two_tools_and_an_explained_empty_enum() {
        for d in [None, Some(doc(""))] {
            let tools = tools(d.as_ref());
            assert_eq!(tools.len(), 2);
            let desc = tools[0].description.as_deref().unwrap();
            assert!(desc.ends_with(NO_ACTIONS));
            assert!(!desc.contains("billing.refund.issue:"));
            assert_eq!(
                tools[0].input_schema["properties"]["action"]["enum"],
                json!([])
            );
        }
    }

    fn status(state: &str) -> ProposalStatus {
        let at = chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        ProposalStatus {
            proposal_id: uuid::Uuid::nil(),
            action: "billing.refund.issue".into(),
            target: "pi_1".into(),
            state: state.into(),
            reason: None,
            outcome: (state == "succeeded").then(|| "succeeded".into()),
            intent_hash: "0".repeat(64),
            created_at: at,
            updated_at: at,
            amended_from: None,
            amended_to: None,
        }
    }

    #[test]
    fn tasks_follow_the_proposal_state() {
        use rmcp::model::TaskStatus;
        for open in ["pending", "escalated", "approved", "executing"] {
            let t = serde_json::to_value(tasks::detailed(&status(open))).unwrap();
            assert_eq!(t["status"], "working", "{t}");
            assert_eq!(t["taskId"], uuid::Uuid::nil().to_string());
            assert_eq!(t["createdAt"], "2027-01-15T08:00:00.000Z");
            assert_eq!(t["pollIntervalMs"], tasks::POLL_INTERVAL_MS);
            let m = t["statusMessage"].as_str().unwrap();
            assert!(m.starts_with(&format!("{open}: ")), "{m}");
            if open != "executing" {
                assert!(m.contains("NOT"), "{m}");
            }
        }
        for done in [
            "succeeded",
            "failed",
            "outcome_unknown",
            "effect_mismatch",
            "blocked",
            "denied",
            "expired",
            "stale",
        ] {
            let t = tasks::detailed(&status(done));
            assert_eq!(t.status(), TaskStatus::Completed, "{done}");
            let v = serde_json::to_value(&t).unwrap();
            assert_eq!(v["result"]["structuredContent"]["state"], done, "{v}");
            assert_eq!(v["result"]["isError"], false, "{v}");
        }
        let t = tasks::detailed(&status("withdrawn"));
        assert_eq!(t.status(), TaskStatus::Cancelled);
    }

    #[test]
    fn cancellation_refusals_say_why() {
        use actiond_core::state::ProposalState;
        let e = tasks::not_cancellable("t1", ProposalState::Approved);
        assert_eq!(e.code.0, -32602);
        assert!(
            e.message
                .contains("an agent cannot withdraw an approved action"),
            "{}",
            e.message
        );
        assert_eq!(e.data.unwrap()["state"], "approved");
        let e = tasks::not_cancellable("t1", ProposalState::Denied);
        assert!(e.message.contains("final"), "{}", e.message);
        let e = tasks::unknown("t1");
        assert!(e.message.starts_with("unknown task: t1"), "{}", e.message);
        assert!(tasks::task_id("nope").is_err());
    }

    #[test]
    fn descriptions_tell_the_truth() {
        let d = propose_description(None);
        assert!(d.contains("does NOT perform the action"));
        assert!(d.contains("awaiting approval"));
        assert!(CHECK_DESCRIPTION.contains("NOT happened"));
        assert!(state_advice("escalated", Some("big")).contains("NOT happened"));
    }
}
