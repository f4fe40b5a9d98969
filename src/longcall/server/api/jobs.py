"""``/v1/jobs``: jobs for tools that run outside Python, their state, and what to do with them.

A user's token sees and changes only that user's jobs: any other job answers 404, exactly as
a job that does not exist. A ``jobId`` it sends is a key in that user's namespace
(:func:`~longcall.core.jobs.job_id_for`), and (session, call) is unique per user, so creating a job
never tells whether another user's id or call exists. Every change goes through the same store
operations as Python.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

import pydantic
from starlette.requests import Request
from starlette.responses import Response

from longcall.app import App
from longcall.core.jobs import CallIds, FinishOutcome, Job, JobState, parse_duration
from longcall.errors import AttachConflict, JobNotFound, NotRedeliverable
from longcall.server.api import models
from longcall.server.api.operation import PAGE, Answer, Operation, query
from longcall.server.api.requests import Body, Handler, authorized, body_of, reply, whole_number
from longcall.server.auth import Principal
from longcall.server.checks import bounded
from longcall.server.errors import error
from longcall.shapes import Event
from longcall.shapes import Job as JobShape
from longcall.store import SEARCH_WINDOW
from longcall.telemetry import completion_via

M = TypeVar("M", bound=pydantic.BaseModel)

MAX_SEARCH = 200  # characters of a jobs listing's search text


def search_problem(text: str) -> str | None:
    """What is wrong with a jobs listing's search text, or None when nothing is."""
    if len(text) > MAX_SEARCH:
        return f"the search text is at most {MAX_SEARCH} characters"
    if "\x00" in text:  # no store keeps one (PostgreSQL refuses to compare it)
        return "the search text has a NUL character"
    return None


MAX_DEADLINE = 10 * 365 * 86400.0  # seconds; further than this is a mistake, not a plan
# Strict: pydantic would read true and false as 1 and 0 seconds.
Duration = Annotated[
    pydantic.StrictStr | pydantic.StrictFloat,
    pydantic.WithJsonSchema(
        {
            "description": "seconds from now, or like '45m', '1h30m', '2d' (up to 10 years)",
            "anyOf": [
                {"type": "number", "minimum": 0, "maximum": MAX_DEADLINE},
                {"type": "string", "pattern": r"^(\d{1,9}(\.\d{1,6})?(ms|s|m|h|d)){1,4}$"},
            ],
        }
    ),
]


def _deadline_seconds(value: str | float) -> float:
    """Seconds from a body's duration; ValueError says what is wrong with it."""
    seconds = parse_duration(value)
    if seconds > MAX_DEADLINE:
        raise ValueError(f"a deadline is at most 10 years away, not {value!r}")
    return seconds


class CreateJob(Body):
    tool_name: Annotated[str, bounded("tool_name", alias="toolName")]
    job_id: Annotated[
        str | None,
        bounded(
            "job_key",
            alias="jobId",
            description=(
                "the job's key: a user's token gets the job id key@<16 hex> (its own "
                "namespace, see longcall.job_id_for); an admin's names the id in full"
            ),
        ),
    ] = None
    args: dict[str, Any] = pydantic.Field(default={})  # pydantic copies it for each body
    deadline: Duration | None = None
    app_name: Annotated[str | None, bounded("app_name", alias="appName")] = None
    user_id: Annotated[str | None, bounded("user_id", alias="userId")] = None
    session_id: Annotated[str | None, bounded("session_id", alias="sessionId")] = None
    call_id: Annotated[str | None, bounded("call_id", alias="callId")] = None
    invocation_id: Annotated[str | None, bounded("invocation_id", alias="invocationId")] = None


class Complete(Body):
    result: Any = None


FreeText = Annotated[str, bounded("text")]  # anything but NUL


class Fail(Body):
    error: FreeText | dict[str, Any]


class Cancel(Body):
    reason: FreeText | None = None


class Progress(Body):
    progress: Any
    notify_model: Annotated[bool, pydantic.Field(alias="notifyModel")] = False


class Attach(Body):
    app_name: Annotated[str | None, bounded("app_name", alias="appName")] = None
    session_id: Annotated[str | None, bounded("session_id", alias="sessionId")] = None
    call_id: Annotated[str | None, bounded("call_id", alias="callId")] = None
    invocation_id: Annotated[str | None, bounded("invocation_id", alias="invocationId")] = None


class Redeliver(Body):
    app_name: Annotated[
        str | None,
        bounded(
            "app_name",
            alias="appName",
            description="deliver into this ADK app's session from now on (it went to the "
            "wrong app); default: the job's own app",
        ),
    ] = None


class Extend(Body):
    deadline: Duration


