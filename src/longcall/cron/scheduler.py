"""Cron schedules: start a workflow at each occurrence of a cron expression in a time zone.

Expressions are standard 5-field cron (minute hour day-of-month month day-of-week), or 6
fields with a leading seconds field, or one of ``@yearly`` ``@annually`` ``@monthly``
``@weekly`` ``@daily`` ``@midnight`` ``@hourly``; a time zone is an IANA name
(``Europe/Berlin``). A bad expression or zone raises :class:`CronValidationError`, a
``ValueError`` whose ``field`` is ``cronExpression`` or ``timezone``.

Occurrences are wall-clock times in the schedule's zone, stored as UTC epoch seconds (whole
seconds). Across daylight-saving changes every occurrence fires exactly once:

- a local time that does not exist (clocks jump forward over it: ``30 2 * * *`` in
  Europe/Berlin on the last Sunday of March) fires at the first instant after the jump
  (03:00 CEST); the times inside the gap that fall on one instant fire once;
- a local time that happens twice (clocks go back: ``30 1 * * *`` in America/New_York on the
  first Sunday of November) fires once, at its first instance (01:30 EDT), unless the
  expression fires in every hour (its hour field is ``*``): then it fires in both passes, so
  ``*/15 * * * *`` keeps firing every 15 minutes of real time through the repeated hour.

:class:`Scheduler` fires due occurrences; any number of schedulers may run against one
database, each occurrence being claimed once (see :mod:`longcall.store.cron`). An occurrence
counts as *missed* when the scheduler gets to it more than ``misfire_grace`` seconds late
(the schedule was paused, or no scheduler ran); the schedule's misfire policy decides:

- ``skip`` (default): missed occurrences are dropped; the schedule goes on with the next one;
- ``run_once``: one run, at the latest due occurrence, stands for all the due ones;
- ``catch_up``: the latest ``catch_up_max`` missed occurrences fire, oldest first, and older
  ones are dropped (``catch_up_max = 0`` is ``skip``), so a long outage is never a burst.

Concurrency policies decide what an occurrence does while a run the schedule started is
queued, running or waiting for input: ``skip`` (default) starts nothing and records the
occurrence as skipped, ``allow`` starts a run beside it, ``queue`` starts a run keyed
``cron:<cron_id>`` that workers start only after the earlier ones ended, in occurrence order.
A run that completes, fails or is cancelled stops counting. A trigger (:meth:`Crons.trigger`)
starts a run now under the same policy (``force`` overrides ``skip``).

Occurrences within the grace always fire. Pausing stops nothing that is running; resuming
hands what was missed in between to the misfire policy. Changing the expression or the zone
restarts the schedule from the next occurrence after the change.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import dataclasses
import enum
import functools
import logging
import math
import uuid
from collections import deque
from collections.abc import Iterator
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any, Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pydantic
from croniter import (
    CroniterBadDateError,
    croniter,
)

from longcall.core.deprecation import deprecated
from longcall.errors import (
    CronConflict,
    CronNotFound,
    CronValidationError,
    WorkflowNotFound,
)
from longcall.runtime import Runtime
from longcall.store import Store
from longcall.store.cron import (
    ConcurrencyPolicy,
    Cron,
    CronFire,
    FireOutcome,
    FirePlan,
    MisfirePolicy,
    concurrency_key,
)
from longcall.workflows.runs import Workflows

__all__ = [
    "ALIASES",
    "ConcurrencyPolicy",
    "Cron",
    "CronConflict",
    "CronFire",
    "CronNotFound",
    "CronSchedule",
    "CronValidationError",
    "Crons",
    "FireOutcome",
    "MisfirePolicy",
    "Scheduler",
    "concurrency_key",
    "parse",
    "preview",
]

log = logging.getLogger("longcall.cron")

ALIASES: Final = frozenset(
    {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
)
MAX_CATCH_UP: Final = 1000
_EPOCH: Final = datetime(1970, 1, 1)
_HOUR_FIELD: Final = 1


def _epoch(wall: datetime, offset: timedelta) -> float:
    return (wall - offset - _EPOCH).total_seconds()


def _zone(timezone: str) -> ZoneInfo:
    if not isinstance(timezone, str) or not timezone.strip():
        raise CronValidationError("timezone", "give an IANA time zone name such as 'UTC'")
    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise CronValidationError(
            "timezone", f"unknown time zone {timezone!r}; use an IANA name like 'Europe/Berlin'"
        ) from exc


class CronSchedule:
    """A parsed expression in a time zone: its occurrences as UTC epoch seconds.

    Immutable and safe to share between threads (each computation makes its own iterator).
    """

    __slots__ = ("_every_hour", "_expr", "_seconds", "expression", "timezone", "zone")

    def __init__(self, expression: str, timezone: str = "UTC") -> None:
        self.zone = _zone(timezone)
        self.timezone = timezone
        if not isinstance(expression, str) or not expression.strip():
            raise CronValidationError("cronExpression", "empty; e.g. '*/5 * * * *'")
        self.expression = expression
        text = " ".join(expression.split())
        if text.startswith("@"):
            if text.lower() not in ALIASES:
                raise CronValidationError(
                    "cronExpression",
                    f"unknown alias {text!r}; use one of {', '.join(sorted(ALIASES))}",
                )
            text = text.lower()
            self._seconds = False
        else:
            fields = len(text.split(" "))
            if fields not in (5, 6):
                raise CronValidationError(
                    "cronExpression",
                    f"{expression!r} has {fields} field(s); give 5 (minute hour day-of-month "
                    "month day-of-week) or 6 with seconds first",
                )
            self._seconds = fields == 6
        self._expr = text
        try:
            it = croniter(text, _EPOCH, second_at_beginning=self._seconds)
            it.get_next(datetime)
        except CroniterBadDateError as exc:
            raise CronValidationError(
                "cronExpression", f"{expression!r} never matches a date"
            ) from exc
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            raise CronValidationError("cronExpression", f"{expression!r}: {exc}") from exc
        self._every_hour = it.expanded[_HOUR_FIELD] == ["*"]

    def __repr__(self) -> str:
        return f"CronSchedule({self.expression!r}, {self.timezone!r})"

    @property
    def has_seconds(self) -> bool:
        return self._seconds

    # -- wall clock to instants ---------------------------------------------------------

    def _walls(self, after: datetime) -> Iterator[datetime]:
        """The local wall-clock times the expression names, strictly after ``after`` (naive)."""
        it = croniter(self._expr, after, second_at_beginning=self._seconds)
        while True:
            try:
                yield it.get_next(datetime)
            except CroniterBadDateError:
                return

    def _offset(self, instant: float) -> timedelta:
        offset = datetime.fromtimestamp(instant, self.zone).utcoffset()
        assert offset is not None
        return offset

    def _instants(self, wall: datetime) -> tuple[float, float | None]:
        """When a wall time happens: (first, second), second only for a repeated time.

        A time in a gap happens at the first instant after the gap (the transition)."""
        early = wall.replace(tzinfo=self.zone)
        late = wall.replace(tzinfo=self.zone, fold=1)
        o_early, o_late = early.utcoffset(), late.utcoffset()
        assert o_early is not None and o_late is not None
        if o_early == o_late:
            return _epoch(wall, o_early), None
        a, b = sorted((_epoch(wall, o_early), _epoch(wall, o_late)))
        if self._wall(a) == wall and self._wall(b) == wall:
            return a, b
        return self._transition(a, b), None

    def _wall(self, instant: float) -> datetime:
        return datetime.fromtimestamp(instant, self.zone).replace(tzinfo=None)

    def _transition(self, lo: float, hi: float) -> float:
        """The first whole second in (lo, hi] whose offset differs from lo's."""
        before = self._offset(lo)
        low, high = math.floor(lo), math.ceil(hi)
        while high - low > 1:
            mid = (low + high) // 2
            if self._offset(mid) == before:
                low = mid
            else:
                high = mid
        return float(high)

    # -- occurrences --------------------------------------------------------------------

    def next_after(self, after: float) -> float | None:
        """The first occurrence strictly after ``after`` (None: none within 50 years)."""
        local = datetime.fromtimestamp(after, self.zone)
        wall = local.replace(tzinfo=None)
        other = local.replace(fold=1 - local.fold).utcoffset()
        offset = local.utcoffset()
        assert offset is not None and other is not None
        repeated = other != offset  # ``after`` is in an hour that happens twice
        if repeated and local.fold == 1:
            # In the second pass: walls later in the repeated hour happen again after
            # ``after`` (every-hour expressions) or have had their one occurrence already.
            for w in self._walls(wall):
                first, second = self._instants(w)
                if second is not None:
                    if self._every_hour:
                        return second
                    continue
                if first > after:
                    return first
            return None
        best: float | None = None
        for w in self._walls(wall):
            first, _ = self._instants(w)
            if first > after:
                best = first
                break
        if repeated and self._every_hour:
            # In the first pass: walls up to ``after``'s own come round again after it.
            shift = offset - other
            for w in self._walls(wall - shift):
                if w > wall:
                    break
                _, second = self._instants(w)
                if second is not None and second > after:
                    if best is None or second < best:
                        best = second
                    break
        return best

    def at_or_after(self, when: float) -> float | None:
        """The first occurrence at ``when`` or later (occurrences are whole seconds)."""
        return self.next_after(math.ceil(when) - 1.0)

    def occurrences(self, start: float, end: float | None = None) -> Iterator[float]:
        """Occurrences from ``start`` (included) to ``end`` (excluded; None: no end)."""
        at = self.at_or_after(start)
        while at is not None and (end is None or at < end):
            yield at
            at = self.next_after(at)

    def next_times(self, count: int, *, after: float) -> list[float]:
        """The next ``count`` occurrences strictly after ``after``."""
        found: list[float] = []
        at = self.next_after(after)
        while at is not None and len(found) < count:
            found.append(at)
            at = self.next_after(at)
        return found

    def last_before(self, end: float, count: int, *, not_before: float) -> list[float]:
        """The latest ``count`` occurrences in [``not_before``, ``end``), oldest first."""
        if count <= 0 or end <= not_before:
            return []
        first = self.at_or_after(not_before)
        if first is None or first >= end:
            return []
        second = self.next_after(first)
        period = max(1.0, (second - first) if second is not None else end - first)
        span = period * count * 2
        while True:
            low = max(not_before, end - span)
            window: deque[float] = deque(maxlen=count)
            seen = 0
            for at in self.occurrences(low, end):
                window.append(at)
                seen += 1
            if seen >= count or low <= not_before:
                return list(window)
            span *= 4


