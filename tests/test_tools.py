"""The long-running tool wrapper: declaration, validation, idempotent jobs, the pending map."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import longcall
from longcall.jobs.tools import DEFAULT_PENDING_MESSAGE, LONG_RUNNING_NOTE

PENDING_KEYS = {"status", "jobId", "message"}


@pytest.fixture
def app(sqlite_url: str) -> Iterator[longcall.App]:
    with longcall.App(sqlite_url) as app:
        yield app


# -- the declaration -----------------------------------------------------------------------


def test_declaration_is_built_from_the_signature(app: longcall.App) -> None:
    """The declaration names the tool, types each parameter and lists the required ones."""

    @app.long_running
    def export_table(table: str, rows: int, fmt: str = "csv", compress: bool = False) -> str:
        """Exports a table to a file."""
        return "started"

    decl = export_table.declaration()
    assert decl["name"] == "export_table"
    assert decl["parameters"] == {
        "type": "object",
        "properties": {
            "table": {"type": "string"},
            "rows": {"type": "integer"},
            "fmt": {"type": "string", "default": "csv"},
            "compress": {"type": "boolean", "default": False},
        },
        "required": ["table", "rows"],
    }


def test_declaration_description_is_the_docstring_plus_the_do_not_repeat_note(
    app: longcall.App,
) -> None:
    """The description is the docstring followed by the don't-call-again note."""

    @app.long_running
    def build(name: str) -> None:
        """Builds a report.

        Takes about twenty minutes.
        """

    description = build.declaration()["description"]
    assert description == (
        f"Builds a report.\n\nTakes about twenty minutes.\n\n{LONG_RUNNING_NOTE}"
    )
    assert "Do not call this tool again" in description


def test_declaration_without_docstring_or_with_explicit_description(app: longcall.App) -> None:
    """No docstring gives the note alone; ``description=`` replaces the docstring."""

    @app.long_running
    def bare(name: str) -> None:
        pass

    @app.long_running(description="Approves an expense.")
    def approve(amount: int) -> None:
        """Ignored docstring."""

    assert bare.declaration()["description"] == LONG_RUNNING_NOTE
    assert approve.declaration()["description"] == f"Approves an expense.\n\n{LONG_RUNNING_NOTE}"


def test_job_handle_parameters_are_hidden_from_the_model(app: longcall.App) -> None:
    """A JobHandle parameter is absent from the schema and is filled with the job's handle."""
    seen: list[longcall.JobHandle] = []

    @app.long_running(name="report", key="report:{quarter}")
    def start_report(quarter: str, job: longcall.JobHandle) -> str:
        """Starts a report."""
        seen.append(job)
        return "queued"

    params = start_report.declaration()["parameters"]
    assert params["properties"] == {"quarter": {"type": "string"}}
    assert params["required"] == ["quarter"]
    assert start_report.declaration()["name"] == "report"

    pending = start_report.invoke({"quarter": "2026-Q3"})
    assert pending == {"status": "pending", "jobId": "report:2026-Q3", "message": "queued"}
    assert len(seen) == 1
    assert seen[0].id == "report:2026-Q3"
    assert seen[0].tool_name == "report"
    assert dict(seen[0].args) == {"quarter": "2026-Q3"}
    assert seen[0].attempt == 1


def test_optional_job_handle_parameter_is_hidden_and_filled(app: longcall.App) -> None:
    """``job: JobHandle | None = None`` is hidden from the model and still gets the handle."""
    seen: list[longcall.JobHandle | None] = []

    @app.long_running(key="export:{fmt}")
    def export(fmt: str, job: longcall.JobHandle | None = None) -> None:
        """Exports."""
        seen.append(job)

    decl = export.declaration()
    assert decl["parameters"] == {
        "type": "object",
        "properties": {"fmt": {"type": "string"}},
        "required": ["fmt"],
    }
    assert export.invoke({"fmt": "csv"})["jobId"] == "export:csv"
    assert len(seen) == 1
    assert seen[0] is not None
    assert seen[0].id == "export:csv"


