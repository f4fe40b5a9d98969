"""The schedules of an app: validated create, edit, pause, trigger and list.

See :mod:`longcall.cron` for what a schedule does."""

from __future__ import annotations

import builtins
import dataclasses
import enum
import functools
import logging
import uuid
from typing import Any, Final

import pydantic

from longcall.core.cron import ConcurrencyPolicy, Cron, CronFire, MisfirePolicy
from longcall.core.deprecation import deprecated
from longcall.cron._schedule import MAX_CATCH_UP, parse, preview
from longcall.cron._scheduler import Scheduler
from longcall.errors import (
    CronValidationError,
    WorkflowNotFound,
)
from longcall.runtime import Runtime
from longcall.store import Store
from longcall.workflows.runs import Workflows

log = logging.getLogger("longcall.cron")


class _Keep(enum.Enum):
    KEEP = enum.auto()


KEEP: Final = _Keep.KEEP


def _policy(value: Any, kind: type[enum.StrEnum], field: str) -> Any:
    try:
        return kind(value)
    except ValueError as exc:
        names = ", ".join(m.value for m in kind)
        raise CronValidationError(field, f"{value!r} is not one of {names}") from exc


def _catch_up(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_CATCH_UP:
        raise CronValidationError("catchUpMax", f"give a whole number from 0 to {MAX_CATCH_UP}")
    return value


def _name(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise CronValidationError("name", "give the schedule a non-empty name")
    return value


class Crons:
    """The cron schedules of an :class:`~longcall.App`: validated create, edit, trigger, list.

    Each method has an ``*_async`` twin that runs it on the app's thread pool; the plain
    form refuses to run inside an event loop.
    """

    def __init__(self, runtime: Runtime, workflows: Workflows) -> None:
        self.runtime = runtime
        self.workflows = workflows

    def _store(self, method: str) -> Store:
        self.runtime.refuse_in_loop(f"crons.{method}")
        return self.runtime.store

    def create(
        self,
        name: str,
        workflow_id: str,
        expression: str,
        *,
        timezone: str = "UTC",
        input: Any = None,
        concurrency_policy: ConcurrencyPolicy | str = ConcurrencyPolicy.SKIP,
        misfire_policy: MisfirePolicy | str = MisfirePolicy.SKIP,
        catch_up_max: int = 0,
        paused: bool = False,
        user_id: str | None = None,
        cron_id: str | None = None,
        check_workflow: bool = True,
        queue: str | None = None,
    ) -> Cron:
        """Validate and create a schedule; its first occurrence is the first after now.

        The workflow must be registered in this App and the input must be one it takes: an
        unknown workflow raises :class:`~longcall.errors.WorkflowNotFound`, an input it would
        refuse :class:`~longcall.errors.CronValidationError` (``field`` ``input``), and
        nothing is created; the input is stored as the workflow encodes it. For a workflow
        only other processes (the workers) register, pass ``check_workflow=False``: the
        input is then stored as given (JSON), and runs of an unknown workflow fail where
        they execute. ``queue`` submits the runs to that named queue (declared with
        ``app.queue``; one not declared raises CronValidationError, field ``queue``); the
        concurrency policy still applies before the queue's limits.
        """
        store = self._store("create")
        if queue is not None and store.get_queue(queue) is None:
            raise CronValidationError("queue", f"no queue named {queue!r} is declared")
        schedule = parse(expression, timezone)
        if not isinstance(workflow_id, str) or not workflow_id:
            raise CronValidationError("workflowId", "give the id of a workflow")
        if check_workflow:
            input = self._checked_input(workflow_id, input)
        return store.create_cron(
            cron_id or f"cron-{uuid.uuid4().hex}",
            _name(name),
            workflow_id,
            expression,
            next_fire_at=schedule.next_after(self.runtime.clock.now()),
            timezone=timezone,
            input=input,
            concurrency_policy=_policy(concurrency_policy, ConcurrencyPolicy, "concurrencyPolicy"),
            misfire_policy=_policy(misfire_policy, MisfirePolicy, "misfirePolicy"),
            catch_up_max=_catch_up(catch_up_max),
            paused=bool(paused),
            user_id=user_id,
            queue=queue,
        )

    def _checked_input(self, workflow_id: str, value: Any) -> Any:
        """The input as the registered workflow encodes it (WorkflowNotFound for an unknown
        workflow, CronValidationError naming every bad field of the input)."""
        workflow = self.workflows.resolve(workflow_id)
        try:
            return workflow.encode_input(value)
        except pydantic.ValidationError as exc:
            problems = "; ".join(
                ".".join(["input", *(str(p) for p in e["loc"])]) + f": {e['msg']}"
                for e in exc.errors()
            )
            raise CronValidationError(
                "input", f"workflow {workflow_id!r} does not take it ({problems})"
            ) from None

    def get(self, cron_id: str) -> Cron:
        return self._store("get").get_cron(cron_id)

    def get_by_name(self, name: str) -> Cron:
        return self._store("get_by_name").get_cron_by_name(name)

    def list(
        self,
        *,
        user_id: str | None = None,
        workflow_id: str | None = None,
        paused: bool | None = None,
        after: str | None = None,
        limit: int = 50,
    ) -> builtins.list[Cron]:
        """Schedules by name; ``after`` is the name of the last one of the previous page."""
        return self._store("list").list_cron(
            user_id=user_id, workflow_id=workflow_id, paused=paused, after=after, limit=limit
        )

    def update(
        self,
        cron_id: str,
        *,
        name: str | None = None,
        workflow_id: str | None = None,
        expression: str | None = None,
        timezone: str | None = None,
        input: Any = KEEP,
        concurrency_policy: ConcurrencyPolicy | str | None = None,
        misfire_policy: MisfirePolicy | str | None = None,
        catch_up_max: int | None = None,
        paused: bool | None = None,
        check_workflow: bool = False,
    ) -> Cron:
        """Change what is given (None and KEEP leave a field as it is).

        A new expression or zone restarts the schedule at the first occurrence after now;
        resuming keeps ``next_fire_at``, so occurrences missed while paused go to the
        misfire policy at the next tick.
        """
        store = self._store("update")
        if name is not None:
            _name(name)
        if (
            check_workflow
            and workflow_id is not None
            and workflow_id not in self.workflows.registry
        ):
            raise WorkflowNotFound(workflow_id)
        concurrency = (
            None
            if concurrency_policy is None
            else _policy(concurrency_policy, ConcurrencyPolicy, "concurrencyPolicy")
        )
        misfire = (
            None
            if misfire_policy is None
            else _policy(misfire_policy, MisfirePolicy, "misfirePolicy")
        )
        catch_up = None if catch_up_max is None else _catch_up(catch_up_max)
        if expression is not None or timezone is not None:
            # Fail before touching the row when the new pair alone is already wrong.
            parse(
                expression if expression is not None else "* * * * *",
                timezone if timezone is not None else "UTC",
            )
        now = self.runtime.clock.now()

        def edit(current: Cron) -> Cron:
            new_expression = current.expression if expression is None else expression
            new_timezone = current.timezone if timezone is None else timezone
            next_fire_at = current.next_fire_at
            if (new_expression, new_timezone) != (current.expression, current.timezone):
                next_fire_at = parse(new_expression, new_timezone).next_after(now)
            return dataclasses.replace(
                current,
                name=current.name if name is None else name,
                workflow_id=current.workflow_id if workflow_id is None else workflow_id,
                expression=new_expression,
                timezone=new_timezone,
                input=current.input if input is KEEP else input,
                concurrency_policy=current.concurrency_policy
                if concurrency is None
                else concurrency,
                misfire_policy=current.misfire_policy if misfire is None else misfire,
                catch_up_max=current.catch_up_max if catch_up is None else catch_up,
                paused=current.paused if paused is None else bool(paused),
                next_fire_at=next_fire_at,
            )

        return store.update_cron(cron_id, edit)

    def pause(self, cron_id: str) -> Cron:
        """Stop firing (runs already started go on); repeating it changes nothing."""
        return self.update(cron_id, paused=True)

    def unpause(self, cron_id: str) -> Cron:
        """Fire again; what was missed while paused goes to the misfire policy."""
        return self.update(cron_id, paused=False)

    def resume(self, cron_id: str) -> Cron:
        """Deprecated name of :meth:`unpause`."""
        deprecated("app.crons.resume", "app.crons.unpause")
        return self.unpause(cron_id)

    def delete(self, cron_id: str) -> bool:
        """Delete the schedule (its runs stay); False when there was none."""
        return self._store("delete").delete_cron(cron_id)

    def trigger(self, cron_id: str, *, force: bool = False) -> CronFire:
        """Start a run now, outside the schedule's occurrences (outcome ``triggered``).

        The concurrency policy applies: a ``queue`` schedule's run waits its turn, a
        ``skip`` schedule refuses while one of its runs is active (outcome
        ``trigger_skipped``, no run) unless ``force``."""
        return self._store("trigger").trigger(
            cron_id, self.runtime.clock.now(), force=force, versions=self.versions()
        )

    def fires(
        self, cron_id: str, *, before: float | None = None, limit: int = 50
    ) -> builtins.list[CronFire]:
        """The schedule's claimed occurrences, newest first."""
        return self._store("fires").cron_fires(cron_id, before=before, limit=limit)

    def active_runs(self, cron_id: str) -> int:
        """How many of the schedule's runs are queued, running or waiting for input."""
        return self._store("active_runs").active_run_count(cron_id)

    def preview(
        self, expression: str, timezone: str = "UTC", *, count: int = 5, after: float | None = None
    ) -> builtins.list[float]:
        """The next ``count`` fire times (UTC epoch seconds) of an expression in a zone."""
        return preview(
            expression,
            timezone,
            count=count,
            after=self.runtime.clock.now() if after is None else after,
        )

    def scheduler(self, **options: Any) -> Scheduler:
        return Scheduler(self.runtime, versions=self.versions, **options)

    def versions(self) -> dict[str, str]:
        """The version registered here of each workflow: the version its fired runs record."""
        return {wid: wf.version for wid, wf in self.workflows.registry.items()}

    # -- async twins ---------------------------------------------------------------------

    async def create_async(self, name: str, workflow_id: str, expression: str, **kw: Any) -> Cron:
        return await self.runtime.in_thread(
            functools.partial(self.create, name, workflow_id, expression, **kw)
        )

    async def get_async(self, cron_id: str) -> Cron:
        return await self.runtime.in_thread(self.get, cron_id)

    async def list_async(self, **filters: Any) -> builtins.list[Cron]:
        return await self.runtime.in_thread(self.list, **filters)

    async def update_async(self, cron_id: str, **changes: Any) -> Cron:
        return await self.runtime.in_thread(self.update, cron_id, **changes)

    async def delete_async(self, cron_id: str) -> bool:
        return await self.runtime.in_thread(self.delete, cron_id)

    async def trigger_async(self, cron_id: str, *, force: bool = False) -> CronFire:
        return await self.runtime.in_thread(self.trigger, cron_id, force=force)

    async def fires_async(self, cron_id: str, **options: Any) -> builtins.list[CronFire]:
        return await self.runtime.in_thread(self.fires, cron_id, **options)
