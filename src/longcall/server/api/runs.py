"""``/v1/runs``: background workflow runs over HTTP: submit, inspect, list, follow, answer,
cancel.

A user's token submits runs for that user and sees only that user's runs: any other run
answers 404, exactly as a run that does not exist; an admin's token sees every run. Runs are
executed by workers (``longcall worker --app``, ``longcall serve --app``); the server only
queues them, so it needs the App whose workflows it accepts (``app.workflows.registry``).

Choices a client can rely on:

* ``POST /v1/runs`` answers 201 with a new run, 200 with the run an ``Idempotency-Key``
  made before (the key is the caller's own: another user's identical key is another run). The
  same key with another workflow or input is refused with 422 and queues nothing.
* ``DELETE /v1/runs/{runId}`` always answers 200 with the run: cancelled at once when it was
  queued or waiting, ``cancelRequested`` while a running one reaches its next task call, and
  unchanged when it had finished already (``status`` says which).
* ``POST /v1/runs/{runId}/answers`` (``…/resume`` until the next release) checks each answer
  against the JSON schema of the question it answers before anything is stored (422 with every
  problem, the run still waiting), then queues the run for a worker: 202. An answer ahead, to a
  question not asked yet given with the one the run waits on (``interrupt-2`` with
  ``interrupt-1``), is stored as it is and the run checks it when it gets there; any other key
  the run has not asked (``interrupt-7``), or one already answered, is 422 naming it, and
  nothing is stored or executed.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
from collections.abc import AsyncIterator, Mapping
from typing import Annotated, Any

import pydantic
from starlette.requests import Request
from starlette.responses import Response

from longcall.app import App
from longcall.core.ids import RULES
from longcall.core.runs import Interrupt, Run, RunEvent, RunStatus
from longcall.errors import (
    DuplicateRun,
    InvalidAnswer,
    InvalidValue,
    QueueNotFound,
    RunNotFound,
    RunStateError,
    WorkflowNotFound,
)
from longcall.server.api import models
from longcall.server.api.jobs import MAX_DEADLINE
from longcall.server.api.operation import PAGE, Answer, Endpoint, Operation, header, query
from longcall.server.api.requests import Body, Handler, authorized, body_of, reply, whole_number
from longcall.server.api.streams import message, stream, ticks, wants_stream
from longcall.server.auth import Principal
from longcall.server.checks import bounded
from longcall.server.errors import Error, ErrorDetail, error
from longcall.shapes import Event, HistoryStep, PendingInterrupt, Step, iso
from longcall.shapes import Run as RunShape
from longcall.workflows import answer_problems, checked_version, key_number

MAX_KEY = RULES["idempotency_key"].max_length  # characters in an Idempotency-Key
STATUSES = [s.value for s in RunStatus]


# -- answers ----------------------------------------------------------------------------------


def _pending(run: Run, interrupts: Mapping[str, Interrupt]) -> list[Interrupt]:
    """The questions a waiting run waits on, in the order it asked them."""
    if run.status is not RunStatus.WAITING_INPUT:
        return []
    asked = [i for i in interrupts.values() if i.asked_at is not None and not i.answered]
    return sorted(asked, key=lambda i: key_number(i.key))


def details(app: App, run: Run) -> models.RunDetails:
    """The run with its pending questions and its task checkpoints (blocking: two queries)."""
    interrupts = app.monitor.run_interrupts(run.run_id)
    return models.RunDetails(
        **dict(RunShape.of(run)),
        pending_interrupts=[PendingInterrupt.of(i) for i in _pending(run, interrupts)],
        steps=[Step.of(s) for s in app.monitor.run_steps(run.run_id)],
        children=[RunShape.of(c) for c in app.monitor.child_runs(run.run_id)],
    )


def details_json(app: App, run: Run) -> dict[str, Any]:
    """:func:`details` as JSON data (blocking: two queries)."""
    return details(app, run).dumped()


# -- requests ---------------------------------------------------------------------------------


class SubmitRun(Body):
    workflow_id: Annotated[str, bounded("workflow_id", alias="workflowId")]
    input: Any = None
    # Strict: pydantic would read true as 1 (second, retry).
    timeout_secs: Annotated[
        pydantic.StrictFloat | None, pydantic.Field(alias="timeoutSecs", gt=0, le=MAX_DEADLINE)
    ] = None
    max_retries: Annotated[pydantic.StrictInt, pydantic.Field(alias="maxRetries", ge=0, le=100)] = 0
    user_id: Annotated[str | None, bounded("user_id", alias="userId")] = None
    queue: Annotated[str | None, pydantic.Field(min_length=1, max_length=128)] = None
    priority: Annotated[pydantic.StrictInt | None, pydantic.Field(ge=-(2**31), lt=2**31)] = None
    dedupe_id: Annotated[
        str | None, pydantic.Field(alias="dedupeId", min_length=1, max_length=255)
    ] = None


class ForkRun(Body):
    # Strict: pydantic would read true as step 1.
    from_step: Annotated[pydantic.StrictInt, pydantic.Field(alias="fromStep", ge=1, le=10**9)]
    input: Any = None


class Answers(pydantic.RootModel[dict[str, Any]]):
    """Answers by continuation key: ``{"interrupt-1": value, …}``."""


def _visible(who: Principal, run: Run) -> bool:
    return who.admin or (run.user_id is not None and run.user_id == who.user_id)


async def visible_run(app: App, who: Principal, run_id: str) -> Run:
    """The run, if the caller may see it; RunNotFound (404) otherwise, either way."""
    run = await app.in_thread(app.monitor.run, run_id)
    if not _visible(who, run):
        raise RunNotFound(run_id)
    return run


def _authorized(handler: Handler) -> Endpoint:
    """:func:`~longcall.server.api.requests.authorized`, with an unknown run answered 404."""

    async def inner(request: Request, app: App, who: Principal) -> Response:
        try:
            return await handler(request, app, who)
        except RunNotFound as exc:
            return error(404, "run_not_found", str(exc), "runId")

    return authorized(inner)


def _idempotency_key(request: Request, owner: str | None) -> str | Response | None:
    key = request.headers.get("idempotency-key")
    if key is None:
        return None
    if not 1 <= len(key) <= MAX_KEY:
        message = f"an Idempotency-Key has 1 to {MAX_KEY} characters"
        return error(422, "invalid_header", message, "Idempotency-Key")
    # Keys are per owner: two users choosing the same key get a run each.
    return "http:" + json.dumps([owner, key], separators=(",", ":"))


async def submit(request: Request, app: App, who: Principal) -> Response:
    body = await body_of(request, SubmitRun)
    if isinstance(body, Response):
        return body
    if not who.admin and body.user_id not in (None, who.user_id):
        return error(422, "invalid_body", "a user's token submits runs for that user", "userId")
    owner = body.user_id or who.user_id
    key = _idempotency_key(request, owner)
    if isinstance(key, Response):
        return key
    try:
        workflow = app.workflows.resolve(body.workflow_id)
    except WorkflowNotFound as exc:
        return error(404, "workflow_not_found", str(exc), "workflowId")
    try:
        encoded = workflow.encode_input(body.input)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(["input", *(str(p) for p in first["loc"])])
        return error(422, "invalid_input", first["msg"], field)
    try:
        run = await app.in_thread(
            functools.partial(
                app.submit_run,
                workflow,
                encoded,
                idempotency_key=key,
                max_retries=body.max_retries,
                timeout=body.timeout_secs,
                user_id=owner,
                queue=body.queue,
                priority=body.priority,
                dedupe_id=body.dedupe_id,
            )
        )
    except QueueNotFound as exc:
        return error(404, "queue_not_found", str(exc), "queue")
    except DuplicateRun as exc:
        return reply(models.Duplicate(error=_detail(exc), run_id=exc.run_id), status_code=409)
    except ValueError as exc:  # a priority or dedupe id the queue does not take
        said = str(exc)
        field = (
            "queue"
            if body.queue is None or "queue name" in said
            else "priority"
            if "priorit" in said
            else "dedupeId"
        )
        return error(422, "invalid_body", str(exc), field)
    if not run.created and (run.workflow_id != workflow.workflow_id or run.input != encoded):
        message = "this Idempotency-Key was used for another workflow or input"
        return error(422, "idempotency_key_reused", message, "Idempotency-Key")
    found = await app.in_thread(details, app, run)
    return reply(found, status_code=201 if run.created else 200)


def _detail(exc: DuplicateRun) -> ErrorDetail:
    return ErrorDetail(code="duplicate_run", message=str(exc), field="dedupeId")


def _cursor(run: Run) -> str:
    return base64.urlsafe_b64encode(json.dumps([run.created_at, run.run_id]).encode()).decode()


def _read_cursor(text: str) -> tuple[float, str] | None:
    try:
        created, run_id = json.loads(base64.urlsafe_b64decode(text.encode()))
        return float(created), str(run_id)
    except (ValueError, TypeError, binascii.Error):
        return None


async def list_(request: Request, app: App, who: Principal) -> Response:
    q = request.query_params
    status = q.get("status")
    if status is not None and status not in STATUSES:
        return error(422, "invalid_query", f"unknown status {status!r}", "status")
    for name in ("workflow", "user", "parent"):
        if "\x00" in q.get(name, ""):
            return error(422, "invalid_query", "no NUL characters here", name)
    limit_text = q.get("limit", "50")
    if not whole_number(limit_text) or not 1 <= int(limit_text) <= 200:
        return error(422, "invalid_query", "limit is a whole number from 1 to 200", "limit")
    before = None
    if q.get("cursor"):  # an empty cursor= is the first page
        before = _read_cursor(q["cursor"])
        if before is None or "\x00" in before[1]:
            return error(422, "invalid_query", "the cursor is not one this API gave", "cursor")
    user = None if who.admin else who.user_id
    if who.admin and q.get("user"):
        user = q["user"]
    version = q.get("version")
    if version is not None:
        try:
            checked_version(version)
        except InvalidValue as exc:
            return error(422, "invalid_query", str(exc), "version")
    limit = int(limit_text)
    if q.get("parent"):
        children = await app.in_thread(app.monitor.child_runs, q["parent"])
        wanted = [
            r
            for r in children
            if (status is None or r.status.value == status)
            and (not q.get("workflow") or r.workflow_id == q["workflow"])
            and (user is None or r.user_id == user)
        ]
        return reply(
            models.RunList(runs=[RunShape.of(r) for r in wanted[:limit]], next_cursor=None)
        )
    runs = await app.in_thread(
        app.list_runs,
        status=RunStatus(status) if status else None,
        workflow_id=q.get("workflow"),
        user_id=user,
        before=before,
        limit=limit,
        version=version,
    )
    next_cursor = _cursor(runs[-1]) if len(runs) == limit else None
    return reply(models.RunList(runs=[RunShape.of(r) for r in runs], next_cursor=next_cursor))


async def versions(request: Request, app: App, who: Principal) -> Response:
    """A user's token counts that user's runs; an admin's, everyone's."""
    workflow = request.query_params.get("workflow")
    if workflow is not None and "\x00" in workflow:
        return error(422, "invalid_query", "no NUL characters here", "workflow")
    user = None if who.admin else who.user_id
    found = await app.in_thread(functools.partial(app.run_versions, workflow, user_id=user))
    return reply(
        models.WorkflowVersions(
            versions=[
                models.WorkflowVersion(
                    workflow_id=v.workflow_id,
                    version=v.version,
                    queued=v.counts["queued"],
                    running=v.counts["running"],
                    waiting_input=v.counts["waiting_input"],
                    sleeping=v.counts["sleeping"],
                    active=v.active,
                    oldest_created_at=iso(v.oldest_created_at),
                )
                for v in found
            ]
        )
    )


async def get(request: Request, app: App, who: Principal) -> Response:
    run = await visible_run(app, who, request.path_params["run_id"])
    return reply(await app.in_thread(details, app, run))


async def cancel(request: Request, app: App, who: Principal) -> Response:
    run = await visible_run(app, who, request.path_params["run_id"])
    cancelled = await app.in_thread(app.cancel_run, run.run_id)
    return reply(await app.in_thread(details, app, cancelled))


async def history(request: Request, app: App, who: Principal) -> Response:
    run = await visible_run(app, who, request.path_params["run_id"])
    entries = await app.in_thread(app.run_history, run.run_id)
    return reply(models.History(run_id=run.run_id, steps=[HistoryStep.of(e) for e in entries]))


_FIELDS = {"from_step": "fromStep"}  # InvalidValue's field, as the body names it


async def fork(request: Request, app: App, who: Principal) -> Response:
    """``POST /v1/runs/{runId}/fork``: a new run, owned as the original is, that reuses the
    original's steps before ``fromStep`` and executes from it on; 201 with the new run."""
    run = await visible_run(app, who, request.path_params["run_id"])
    body = await body_of(request, ForkRun)
    if isinstance(body, Response):
        return body
    try:
        forked = await app.in_thread(
            app.fork_run, run.run_id, from_step=body.from_step, input=body.input
        )
    except WorkflowNotFound as exc:
        return error(404, "workflow_not_found", str(exc), "workflowId")
    except InvalidValue as exc:
        field = _FIELDS.get(exc.field, exc.field)
        return error(422, "invalid_fork", str(exc), field)
    return reply(await app.in_thread(details, app, forked), status_code=201)


