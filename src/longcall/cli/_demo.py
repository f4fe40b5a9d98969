"""``longcall demo --in-process``: the worked example of a 19-minute report, on a fake clock.

A user asks for the Q3 EMEA sales report at 10:00; the tool records the job with a 45-minute
deadline and hands it to a (simulated) batch system; an unrelated question at 10:05 is answered
normally; the batch system reports completion at 10:19 and the agent is resumed with the URL
and row count; the same completion arrives again at 10:21 and changes nothing. A second report
never finishes: at its deadline the sweeper answers for it, and a late result is a recorded
no-op. The demo checks each step and exits 0 only when every one happened as it should.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from longcall import JobHandle
from longcall.agents import AgentEvent
from longcall.app import App
from longcall.cli._demo_cast import (
    APAC,
    EMEA,
    START,
    Conversation,
    ReportTool,
    ScriptedConversation,
)
from longcall.core.clock import FakeClock
from longcall.core.jobs import Delivery, JobState


@dataclass
class Timeline:
    """What happened, printed as it happens, and the checks made along the way.

    ``stamp`` says when: the fake clock's time of day here, seconds since the start in the
    demo that runs through the service.
    """

    console: Console
    stamp: Callable[[], str]
    failures: list[str] = field(default_factory=list)
    checks: int = 0

    def say(self, who: str, text: str, style: str = "") -> None:
        self.console.print(
            f"[dim]{self.stamp()}[/dim]  [bold]{who:<13}[/bold] {text}",
            style=style,
            highlight=False,
        )

    def events(self, events: list[AgentEvent]) -> None:
        for event in events:
            if event.author == "user" and event.text:
                continue
            for call in event.function_calls:
                args = ", ".join(f"{k}={v!r}" for k, v in call.args.items())
                self.say("agent", f"calls {call.name}({args})", "cyan")
            for response in event.function_responses:
                self.say(
                    "tool" if event.author != "user" else "longcall",
                    f"{response.name} -> {response.response}",
                    "magenta",
                )
            if event.text:
                self.say("agent", event.text, "green")

    def check(self, ok: bool, what: str) -> bool:
        self.checks += 1
        if ok:
            self.console.print(f"          [green]✓[/green] {what}", highlight=False)
        else:
            self.failures.append(what)
            self.console.print(f"          [red]✗ {what}[/red]", highlight=False)
        return ok

    def summary(self) -> int:
        """Print how the checks went; the exit status (0 only when every check passed)."""
        if self.failures:
            self.console.print(
                f"\n[red]{len(self.failures)} of {self.checks} checks failed:[/red]",
                highlight=False,
            )
            for what in self.failures:
                self.console.print(f"[red]  ✗ {what}[/red]", highlight=False)
            return 1
        self.console.print(f"\n[green]all {self.checks} checks passed[/green]")
        return 0


def time_of_day(clock: FakeClock) -> Callable[[], str]:
    """A stamp showing the fake clock's time of day."""
    return lambda: dt.datetime.fromtimestamp(clock.now(), dt.UTC).strftime("%H:%M:%S")


def setter(clock: FakeClock) -> Callable[[str], None]:
    """Move the fake clock to a time of day (``"10:19:03"``) on the demo's date."""

    def at(hh_mm_ss: str) -> None:
        h, m, s = (int(x) for x in hh_mm_ss.split(":"))
        clock.set(START + h * 3600 + m * 60 + s - 10 * 3600)

    return at


