"""The long-running tool: a plain function that starts work and returns a pending map.

The wrapper builds the function declaration from the signature, validates the model's
arguments (a bad call gets an error map naming the parameters, and no job), records the job
durably before the function runs, and answers with the pending map::

    {"status": "pending", "jobId": "...", "message": "...", **other fields the tool returned}

The function's own body only submits the work (to a queue, a batch API, a person); the result
arrives later through :meth:`App.complete` and friends. What the body returns shapes the map
(:func:`pending_answer`): a string is the message; a dict's ``message`` is the message and its
other fields (a ticket id, an amount) go to the model as they are. ``status`` and ``jobId``
stay longcall's: the body already submitted the work when it returns, so refusing the answer
would strand that work; a different value is dropped with a warning instead.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import string
import types
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Union, get_args, get_origin, get_type_hints

import pydantic
import pydantic_core

from longcall.core.jobs import STILL_WORKING, CallIds, Job, job_id_for, parse_duration, status_word
from longcall.errors import ConfigError, ToolArgumentsError
from longcall.jobs._joins import Joins
from longcall.logs import about
from longcall.runtime import Runtime
from longcall.store.base import NewJob
from longcall.telemetry import APP_NAME, CALL_ID, JOB_ID, SESSION_ID, TOOL_NAME, USER_ID

log = logging.getLogger("longcall.tools")

LONG_RUNNING_NOTE = (
    "This tool starts a long-running job and returns at once with a pending status; the "
    "result arrives later as a new response to this same call. Do not call this tool again "
    "for the same request after it returned a pending status."
)
DEFAULT_PENDING_MESSAGE = "The job has started; the result will follow when it is ready."


@dataclass(frozen=True, slots=True)
class JobHandle:
    """What the tool's body knows of its job: pass ``id`` on as the idempotency key."""

    id: str
    tool_name: str
    args: Mapping[str, Any]
    ids: CallIds = field(default_factory=CallIds)
    attempt: int = 1  # 2 and more: a worker re-submits after the first try was lost

    @classmethod
    def of(cls, job: Job, *, attempt: int = 1) -> JobHandle:
        return cls(job.job_id, job.tool_name, job.args, job.ids, attempt)


def _context_type(annotation: Any, context_types: Sequence[type]) -> type | None:
    """The context type a parameter asks for, plain or optional (``JobHandle | None``)."""
    if get_origin(annotation) in (Union, types.UnionType):
        members = [a for a in get_args(annotation) if a is not type(None)]
        annotation = members[0] if len(members) == 1 else None
    if isinstance(annotation, type) and any(issubclass(annotation, t) for t in context_types):
        return annotation
    return None