def _invalid(problems: list[dict[str, str]]) -> Response:
    errors = [
        models.Problem(
            field=p["key"] + (f".{p['path']}" if p["path"] else "") or None,
            message=p["message"],
        )
        for p in problems
    ]
    first = errors[0]
    refusal = models.AnswerRefusal(
        code="invalid_answer", message=first.message, field=first.field, errors=errors
    )
    return reply(models.AnswersRefused(error=refusal), status_code=422)


async def answer(request: Request, app: App, who: Principal) -> Response:
    run = await visible_run(app, who, request.path_params["run_id"])
    body = await body_of(request, Answers)
    if isinstance(body, Response):
        return body
    values = body.root
    if run.status is not RunStatus.WAITING_INPUT:
        message = f"run {run.run_id!r} is {run.status.value}, not waiting for input"
        return error(409, "run_not_waiting", message, "runId")
    interrupts = await app.in_thread(app.monitor.run_interrupts, run.run_id)
    try:
        app.workflows.check_answers(run, interrupts, values)
    except InvalidAnswer as exc:
        return _invalid(exc.errors)
    problems = answer_problems(interrupts, values)
    if problems:
        return _invalid(problems)
    try:
        # Checks again in its transaction: the run may have moved on since it was read.
        queued = await app.in_thread(app.submit_answers, run.run_id, values)
    except RunStateError as exc:
        return error(409, "run_not_waiting", str(exc), "runId")
    except InvalidAnswer as exc:
        return _invalid(exc.errors)
    return reply(await app.in_thread(details, app, queued), status_code=202)


