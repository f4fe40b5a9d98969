"""Registered workflows served as MCP task tools: each call a background run, each run a task.

A ``tools/call`` of a workflow submits a run (``app.submit_run``) for the worker's run loop
and answers with its task; ``tasks/get`` reads the run row and its interrupts; a run waiting
in ``ctx.interrupt`` is ``input_required`` with its open questions as ``inputRequests``;
``tasks/update`` checks the client's ``inputResponses`` against the questions' JSON schemas
and queues the run with them (``app.submit_answers``), as ``POST /v1/runs/{id}/answers``
does; ``tasks/cancel`` cancels the run. Everything is in the store: any server process
answers for any run.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import mcp_types
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from pydantic import ValidationError

from longcall.app import App
from longcall.core.runs import Interrupt, Run, RunStatus
from longcall.errors import InvalidAnswer, InvalidValue, RunNotFound, RunStateError
from longcall.mcp.run_wire import (
    answer_of,
    detailed_run_task,
    is_object_schema,
    open_interrupts,
    run_task,
)
from longcall.workflows import Workflow, answer_problems

INPUT_ARGUMENT = "input"  # the one argument of a workflow whose input is not an object


def _input_schema(wf: Workflow[..., Any]) -> dict[str, Any]:
    if wf.input_param is None:
        return {"type": "object", "properties": {}}
    schema = wf.input_adapter.json_schema()
    if schema == {} or is_object_schema(schema):
        return schema or {"type": "object"}
    return {"type": "object", "properties": {INPUT_ARGUMENT: schema}, "required": [INPUT_ARGUMENT]}


def _input_of(wf: Workflow[..., Any], arguments: dict[str, Any]) -> Any:
    if wf.input_param is None:
        return None
    schema = wf.input_adapter.json_schema()
    if schema == {} or is_object_schema(schema):
        return arguments
    return arguments.get(INPUT_ARGUMENT)


def _refused(problems: list[dict[str, str]], run_id: str) -> MCPError:
    text = "; ".join(
        f"{p['key']}{'.' + p['path'] if p['path'] else ''}: {p['message']}" for p in problems
    )
    return MCPError(
        code=INVALID_PARAMS,
        message=f"answers refused, run {run_id!r} still waits: {text}",
        data={"errors": problems},
    )


class RunTasks:
    """The workflow half of the server: ``names`` None serves every registered workflow
    (read at each request), otherwise only those."""

    def __init__(self, app: App, names: Collection[str] | None) -> None:
        self.app = app
        self.names = None if names is None else frozenset(names)
        for name in self.names or ():
            app.workflows.resolve(name)  # WorkflowNotFound now, not at the first call

    def served(self) -> dict[str, Workflow[..., Any]]:
        registry = dict(self.app.workflows.registry)
        if self.names is None:
            return registry
        return {name: wf for name, wf in registry.items() if name in self.names}

    def tools(self) -> list[mcp_types.Tool]:
        return [
            mcp_types.Tool(
                name=name,
                description=(wf.__doc__ or f"the workflow {name!r}").strip()
                + " (a durable longcall workflow run; it may ask for input)",
                input_schema=_input_schema(wf),
            )
            for name, wf in sorted(self.served().items())
        ]

    async def start(self, name: str, arguments: dict[str, Any], user_id: str | None) -> Run:
        wf = self.served()[name]
        try:
            return await self.app.in_thread(
                self.app.submit_run, wf, _input_of(wf, arguments), user_id=user_id
            )
        except (ValidationError, InvalidValue) as exc:
            raise MCPError(code=INVALID_PARAMS, message=f"bad input for {name!r}: {exc}") from None

    async def find(self, task_id: str, may_see: Any) -> Run | None:
        """The run with this id if it is a served workflow's and ``may_see(user_id)``."""
        try:
            run = await self.app.in_thread(self.app.monitor.run, task_id)
        except (RunNotFound, InvalidValue):
            return None
        if run.workflow_id not in self.served() or not may_see(run.user_id):
            return None
        return run

    async def _interrupts(self, run: Run) -> dict[str, Interrupt]:
        return await self.app.in_thread(self.app.monitor.run_interrupts, run.run_id)

    async def get(self, run: Run) -> dict[str, Any]:
        interrupts = await self._interrupts(run)
        return detailed_run_task(run, list(interrupts.values()))

    async def cancel(self, run: Run) -> None:
        await self.app.in_thread(self.app.cancel_run, run.run_id)

    async def update(self, run: Run, responses: Mapping[str, Any]) -> None:
        """Take the answers to the run's open questions; unknown or already answered keys
        are ignored (SEP-2663), so a repeated ``tasks/update`` changes nothing. A value
        that does not fit its question's schema refuses the whole update."""
        if run.status is not RunStatus.WAITING_INPUT:
            return
        interrupts = await self._interrupts(run)
        asking = {i.key: i for i in open_interrupts(list(interrupts.values()))}
        values: dict[str, Any] = {}
        problems: list[dict[str, str]] = []
        for key, response in responses.items():
            if key not in asking:
                continue
            try:
                values[key] = _accepted_value(asking[key], response)
            except ValueError as exc:
                problems.append({"key": key, "path": "", "message": str(exc)})
        if problems:
            raise _refused(problems, run.run_id)
        if not values:
            return
        try:
            self.app.workflows.check_answers(run, interrupts, values)
            problems = answer_problems(interrupts, values)
            if problems:
                raise InvalidAnswer(run.run_id, problems)
            # Checks again in its transaction: another process may have answered meanwhile.
            await self.app.in_thread(self.app.submit_answers, run.run_id, values)
        except InvalidAnswer as exc:
            if _already_answered(exc):
                return
            raise _refused(exc.errors, run.run_id) from None
        except RunStateError:
            return  # answered (or cancelled) by someone else first: nothing left to take


def _accepted_value(interrupt: Interrupt, response: Any) -> Any:
    """The value an ``ElicitResult`` carries (read by hand, not with ``mcp_types``: its
    ``content`` is typed flat, and a question's schema may nest)."""
    action = response.get("action") if isinstance(response, dict) else None
    if action not in ("accept", "decline", "cancel"):
        raise ValueError("not an elicitation result: needs action accept, decline or cancel")
    if action != "accept":
        raise ValueError(
            f"the answer's action is {action!r}: the run needs an accepted answer "
            "(tasks/cancel stops it instead)"
        )
    content = response.get("content")
    if not isinstance(content, dict):
        raise ValueError("an accepted answer needs its content (an object)")
    return answer_of(interrupt.schema, content)


def _already_answered(exc: InvalidAnswer) -> bool:
    return all("already answered" in p["message"] for p in exc.errors)


__all__ = ["RunTasks", "run_task"]
