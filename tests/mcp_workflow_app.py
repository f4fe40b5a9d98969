"""The App the MCP input_required tests serve (``--app mcp_workflow_app:app``): one workflow
that asks two questions, an object (an approval) and a plain string (a note)."""

from __future__ import annotations

from pydantic import BaseModel

from longcall import App, TaskContext

app = App()


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
    note = ctx.interrupt("A note for the customer?", schema=str)
    return {"refunded": True, "by": approval.approver, "note": note}
