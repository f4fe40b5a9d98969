"""A workflow served as a durable MCP task that asks for input:
`longcall serve --app approvals:app`.

The run stops at `ctx.interrupt` (status waiting_input); over MCP its task is
`input_required` with the question, and the client's `tasks/update` answers it.
"""

from __future__ import annotations

import os

from pydantic import BaseModel

from longcall import App, TaskContext

app = App(os.environ.get("LONGCALL_DATABASE_URL", "sqlite:///mcp_tasks.db"))


class Order(BaseModel):
    id: str
    amount: float


class Approval(BaseModel):
    approved: bool
    approver: str


@app.workflow("refund")
def refund(order: Order, ctx: TaskContext) -> dict[str, object]:
    """Refund an order once a person approves it."""
    approval = ctx.interrupt(f"Refund {order.amount} for {order.id}?", schema=Approval)
    if not approval.approved:
        return {"refunded": False, "by": approval.approver}
    return {"refunded": True, "by": approval.approver}