async def answer_by_old_name(request: Request, app: App, who: Principal) -> Response:
    """``POST /v1/runs/{runId}/resume``: the deprecated path of ``…/answers``, for one
    release; its answers say so in a ``Deprecation`` header (RFC 9745)."""
    response = await answer(request, app, who)
    response.headers["deprecation"] = "true"
    successor = request.url.path.removesuffix("/resume") + "/answers"
    response.headers["link"] = f'<{successor}>; rel="successor-version"'
    return response


async def events(request: Request, app: App, who: Principal) -> Response:
    """``GET /v1/runs/{runId}/events``: the event log as JSON, or live until the run ends.

    As a stream: ``event: run`` carries the run (with its questions and checkpoints) when it
    opens and each time it changes, ``event: event`` a log entry with ``id:`` its seq. After
    the run completes, fails or is cancelled the stream sends what is left and ends.
    """
    run = await visible_run(app, who, request.path_params["run_id"])
    start = request.headers.get("last-event-id") or request.query_params.get("after") or "0"
    if not whole_number(start):
        return error(422, "invalid_query", "Last-Event-ID is an event's seq number", "after")
    if not wants_stream(request):
        found = await app.in_thread(app.run_event_log, run.run_id, after=int(start))
        return reply(models.Events(events=[Event.of(e) for e in found]))

    def look(after: int) -> tuple[list[RunEvent], Run, int]:
        found = app.run_event_log(run.run_id, after=after)
        current = app.monitor.run(run.run_id)
        return found, current, len(app.monitor.run_steps(run.run_id))

    async def messages() -> AsyncIterator[bytes]:
        after, seen = int(start), (-1.0, -1)
        async for keepalive in ticks(request):
            found, current, steps = await app.in_thread(look, after)
            if current.status.terminal:
                # Events committed after the read above but before the run ended.
                found += await app.in_thread(
                    app.run_event_log, run.run_id, after=found[-1].seq if found else after
                )
            for event in found:
                after = event.seq
                yield message("event", Event.of(event), str(event.seq))
            sent = bool(found)
            if (current.updated_at, steps) != seen:
                seen, sent = (current.updated_at, steps), True
                yield message("run", await app.in_thread(details, app, current))
            if current.status.terminal:
                return
            if keepalive and not sent:
                yield b": keepalive\n\n"

    return stream(messages())