def test_job_handle_argument_from_the_model_is_refused(app: longcall.App) -> None:
    """The model cannot pass the hidden JobHandle parameter itself."""

    @app.long_running
    def start(quarter: str, job: longcall.JobHandle) -> None:
        """Starts."""

    response = start.invoke({"quarter": "Q1", "job": {"id": "forged"}})
    assert response["status"] == "error"
    assert response["errors"] == {"job": "unexpected argument"}
    assert app.list_jobs() == []


# -- validation ----------------------------------------------------------------------------


def test_missing_and_wrongly_typed_arguments_name_every_parameter(app: longcall.App) -> None:
    """Each missing or wrongly typed argument is named in the error map, and no job exists."""
    calls: list[dict[str, Any]] = []

    @app.long_running
    def export(table: str, rows: int, fmt: str = "csv") -> None:
        """Exports."""
        calls.append({"table": table, "rows": rows, "fmt": fmt})

    response = export.invoke({"rows": "many", "fmt": 7})
    assert response["status"] == "error"
    assert set(response["errors"]) == {"table", "rows", "fmt"}
    assert response["errors"]["table"] == "missing required argument"
    assert "integer" in response["errors"]["rows"]
    assert "string" in response["errors"]["fmt"]
    assert "table" in response["message"]
    assert "jobId" not in response
    assert calls == []
    assert app.list_jobs() == []


def test_unexpected_arguments_are_refused(app: longcall.App) -> None:
    """An argument the signature does not have is refused, and no job is created."""
    calls = 0

    @app.long_running
    def export(table: str) -> None:
        """Exports."""
        nonlocal calls
        calls += 1

    response = export.invoke({"table": "sales", "limit": 10, "dry_run": True})
    assert response["status"] == "error"
    assert response["errors"] == {"limit": "unexpected argument", "dry_run": "unexpected argument"}
    assert calls == 0
    assert app.list_jobs() == []


def test_invalid_arguments_are_refused_by_invoke_async_too(app: longcall.App) -> None:
    """invoke_async validates the same way and creates no job."""

    @app.long_running
    async def export(table: str, rows: int) -> None:
        """Exports."""
        raise AssertionError("the body must not run")

    response = asyncio.run(export.invoke_async({"table": 3}))
    assert response["status"] == "error"
    assert set(response["errors"]) == {"table", "rows"}
    assert app.list_jobs() == []


def test_valid_arguments_are_coerced_and_stored(app: longcall.App) -> None:
    """The body gets the declared types and the job row keeps the JSON arguments."""
    got: list[tuple[Any, ...]] = []

    @app.long_running(key="exp:{table}:{rows}")
    def export(table: str, rows: int, ratio: float = 0.5) -> None:
        """Exports."""
        got.append((table, rows, ratio))

    pending = export.invoke({"table": "sales", "rows": "12"})
    assert pending["jobId"] == "exp:sales:12"
    assert got == [("sales", 12, 0.5)]
    job = app.get_job("exp:sales:12")
    assert job.args == {"table": "sales", "rows": 12, "ratio": 0.5}
    assert job.tool_name == "export"
    assert job.state is longcall.JobState.STARTED


# -- sync and async bodies -----------------------------------------------------------------


@pytest.mark.parametrize("body", ["sync", "async"])
@pytest.mark.parametrize("caller", ["invoke", "invoke_async"])
def test_sync_and_async_bodies_work_with_both_callers(
    app: longcall.App, body: str, caller: str
) -> None:
    """Sync and async tool functions both start one job from invoke and from invoke_async."""
    calls: list[str] = []

    if body == "sync":

        def start(item: str) -> str:
            """Starts."""
            calls.append(item)
            return f"started {item}"

    else:

        async def start(item: str) -> str:
            """Starts."""
            await asyncio.sleep(0)
            calls.append(item)
            return f"started {item}"

    tool = app.long_running(key="job:{item}")(start)
    assert tool.is_async is (body == "async")
    if caller == "invoke":
        pending = tool.invoke({"item": "a"})
    else:
        pending = asyncio.run(tool.invoke_async({"item": "a"}))
    assert pending == {"status": "pending", "jobId": "job:a", "message": "started a"}
    assert calls == ["a"]
    assert [j.job_id for j in app.list_jobs()] == ["job:a"]
    assert app.get_job("job:a").pending_message == "started a"


