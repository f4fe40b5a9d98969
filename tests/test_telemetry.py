"""OpenTelemetry spans: a tool call, its completion (Python, API, webhook, CLI, another
process) and its delivery, runs and tasks; the completion links to the tool call's span."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import longcall

pytest.importorskip("opentelemetry.sdk", reason="opentelemetry-sdk is not installed")
from click.testing import CliRunner
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

CSV = longcall.job_id_for("export:csv", "u")
SRC = str(Path(__file__).resolve().parents[1] / "src")


class Traces:
    """A tracer provider of its own (the global one is set once per process) and its spans."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.exporter.get_finished_spans() if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        [span] = self.named(name)
        return span


@pytest.fixture
def traces() -> Iterator[Traces]:
    traces = Traces()
    yield traces
    traces.provider.shutdown()


def _app(url: str, traces: Traces | None) -> longcall.App:
    app = longcall.App(url, tracer_provider=traces.provider if traces else None)

    @app.long_running(key="export:{fmt}")
    def export(fmt: str) -> str:
        """Exports data."""
        return "Export started."

    return app


def _agent(app: longcall.App) -> longcall.ScriptedAgent:
    return longcall.ScriptedAgent(
        app, rules=[longcall.Rule("export", calls=[("export", {"fmt": "csv"})])]
    )


def _start(app: longcall.App) -> longcall.ScriptedAgent:
    agent = _agent(app)
    app.run_turn(agent, user_id="u", session_id="s", text="export please")
    return agent


def _links_to(span: ReadableSpan, target: ReadableSpan) -> bool:
    assert target.context is not None
    return [(link.context.trace_id, link.context.span_id) for link in span.links] == [
        (target.context.trace_id, target.context.span_id)
    ]


def test_tool_call_completion_and_delivery_have_linked_spans(db_url: str, traces: Traces) -> None:
    """A tool call, a completion from another App and the delivery each make their span; the
    completion and the delivery link to the tool call's span, the agent turn is inside the
    delivery."""
    with _app(db_url, traces) as app:
        agent = _start(app)
        call = traces.one("longcall.tool_call")
        assert call.attributes is not None
        assert (
            dict(call.attributes).items()
            >= {
                "longcall.job.id": CSV,
                "longcall.tool.name": "export",
                "longcall.session.id": "s",
                "longcall.user.id": "u",
            }.items()
        )
        assert "longcall.call.id" in call.attributes
        assert app.get_job(CSV).trace_context is not None
        with _app(db_url, traces) as other:  # another process's view: only the row is shared
            assert other.complete(CSV, {"rows": 3}).changed
        assert asyncio.run(app.deliverer(agent).run_once()) == 1

    done = traces.one("longcall.complete")
    assert done.attributes is not None
    assert done.attributes["longcall.completion.via"] == "python"
    assert done.attributes["longcall.completion.outcome"] == "applied"
    assert done.attributes["longcall.completion.state"] == "succeeded"
    assert done.attributes["longcall.session.id"] == "s"
    assert _links_to(done, call)
    assert done.parent is None and done.context.trace_id != call.context.trace_id  # type: ignore[union-attr]
    deliver = traces.one("longcall.deliver")
    assert deliver.attributes is not None
    assert deliver.attributes["longcall.job.id"] == CSV
    assert deliver.attributes["longcall.delivery.outcome"] == "delivered"
    assert _links_to(deliver, call)
    turn = traces.one("longcall.agent_turn")
    assert turn.parent is not None and turn.parent.span_id == deliver.context.span_id  # type: ignore[union-attr]


