"""An expense approval: a durable workflow that waits for a person's answer from outside.

Run:  python approval.py EXPENSE_ID AMOUNT

It submits the run and works it in this process. The run checks the budget, then asks its
question and waits; answer it from another terminal (or the dashboard, or the HTTP API):

    longcall runs answer RUN_ID --value interrupt-1='{"approved": true, "approver": "ana"}'

(it prints that command with the run's id and its --database).

The run then pays and the script prints the result. Stop the script while it waits and start
it again with the same EXPENSE_ID: the same run is found (its idempotency key), its finished
task is not run twice, and the question is still open.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from pydantic import BaseModel

import longcall

DATABASE = os.environ.get("LONGCALL_DATABASE_URL", "sqlite:///longcall.db")
app = longcall.App(DATABASE)
FINISHED = {longcall.RunStatus.COMPLETED, longcall.RunStatus.FAILED, longcall.RunStatus.CANCELLED}


class Expense(BaseModel):
    id: str
    amount: float


class Decision(BaseModel):
    approved: bool
    approver: str


@app.task()
def within_budget(amount: float) -> bool:
    return amount <= 1000  # your finance system


@app.task()
def pay(expense_id: str, amount: float) -> str:
    return f"payment-{expense_id}"  # your payment provider; runs once per run


@app.workflow("expense-approval")
def expense_approval(expense: Expense, ctx: longcall.TaskContext) -> dict[str, object]:
    if not within_budget(expense.amount):
        return {"paid": False, "reason": "over budget"}
    decision = ctx.interrupt(f"Pay {expense.amount:.2f} for expense {expense.id}?", schema=Decision)
    if not decision.approved:
        return {"paid": False, "reason": f"declined by {decision.approver}"}
    return {"paid": True, "payment": pay(expense.id, expense.amount), "by": decision.approver}


async def follow(run_id: str) -> longcall.RunDetails:
    """Print the open question once, then wait until the run has finished."""
    asked = False
    while (details := app.get_run(run_id)).status not in FINISHED:
        if details.pending and not asked:
            asked = True
            question = details.pending[0]
            print(f"waiting: {question.prompt}", flush=True)
            answer = json.dumps({"approved": True, "approver": "ana"})
            print(
                f"answer:  longcall runs answer {run_id} --database {DATABASE} "
                f"--value {question.key}='{answer}'",
                flush=True,
            )
        await asyncio.sleep(0.2)
    return details


async def main(expense: Expense) -> int:
    run = app.submit_run("expense-approval", expense, idempotency_key=f"expense-{expense.id}")
    print(f"run {run.run_id} ({'submitted' if run.created else 'found again'})", flush=True)
    stop = asyncio.Event()
    worker = asyncio.create_task(app.run_worker().run(stop))
    try:
        details = await follow(run.run_id)
    finally:
        stop.set()
        await worker
    print(f"{details.status.value}: {json.dumps(details.run.result)}", flush=True)
    return 0 if details.status is longcall.RunStatus.COMPLETED else 1


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python approval.py EXPENSE_ID AMOUNT")
    try:
        sys.exit(asyncio.run(main(Expense(id=sys.argv[1], amount=float(sys.argv[2])))))
    finally:
        app.close()