def test_calling_the_tool_directly_returns_the_pending_map(app: longcall.App) -> None:
    """``tool(**kwargs)`` is invoke with keyword arguments."""

    @app.long_running(key="k:{x}")
    def start(x: int) -> dict[str, Any]:
        """Starts."""
        return {"message": "on its way", "extra": "shown too"}

    assert start(x=3) == {
        "status": "pending",
        "jobId": "k:3",
        "message": "on its way",
        "extra": "shown too",
    }


# -- idempotency and the pending map -------------------------------------------------------


def test_same_key_gives_the_same_job_and_runs_the_body_once(app: longcall.App) -> None:
    """A repeated call with the same key finds the same job, returns the same map, no re-run."""
    calls = 0

    @app.long_running(key="report:{quarter}:{region}")
    def report(quarter: str, region: str) -> str:
        """Starts a report."""
        nonlocal calls
        calls += 1
        return "Report build started."

    first = report.invoke({"quarter": "2026-Q3", "region": "EMEA"})
    second = report.invoke({"quarter": "2026-Q3", "region": "EMEA"})
    third = asyncio.run(report.invoke_async({"quarter": "2026-Q3", "region": "EMEA"}))
    other = report.invoke({"quarter": "2026-Q3", "region": "APAC"})
    assert first == second == third
    assert first == {
        "status": "pending",
        "jobId": "report:2026-Q3:EMEA",
        "message": "Report build started.",
    }
    assert other["jobId"] == "report:2026-Q3:APAC"
    assert calls == 2
    assert sorted(j.job_id for j in app.list_jobs()) == [
        "report:2026-Q3:APAC",
        "report:2026-Q3:EMEA",
    ]


def test_same_key_from_many_threads_runs_the_body_once(db_url: str) -> None:
    """Concurrent calls with one key create one job and submit the work exactly once."""
    calls = 0
    lock = threading.Lock()
    barrier = threading.Barrier(8)
    with longcall.App(db_url) as app:

        @app.long_running(key="export:{table}")
        def export(table: str) -> str:
            """Exports."""
            nonlocal calls
            with lock:
                calls += 1
            return "exporting"

        def call(_: int) -> dict[str, Any]:
            barrier.wait(timeout=30)
            return export.invoke({"table": "sales"})

        with ThreadPoolExecutor(max_workers=8) as pool:
            results = list(pool.map(call, range(8)))
        assert calls == 1
        assert {r["jobId"] for r in results} == {"export:sales"}
        assert {r["status"] for r in results} == {"pending"}
        assert all(set(r) == PENDING_KEYS for r in results)
        assert len(app.list_jobs()) == 1


def test_key_may_name_call_ids(app: longcall.App) -> None:
    """A key may use the call's ids (``{session_id}``) beside the parameters."""

    @app.long_running(key="{session_id}:{table}")
    def export(table: str) -> None:
        """Exports."""

    ids = longcall.CallIds("app", "u1", "s1", "call-1", "inv-1")
    pending = export.invoke({"table": "sales"}, ids=ids)
    assert pending["jobId"] == longcall.job_id_for("s1:sales", "u1")
    job = app.get_job(pending["jobId"])
    assert job.ids == ids
    assert job.attached


