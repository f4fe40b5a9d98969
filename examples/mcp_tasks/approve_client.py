"""An MCP client that starts the `refund` workflow as a task and answers its question.

    LONGCALL_TOKEN=<token> python approve_client.py http://127.0.0.1:8800/mcp

The task turns `input_required` with an `elicitation/create` form (the run's prompt and
JSON schema); `tasks/update` answers it and the run continues in the server's worker.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from longcall.mcp.client import CreatedTask, call_as_task, get_task, http_session, update_task


async def until(session: Any, task_id: str, status: str) -> dict[str, Any]:
    for _ in range(100):  # poll every 0.2 s, for up to 20 s
        task = await get_task(session, task_id)
        if task["status"] == status:
            return task
        await asyncio.sleep(0.2)
    raise SystemExit(f"task {task_id} never became {status}")


async def main(url: str, token: str) -> None:
    async with http_session(url, {"authorization": f"Bearer {token}"}) as session:
        created = await call_as_task(session, "refund", {"id": "A-17", "amount": 42.0})
        assert isinstance(created, CreatedTask), created
        print(f"task {created.task_id}: {created.status}", flush=True)

        asked = await until(session, created.task_id, "input_required")
        for key, request in asked["inputRequests"].items():
            form = request["params"]
            print(f"{key}: {form['message']} {sorted(form['requestedSchema']['properties'])}")

        answer = {"action": "accept", "content": {"approved": True, "approver": "ana"}}
        await update_task(session, created.task_id, {"interrupt-1": answer})
        done = await until(session, created.task_id, "completed")
        print(f"task {created.task_id}: completed: {done['result']['structuredContent']}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], os.environ["LONGCALL_TOKEN"]))