def test_a_completion_in_another_process_links_to_the_tool_call(
    db_url: str, traces: Traces, tmp_path: Path
) -> None:
    """A completion made by a separate Python process links to the span of the tool call."""
    with _app(db_url, traces) as app:
        _start(app)
    call = traces.one("longcall.tool_call")
    script = textwrap.dedent(
        f"""
        import json
        import longcall
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        with longcall.App({db_url!r}, tracer_provider=provider) as app:
            app.complete({CSV!r}, {{"rows": 3}})
        [span] = exporter.get_finished_spans()
        print(json.dumps({{
            "name": span.name,
            "links": [[link.context.trace_id, link.context.span_id] for link in span.links],
        }}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
    )
    seen = json.loads(done.stdout)
    assert call.context is not None
    assert seen == {
        "name": "longcall.complete",
        "links": [[call.context.trace_id, call.context.span_id]],
    }


def test_completions_over_http_say_api_and_webhook(db_url: str, traces: Traces) -> None:
    """A completion through the HTTP API says ``api``; one through a signed webhook says
    ``webhook``; both link to their tool call's span."""
    pytest.importorskip("longcall.server", reason="the server extra is not installed")
    import httpx

    from longcall.server.app import create_app
    from longcall.webhooks import new_secret, sign

    with _app(db_url, traces) as app:
        export = app.tools["export"]
        export.invoke({"fmt": "csv"}, longcall.CallIds("a", "u", "s1", "c1", "i1"))
        export.invoke({"fmt": "json"}, longcall.CallIds("a", "u", "s2", "c2", "i2"))
        json_job = longcall.job_id_for("export:json", "u")
        token = app.store.create_token(user_id="u")[1]
        secret = app.store.add_hook_secret("batch", new_secret()).secret
        web = create_app(app)

        async def scenario() -> None:
            transport = httpx.ASGITransport(app=web)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
                answer = await client.post(
                    f"/v1/jobs/{CSV}/complete",
                    json={"result": {"rows": 1}},
                    headers={"authorization": f"Bearer {token}"},
                )
                assert answer.status_code == 200, answer.text
                body = json.dumps({"jobId": json_job, "type": "fail", "error": "no"}).encode()
                headers = {**sign(body, secret), "content-type": "application/json"}
                answer = await client.post("/v1/hooks/batch", content=body, headers=headers)
                assert answer.json()["outcome"] == "applied", answer.text

        asyncio.run(scenario())

    calls = {s.attributes["longcall.job.id"]: s for s in traces.named("longcall.tool_call")}  # type: ignore[index]
    done = {s.attributes["longcall.job.id"]: s for s in traces.named("longcall.complete")}  # type: ignore[index]
    assert done[CSV].attributes["longcall.completion.via"] == "api"  # type: ignore[index]
    assert done[json_job].attributes["longcall.completion.via"] == "webhook"  # type: ignore[index]
    assert done[json_job].attributes["longcall.completion.state"] == "failed"  # type: ignore[index]
    assert _links_to(done[CSV], calls[CSV])
    assert _links_to(done[json_job], calls[json_job])


def test_a_completion_from_the_cli_says_cli(
    sqlite_url: str, traces: Traces, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``longcall jobs complete`` makes a ``longcall.complete`` span that says ``cli``."""
    from longcall.cli import main as cli_main

    with _app(sqlite_url, traces) as app:
        _start(app)

    class Traced(longcall.App):  # the App the CLI opens, with this test's provider
        def __init__(self, *args: object, **options: object) -> None:
            super().__init__(*args, tracer_provider=traces.provider, **options)  # type: ignore[arg-type]

    monkeypatch.setattr("longcall.app.App", Traced)
    result = CliRunner().invoke(
        cli_main.main, ["jobs", "complete", CSV, "--result", "{}", "--database", sqlite_url]
    )
    assert result.exit_code == 0, result.output
    done = traces.one("longcall.complete")
    assert done.attributes is not None and done.attributes["longcall.completion.via"] == "cli"
    assert _links_to(done, traces.one("longcall.tool_call"))


def test_a_completion_of_an_unknown_job_is_an_error_span(sqlite_url: str, traces: Traces) -> None:
    """A completion that raises records the exception and sets error status."""
    with _app(sqlite_url, traces) as app, pytest.raises(longcall.errors.JobNotFound):
        app.complete("nope", 1)
    done = traces.one("longcall.complete")
    assert done.status.status_code is StatusCode.ERROR
    assert [e.name for e in done.events] == ["exception"]


def test_runs_and_tasks_have_spans(db_url: str, traces: Traces) -> None:
    """A workflow run's execution is a span; each task call that runs is a span inside it; a
    failed run is an error."""
    with _app(db_url, traces) as app:

        @app.task
        def double(n: int) -> int:
            return 2 * n

        @app.workflow
        def twice(n: int) -> int:
            return double(double(n))

        @app.workflow
        def broken() -> None:
            raise ValueError("no")

        run = app.run_workflow(twice, 3)
        assert run.result == 12
        failed = app.run_workflow(broken)

    [ok, bad] = sorted(traces.named("longcall.run"), key=lambda s: s.start_time or 0)
    assert ok.attributes is not None and ok.attributes["longcall.run.id"] == run.run_id
    assert ok.attributes["longcall.run.status"] == "completed"
    assert ok.attributes["longcall.workflow.id"] == "twice"
    tasks = traces.named("longcall.task")
    assert [t.attributes["longcall.task.position"] for t in tasks] == [1, 2]  # type: ignore[index]
    assert all(t.parent and t.parent.span_id == ok.context.span_id for t in tasks)  # type: ignore[union-attr]
    assert bad.attributes is not None and bad.attributes["longcall.run.id"] == failed.run_id
    assert bad.status.status_code is StatusCode.ERROR


def test_everything_works_without_a_tracer_provider(db_url: str) -> None:
    """With no provider configured (OpenTelemetry's no-op), nothing is kept and nothing breaks."""
    with _app(db_url, None) as app:
        agent = _start(app)
        assert app.get_job(CSV).trace_context is None
        assert app.complete(CSV, 1).changed
        assert asyncio.run(app.deliverer(agent).run_once()) == 1


def test_importing_longcall_does_not_import_opentelemetry(sqlite_url: str) -> None:
    """``import longcall``, a tool call, its completion and a workflow run work with
    opentelemetry not importable (a plain ``pip install longcall``)."""
    script = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "import longcall\n"
        f"with longcall.App({sqlite_url!r}) as app:\n"
        "    assert not app.runtime.telemetry.enabled\n"
        "    @app.long_running(key='k:{n}')\n"
        "    def tool(n: int) -> str:\n"
        "        'A tool.'\n"
        "        return 'started'\n"
        "    tool.invoke({'n': 1}, longcall.CallIds('a', 'u', 's', 'c', 'i'))\n"
        "    [job] = app.list_jobs()\n"
        "    assert app.complete(job.job_id, {'rows': 1}).changed\n"
        "    @app.task()\n"
        "    def double(n: int) -> int:\n"
        "        return 2 * n\n"
        "    @app.workflow('twice')\n"
        "    def twice(n: int) -> int:\n"
        "        return double(double(n))\n"
        "    assert app.run_workflow('twice', 3).result == 12\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
    )
    assert done.stdout.strip() == "ok", done.stderr