async def visible_job(app: App, who: Principal, job_id: str) -> Job:
    """The job, if the caller may see it; JobNotFound (404) otherwise, either way."""
    job = await app.get_job_async(job_id)
    if not who.may_see(job):
        raise JobNotFound(job_id)
    return job


def _encode_cursor(key: tuple[float, str]) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(key)).encode()).decode()


def _read_cursor(text: str) -> tuple[float, str] | None:
    try:
        created, job_id = json.loads(base64.urlsafe_b64decode(text.encode()))
        return float(created), str(job_id)
    except (ValueError, TypeError, binascii.Error):
        return None


async def list_jobs(request: Request, app: App, who: Principal) -> Response:
    q = request.query_params
    state = q.get("state")
    if state is not None and state not in {s.value for s in JobState}:
        return error(422, "invalid_query", f"unknown state {state!r}", "state")
    limit_text = q.get("limit", "50")
    if not (whole_number(limit_text) and 1 <= int(limit_text) <= 200):
        return error(422, "invalid_query", "limit is a whole number from 1 to 200", "limit")
    before = None
    if q.get("cursor"):  # an empty cursor= is the first page
        before = _read_cursor(q["cursor"])
        if before is None:
            return error(422, "invalid_query", "the cursor is not one this API gave", "cursor")
    user = None if who.admin else who.user_id
    if who.admin and "user" in q:
        user = q["user"]
    text = q.get("q", "")
    problem = search_problem(text)
    if problem is not None:
        return error(422, "invalid_query", problem, "q")
    found = await app.in_thread(
        app.monitor.job_page,
        state=JobState(state) if state else None,
        tool_name=q.get("tool"),
        session_id=q.get("session"),
        user_id=user,
        text=text or None,
        before=before,
        limit=int(limit_text),
    )
    jobs = found.jobs
    next_cursor = _encode_cursor(found.next) if found.next else None
    return reply(models.JobList(jobs=[JobShape.of(j) for j in jobs], next_cursor=next_cursor))


async def create_job(request: Request, app: App, who: Principal) -> Response:
    body = await body_of(request, CreateJob)
    if isinstance(body, Response):
        return body
    if not who.admin and body.user_id not in (None, who.user_id):
        return error(
            422, "invalid_body", "a user's token creates jobs for that user only", "userId"
        )
    try:
        deadline = None if body.deadline is None else _deadline_seconds(body.deadline)
    except ValueError as exc:
        return error(422, "invalid_body", str(exc), "deadline")
    ids = CallIds(
        body.app_name,
        body.user_id or who.user_id,
        body.session_id,
        body.call_id,
        body.invocation_id,
    )
    # An admin names the stored id in full; a user's id is a key in that user's namespace, so
    # it can neither block another user's job nor tell whether one exists.
    named = {"job_id" if who.admin else "key": body.job_id}
    try:
        job, created = await app.create_job_async(
            body.tool_name, body.args, ids=ids, deadline=deadline, **named
        )
    except AttachConflict as exc:
        return error(409, "call_taken", str(exc), "callId")
    if not who.may_see(job):
        raise JobNotFound(job.job_id)
    return reply(JobShape.of(job), status_code=201 if created else 200)


async def get_job(request: Request, app: App, who: Principal) -> Response:
    job = await visible_job(app, who, request.path_params["job_id"])
    return reply(JobShape.of(job))


async def job_events(request: Request, app: App, who: Principal) -> Response:
    job = await visible_job(app, who, request.path_params["job_id"])
    events = await app.job_events_async(job.job_id)
    return reply(models.Events(events=[Event.of(e) for e in events]))


def _changed(changed: bool, job: Job) -> Response:
    return reply(models.Changed(changed=changed, job=JobShape.of(job)))


def _finishing(
    model: type[M], finish: Callable[[App, str, M], Awaitable[FinishOutcome]]
) -> Handler:
    """A handler that ends a visible job with what ``finish`` does with the body."""

    async def handler(request: Request, app: App, who: Principal) -> Response:
        job = await visible_job(app, who, request.path_params["job_id"])
        body = await body_of(request, model)
        if isinstance(body, Response):
            return body
        with completion_via("api"):
            outcome = await finish(app, job.job_id, body)
        return _changed(outcome.changed, outcome.job)

    return handler


complete = _finishing(Complete, lambda app, job_id, b: app.complete_async(job_id, b.result))
fail = _finishing(Fail, lambda app, job_id, b: app.fail_async(job_id, b.error))
cancel = _finishing(Cancel, lambda app, job_id, b: app.cancel_async(job_id, b.reason))


async def progress(request: Request, app: App, who: Principal) -> Response:
    job = await visible_job(app, who, request.path_params["job_id"])
    body = await body_of(request, Progress)
    if isinstance(body, Response):
        return body
    updated = await app.progress_async(job.job_id, body.progress, notify_model=body.notify_model)
    return _changed(updated is not None, updated or job)