def test_without_key_every_call_is_a_new_job(app: longcall.App) -> None:
    """Without a key each call gets a fresh random job id."""

    @app.long_running
    def ping(x: int) -> None:
        """Pings."""

    ids = {ping.invoke({"x": 1})["jobId"] for _ in range(3)}
    assert len(ids) == 3
    assert all(i.startswith("job-") for i in ids)
    assert len(app.list_jobs()) == 3


@pytest.mark.parametrize(
    ("returned", "message", "fields"),
    [
        ("Build started.", "Build started.", {}),
        ({"message": "Queued as #42.", "ticket": 42}, "Queued as #42.", {"ticket": 42}),
        (None, DEFAULT_PENDING_MESSAGE, {}),
        (42, DEFAULT_PENDING_MESSAGE, {}),
    ],
)
def test_pending_map_is_longcalls_keys_and_the_tools_fields(
    app: longcall.App, returned: Any, message: str, fields: dict[str, Any]
) -> None:
    """The pending map is status, jobId and message, then the fields a returned dict had."""

    @app.long_running(key="one")
    def start() -> Any:
        """Starts."""
        return returned

    pending = start.invoke({})
    assert set(pending) == PENDING_KEYS | set(fields)
    assert pending == {"status": "pending", "jobId": "one", "message": message, **fields}
    assert start.invoke({}) == pending  # a repeated call reads them back from the job row


def test_repeated_call_attaches_missing_ids(app: longcall.App) -> None:
    """A repeat that knows the call ids fills them in on the existing job (a job's user is
    part of its id, so the repeat is one without a user as the first call was)."""

    @app.long_running(key="k")
    def start() -> None:
        """Starts."""

    start.invoke({})
    assert not app.get_job("k").attached
    ids = longcall.CallIds("app", None, "s", "c", "i")
    start.invoke({}, ids=ids)
    assert app.get_job("k").ids == ids


# -- a body that raises --------------------------------------------------------------------


def test_body_that_raises_leaves_no_job_and_returns_an_error_map(app: longcall.App) -> None:
    """A body that raises removes the job again and answers with an error map."""
    attempts = 0

    @app.long_running(key="flaky:{name}")
    def flaky(name: str) -> str:
        """Fails the first time."""
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            raise ConnectionError("queue unreachable")
        return "submitted"

    response = flaky.invoke({"name": "a"})
    assert response["status"] == "error"
    assert "jobId" not in response
    assert "queue unreachable" in response["message"]
    assert app.list_jobs() == []
    with pytest.raises(longcall.JobNotFound):
        app.get_job("flaky:a")
    # The key is free again: the next call creates the job and submits the work.
    assert flaky.invoke({"name": "a"}) == {
        "status": "pending",
        "jobId": "flaky:a",
        "message": "submitted",
    }
    assert attempts == 2
    assert len(app.list_jobs()) == 1


def test_async_body_that_raises_leaves_no_job(app: longcall.App) -> None:
    """An async body that raises leaves no job, through invoke_async and invoke."""

    @app.long_running
    async def broken(name: str) -> None:
        """Always fails."""
        raise RuntimeError("batch API down")

    for response in (asyncio.run(broken.invoke_async({"name": "x"})), broken.invoke({"name": "y"})):
        assert response["status"] == "error"
        assert "batch API down" in response["message"]
    assert app.list_jobs() == []


# -- sync calls inside an event loop -------------------------------------------------------


def test_sync_invoke_inside_a_running_loop_names_the_async_method(app: longcall.App) -> None:
    """invoke inside an event loop raises SyncInAsyncError naming invoke_async; no job."""
    calls = 0

    @app.long_running
    def export(table: str) -> None:
        """Exports."""
        nonlocal calls
        calls += 1

    @app.long_running
    async def export_async(table: str) -> None:
        """Exports."""
        nonlocal calls
        calls += 1

    async def inside() -> None:
        with pytest.raises(longcall.SyncInAsyncError, match=r"export\.invoke_async\(\)"):
            export.invoke({"table": "t"})
        with pytest.raises(longcall.SyncInAsyncError, match=r"export_async\.invoke_async\(\)"):
            export_async.invoke({"table": "t"})
        with pytest.raises(longcall.SyncInAsyncError):
            export(table="t")

    asyncio.run(inside())
    assert calls == 0
    assert app.list_jobs() == []


