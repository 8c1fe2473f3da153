"""The line protocol between services/api/tests/mcp and its Python MCP clients (py_client.py,
py_tasks_client.py): one JSON event per line on stdout, one command per line on stdin, and a
check that stops the client with the reason when something is not as the test expects.
"""

import json
import sys

import anyio


def emit(event: dict) -> None:
    sys.stdout.write(json.dumps(event, default=str) + "\n")
    sys.stdout.flush()


async def expect_command(want: str) -> None:
    line = await anyio.to_thread.run_sync(sys.stdin.readline)
    if line.strip() != want:
        raise RuntimeError(f"expected command {want!r}, got {line!r}")


def check(cond: bool, what: str) -> None:
    if not cond:
        raise RuntimeError(f"check failed: {what}")