async def attach(request: Request, app: App, who: Principal) -> Response:
    job = await visible_job(app, who, request.path_params["job_id"])
    body = await body_of(request, Attach)
    if isinstance(body, Response):
        return body
    ids = CallIds(body.app_name, job.user_id, body.session_id, body.call_id, body.invocation_id)
    try:
        attached = await app.attach_async(job.job_id, ids)
    except AttachConflict as exc:
        return error(409, "attach_conflict", str(exc), next(iter(exc.conflicts), None))
    return _changed(attached != job, attached)


async def extend(request: Request, app: App, who: Principal) -> Response:
    job = await visible_job(app, who, request.path_params["job_id"])
    body = await body_of(request, Extend)
    if isinstance(body, Response):
        return body
    try:
        seconds = _deadline_seconds(body.deadline)
    except ValueError as exc:
        return error(422, "invalid_body", str(exc), "deadline")
    extended = await app.in_thread(app.extend_deadline, job.job_id, seconds)
    return _changed(extended is not None, extended or job)


async def redeliver(request: Request, app: App, who: Principal) -> Response:
    job = await visible_job(app, who, request.path_params["job_id"])
    body = await body_of(request, Redeliver)
    if isinstance(body, Response):
        return body
    try:
        again = await app.redeliver_async(job.job_id, app_name=body.app_name)
    except NotRedeliverable as exc:
        return error(409, "not_redeliverable", str(exc))
    return _changed(True, again)


# -- the operations ---------------------------------------------------------------------------

STATES = [s.value for s in JobState]
_WRITE_REFUSALS = (400, 401, 404, 413, 415, 422, 503)
_CHANGED = {200: Answer("Whether it changed the job; the job after.", models.Changed)}


def _action(verb: str, handler: Handler, summary: str, model: type[Body], *more: int) -> Operation:
    return Operation(
        "POST",
        f"/v1/jobs/{{job_id:path}}/{verb}",
        authorized(handler),
        tag="jobs",
        summary=summary,
        body=model,
        answers=_CHANGED,
        refusals=(*_WRITE_REFUSALS, *more),
    )


OPERATIONS = (
    Operation(
        "GET",
        "/v1/jobs",
        authorized(list_jobs),
        tag="jobs",
        summary="Jobs the caller may see, newest first.",
        params=(
            query("state", "Only jobs in this state.", {"enum": STATES}),
            query("tool", "Only jobs of this tool."),
            query("session", "Only jobs of this session."),
            query(
                "q",
                "Only jobs whose id, tool, session, user, call id or arguments contain this "
                "text (in any case of ASCII letters). A search page reads at most "
                f"{SEARCH_WINDOW:,} jobs, so it may hold fewer than `limit` jobs and still "
                "have a `next_cursor`: follow it to search older jobs.",
                {"type": "string", "maxLength": MAX_SEARCH},
            ),
            *PAGE,
        ),
        answers={200: Answer("A page of jobs.", models.JobList)},
        refusals=(401, 422, 503),
    ),
    Operation(
        "POST",
        "/v1/jobs",
        authorized(create_job),
        tag="jobs",
        summary="Create a job for a tool that runs outside Python (idempotent).",
        description="Its work runs outside Python: cancelling it or its deadline passing calls "
        "no `on_cancel` hook (unless the server's App registers a tool of that name with one).",
        body=CreateJob,
        answers={
            201: Answer("Created.", JobShape),
            200: Answer("It existed: the job as it is.", JobShape),
        },
        refusals=(400, 401, 404, 409, 413, 415, 422, 503),
    ),
    _action(
        "complete",
        complete,
        "Complete the job (first result wins; at or after its deadline the result is late: "
        "recorded, `changed` false, the job expired).",
        Complete,
    ),
    _action("fail", fail, "Fail the job (late past its deadline).", Fail),
    _action("cancel", cancel, "Cancel the job (late past its deadline).", Cancel),
    _action("progress", progress, "Report progress.", Progress),
    _action("attach", attach, "Attach the job to its agent session and call.", Attach, 409),
    _action("extend", extend, "Set a new deadline, from now.", Extend),
    _action(
        "redeliver",
        redeliver,
        "Deliver an orphaned or failed job's response again, once its cause is fixed (attempts "
        "reset; the error stays in the event log). Any other delivery: 409.",
        Redeliver,
        409,
    ),
    Operation(
        "GET",
        "/v1/jobs/{job_id:path}",
        authorized(get_job),
        tag="jobs",
        summary="One job.",
        answers={200: Answer("The job.", JobShape)},
        refusals=(401, 404, 503),
    ),
)