@lru_cache(maxsize=1024)
def parse(expression: str, timezone: str = "UTC") -> CronSchedule:
    """The schedule of ``expression`` in ``timezone`` (cached); CronValidationError if bad."""
    return CronSchedule(expression, timezone)


def preview(expression: str, timezone: str = "UTC", *, count: int = 5, after: float) -> list[float]:
    """The next ``count`` fire times after ``after``, as UTC epoch seconds."""
    return parse(expression, timezone).next_times(count, after=after)


# -- the schedules of an app -------------------------------------------------------------


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
    ) -> Cron:
        """Validate and create a schedule; its first occurrence is the first after now.

        The workflow must be registered in this App and the input must be one it takes: an
        unknown workflow raises :class:`~longcall.errors.WorkflowNotFound`, an input it would
        refuse :class:`~longcall.errors.CronValidationError` (``field`` ``input``), and
        nothing is created; the input is stored as the workflow encodes it. For a workflow
        only other processes (the workers) register, pass ``check_workflow=False``: the
        input is then stored as given (JSON), and runs of an unknown workflow fail where
        they execute.
        """
        store = self._store("create")
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
        return self._store("trigger").trigger(cron_id, self.runtime.clock.now(), force=force)

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
        return Scheduler(self.runtime, **options)

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


