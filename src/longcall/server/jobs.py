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
import uuid
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

import pydantic
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from longcall.app import App
from longcall.core.jobs import CallIds, FinishOutcome, Job, JobState, job_id_for, parse_duration
from longcall.errors import (
    AttachConflict,
    JobNotFound,
    NotRedeliverable,
    StoreError,
    WebhookError,
)
from longcall.server.auth import Principal, authenticate
from longcall.server.checks import bounded, nul_in_body
from longcall.server.errors import error
from longcall.server.hooks import read_body
from longcall.shapes import event_json, job_json
from longcall.store.base import NewJob
from longcall.webhooks import parse_json

M = TypeVar("M", bound=pydantic.BaseModel)
Handler = Callable[[Request, App, Principal], Awaitable[Response]]


MAX_SEARCH = 200  # characters of a jobs listing's search text


def search_problem(text: str) -> str | None:
    """What is wrong with a jobs listing's search text, or None when nothing is."""
    if len(text) > MAX_SEARCH:
        return f"the search text is at most {MAX_SEARCH} characters"
    if "\x00" in text:  # no store keeps one (PostgreSQL refuses to compare it)
        return "the search text has a NUL character"
    return None


def whole_number(text: str) -> bool:
    """ASCII digits only, and few of them: ``str.isdigit`` also takes "²", which int() refuses."""
    return text.isascii() and text.isdigit() and len(text) <= 18


