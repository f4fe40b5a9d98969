"""Two ADK users with the same session id: separate jobs, separate results, separate
transcripts, through the real google-adk Runner and over the HTTP API (issue 21)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import longcall

adk = pytest.importorskip("longcall.adk", reason="google-adk is not installed (extra 'adk')")
pytest.importorskip("longcall.server", reason="the server extra is not installed")
import httpx  # noqa: E402
from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.apps import App as AdkApp  # noqa: E402
from google.adk.runners import Runner  # noqa: E402
from google.adk.sessions import InMemorySessionService  # noqa: E402
from google.genai import types  # noqa: E402

from longcall import job_id_for  # noqa: E402
from longcall.server import runner as server_runner  # noqa: E402

APP, SESSION = "exports", "s"
KEY = "export:{session_id}:{export_type}"


class Exports:
    """A real ADK Runner with a longcall export tool and the offline scripted model."""

    def __init__(self, app: longcall.App) -> None:
        self.app = app
        self.started: list[tuple[str, str]] = []  # (user, job id) of each body that ran

        def export_data(export_type: str, job: longcall.JobHandle) -> str:
            """Exports user data."""
            self.started.append((job.ids.user_id or "", job.id))
            return f"Exporting {export_type}."

        llm = adk.ScriptedLlm(
            rules=[
                longcall.Rule(
                    r"export (\w+)", calls=[("export_data", lambda m: {"export_type": m[1]})]
                )
            ]
        )
        self.sessions = InMemorySessionService()
        tool = adk.long_running_tool(app, export_data, key=KEY)
        self.runner = Runner(
            app=AdkApp(
                name=APP,
                root_agent=LlmAgent(name="exporter", model=llm, tools=[tool]),
                plugins=[adk.LongcallPlugin(app)],
            ),
            session_service=self.sessions,
        )
        self.agent = adk.AdkAgentRunner(self.runner)

    async def ask(self, user: str, text: str) -> None:
        if await self.sessions.get_session(app_name=APP, user_id=user, session_id=SESSION) is None:
            await self.sessions.create_session(app_name=APP, user_id=user, session_id=SESSION)
        message = types.Content(role="user", parts=[types.Part(text=text)])
        async for _ in self.runner.run_async(user_id=user, session_id=SESSION, new_message=message):
            pass

    async def texts(self, user: str) -> list[str]:
        events = await self.agent.transcript(user_id=user, session_id=SESSION)
        return [e.text for e in events if e.text]


@pytest.fixture
def exports(db_url: str) -> Iterator[Exports]:
    with longcall.App(db_url) as app:
        yield Exports(app)


def test_same_session_id_gives_each_user_their_own_job_and_result(exports: Exports) -> None:
    """Ana and Bob both ask for a CSV export in a session called "s": two jobs, two bodies
    run, and Ana's result resumes Ana's session only."""

    async def scenario() -> tuple[list[str], list[str]]:
        await exports.ask("ana", "export csv")
        await exports.ask("bob", "export csv")
        await exports.app.complete_async(job_id_for("export:s:csv", "ana"), {"url": "ana.csv"})
        deliverer = exports.app.deliverer(exports.agent)
        assert await deliverer.run_once() == 1
        assert await deliverer.run_once() == 0
        return await exports.texts("ana"), await exports.texts("bob")

    ana, bob = asyncio.run(scenario())
    assert exports.started == [
        ("ana", job_id_for("export:s:csv", "ana")),
        ("bob", job_id_for("export:s:csv", "bob")),
    ]
    anas, bobs = (exports.app.get_job(job_id_for("export:s:csv", u)) for u in ("ana", "bob"))
    assert (anas.user_id, bobs.user_id) == ("ana", "bob")
    assert anas.session_id == bobs.session_id == SESSION and anas.call_id != bobs.call_id
    assert ana[-1] == "export_data has finished: url ana.csv."
    assert not any("ana.csv" in t for t in bob)
    assert bobs.state is longcall.JobState.STARTED


def test_the_transcript_api_reads_the_callers_adk_session(exports: Exports) -> None:
    """GET /v1/sessions/s/transcript with Bob's token reads Bob's ADK session, never Ana's;
    an admin picks either with ?user=."""
    asyncio.run(exports.ask("ana", "export csv"))
    ana_token = exports.app.store.create_token(user_id="ana")[1]
    bob_token = exports.app.store.create_token(user_id="bob")[1]
    admin = exports.app.store.create_token(user_id=None, admin=True)[1]
    with Serving(exports) as client:

        def transcript(token: str, query: str = "") -> httpx.Response:
            headers = {"authorization": f"Bearer {token}"}
            return client.get(f"/v1/sessions/{SESSION}/transcript{query}", headers=headers)

        anas = transcript(ana_token)
        assert anas.status_code == 200
        assert "export csv" in [e["text"] for e in anas.json()["events"]]
        assert transcript(bob_token).status_code == 404
        asyncio.run(exports.ask("bob", "export json"))
        bobs = transcript(bob_token).json()
        texts = [e["text"] for e in bobs["events"]]
        assert bobs["userId"] == "bob" and "export json" in texts and "export csv" not in texts
        assert transcript(admin, "?user=ana").json()["events"] == anas.json()["events"]
        assert transcript(admin, "?user=bob").json()["userId"] == "bob"


class Serving:
    """The HTTP API over ``exports.app`` with the ADK runner as its transcript source."""

    def __init__(self, exports: Exports) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.server = server_runner.build(exports.app, agent=exports.agent)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def __enter__(self) -> httpx.Client:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.01)
        port = self.sock.getsockname()[1]
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10)
        return self.client

    def __exit__(self, *exc: Any) -> None:
        self.client.close()
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()