# -- the scheduler -----------------------------------------------------------------------


class Scheduler:
    """Fires due occurrences of every schedule in the app's store.

    ``tick(now)`` does one pass (synchronous; tests give explicit times); ``run(stop)`` ticks
    until ``stop`` is set, waking for the next due occurrence or every ``poll`` seconds to
    see schedules made elsewhere. Start as many as you like, in as many processes: each
    occurrence starts one run.
    """

    def __init__(
        self,
        runtime: Runtime,
        *,
        batch: int = 100,
        misfire_grace: float = 60.0,
        poll: float = 1.0,
        keep_fires: float = 7 * 86400.0,
        prune_every: float = 3600.0,
    ) -> None:
        if batch < 1:
            raise ValueError("batch must be at least 1")
        if misfire_grace < 0:
            raise ValueError("misfire_grace cannot be negative")
        self.runtime = runtime
        self.batch = batch
        self.misfire_grace = misfire_grace
        self.poll = poll
        self.keep_fires = keep_fires
        self.prune_every = prune_every
        self.claimed = 0  # occurrences this scheduler claimed (fired, skipped or not)
        self._pruned_at: float | None = None
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def plan(self, cron: Cron, now: float) -> FirePlan:
        """Which of ``cron``'s due occurrences fire at ``now``, and its next occurrence.

        A schedule that cannot be evaluated here (its zone unknown to this host, say) stops:
        it fires nothing and gets no next occurrence until it is edited, rather than
        holding up the other schedules of the tick at every poll."""
        try:
            return self._plan(cron, now)
        except Exception:
            log.exception("cron schedule %s (%s) stops", cron.cron_id, cron.name)
            return FirePlan((), None)

    def _plan(self, cron: Cron, now: float) -> FirePlan:
        schedule = parse(cron.expression, cron.timezone)
        first = cron.next_fire_at
        following = schedule.next_after(now)
        if first is None:
            return FirePlan((), following)
        horizon = now - self.misfire_grace
        end = math.floor(now) + 1.0  # occurrences are whole seconds: those <= now
        on_time = list(schedule.occurrences(max(first, horizon), end))
        if first >= horizon:
            return FirePlan(on_time, following)
        policy = cron.misfire_policy
        if policy is MisfirePolicy.RUN_ONCE:
            latest = on_time[-1:] or schedule.last_before(horizon, 1, not_before=first)
            return FirePlan(latest, following)
        if policy is MisfirePolicy.CATCH_UP:
            missed = schedule.last_before(horizon, cron.catch_up_max, not_before=first)
            return FirePlan(missed + on_time, following)
        return FirePlan(on_time, following)

    def tick(self, now: float | None = None) -> list[CronFire]:
        """Fire every schedule due at ``now`` (default: the app clock's now); the occurrences
        this scheduler claimed, in the order it claimed them."""
        self.runtime.refuse_in_loop("scheduler.tick")
        return self._tick(now)

    async def tick_async(self, now: float | None = None) -> list[CronFire]:
        """:meth:`tick` on the app's thread pool."""
        return await self.runtime.in_thread(self._tick, now)

    def _tick(self, now: float | None = None) -> list[CronFire]:
        at = self.runtime.clock.now() if now is None else now
        fires: list[CronFire] = []
        while True:
            got, taken = self.runtime.store.fire_due(
                at, lambda cron: self.plan(cron, at), limit=self.batch
            )
            fires += got
            self.claimed += len(got)
            if taken < self.batch:
                break
        if self._pruned_at is None or at - self._pruned_at >= self.prune_every:
            self._pruned_at = at
            self.runtime.store.prune_cron_fires(at - self.keep_fires)
        return fires

    def wake(self) -> None:
        """Tick now instead of at the next due time (from any thread), e.g. after a create."""
        loop, event = self._loop, self._wake
        if loop is not None and event is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed
                loop.call_soon_threadsafe(event.set)

    async def run(self, stop: asyncio.Event) -> None:
        """Tick until ``stop`` is set; a failed tick (the database away) is logged and tried
        again after ``poll`` seconds."""
        self._loop = asyncio.get_running_loop()
        self._wake = wake = asyncio.Event()
        try:
            while not stop.is_set():
                wake.clear()
                delay = self.poll
                try:
                    fires = await self.runtime.in_thread(self._tick)
                    if fires:
                        log.debug("cron: %d occurrence(s) claimed", len(fires))
                    due = await self.runtime.in_thread(self.runtime.store.next_cron_due)
                    if due is not None:
                        # Not zero: a due schedule another scheduler is firing right now
                        # (PostgreSQL skips it) would make this loop spin until it commits.
                        delay = min(self.poll, max(0.01, due - self.runtime.clock.now()))
                except Exception:
                    log.exception("cron scheduler: tick failed; retrying in %.1fs", self.poll)
                stopping = asyncio.ensure_future(stop.wait())
                waking = asyncio.ensure_future(wake.wait())
                try:
                    await asyncio.wait(
                        {stopping, waking}, timeout=delay, return_when=asyncio.FIRST_COMPLETED
                    )
                finally:
                    for task in (stopping, waking):
                        task.cancel()
                    await asyncio.gather(stopping, waking, return_exceptions=True)
        finally:
            self._loop = self._wake = None