async def play(
    app: App,
    clock: FakeClock,
    console: Console,
    conversation: Callable[[App, ReportTool], Conversation] = ScriptedConversation,
) -> Timeline:
    """Run the worked example against ``app`` and return the timeline with its checks."""
    line = Timeline(console, time_of_day(clock))
    at = setter(clock)
    batch_queue: list[str] = []

    def start_sales_report(quarter: str, region: str, job: JobHandle) -> dict[str, Any]:
        """Starts a sales report build for a quarter (like 2026-Q3) and a region code."""
        batch_queue.append(job.id)  # the batch system takes the job id as its idempotency key
        return {"message": "Report build started; typical time is 15-25 minutes."}

    chat = conversation(app, start_sales_report)
    deliverer = app.deliverer(chat.runner, on_event=lambda job, event: line.events([event]))
    sweeper = app.sweeper()

    async def ask(text: str) -> None:
        line.say("user", text, "bold")
        line.events(await chat.ask(text))

    at("10:00:00")
    await ask("Please build the sales report for 2026-Q3 EMEA.")
    job = await app.get_job_async(EMEA)
    line.check(
        job.state is JobState.STARTED and job.attached,
        f"job {EMEA} recorded with its session and call id",
    )
    line.check(job.deadline_at == START + 45 * 60, "its deadline is 10:45:00")
    line.check(batch_queue == [job.job_id], "the work was submitted once, keyed by the job id")

    at("10:05:00")
    await ask("How many vacation days do I have left?")
    line.check(await deliverer.run_once() == 0, "nothing to resume while the report runs")

    at("10:19:00")
    result = {"url": "https://reports.example.com/2026-Q3-EMEA.csv", "rowCount": 48213}
    line.say("batch system", f"{EMEA} finished: {result}", "yellow")
    outcome = await app.complete_async(EMEA, result)
    line.check(outcome.changed, "the completion moved the job to succeeded")
    at("10:19:03")
    line.check(await deliverer.run_once() == 1, "the deliverer delivered the result once")

    at("10:21:00")
    line.say("batch system", f"{EMEA} finished (the same webhook, retried)", "yellow")
    again = await app.complete_async(EMEA, result)
    line.check(not again.changed, "the duplicate completion changed nothing")
    line.check(await deliverer.run_once() == 0, "and nothing was delivered twice")
    history = await chat.history()
    finals = [r for e in history if e.author == "user" for r in e.function_responses]
    line.check(
        len(finals) == 1 and finals[0].response.get("result") == result,
        "the session holds exactly one response to the call, with URL and row count",
    )

    at("10:22:00")
    await ask("Also the sales report for 2026-Q3 APAC, please.")
    at("11:07:00")
    line.say("sweeper", "checks deadlines", "yellow")
    expired = await sweeper.run_once()
    line.check(
        [j.job_id for j in expired] == [APAC],
        "the APAC report expired at its deadline, 45 minutes after it started",
    )
    line.check(await deliverer.run_once() == 1, "the agent was told, once")
    at("11:10:00")
    late = await app.complete_async(APAC, {"url": "late"})
    apac = await app.get_job_async(APAC)
    events = await app.job_events_async(APAC)
    line.check(
        not late.changed
        and apac.state is JobState.EXPIRED
        and apac.delivery is Delivery.DELIVERED
        and events[-1].kind == "ignored",
        "a late result at 11:10 is recorded and changes nothing",
    )
    return line


def run_demo(
    database: str | None = None, console: Console | None = None, *, adk: bool = False
) -> int:
    """Play the demo; return the process exit status (0 when every check passed).

    With ``adk`` the agent is google-adk's Runner with longcall's tool, plugin and resume
    runner; the model is the offline scripted one unless ``GOOGLE_API_KEY`` is set.
    """
    console = console or Console()
    clock = FakeClock(START)
    conversation: Callable[[App, ReportTool], Conversation] = ScriptedConversation
    agent_name = "the scripted agent"
    if adk:
        from longcall.cli._demo_adk import AdkConversation, model_name

        conversation = AdkConversation
        agent_name = f"google-adk with {model_name()}"
    with tempfile.TemporaryDirectory(prefix="longcall-demo-") as tmp:
        url = database or f"sqlite:///{Path(tmp) / 'demo.db'}"
        console.print(
            f"[bold]longcall demo[/bold]: the 19-minute report, on a fake clock, "
            f"with {agent_name} ({url})\n"
        )
        app = App(url, clock=clock)
        try:
            line = asyncio.run(play(app, clock, console, conversation))
        finally:
            app.close()
    return line.summary()
