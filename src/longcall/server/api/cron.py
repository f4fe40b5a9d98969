"""``/v1/cron``: cron schedules over HTTP: create, list, inspect, change, trigger, delete.

Schedules belong to a user like runs do: a user's token creates schedules for that user and
sees only those (any other answers 404, exactly as one that does not exist); an admin's token
sees every schedule. The runs a schedule starts belong to its user. Names are unique across
the service, so a name another user took is a 409 too.

Choices a client can rely on:

* ``POST /v1/cron`` answers 201. Refusals store nothing: a bad ``cronExpression`` or an
  unknown ``timezone`` is 422 naming the field, a workflow the server's App has not
  registered 404, input that does not fit the workflow's input type 422 naming the field
  under ``input``, a taken name 409.
* ``PATCH /v1/cron/{cronId}`` changes the fields given (``null``, or a field left out, keeps
  it; ``input`` may be set to ``null``): ``{"paused": true}`` pauses, ``{"paused": false}``
  resumes (occurrences missed in between go to the misfire policy), a new expression or zone
  restarts the schedule at its first occurrence after now. It answers 200 with the schedule.
* ``DELETE /v1/cron/{cronId}`` answers 204; the runs the schedule started stay and go on.
* ``POST /v1/cron/{cronId}/trigger`` starts a run now under the concurrency policy (paused or
  not): 202 with outcome ``triggered`` and the ``runId``; 200 with outcome
  ``trigger_skipped`` and no run when a ``skip`` schedule has a run active, unless the body
  says ``{"force": true}``.

Fire times are ISO 8601: in UTC (``…+00:00``) and, in ``nextFireTimes``, also in the
schedule's zone.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import math
from typing import Annotated, Any

import pydantic
from starlette.requests import Request
from starlette.responses import Response

from longcall.app import App
from longcall.core.cron import ConcurrencyPolicy, Cron, MisfirePolicy
from longcall.cron import MAX_CATCH_UP, parse
from longcall.errors import (
    CronConflict,
    CronNotFound,
    CronValidationError,
    RunNotFound,
    WorkflowNotFound,
)
from longcall.server.api import models
from longcall.server.api.operation import PAGE, Answer, Endpoint, Operation, query
from longcall.server.api.requests import Body, Handler, authorized, body_of, reply, whole_number
from longcall.server.auth import Principal
from longcall.server.checks import bounded
from longcall.server.errors import error
from longcall.shapes import Cron as CronShape
from longcall.shapes import CronFire, ZonedTime, iso, zoned

# -- answers ----------------------------------------------------------------------------------


def _next_times(app: App, cron: Cron) -> list[ZonedTime]:
    """The expression's next fire times after now, in the schedule's zone and in UTC (none
    when this host cannot evaluate the schedule, its zone unknown here, say)."""
    try:
        found = app.crons.preview(cron.expression, cron.timezone, count=models.NEXT_TIMES)
    except CronValidationError:
        return []
    return zoned(found, cron.timezone)


def _last_execution(app: App, cron: Cron) -> models.LastExecution | None:
    """The latest run the schedule started: when, how, and the run's status now (None for
    the time and outcome when its record was pruned, for the status when the run is gone)."""
    if cron.last_fire_at is None:
        return None
    # cron_fires lists those strictly before a time: the next float includes last_fire_at.
    found = app.crons.fires(
        cron.cron_id, before=math.nextafter(cron.last_fire_at, math.inf), limit=1
    )
    fire = found[0] if found and found[0].fire_at == cron.last_fire_at else None
    status = None
    if fire is not None and fire.run_id is not None:
        with contextlib.suppress(RunNotFound):  # removed from the database by hand
            status = app.monitor.run(fire.run_id).status
    return models.LastExecution(
        fire_at=iso(cron.last_fire_at),
        outcome=fire.outcome if fire else None,
        run_id=fire.run_id if fire else None,
        run_status=status,
    )


def details(app: App, cron: Cron) -> models.CronDetails:
    """The schedule with its active runs, latest run, next fire times and recent occurrences
    (blocking: a few queries)."""
    fires = app.crons.fires(cron.cron_id, limit=models.RECENT_FIRES)
    return models.CronDetails(
        **dict(CronShape.of(cron, app.crons.active_runs(cron.cron_id))),
        last_execution=_last_execution(app, cron),
        next_fire_times=_next_times(app, cron),
        recent_fires=[CronFire.of(f) for f in fires],
    )


def details_json(app: App, cron: Cron) -> dict[str, Any]:
    """:func:`details` as JSON data (blocking: a few queries)."""
    return details(app, cron).dumped()


def listed(app: App, crons: list[Cron]) -> list[CronShape]:
    """The schedules with their active runs (blocking: a query each)."""
    return [CronShape.of(c, app.crons.active_runs(c.cron_id)) for c in crons]


def listed_json(app: App, crons: list[Cron]) -> list[dict[str, Any]]:
    """:func:`listed` as JSON data (blocking: a query each)."""
    return [c.dumped() for c in listed(app, crons)]


# -- requests ---------------------------------------------------------------------------------

Name = Annotated[str, bounded("cron_name")]
WorkflowId = Annotated[str, bounded("workflow_id")]
Expression = Annotated[
    str,
    bounded(
        "cron_expression",
        description="5 fields (minute hour day-of-month month day-of-week), 6 with seconds "
        "first, or @yearly @monthly @weekly @daily @hourly …",
    ),
]
Zone = Annotated[str, bounded("timezone", description="An IANA name: Europe/Berlin")]
CatchUp = Annotated[int, pydantic.Field(ge=0, le=MAX_CATCH_UP)]


class CreateCron(Body):
    name: Name
    workflow_id: WorkflowId = pydantic.Field(alias="workflowId")
    cron_expression: Expression = pydantic.Field(alias="cronExpression")
    timezone: Zone = "UTC"
    input: Any = None
    concurrency_policy: ConcurrencyPolicy = pydantic.Field(alias="concurrencyPolicy")
    misfire_policy: MisfirePolicy = pydantic.Field(MisfirePolicy.SKIP, alias="misfirePolicy")
    catch_up_max: CatchUp = pydantic.Field(0, alias="catchUpMax")
    paused: bool = False
    user_id: Annotated[str | None, bounded("user_id", alias="userId")] = None
    queue: Annotated[str | None, pydantic.Field(min_length=1, max_length=128)] = None


class UpdateCron(Body):
    """The fields to change; one left out or ``null`` stays as it is (but ``input``, which may
    be set to ``null``)."""

    name: Name | None = None
    workflow_id: WorkflowId | None = pydantic.Field(None, alias="workflowId")
    cron_expression: Expression | None = pydantic.Field(None, alias="cronExpression")
    timezone: Zone | None = None
    input: Any = None
    concurrency_policy: ConcurrencyPolicy | None = pydantic.Field(None, alias="concurrencyPolicy")
    misfire_policy: MisfirePolicy | None = pydantic.Field(None, alias="misfirePolicy")
    catch_up_max: CatchUp | None = pydantic.Field(None, alias="catchUpMax")
    paused: bool | None = None


class Trigger(Body):
    force: bool = pydantic.Field(
        default=False, description="Start a run even while a skip schedule has one active."
    )


# -- handlers ---------------------------------------------------------------------------------


def _visible(who: Principal, cron: Cron) -> bool:
    return who.admin or (cron.user_id is not None and cron.user_id == who.user_id)


async def visible_cron(app: App, who: Principal, cron_id: str) -> Cron:
    """The schedule, if the caller may see it; CronNotFound (404) otherwise, either way."""
    if "\x00" in cron_id:  # no store keeps such an id (PostgreSQL refuses to compare it)
        raise CronNotFound(cron_id)
    cron = await app.crons.get_async(cron_id)
    if not _visible(who, cron):
        raise CronNotFound(cron_id)
    return cron


def _authorized(handler: Handler) -> Endpoint:
    """:func:`~longcall.server.api.requests.authorized`, with the schedule refusals answered."""

    async def inner(request: Request, app: App, who: Principal) -> Response:
        try:
            return await handler(request, app, who)
        except CronNotFound as exc:
            return error(404, "cron_not_found", str(exc), "cronId")
        except WorkflowNotFound as exc:
            return error(404, "workflow_not_found", str(exc), "workflowId")
        except CronValidationError as exc:
            return error(422, "invalid_schedule", str(exc), exc.field)
        except CronConflict as exc:
            return error(409, "cron_conflict", str(exc), "name")

    return authorized(inner)


def _wake(request: Request) -> None:
    """Have the scheduler beside this server look at the schedules now, when whoever runs it
    put it in ``state.scheduler``; otherwise every scheduler sees the change at its next poll
    (each second by default)."""
    scheduler = getattr(request.app.state, "scheduler", None)
    if scheduler is not None:
        scheduler.wake()


def _encoded_input(app: App, workflow_id: str, value: Any) -> Any | Response:
    """The input checked against the workflow's input type, as it is stored; a 422 naming
    the field when it does not fit."""
    workflow = app.workflows.resolve(workflow_id)
    try:
        return workflow.encode_input(value)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(["input", *(str(p) for p in first["loc"])])
        return error(422, "invalid_input", first["msg"], field)


async def create(request: Request, app: App, who: Principal) -> Response:
    body = await body_of(request, CreateCron)
    if isinstance(body, Response):
        return body
    if not who.admin and body.user_id not in (None, who.user_id):
        return error(
            422, "invalid_body", "a user's token creates schedules for that user", "userId"
        )
    parse(body.cron_expression, body.timezone)  # 422 before the workflow's 404
    encoded = _encoded_input(app, body.workflow_id, body.input)
    if isinstance(encoded, Response):
        return encoded
    cron = await app.crons.create_async(
        body.name,
        body.workflow_id,
        body.cron_expression,
        timezone=body.timezone,
        input=encoded,
        concurrency_policy=body.concurrency_policy,
        misfire_policy=body.misfire_policy,
        catch_up_max=body.catch_up_max,
        paused=body.paused,
        user_id=body.user_id or who.user_id,
        check_workflow=True,
        queue=body.queue,
    )
    _wake(request)
    return reply(await app.in_thread(details, app, cron), status_code=201)


def _cursor(cron: Cron) -> str:
    return base64.urlsafe_b64encode(json.dumps([cron.name]).encode()).decode()


def _read_cursor(text: str) -> str | None:
    try:
        [name] = json.loads(base64.urlsafe_b64decode(text.encode()))
    except (ValueError, TypeError, binascii.Error):
        return None
    return name if isinstance(name, str) and "\x00" not in name else None


async def list_(request: Request, app: App, who: Principal) -> Response:
    q = request.query_params
    for name in ("workflow", "user"):
        if "\x00" in q.get(name, ""):
            return error(422, "invalid_query", "no NUL characters here", name)
    paused_text = q.get("paused")
    if paused_text not in (None, "true", "false"):
        return error(422, "invalid_query", "paused is true or false", "paused")
    limit_text = q.get("limit", "50")
    if not (whole_number(limit_text) and 1 <= int(limit_text) <= 200):
        return error(422, "invalid_query", "limit is a whole number from 1 to 200", "limit")
    after = None
    if q.get("cursor"):  # an empty cursor= is the first page
        after = _read_cursor(q["cursor"])
        if after is None:
            return error(422, "invalid_query", "the cursor is not one this API gave", "cursor")
    user = None if who.admin else who.user_id
    if who.admin and q.get("user"):
        user = q["user"]
    limit = int(limit_text)
    crons = await app.crons.list_async(
        user_id=user,
        workflow_id=q.get("workflow"),
        paused=None if paused_text is None else paused_text == "true",
        after=after,
        limit=limit,
    )
    next_cursor = _cursor(crons[-1]) if len(crons) == limit else None
    found = await app.in_thread(listed, app, crons)
    return reply(models.CronList(crons=found, next_cursor=next_cursor))


async def get(request: Request, app: App, who: Principal) -> Response:
    cron = await visible_cron(app, who, request.path_params["cron_id"])
    return reply(await app.in_thread(details, app, cron))


async def update(request: Request, app: App, who: Principal) -> Response:
    cron = await visible_cron(app, who, request.path_params["cron_id"])
    body = await body_of(request, UpdateCron)
    if isinstance(body, Response):
        return body
    given = body.model_fields_set
    changes: dict[str, Any] = {
        key: value
        for key, value in (
            ("name", body.name),
            ("workflow_id", body.workflow_id),
            ("expression", body.cron_expression),
            ("timezone", body.timezone),
            ("concurrency_policy", body.concurrency_policy),
            ("misfire_policy", body.misfire_policy),
            ("catch_up_max", body.catch_up_max),
            ("paused", body.paused),
        )
        if value is not None
    }
    if body.cron_expression is not None or body.timezone is not None:
        # The pair as it will be, so the field at fault is named (422 before any 404).
        parse(
            cron.expression if body.cron_expression is None else body.cron_expression,
            cron.timezone if body.timezone is None else body.timezone,
        )
    workflow_id = cron.workflow_id if body.workflow_id is None else body.workflow_id
    if body.workflow_id is not None:
        app.workflows.resolve(workflow_id)  # 404 when not registered here
    if "input" in given or body.workflow_id is not None:
        value = body.input if "input" in given else cron.input
        if workflow_id in app.workflows.registry:
            encoded = _encoded_input(app, workflow_id, value)
            if isinstance(encoded, Response):
                return encoded
            value = encoded
        changes["input"] = value
    if changes:
        cron = await app.crons.update_async(cron.cron_id, check_workflow=True, **changes)
        _wake(request)
    return reply(await app.in_thread(details, app, cron))


async def delete(request: Request, app: App, who: Principal) -> Response:
    cron = await visible_cron(app, who, request.path_params["cron_id"])
    if not await app.crons.delete_async(cron.cron_id):
        raise CronNotFound(cron.cron_id)  # deleted by someone else in between
    return Response(status_code=204)


def _has_body(request: Request) -> bool:
    headers = request.headers
    return (
        "content-type" in headers
        or "transfer-encoding" in headers
        or headers.get("content-length", "0") != "0"
    )


async def trigger(request: Request, app: App, who: Principal) -> Response:
    cron = await visible_cron(app, who, request.path_params["cron_id"])
    body = await body_of(request, Trigger) if _has_body(request) else Trigger()
    if isinstance(body, Response):
        return body
    fire = await app.crons.trigger_async(cron.cron_id, force=body.force)
    triggered = models.CronTriggered(**dict(CronFire.of(fire)), cron_id=cron.cron_id)
    return reply(triggered, status_code=202 if fire.outcome.started else 200)


# -- the operations ---------------------------------------------------------------------------

_REASONS = {
    404: "No such schedule (or workflow, on create and change), or not one the caller may see.",
    409: "Another schedule has this name.",
    422: "A field or query parameter is wrong; `field` names it (`cronExpression`, `timezone`, …).",
}
_READ_REFUSALS = (401, 404, 503)
_WRITE_REFUSALS = (400, 401, 404, 413, 415, 422, 503)


def _cron(method: Any, path: str, handler: Handler, **declared: Any) -> Operation:
    return Operation(method, path, _authorized(handler), tag="cron", reasons=_REASONS, **declared)


OPERATIONS = (
    _cron(
        "GET",
        "/v1/cron",
        list_,
        summary="Cron schedules the caller may see, by name.",
        params=(
            query("workflow", "Only schedules of this workflow."),
            query("paused", "Only paused (or running) ones.", {"enum": ["true", "false"]}),
            query("user", "Only this user's (an admin's token)."),
            *PAGE,
        ),
        answers={200: Answer("A page of schedules.", models.CronList)},
        refusals=(401, 422, 503),
    ),
    _cron(
        "POST",
        "/v1/cron",
        create,
        summary="Start a registered workflow at each occurrence of a cron expression.",
        description="The first occurrence is the first after now. The input is checked "
        "against the workflow's input type.",
        body=CreateCron,
        answers={201: Answer("Created.", models.CronDetails)},
        refusals=(*_WRITE_REFUSALS, 409),
    ),
    _cron(
        "POST",
        "/v1/cron/{cron_id:path}/trigger",
        trigger,
        summary="Start a run now, under the schedule's concurrency policy.",
        description="A `skip` schedule with a run active starts nothing (200, outcome "
        '`trigger_skipped`) unless the body says `{"force": true}`.',
        body=Trigger,
        body_required=False,
        answers={
            202: Answer("A run was queued: `runId`.", models.CronTriggered),
            200: Answer("Skipped: a run of the schedule is active.", models.CronTriggered),
        },
        refusals=_WRITE_REFUSALS,
    ),
    _cron(
        "GET",
        "/v1/cron/{cron_id:path}",
        get,
        summary="One schedule, with its next fire times and latest occurrences.",
        answers={200: Answer("The schedule.", models.CronDetails)},
        refusals=_READ_REFUSALS,
    ),
    _cron(
        "PATCH",
        "/v1/cron/{cron_id:path}",
        update,
        summary="Pause, resume or change a schedule.",
        description='`{"paused": true}` pauses, `{"paused": false}` resumes (missed '
        "occurrences go to the misfire policy); a new expression or zone restarts it at the "
        "next occurrence after now. Fields left out stay.",
        body=UpdateCron,
        answers={200: Answer("The schedule after the change.", models.CronDetails)},
        refusals=(*_WRITE_REFUSALS, 409),
    ),
    _cron(
        "DELETE",
        "/v1/cron/{cron_id:path}",
        delete,
        summary="Delete a schedule; the runs it started go on.",
        answers={204: Answer("Deleted.")},
        refusals=_READ_REFUSALS,
    ),
)
