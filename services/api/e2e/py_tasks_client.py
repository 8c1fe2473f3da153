"""The official Python MCP SDK client (PyPI `mcp` 2.3) following proposals as MCP Tasks.

Run by services/api/tests/mcp (python_sdk_follows_and_withdraws_tasks). The client declares the
Tasks extension (`io.modelcontextprotocol/tasks`, protocol 2026-07-28) with a `ClientExtension`
that claims the `resultType: "task"` shape of `tools/call` and resolves it by polling
`tasks/get`; the server is the command after `--` (the `actiond mcp-stdio` bridge). Protocol
with the test: one JSON event per line on stdout, one command per line on stdin.

usage: py_tasks_client.py -- COMMAND [ARGS...]
"""

import sys
from typing import Any, Literal

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, Request, RequestParams, Result
from pydantic import TypeAdapter

from py_test_io import check, emit, expect_command

TASKS = "io.modelcontextprotocol/tasks"
TERMINAL = {"completed", "failed", "cancelled"}
# The server suggests pollIntervalMs (5 s: approvals take people); the test polls faster.
TEST_POLL_SECONDS = 0.2
ANY = TypeAdapter(dict[str, Any])


class TaskHandle(Result):
    """`CreateTaskResult` (SEP-2663): the task's seed state, flattened."""

    result_type: Literal["task"]
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


class TaskIdParams(RequestParams):
    task_id: str


class GetTask(Request[TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskIdParams
    name_param = "taskId"


class CancelTask(Request[TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskIdParams
    name_param = "taskId"


async def get_task(session, task_id: str) -> dict[str, Any]:
    return await session.send_request(GetTask(params=TaskIdParams(task_id=task_id)), ANY)


async def cancel_task(session, task_id: str) -> dict[str, Any]:
    return await session.send_request(CancelTask(params=TaskIdParams(task_id=task_id)), ANY)


async def follow(handle: TaskHandle, ctx: ClaimContext) -> CallToolResult:
    """Polls `tasks/get` until the task is terminal; on the way, tries once to cancel an
    approved proposal (the server must refuse) and reports every state seen."""
    emit({"event": "task2", "task_id": handle.task_id, "status": handle.status})
    seen: list[str] = []
    tried_cancel = False
    while True:
        task = await get_task(ctx.session, handle.task_id)
        message = task.get("statusMessage") or ""
        state = message.split(":", 1)[0] if task["status"] == "working" else task["status"]
        if not seen or seen[-1] != state:
            seen.append(state)
        if task["status"] == "working" and state == "approved" and not tried_cancel:
            tried_cancel = True
            try:
                await cancel_task(ctx.session, handle.task_id)
                emit({"event": "cancel_refused", "error": None})
            except MCPError as e:
                emit({"event": "cancel_refused", "error": {"code": e.error.code, "message": e.error.message, "data": e.error.data}})
        if task["status"] in TERMINAL:
            emit({"event": "followed", "states": seen, "task": task})
            check(task["status"] == "completed", "the task completed")
            return CallToolResult.model_validate(task["result"], by_name=False)
        await anyio.sleep(TEST_POLL_SECONDS)


class Tasks(ClientExtension):
    identifier = TASKS

    def claims(self):
        return (ResultClaim(result_type="task", model=TaskHandle, resolve=follow),)


async def main(command: list[str]) -> None:
    server = StdioServerParameters(command=command[0], args=command[1:])
    args = {
        "action": "billing.refund.issue",
        "params": {"payment_id": "pi_task_py_1", "amount": 12000, "currency": "USD"},
        "reason": "Customer reports a double charge.",
        "idempotency_key": "py-task-1",
    }
    async with Client(server, extensions=[Tasks()]) as client:
        emit({"event": "connected", "protocol_version": client.protocol_version})
        tools = (await client.list_tools()).tools
        check([t.name for t in tools] == ["propose_action", "check_proposal"], "exactly two tools")

        # 1. The raw task handle, then tasks/get while escalated, then a withdrawal.
        handle = await client.session.call_tool("propose_action", args, allow_claimed=True)
        check(isinstance(handle, TaskHandle), f"a task handle, got {type(handle).__name__}")
        emit({"event": "task", "task": handle.model_dump(by_alias=True, mode="json")})
        await expect_command("escalated")
        got = await get_task(client.session, handle.task_id)
        emit({"event": "got", "task": got})
        ack = await cancel_task(client.session, handle.task_id)
        emit({"event": "withdrawn", "ack": ack, "task": await get_task(client.session, handle.task_id)})

        # 2. The extension resolves the task to check_proposal's final result.
        args2 = dict(args, params=dict(args["params"], payment_id="pi_task_py_2"), idempotency_key="py-task-2")
        final = await client.call_tool("propose_action", args2)
        emit({"event": "final", "result": final.structured_content, "is_error": final.is_error})
    emit({"event": "done"})


if __name__ == "__main__":
    if "--" not in sys.argv or sys.argv.index("--") == len(sys.argv) - 1:
        sys.exit("usage: py_tasks_client.py -- COMMAND [ARGS...]")
    try:
        anyio.run(main, sys.argv[sys.argv.index("--") + 1 :])
    except BaseException as e:  # ExceptionGroup from the SDK's task groups included
        emit({"event": "error", "message": repr(e)})
        sys.exit(1)