@pytest.mark.parametrize(
    ("method", "call"),
    [
        ("complete", lambda app: app.complete("j", {"ok": True})),
        ("fail", lambda app: app.fail("j", "boom")),
        ("cancel", lambda app: app.cancel("j")),
        ("progress", lambda app: app.progress("j", {"pct": 5})),
        ("get_job", lambda app: app.get_job("j")),
        ("run_turn", lambda app: app.run_turn(object(), user_id="u", session_id="s", text="hi")),
    ],
)
def test_sync_app_methods_inside_a_running_loop_name_the_async_method(
    app: longcall.App, method: str, call: Any
) -> None:
    """app.complete and friends inside an event loop raise, naming their ``_async`` twin."""

    @app.long_running(key="j")
    def start() -> None:
        """Starts."""

    start.invoke({})

    async def inside() -> None:
        with pytest.raises(longcall.SyncInAsyncError) as info:
            call(app)
        assert f"await {method}_async()" in str(info.value)

    asyncio.run(inside())
    job = app.get_job("j")
    assert job.state is longcall.JobState.STARTED
    assert job.progress is None
    assert [e.kind for e in app.job_events("j")] == []


def test_sync_in_async_error_is_a_longcall_error() -> None:
    """SyncInAsyncError is caught by ``except LongcallError``."""
    assert issubclass(longcall.SyncInAsyncError, longcall.LongcallError)


# -- registration --------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["export:{nope}", "export:{table}:{user}", "{}", "{0}"])
def test_key_naming_unknown_fields_is_refused_at_registration(app: longcall.App, key: str) -> None:
    """A key template naming neither a parameter nor a call id raises ConfigError."""
    with pytest.raises(longcall.ConfigError, match="key"):

        @app.long_running(key=key)
        def export(table: str) -> None:
            """Exports."""

    assert app.tools == {}


def test_key_may_not_name_the_hidden_job_handle(app: longcall.App) -> None:
    """The JobHandle parameter is not a key field: the model never supplies it."""
    with pytest.raises(longcall.ConfigError):

        @app.long_running(key="x:{job}")
        def export(table: str, job: longcall.JobHandle) -> None:
            """Exports."""


def test_duplicate_tool_name_is_refused(app: longcall.App) -> None:
    """Registering a second tool with a taken name raises ConfigError; the first stays."""

    @app.long_running
    def export(table: str) -> None:
        """Exports."""

    with pytest.raises(longcall.ConfigError, match="export"):

        @app.long_running(name="export")
        def other(x: int) -> None:
            """Other."""

    with pytest.raises(longcall.ConfigError, match="export"):

        @app.long_running
        def export(table: str) -> None:
            """Exports again."""

    assert list(app.tools) == ["export"]
    assert app.tools["export"].func.__doc__ == "Exports."


def test_var_args_are_refused_at_registration(app: longcall.App) -> None:
    """*args and **kwargs cannot be declared to a model."""
    with pytest.raises(longcall.ConfigError):

        @app.long_running
        def loose(*items: str) -> None:
            """Loose."""

    with pytest.raises(longcall.ConfigError):

        @app.long_running
        def looser(**options: str) -> None:
            """Looser."""

    assert app.tools == {}


def test_same_tool_name_in_two_apps_is_fine(sqlite_url: str, tmp_path: Any) -> None:
    """The registry belongs to the App: two apps register the same name independently."""
    with (
        longcall.App(sqlite_url) as first,
        longcall.App(f"sqlite:///{tmp_path / 'other.db'}") as second,
    ):
        for app in (first, second):

            @app.long_running
            def export(table: str) -> None:
                """Exports."""

        assert list(first.tools) == list(second.tools) == ["export"]