class _Body(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", populate_by_name=True)


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


def deadline_seconds(value: str | float) -> float:
    """Seconds from a body's duration; ValueError says what is wrong with it."""
    seconds = parse_duration(value)
    if seconds > MAX_DEADLINE:
        raise ValueError(f"a deadline is at most 10 years away, not {value!r}")
    return seconds


class CreateJob(_Body):
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
    args: dict[str, Any] = {}
    deadline: Duration | None = None
    app_name: Annotated[str | None, bounded("app_name", alias="appName")] = None
    user_id: Annotated[str | None, bounded("user_id", alias="userId")] = None
    session_id: Annotated[str | None, bounded("session_id", alias="sessionId")] = None
    call_id: Annotated[str | None, bounded("call_id", alias="callId")] = None
    invocation_id: Annotated[str | None, bounded("invocation_id", alias="invocationId")] = None


class Complete(_Body):
    result: Any = None


FreeText = Annotated[str, bounded("text")]  # anything but NUL


class Fail(_Body):
    error: FreeText | dict[str, Any]


class Cancel(_Body):
    reason: FreeText | None = None


class Progress(_Body):
    progress: Any
    notify_model: Annotated[bool, pydantic.Field(alias="notifyModel")] = False


class Attach(_Body):
    app_name: Annotated[str | None, bounded("app_name", alias="appName")] = None
    session_id: Annotated[str | None, bounded("session_id", alias="sessionId")] = None
    call_id: Annotated[str | None, bounded("call_id", alias="callId")] = None
    invocation_id: Annotated[str | None, bounded("invocation_id", alias="invocationId")] = None


class Redeliver(_Body):
    app_name: Annotated[
        str | None,
        bounded(
            "app_name",
            alias="appName",
            description="deliver into this ADK app's session from now on (it went to the "
            "wrong app); default: the job's own app",
        ),
    ] = None


class Extend(_Body):
    deadline: Duration


async def body_of(request: Request, model: type[M]) -> M | Response:
    """The request's JSON body as ``model``, or the 4xx answer that says what is wrong."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/json":
        return error(415, "unsupported_media_type", "send JSON (application/json)", "content-type")
    raw = await read_body(request, request.app.state.settings.max_body)
    if isinstance(raw, Response):
        return raw
    try:
        data = parse_json(raw) if raw else {}
    except WebhookError as exc:
        return error(400, "bad_request", str(exc))
    refused = nul_in_body(data)
    if refused is not None:
        return refused
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or None
        return error(422, "invalid_body", first["msg"], field)


def authorized(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """Answer 401 without a valid token, 503 when the store fails, else run ``handler``."""

    async def endpoint(request: Request) -> Response:
        who = await authenticate(request)
        if isinstance(who, Response):
            return who
        try:
            return await handler(request, request.app.state.longcall, who)
        except JobNotFound as exc:
            return error(404, "job_not_found", str(exc), "jobId")
        except StoreError as exc:
            return error(503, "store_unavailable", f"the store could not answer: {exc}")

    return endpoint


async def visible_job(app: App, who: Principal, job_id: str) -> Job:
    """The job, if the caller may see it; JobNotFound (404) otherwise, either way."""
    job = await app.get_job_async(job_id)
    if not who.may_see(job):
        raise JobNotFound(job_id)
    return job


def _cursor(job: Job) -> str:
    return base64.urlsafe_b64encode(json.dumps([job.created_at, job.job_id]).encode()).decode()


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
    limit = int(limit_text)
    jobs = await app.list_jobs_async(
        state=JobState(state) if state else None,
        tool_name=q.get("tool"),
        session_id=q.get("session"),
        user_id=user,
        text=text or None,
        before=before,
        limit=limit,
    )
    next_cursor = _cursor(jobs[-1]) if len(jobs) == limit else None
    return JSONResponse({"jobs": [job_json(j) for j in jobs], "nextCursor": next_cursor})


async def create_job(request: Request, app: App, who: Principal) -> Response:
    body = await body_of(request, CreateJob)
    if isinstance(body, Response):
        return body
    if not who.admin and body.user_id not in (None, who.user_id):
        return error(
            422, "invalid_body", "a user's token creates jobs for that user only", "userId"
        )
    try:
        deadline = None if body.deadline is None else deadline_seconds(body.deadline)
    except ValueError as exc:
        return error(422, "invalid_body", str(exc), "deadline")
    ids = CallIds(
        body.app_name,
        body.user_id or who.user_id,
        body.session_id,
        body.call_id,
        body.invocation_id,
    )
    # The work runs outside Python: no on_cancel hook to call when it is cancelled or expires,
    # unless this server's own App has the tool with one.
    tool = app.tools.get(body.tool_name)
    job_id, legacy_id = f"job-{uuid.uuid4().hex}", None
    if body.job_id is not None and who.admin:
        job_id = body.job_id  # an admin names the stored id in full
    elif body.job_id is not None:
        # A user's id lives in that user's namespace, so it can neither block another
        # user's job nor tell whether one exists.
        job_id, legacy_id = job_id_for(body.job_id, ids.user_id), body.job_id
    new = NewJob(
        job_id,
        body.tool_name,
        body.args,
        ids,
        deadline,
        cancel_hook=tool is not None and tool.on_cancel is not None,
        legacy_id=legacy_id,
    )
    try:
        job, created = await app.in_thread(
            app.store.create_job, new, holder=app.holder, dispatch_lease=0, dispatch=False
        )
    except AttachConflict as exc:
        return error(409, "call_taken", str(exc), "callId")
    if not who.may_see(job):
        raise JobNotFound(new.job_id)
    return JSONResponse(job_json(job), status_code=201 if created else 200)


async def get_job(request: Request, app: App, who: Principal) -> Response:
    job = await visible_job(app, who, request.path_params["job_id"])
    return JSONResponse(job_json(job))


async def job_events(request: Request, app: App, who: Principal) -> Response:
    job = await visible_job(app, who, request.path_params["job_id"])
    events = await app.job_events_async(job.job_id)
    return JSONResponse({"events": [event_json(e) for e in events]})


def _finished(outcome: FinishOutcome) -> Response:
    return JSONResponse({"changed": outcome.changed, "job": job_json(outcome.job)})


def _finishing(
    model: type[M], finish: Callable[[App, str, M], Awaitable[FinishOutcome]]
) -> Handler:
    """A handler that ends a visible job with what ``finish`` does with the body."""

    async def handler(request: Request, app: App, who: Principal) -> Response:
        job = await visible_job(app, who, request.path_params["job_id"])
        body = await body_of(request, model)
        if isinstance(body, Response):
            return body
        return _finished(await finish(app, job.job_id, body))

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
    return JSONResponse({"changed": updated is not None, "job": job_json(updated or job)})


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
    return JSONResponse({"changed": attached != job, "job": job_json(attached)})


async def extend(request: Request, app: App, who: Principal) -> Response:
    job = await visible_job(app, who, request.path_params["job_id"])
    body = await body_of(request, Extend)
    if isinstance(body, Response):
        return body
    try:
        seconds = deadline_seconds(body.deadline)
    except ValueError as exc:
        return error(422, "invalid_body", str(exc), "deadline")
    extended = await app.in_thread(app.store.extend, job.job_id, seconds)
    return JSONResponse({"changed": extended is not None, "job": job_json(extended or job)})


async def redeliver(request: Request, app: App, who: Principal) -> Response:
    job = await visible_job(app, who, request.path_params["job_id"])
    body = await body_of(request, Redeliver)
    if isinstance(body, Response):
        return body
    try:
        again = await app.redeliver_async(job.job_id, app_name=body.app_name)
    except NotRedeliverable as exc:
        return error(409, "not_redeliverable", str(exc))
    return JSONResponse({"changed": True, "job": job_json(again)})


ROUTES = [
    Route("/v1/jobs", authorized(list_jobs), methods=["GET"]),
    Route("/v1/jobs", authorized(create_job), methods=["POST"]),
    Route("/v1/jobs/{job_id:path}/complete", authorized(complete), methods=["POST"]),
    Route("/v1/jobs/{job_id:path}/fail", authorized(fail), methods=["POST"]),
    Route("/v1/jobs/{job_id:path}/cancel", authorized(cancel), methods=["POST"]),
    Route("/v1/jobs/{job_id:path}/progress", authorized(progress), methods=["POST"]),
    Route("/v1/jobs/{job_id:path}/attach", authorized(attach), methods=["POST"]),
    Route("/v1/jobs/{job_id:path}/extend", authorized(extend), methods=["POST"]),
    Route("/v1/jobs/{job_id:path}/redeliver", authorized(redeliver), methods=["POST"]),
    Route("/v1/jobs/{job_id:path}", authorized(get_job), methods=["GET"]),
]
