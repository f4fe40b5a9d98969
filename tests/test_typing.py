"""The public API is typed for its users, and ``longcall`` exports what the docs name.

``tests/typing/docs_user.py`` is a user's module in the documentation's patterns; mypy checks it
under ``--strict`` here, and each of its ``# expect:`` comments is held to what mypy reports on
the line after it: a revealed type, or an error of a given code for a misuse. Nothing else may be
reported, so a decorator that loses the types again fails on the untyped-decorator errors.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

import longcall
from longcall import App, RunStateError, RunStatus, TaskContext

ROOT = Path(__file__).resolve().parent.parent
USER_MODULE = Path(__file__).resolve().parent / "typing" / "docs_user.py"
EXPECT = re.compile(r"^\s*# expect: (.+)$")
REPORTED = re.compile(r"^docs_user\.py:(\d+): (error|note): (.*?)(?:\s+\[([a-z-]+)\])?$")


def expectations() -> dict[int, str]:
    """Line number to what the ``# expect:`` comment on the line before says of it."""
    lines = USER_MODULE.read_text().splitlines()
    return {n + 1: m[1].strip() for n, line in enumerate(lines, 1) if (m := EXPECT.match(line))}


def mypy_strict(cache: Path) -> dict[int, list[str]]:
    """What ``mypy --strict`` reports on each line of the user module, as ``# expect:`` spells
    it: the revealed type, or ``error[code]``; other notes are dropped."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--cache-dir",
            str(cache),
            "--show-error-codes",
            "--no-pretty",
            "--no-error-summary",
            "--hide-error-context",
            USER_MODULE.name,
        ],
        cwd=USER_MODULE.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode in (0, 1), done.stderr + done.stdout
    reported: dict[int, list[str]] = {}
    for line in done.stdout.splitlines():
        m = REPORTED.match(line)
        assert m is not None, f"unexpected mypy output: {line!r}\n{done.stdout}"
        number, kind, text, code = int(m[1]), m[2], m[3], m[4]
        if kind == "error":
            reported.setdefault(number, []).append(f"error[{code}]")
        elif text.startswith("Revealed type is "):
            reported.setdefault(number, []).append(text.removeprefix("Revealed type is ")[1:-1])
    return reported


def test_the_documented_patterns_keep_their_types_under_mypy_strict(tmp_path: Path) -> None:
    expected = expectations()
    assert len(expected) >= 20, "the user module lost its expectations"
    # A cold cache of its own (a few seconds): nothing left over from another check counts.
    reported = mypy_strict(tmp_path / "mypy_cache")
    wrong = {
        n: {"expected": want, "reported": reported.get(n, [])}
        for n, want in expected.items()
        if reported.get(n) != [want]
    }
    unexpected = {n: got for n, got in reported.items() if n not in expected}
    assert wrong == {}, wrong
    assert unexpected == {}, unexpected


def test_every_name_the_docs_spell_longcall_dot_is_exported() -> None:
    """A ``longcall.X`` in the README, the docs pages or the examples is a public name."""
    pages = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "examples").rglob("*")]
    text = "\n".join(p.read_text() for p in pages if p.suffix in {".md", ".py"})
    # OpenTelemetry's span and attribute names (`longcall.tool_call`, `longcall.job.id`) are
    # not Python names (docs/observability.md lists them).
    spans = {"tool_call", "complete", "deliver", "agent_turn", "run", "task"}
    text = re.sub(r"\blongcall\.[a-z_]+\.[a-z_*]+", "", text)
    text = re.sub(r'"longcall\.[\w.]+"', "", text)  # logger names, in JSON log lines
    text = re.sub(r"`longcall\.(" + "|".join(sorted(spans)) + r")`", "", text)
    spelled = set(re.findall(r"\blongcall\.([A-Za-z_][A-Za-z0-9_]*)", text))
    # modules (``longcall.adk.X``), a file name (``longcall.db``), a page (``api/longcall.md``)
    others = {
        "adk",
        "agents",
        "langgraph",
        "openai_agents",
        "mcp",
        "mcp_adk",
        "pydantic_ai",
        "errors",
        "logs",
        "testing",
        "workflows",
        "__all__",
        "db",
        "md",
    }
    assert len(spelled) >= 15, "the docs lost their names"
    assert spelled - others - set(longcall.__all__) == set()
    for name in longcall.__all__:
        assert getattr(longcall, name) is not None


def test_the_names_the_docs_use_for_runs_and_their_errors_are_exported() -> None:
    named = {
        "InvalidAnswer",
        "NonDeterminismError",
        "Run",
        "Interrupt",
        "RunDetails",
        "RunStatus",
        "RetryPolicy",
        "TaskContext",
        "Deliverer",
        "Task",
        "Workflow",
    }
    assert named <= set(longcall.__all__)


@pytest.mark.parametrize(
    ("name", "now", "replacement"),
    [
        (
            "Sweeper",
            "longcall.jobs.sweeper.Sweeper",
            r"app\.sweeper\(\) or longcall\.jobs\.sweeper\.Sweeper",
        ),
        ("InvalidResume", "longcall.errors.InvalidAnswer", r"longcall\.InvalidAnswer"),
    ],
)
def test_names_left_out_of_all_still_import_for_a_release_with_a_warning(
    name: str, now: str, replacement: str
) -> None:
    assert name not in longcall.__all__
    module, _, attr = now.rpartition(".")
    with pytest.warns(DeprecationWarning, match=rf"longcall\.{name} .*{replacement}"):
        value = getattr(longcall, name)
    assert value is getattr(__import__(module, fromlist=[attr]), attr)


class Receipt(BaseModel):
    order: str
    total: float


def test_result_of_reads_a_completed_run_as_the_declared_type(sqlite_url: str) -> None:
    with App(sqlite_url) as app:

        @app.task
        def price(order: str) -> float:
            return 12.5

        @app.workflow("receipt")
        def receipt(order: str, ctx: TaskContext) -> Receipt:
            return Receipt(order=order, total=price(order))

        @app.workflow("ask")
        def ask(ctx: TaskContext) -> str:
            return str(ctx.interrupt("Name?"))

        done = app.run_workflow(receipt, "A-17")
        assert done.result == {"order": "A-17", "total": 12.5}  # the stored JSON, as before
        assert receipt.result_of(done) == Receipt(order="A-17", total=12.5)

        waiting = app.run_workflow(ask)
        assert waiting.status is RunStatus.WAITING_INPUT
        with pytest.raises(RunStateError, match=r"is waiting_input: only a completed run"):
            ask.result_of(waiting)
        with pytest.raises(RunStateError, match=r"a run of 'receipt', not of 'ask'"):
            ask.result_of(done)
