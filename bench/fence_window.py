"""The window fencing leaves open with google-adk: from the fence check to ADK's own commit.

Run:  python bench/fence_window.py                      (200 resumes, each ADK session kind)
      python bench/fence_window.py --resumes 500 --sessions database

Before each ``append_event`` of a delivery, ``FencedSessionService`` asks longcall's job table
whether the delivery still holds its session under its fence; ADK then appends to its own
session store, another database, so the two cannot share a transaction. A holder frozen
between the two for longer than its lease, while another takes over and delivers, could
still append once. This measures that span for every append of every resume: from the start
of the check (an upper bound: it includes the check itself) and from its answer (a lower
bound) to the end of ADK's append. It prints the median, p99 and maximum; these are the
figures the README's guarantees quote. There is no target: the span is a fact to state.

No network, no API key: the model is longcall's offline ``ScriptedLlm``. longcall's store is
SQLite (WAL, FULL).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import longcall

try:
    from google.adk.agents import LlmAgent
    from google.adk.apps import App as AdkApp
    from google.adk.events.event import Event
    from google.adk.runners import Runner
    from google.adk.sessions.session import Session
    from google.genai import types

    from longcall.adk import AdkAgentRunner, LongcallPlugin, ScriptedLlm, long_running_tool
    from longcall.adk.fencing import DELIVERY_FENCE, FencedSessionService
except ImportError:  # pragma: no cover - depends on the installed extras
    sys.exit("bench/fence_window.py needs google-adk: pip install 'longcall[adk]'")

from adk import RULES, USER, delivered, export_data, sessions_of

MESSAGE = types.Content(role="user", parts=[types.Part(text="Export my data to CSV")])


class TimedFences(FencedSessionService):
    """The fenced service, timing each delivery append from its check to ADK's commit."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.from_start: list[float] = []
        self.from_answer: list[float] = []

    async def append_event(self, session: Session, event: Event) -> Event:
        fence = DELIVERY_FENCE.get()
        if fence is None or event.partial:
            return await self.inner.append_event(session, event)
        started = time.perf_counter()
        await fence.check_async()
        answered = time.perf_counter()
        appended = await self.inner.append_event(session, event)
        done = time.perf_counter()
        self.from_start.append(done - started)
        self.from_answer.append(done - answered)
        return appended


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


async def measure(kind: str, resumes: int, directory: Path) -> None:
    app = longcall.App(f"sqlite:///{directory / f'jobs-{kind}.db'}")
    sessions = sessions_of(kind, directory, "fence")
    tool = long_running_tool(app, export_data, key="export:{session_id}:{export_type}")
    runner = Runner(
        app=AdkApp(
            name="fence",
            root_agent=LlmAgent(name="exporter", model=ScriptedLlm(rules=RULES), tools=[tool]),
            plugins=[LongcallPlugin(app)],
        ),
        session_service=sessions,
    )
    agent = AdkAgentRunner(runner)  # wraps the session service: unwrap, and time it instead
    timed = TimedFences(sessions)
    runner.session_service = timed
    worker = app.worker(agent, poll_interval="0.05s")
    running = asyncio.create_task(worker.run(handle_signals=False))
    try:
        for i in range(resumes):
            session_id = f"s-{i}"
            await sessions.create_session(app_name="fence", user_id=USER, session_id=session_id)
            async for _ in runner.run_async(
                user_id=USER, session_id=session_id, new_message=MESSAGE
            ):
                pass
            job_id = longcall.job_id_for(f"export:{session_id}:csv", USER)
            await app.complete_async(job_id, {"url": f"https://example.com/{i}.csv"})
            await delivered(app, job_id)
    finally:
        worker.stop()
        await running
        await runner.close()
        closing = getattr(sessions, "close", None)
        if closing is not None:
            result = closing()
            if asyncio.iscoroutine(result):
                await result
        app.close()
    for label, spans in (("check start", timed.from_start), ("check answer", timed.from_answer)):
        p99 = statistics.quantiles(spans, n=100)[-1]
        print(
            f"  from the {label:12} to ADK's commit: median {ms(statistics.median(spans))}"
            f"  p99 {ms(p99)}  max {ms(max(spans))}  ({len(spans)} appends)"
        )


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="longcall-bench-fence-") as tmp:
        for kind in args.sessions.split(","):
            print(f"\n{args.resumes} resumes into {kind} ADK sessions, longcall on SQLite:")
            await measure(kind, args.resumes, Path(tmp))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--resumes", type=int, default=200)
    parser.add_argument("--sessions", default="memory,sqlite,database")
    args = parser.parse_args()
    asyncio.run(run(args))
    print("\nrun: python bench/fence_window.py [--resumes N] [--sessions memory,sqlite,database]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