# -- the operations ---------------------------------------------------------------------------

_REASONS = {
    404: "No such run (or workflow or queue, on submit; workflow, on fork), or not one the "
    "caller may see.",
    409: "The run is not waiting for input.",
    422: "A field, header or query parameter is wrong; `field` names it. Refused answers "
    "list every problem in `errors`.",
}
_READ_REFUSALS = (401, 404, 503)
_ANSWER_REFUSALS = (400, 401, 404, 409, 413, 415, 503)  # and 422: AnswersRefused
_QUEUED = {
    202: Answer("Answers stored; the run is queued.", models.RunDetails),
    # The id checks refuse a path before any answer is read: their 422 is a plain Error.
    422: Answer(_REASONS[422], (models.AnswersRefused, Error)),
}


def _run(method: Any, path: str, handler: Handler, **declared: Any) -> Operation:
    return Operation(method, path, _authorized(handler), tag="runs", reasons=_REASONS, **declared)


OPERATIONS = (
    _run(
        "GET",
        "/v1/runs",
        list_,
        summary="Workflow runs the caller may see, newest first.",
        params=(
            query("status", "Only runs in this status.", {"enum": STATUSES}),
            query("workflow", "Only runs of this workflow."),
            query("user", "Only this user's runs (an admin's token)."),
            query(
                "parent",
                "Only the children of this run (ctx.start_child), oldest first, in one page.",
            ),
            query("version", "Only runs started by this version of their workflow."),
            *PAGE,
        ),
        answers={200: Answer("A page of runs.", models.RunList)},
        refusals=(401, 422, 503),
    ),
    _run(
        "GET",
        "/v1/workflows/versions",
        versions,
        summary="Per workflow and version, its runs not finished that the caller may see.",
        description="A version missing here has drained: no run of it is queued, running, "
        "waiting or sleeping, and workers that register only that version can go.",
        params=(query("workflow", "Only this workflow's versions."),),
        answers={200: Answer("The versions with runs not finished.", models.WorkflowVersions)},
        refusals=(401, 422, 503),
    ),
    _run(
        "POST",
        "/v1/runs",
        submit,
        summary="Queue a run of a registered workflow for a worker.",
        description="The input is checked against the workflow's input type. With an "
        "Idempotency-Key the caller's earlier run with that key is returned (200). `queue` "
        "submits to a named queue (declared by the app), `priority` orders its runs (lower "
        "first) and `dedupeId` refuses a second active run of the queue with the same id (409).",
        params=(
            header(
                "Idempotency-Key",
                "Submit once: the same key returns the same run.",
                "idempotency_key",
            ),
        ),
        body=SubmitRun,
        answers={
            201: Answer("Queued.", models.RunDetails),
            200: Answer("The run this Idempotency-Key made before.", models.RunDetails),
            409: Answer(
                "The queue has an active run with this dedupeId: `runId` names it.",
                models.Duplicate,
            ),
        },
        refusals=(400, 401, 404, 413, 415, 422, 503),
    ),
    _run(
        "GET",
        "/v1/runs/{run_id:path}/events",
        events,
        summary="The run's event log; live with Accept: text/event-stream.",
        description="As a stream: `event: run` messages carry the run, `event: event` messages "
        "a log entry with `id:` its seq; reconnect with Last-Event-ID. The stream ends once "
        "the run has completed, failed or been cancelled.",
        params=(query("after", "Only entries after this seq.", {"type": "integer"}),),
        answers={200: Answer("The log, or its stream.", models.Events, stream=True)},
        refusals=(*_READ_REFUSALS, 422),
    ),
    _run(
        "GET",
        "/v1/runs/{run_id:path}/history",
        history,
        summary="The run's steps in order, each with its output and the state after it.",
        description="A step is a checkpoint: a task call, a sleep, a recv (and its timeout), a "
        "set_event, numbered in the order the workflow called them. Pick one to fork from.",
        answers={200: Answer("The history.", models.History)},
        refusals=_READ_REFUSALS,
    ),
    _run(
        "POST",
        "/v1/runs/{run_id:path}/fork",
        fork,
        summary="Queue a new run that reuses this run's steps before fromStep and executes "
        "from it on.",
        description="`fromStep` is from 1 to one past the run's last step; `input`, if given, "
        "replaces the original's. The new run belongs to the original's owner and records "
        "`forkedFrom` and `forkedStep`. Any run can be forked, finished or not.",
        body=ForkRun,
        answers={201: Answer("The new run, queued.", models.RunDetails)},
        refusals=(400, 401, 404, 413, 415, 422, 503),
    ),
    _run(
        "POST",
        "/v1/runs/{run_id:path}/answers",
        answer,
        summary="Answer a waiting run's questions by key and queue it for a worker.",
        description='The body maps keys to answers: `{"interrupt-1": …}`. Each answer must fit '
        "its question's schema. A key the run has not asked (unless it answers the next "
        "question ahead, together with the one the run waits on) and one already answered "
        "are refused with 422.",
        body=Answers,
        answers=_QUEUED,
        refusals=_ANSWER_REFUSALS,
    ),
    _run(
        "POST",
        "/v1/runs/{run_id:path}/resume",
        answer_by_old_name,
        summary="The deprecated path of /v1/runs/{runId}/answers (for one release).",
        description="The same as `POST /v1/runs/{runId}/answers`; its answers carry a "
        "`Deprecation: true` header and a `Link` to the new path.",
        deprecated=True,
        body=Answers,
        answers=_QUEUED,
        refusals=_ANSWER_REFUSALS,
    ),
    _run(
        "GET",
        "/v1/runs/{run_id:path}",
        get,
        summary="One run, with the questions it waits on and its checkpoints.",
        answers={200: Answer("The run.", models.RunDetails)},
        refusals=_READ_REFUSALS,
    ),
    _run(
        "DELETE",
        "/v1/runs/{run_id:path}",
        cancel,
        summary="Cancel the run (a finished one is left as it is).",
        description="A queued or waiting run is cancelled at once; a running one gets "
        "`cancelRequested` and stops at its next task call.",
        answers={200: Answer("The run after the request.", models.RunDetails)},
        refusals=_READ_REFUSALS,
    ),
)