class LongRunningTool:
    """A function registered with :meth:`App.long_running`. Calling it starts (or finds) its job."""

    def __init__(
        self,
        runtime: Runtime,
        joins: Joins,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        key: str | None = None,
        deadline: str | float | None = None,
        on_cancel: Callable[[JobHandle], Any] | None = None,
        description: str | None = None,
        context_types: Sequence[type] = (),
    ) -> None:
        self.runtime = runtime
        self.joins = joins
        self.func = func
        self.name = name or func.__name__
        self.key = key
        self.deadline = None if deadline is None else parse_duration(deadline)
        self.on_cancel = on_cancel
        self.is_async = inspect.iscoroutinefunction(func)
        doc = description if description is not None else (inspect.getdoc(func) or "")
        self.description = f"{doc}\n\n{LONG_RUNNING_NOTE}" if doc else LONG_RUNNING_NOTE
        # Parameters of these types are supplied by longcall or a framework, never the model.
        self._context_types = (JobHandle, *context_types)
        self._context_params: dict[str, type] = {}
        self._model = self._build_model()
        if key is not None:
            self._check_key(key)

    def _build_model(self) -> type[pydantic.BaseModel]:
        hints = get_type_hints(self.func)
        fields: dict[str, Any] = {}
        for param in inspect.signature(self.func).parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise ConfigError(f"tool {self.name!r}: *args and **kwargs cannot be declared")
            annotation = hints.get(param.name, Any)
            context = _context_type(annotation, self._context_types)
            if context is not None:
                self._context_params[param.name] = context
                continue
            default = ... if param.default is param.empty else param.default
            fields[param.name] = (annotation, default)
        config = pydantic.ConfigDict(extra="forbid")
        return pydantic.create_model(f"{self.name}_args", __config__=config, **fields)

    @property
    def context_params(self) -> tuple[str, ...]:
        """The parameters longcall or the framework fills in (hidden from the model)."""
        return tuple(self._context_params)

    def _check_key(self, key: str) -> None:
        allowed = set(self._model.model_fields) | set(CallIds().as_dict())
        for _, field_name, _, _ in string.Formatter().parse(key):
            if field_name is not None and field_name not in allowed:
                raise ConfigError(
                    f"tool {self.name!r}: key {key!r} names {field_name!r}, which is neither "
                    f"a parameter nor one of {sorted(CallIds().as_dict())}"
                )

    # -- declaration --------------------------------------------------------------------

    def declaration(self) -> dict[str, Any]:
        """The function declaration for the model: name, description, JSON schema of params."""
        schema = _strip_titles(self._model.model_json_schema())
        schema.pop("additionalProperties", None)
        return {"name": self.name, "description": self.description, "parameters": schema}

    # -- validation and ids -------------------------------------------------------------

    def validate(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments as the function's types, or :class:`ToolArgumentsError`."""
        try:
            model = self._model.model_validate(dict(args))
        except pydantic.ValidationError as exc:
            errors: dict[str, str] = {}
            for err in exc.errors():
                where = ".".join(str(p) for p in err["loc"]) or "(arguments)"
                message = "missing required argument" if err["type"] == "missing" else err["msg"]
                if err["type"] == "extra_forbidden":
                    message = "unexpected argument"
                errors.setdefault(where, message)
            raise ToolArgumentsError(self.name, errors) from None
        return {name: getattr(model, name) for name in type(model).model_fields}

    def job_id(self, args: Mapping[str, Any], ids: CallIds) -> str:
        """The key filled from the arguments (and call ids) in the caller's namespace
        (:func:`~longcall.core.jobs.job_id_for`), or a fresh random id."""
        key = self.filled_key(args, ids)
        if key is None:
            return f"job-{uuid.uuid4().hex}"
        return job_id_for(key, ids.user_id)

    def filled_key(self, args: Mapping[str, Any], ids: CallIds) -> str | None:
        """The key filled from the arguments and call ids; None for a tool without a key."""
        if self.key is None:
            return None
        values = {**ids.as_dict(), **args}
        return self.key.format(**values)

    def json_args(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Arguments that :meth:`validate` returned, as JSON-ready values for the job row."""
        dumped: dict[str, Any] = self._model.model_construct(**args).model_dump(mode="json")
        return dumped

    # -- calling ------------------------------------------------------------------------

    def call_body(
        self, handle: JobHandle, args: Mapping[str, Any], context: Sequence[object] = ()
    ) -> Any:
        """Run the function itself (sync or async) with its context parameters filled."""
        kwargs = dict(args)
        for name, annotation in self._context_params.items():
            if issubclass(annotation, JobHandle):
                kwargs[name] = handle
            else:
                kwargs[name] = next((c for c in context if isinstance(c, annotation)), None)
        return self.func(**kwargs)

    async def call_body_async(
        self, handle: JobHandle, args: Mapping[str, Any], context: Sequence[object] = ()
    ) -> Any:
        if self.is_async:
            return await self.call_body(handle, args, context)
        return await asyncio.to_thread(self.call_body, handle, args, context)

    @contextmanager
    def _span(self, values: Mapping[str, Any], ids: CallIds) -> Iterator[NewJob]:
        """The ``longcall.tool_call`` span, current inside the block, and the job to create
        in it (which keeps the span's trace context)."""
        telemetry = self.runtime.telemetry
        attributes = {
            TOOL_NAME: self.name,
            APP_NAME: ids.app_name,
            USER_ID: ids.user_id,
            SESSION_ID: ids.session_id,
            CALL_ID: ids.call_id,
        }
        with telemetry.span("longcall.tool_call", attributes) as span:
            new = self._new_job(values, ids, telemetry.trace_context())
            telemetry.set(span, JOB_ID, new.job_id)
            yield new

    def _new_job(
        self, values: Mapping[str, Any], ids: CallIds, trace_context: str | None = None
    ) -> NewJob:
        return NewJob(
            self.job_id(values, ids),
            self.name,
            self.json_args(values),
            ids,
            self.deadline,
            cancel_hook=self.on_cancel is not None,
            by_call=self.key is None,
            # Jobs made before ids were namespaced carry the bare key: the same user's is found.
            legacy_id=self.filled_key(values, ids),
            trace_context=trace_context,
        )

    def _abandoned(self, job: Job, exc: Exception) -> dict[str, Any]:
        log.warning(
            "tool %s could not start job %s: %r",
            self.name,
            job.job_id,
            exc,
            extra=about(job),
        )
        self.runtime.telemetry.failed(exc)
        # No jobId: the job was removed again, and an observer must not try to attach it.
        return {"status": "error", "message": f"the job could not be started: {exc}"}

    def _refused(self, job: Job) -> dict[str, Any]:
        # Only an admin or library code can write into a user's namespace; even then the
        # caller is never handed a stranger's pending job (nor its id).
        log.warning(
            "tool %s: job %s belongs to another user", self.name, job.job_id, extra=about(job)
        )
        self.runtime.telemetry.failed("the job id is taken by another user's job")
        return {"status": "error", "message": "the job id is taken by another user's job"}

    def invoke(
        self,
        args: Mapping[str, Any],
        ids: CallIds | None = None,
        context: Sequence[object] = (),
    ) -> dict[str, Any]:
        """Start the job (or find it) and return the pending map, or an error map.

        The job row commits before the body runs; the body runs only for the call that
        created the row, so a repeated call never submits the work twice. If the body
        raises, the job is removed again and the error map says why.
        """
        self.runtime.refuse_in_loop(f"{self.name}.invoke")
        if self.is_async:
            return asyncio.run(self.invoke_async(args, ids, context))
        return self._invoke_sync(args, ids, context)

    def _invoke_sync(
        self, args: Mapping[str, Any], ids: CallIds | None, context: Sequence[object]
    ) -> dict[str, Any]:
        ids = ids or CallIds()
        try:
            values = self.validate(args)
        except ToolArgumentsError as exc:
            return exc.as_response()
        with self._span(values, ids) as new:
            return self._start_sync(new, values, ids, context)

    def _start_sync(
        self, new: NewJob, values: Mapping[str, Any], ids: CallIds, context: Sequence[object]
    ) -> dict[str, Any]:
        store = self.runtime.store
        job, created = store.create_job(
            new, holder=self.runtime.holder, dispatch_lease=self.runtime.dispatch_lease
        )
        if not created:
            if _strangers(job, ids):
                return self._refused(job)
            return pending_map(self.joins.attach_quietly(job, ids))
        try:
            returned = self.call_body(JobHandle.of(job), values, context)
        except Exception as exc:
            store.abandon_job(job.job_id)
            return self._abandoned(job, exc)
        answer = pending_answer(returned, tool_name=self.name, job_id=job.job_id)
        store.finish_dispatch(job.job_id, answer.message, answer.fields)
        self.joins.joined(job)
        return pending_map(job, answer.message, answer.fields)

    async def invoke_async(
        self,
        args: Mapping[str, Any],
        ids: CallIds | None = None,
        context: Sequence[object] = (),
    ) -> dict[str, Any]:
        """:meth:`invoke` for async callers.

        A sync tool runs whole (its store calls and its body) in one hop to the app's
        thread pool; an async body runs on the loop.
        """
        runtime = self.runtime
        if not self.is_async:
            invoke = runtime.telemetry.carry(self._invoke_sync)
            return await runtime.in_thread(invoke, args, ids, context)
        ids = ids or CallIds()
        try:
            values = self.validate(args)
        except ToolArgumentsError as exc:
            return exc.as_response()
        with self._span(values, ids) as new:
            return await self._start_async(new, values, ids, context)

    async def _start_async(
        self, new: NewJob, values: Mapping[str, Any], ids: CallIds, context: Sequence[object]
    ) -> dict[str, Any]:
        runtime, joins = self.runtime, self.joins
        store = runtime.store
        job, created = await runtime.in_thread(
            store.create_job, new, holder=runtime.holder, dispatch_lease=runtime.dispatch_lease
        )
        if not created:
            if _strangers(job, ids):
                return self._refused(job)
            return pending_map(await runtime.in_thread(joins.attach_quietly, job, ids))
        try:
            returned = await self.call_body_async(JobHandle.of(job), values, context)
        except Exception as exc:
            await runtime.in_thread(store.abandon_job, job.job_id)
            return self._abandoned(job, exc)
        answer = pending_answer(returned, tool_name=self.name, job_id=job.job_id)
        await runtime.in_thread(store.finish_dispatch, job.job_id, answer.message, answer.fields)
        joins.joined(job)
        return pending_map(job, answer.message, answer.fields)

    def __call__(self, **kwargs: Any) -> dict[str, Any]:
        """Call the tool directly with keyword arguments: the pending map."""
        return self.invoke(kwargs)

    def __repr__(self) -> str:
        return f"<LongRunningTool {self.name}>"


def _strangers(job: Job, ids: CallIds) -> bool:
    """Whether ``job`` belongs to another user than the call's (a call with a user only)."""
    return ids.user_id is not None and job.user_id != ids.user_id


RESERVED_KEYS = ("status", "jobId", "message")


def pending_map(
    job: Job, message: str | None = None, fields: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The answer a tool gives while its job runs: longcall's keys, then the tool's fields.

    ``fields`` default to those recorded on the job, so a repeated call for the same job
    answers as the first did. Progress and final responses do not repeat them (ADK shows the
    model only the latest response per call: what it needs at the end belongs in the result).
    """
    extra = job.pending_fields if fields is None else fields
    return {
        "status": "pending",
        "jobId": job.job_id,
        "message": message or job.pending_message or DEFAULT_PENDING_MESSAGE,
        **{k: v for k, v in (extra or {}).items() if k not in RESERVED_KEYS},
    }


@dataclass(frozen=True, slots=True)
class PendingAnswer:
    """What a tool's body returned, made fit for the pending map and the job row."""

    message: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)  # JSON-ready, no reserved key


def pending_answer(returned: Any, *, tool_name: str, job_id: str) -> PendingAnswer:
    """The message and fields a tool's body returned.

    A string is the message. A mapping's ``message`` is the message (as a string) and its
    other fields pass to the model as JSON values (datetimes, UUIDs, dataclasses and pydantic
    models converted as pydantic does). ``status`` and ``jobId`` are longcall's: the same
    value (for ``status`` any word of :data:`~longcall.core.jobs.STILL_WORKING`, such as the
    ``in-progress`` of ADK's sample) is accepted quietly, a different one is dropped with a
    warning, and so is a field that has no JSON form. Anything else (None, a list) answers
    with the default message only.
    """
    if isinstance(returned, str):
        return PendingAnswer(returned)
    if not isinstance(returned, Mapping):
        return PendingAnswer()
    message = returned.get("message")
    ours = {"status": "pending", "jobId": job_id}
    fields: dict[str, Any] = {}
    for key, value in returned.items():
        name = str(key)
        if name == "message":
            continue
        if name in ours:
            agrees = value == ours[name] or (
                name == "status" and status_word(value) in STILL_WORKING
            )
            if not agrees:
                log.warning(
                    "tool %s returned %s=%r for job %s; the pending map keeps longcall's %r "
                    "(return it under another name for the model to see it)",
                    tool_name,
                    name,
                    value,
                    job_id,
                    ours[name],
                )
            continue
        try:
            converted = pydantic_core.to_jsonable_python(value)
            json.dumps(converted, allow_nan=False)  # NaN has no JSON form PostgreSQL accepts
        except (pydantic_core.PydanticSerializationError, ValueError, TypeError):
            log.warning(
                "tool %s returned field %r of type %s for job %s, which has no JSON form; "
                "it is left out of the pending map",
                tool_name,
                name,
                type(value).__name__,
                job_id,
            )
            continue
        fields[name] = converted
    return PendingAnswer(None if message is None else str(message), fields)


def _strip_titles(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _strip_titles(v) for k, v in schema.items() if k != "title"}
    if isinstance(schema, list):
        return [_strip_titles(v) for v in schema]
    return schema
