"""A user's module written from the documentation's patterns, for ``mypy --strict`` (test_typing.py).

Never imported by the tests: mypy reads it. An ``expect`` comment on a line of its own says
what mypy reports on the next line: the type a ``reveal_type`` shows, or ``error[code]`` for a
misuse. Nothing else may be reported.
"""

# ruff: noqa: E501 (the expected types are spelled out whole)

from __future__ import annotations

from typing import Any, reveal_type

from pydantic import BaseModel

import longcall

app = longcall.App("sqlite:///longcall.db")


class Order(BaseModel):
    id: str
    amount: float


class Approval(BaseModel):
    approved: bool
    approver: str


@app.long_running(key="report:{quarter}:{region}", deadline="45m")
def start_sales_report(quarter: str, region: str, job: longcall.JobHandle) -> dict[str, str]:
    return {"message": "Report build started"}


@app.task(retry=longcall.RetryPolicy(max_attempts=3, initial="500ms"))
def fetch_order(order_id: str) -> dict[str, bool]:
    return {"paid": True}


@app.task()
def issue_refund(order_id: str, amount: float) -> str:
    return f"refund-{order_id}"


@app.task
async def count_items(order_id: str) -> int:
    return 3


@app.task
async def wait_for(seconds: float, ctx: longcall.TaskContext) -> str:
    ctx.emit("waiting", {"seconds": seconds})
    return "done"


@app.task(name="note")
def note(text: str, ctx: longcall.TaskContext) -> None:
    ctx.emit("note", text)


@app.workflow("refund")
def refund(order: Order, ctx: longcall.TaskContext) -> dict[str, Any]:
    # expect: dict[str, bool]
    reveal_type(fetch_order(order.id))
    if not fetch_order(order.id)["paid"]:
        return {"refunded": False}
    approval = ctx.interrupt(f"Refund {order.amount}?", schema=Approval)
    # expect: Any
    reveal_type(approval)
    # The run supplies a task's context: the call leaves it out.
    # expect: None
    reveal_type(note(f"approved by {approval.approver}"))
    refund_id = issue_refund(order.id, order.amount)
    # expect: str
    reveal_type(refund_id)
    return {"refunded": True, "refundId": refund_id}


@app.workflow
async def count(order: Order, ctx: longcall.TaskContext) -> int:
    counted = await count_items(order.id)
    # expect: str
    reveal_type(await wait_for(0.5))
    # expect: int
    reveal_type(counted)
    return counted


@app.workflow("count-later", state={})
async def count_later(order: Order) -> list[int]:
    return [await count_items(order.id)]


# expect: longcall.jobs.tools.LongRunningTool
reveal_type(start_sales_report)
# expect: longcall.workflows.engine.Task[[order_id: str], dict[str, bool]]
reveal_type(fetch_order)
# expect: longcall.workflows.engine.Task[[order_id: str], typing.Coroutine[Any, Any, int]]
reveal_type(count_items)
# expect: longcall.workflows.engine.Task[[float], typing.Coroutine[Any, Any, str]]
reveal_type(wait_for)
# expect: longcall.workflows.runs.Workflow[[order: docs_user.Order, ctx: longcall.workflows.engine.TaskContext], dict[str, Any]]
reveal_type(refund)
# expect: longcall.workflows.runs.Workflow[[order: docs_user.Order, ctx: longcall.workflows.engine.TaskContext], int]
reveal_type(count)
# expect: longcall.workflows.runs.Workflow[[order: docs_user.Order], list[int]]
reveal_type(count_later)

run = app.run_workflow(refund, Order(id="A-17", amount=42.0))
# expect: longcall.core.runs.Run
reveal_type(run)
# expect: Any
reveal_type(run.result)
# expect: dict[str, Any]
reveal_type(refund.result_of(run))
# expect: int
reveal_type(count.result_of(app.run_workflow("count", {"id": "A", "amount": 1})))
# expect: longcall.core.runs.Run
reveal_type(app.answer(run.run_id, {"interrupt-1": {"approved": True}}))
# expect: list[longcall.core.jobs.Job]
reveal_type(app.list_jobs(state=longcall.JobState.STARTED, limit=10))
# expect: longcall.workflows.run_worker.RunWorker
reveal_type(app.run_worker(concurrency=4, grace="5s"))
# expect: longcall.worker.Worker
reveal_type(app.worker(deliveries=4, lease="60s"))

# What the docs spell as ``longcall.X`` is exported, with its own type.
errors: tuple[type[Exception], ...] = (longcall.InvalidAnswer, longcall.NonDeterminismError)
question: longcall.Interrupt | None = None
# expect: longcall.core.runs.Interrupt | None
reveal_type(question)

# Misuse: each line is an error of the code named.
# expect: error[call-arg]
app.list_jobs(stat="started")
# expect: error[arg-type]
app.list_jobs(limit="ten")
# expect: error[arg-type]
app.run_worker(concurrency="lots")
# expect: error[call-arg]
app.worker(deliverys=4)
# expect: error[arg-type]
app.sweeper(interval=[5])
# expect: error[arg-type]
issue_refund("A-17", "lots")
# expect: error[call-arg]
fetch_order()
# expect: error[call-arg]
note("x", "not a context")
# expect: error[operator]
fetch_order("A-17")["paid"] + "x"
# expect: error[operator]
refund.result_of(run) + 1
