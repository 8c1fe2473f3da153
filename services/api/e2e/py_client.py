"""The official Python MCP SDK client (PyPI `mcp`) driving actiond through `actiond mcp-stdio`.

Run by services/api/tests/mcp. The MCP server is the command given after `--` (the stdio
bridge), launched by the SDK's stdio transport. Protocol with the test: one JSON event per line
on stdout, one command per line on stdin.

usage: py_client.py -- COMMAND [ARGS...]
"""

import sys

import anyio
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from py_test_io import check, emit, expect_command

FINAL = {"succeeded", "failed", "outcome_unknown", "blocked", "denied", "expired"}


async def main(command: list[str]) -> None:
    server = StdioServerParameters(command=command[0], args=command[1:])
    async with Client(server) as client:
        emit({"event": "connected", "protocol_version": client.protocol_version})

        tools = (await client.list_tools()).tools
        check([t.name for t in tools] == ["propose_action", "check_proposal"], "exactly two tools")
        emit({"event": "tools", "tools": [t.name for t in tools]})

        args = {
            "action": "billing.refund.issue",
            "params": {"payment_id": "pi_py_2077", "amount": 12000, "currency": "USD"},
            "reason": "Customer reports a double charge on order 2077.",
            "source_text": "Chat: I was charged twice for order 2077, refund one please (120.00 USD).",
            "session": "py-e2e-session",
            "idempotency_key": "py-e2e-refund-2077",
        }
        proposed = await client.call_tool("propose_action", args)
        check(not proposed.is_error, "propose_action succeeded")
        pid = proposed.structured_content["proposal_id"]
        check(proposed.structured_content["state"] == "pending", "a new proposal is pending")
        emit({"event": "proposed", "proposal_id": pid, "result": proposed.structured_content})

        await expect_command("escalated")
        escalated = await client.call_tool("check_proposal", {"proposal_id": pid})
        check(escalated.structured_content["state"] == "escalated", "check_proposal says escalated")
        emit({"event": "escalated", "result": escalated.structured_content})

        refused = None
        try:
            await client.call_tool("dns_update", {"zone": "example.com"})
        except MCPError as e:
            refused = {"code": e.error.code, "message": e.error.message}
        check(refused is not None and refused["code"] == -32602, "unknown tool is a JSON-RPC error")
        emit({"event": "unknown_tool", "error": refused})

        emit({"event": "waiting"})
        seen = []
        last = escalated.structured_content
        for _ in range(10):
            if last["state"] in FINAL:
                break
            r = await client.call_tool("check_proposal", {"proposal_id": pid, "wait_seconds": 30})
            last = r.structured_content
            seen.append(last["state"])
        emit({"event": "final", "states": seen, "result": last})
        check(last["state"] == "succeeded" and last["outcome"] == "succeeded", "final outcome succeeded")
    emit({"event": "done"})


if __name__ == "__main__":
    if "--" not in sys.argv or sys.argv.index("--") == len(sys.argv) - 1:
        sys.exit("usage: py_client.py -- COMMAND [ARGS...]")
    try:
        anyio.run(main, sys.argv[sys.argv.index("--") + 1 :])
    except BaseException as e:  # ExceptionGroup from the SDK's task groups included
        emit({"event": "error", "message": repr(e)})
        sys.exit(1)
