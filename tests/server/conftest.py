"""A live uvicorn server in a thread, for tests that talk real HTTP; for the dashboard's, a
server with alice's scripted agent and a refund workflow, and Debian's chromium to drive it.

The browser tests drive /usr/bin/chromium through Playwright; without it they skip, except
under CI=true, where a missing browser fails the run instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Literal

import pydantic
import pytest

import longcall
from longcall import CallIds

pytest.importorskip("longcall.server", reason="the server extra is not installed")
import httpx

from longcall.server import runner
from longcall.server.app import Settings
from longcall.server.dashboard.login_cookie import LOGIN_COOKIE

IN_CI = os.environ.get("CI") == "true"


@contextlib.contextmanager
def live_server(app: longcall.App) -> Iterator[httpx.Client]:
    """Serve ``app`` on a free local port; yield a client whose base URL points at it."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = runner.build(app)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            yield client
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@pytest.fixture
def live() -> Callable[[longcall.App], AbstractContextManager[httpx.Client]]:
    """:func:`live_server`, for tests to serve the App they built."""
    return live_server


@dataclass
class Api:
    app: longcall.App
    client: httpx.Client
    alice: str
    bob: str
    admin: str

    def call(
        self, method: str, path: str, token: str | None, body: Any = None, **options: Any
    ) -> httpx.Response:
        headers = dict(options.pop("headers", {}))
        if token:
            headers["authorization"] = f"Bearer {token}"
        if body is not None:
            options["json"] = body
        return self.client.request(method, path, headers=headers, **options)


@pytest.fixture
def api(db_url: str, live: Any) -> Iterator[Api]:
    """A live server; alice owns export:csv, bob owns export:json; three tokens."""
    app = longcall.App(db_url)

    @app.long_running(key="export:{fmt}")
    def export(fmt: str) -> str:
        """Exports."""
        return "started"

    export.invoke({"fmt": "csv"}, CallIds("exports", "alice", "s-a", "c-a", "i-a"))
    export.invoke({"fmt": "json"}, CallIds("exports", "bob", "s-b", "c-b", "i-b"))
    tokens = [app.store.create_token(user_id=u)[1] for u in ("alice", "bob")]
    admin = app.store.create_token(user_id=None, admin=True)[1]
    with live(app) as client:
        yield Api(app, client, tokens[0], tokens[1], admin)
    app.close()


# -- the dashboard's server and browser ----------------------------------------------------


@dataclass
class Served:
    app: longcall.App
    agent: longcall.ScriptedAgent
    url: str
    token: str  # alice's
    api: httpx.Client  # alice's bearer token on every request

    def login(self, token: str | None = None) -> dict[str, str]:
        """The login cookie a browser gets by posting ``token`` (alice's) to the login form."""
        return login_cookies(self.url, token or self.token)

    def page(self, path: str) -> httpx.Response:
        """A dashboard page as alice's browser would ask for it, with a login cookie."""
        return httpx.get(self.url + path, cookies=self.login())


def login_cookies(url: str, token: str) -> dict[str, str]:
    """Log in at ``url`` through the form as a browser does; the cookie it then sends."""
    answer = httpx.post(url + "/login", data={"token": token})
    assert answer.status_code == 303, answer.text
    return {LOGIN_COOKIE: answer.cookies[LOGIN_COOKIE]}


async def _serve(server: runner.Server, worker: Any, sock: socket.socket) -> None:
    looping = asyncio.create_task(worker.run(handle_signals=False)) if worker else None
    try:
        await server.serve(sockets=[sock])
    finally:
        if looping is not None:
            worker.stop()
            await looping


class Approval(pydantic.BaseModel):
    approved: bool
    amount: int
    channel: Literal["email", "phone"] = "email"
    note: str = ""


@pytest.fixture
def served(db_url: str) -> Iterator[Served]:
    """The API and the worker loops on a free port; alice's scripted agent starts export jobs,
    a refund workflow asks for an approval, and an inbox workflow waits for a message."""
    with serving(db_url, worker=True) as served:
        yield served


@pytest.fixture
def unworked(db_url: str) -> Iterator[Served]:
    """As ``served``, with no worker loops: nothing executes the runs queued."""
    with serving(db_url, worker=False) as served:
        yield served


@contextlib.contextmanager
def serving(url: str, *, worker: bool) -> Iterator[Served]:
    """The server on ``url``'s store (with the worker loops if ``worker``), until the end."""
    app = longcall.App(url)

    @app.long_running(key="export:{fmt}")
    def export(fmt: str) -> str:
        """Exports data."""
        return "started"

    @app.workflow("refund")
    def refund(order: dict[str, Any], ctx: longcall.TaskContext) -> dict[str, Any]:
        ctx.emit("asked", order)
        answer = ctx.interrupt("Approve the refund?", schema=Approval)
        ctx.emit("answered", answer.model_dump())
        return answer.model_dump()

    @app.workflow("inbox")
    def inbox(ctx: longcall.TaskContext) -> Any:
        return ctx.recv("orders")

    agent = longcall.ScriptedAgent(
        app, rules=[longcall.Rule("export", calls=[("export", {"fmt": "csv"})])]
    )
    token = app.store.create_token(user_id="alice")[1]
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = runner.build(app, agent=agent, settings=Settings(poll=0.1))
    loops = app.worker(agent, poll_interval=0.1) if worker else None
    thread = threading.Thread(target=asyncio.run, args=(_serve(server, loops, sock),))
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    headers = {"authorization": f"Bearer {token}"}
    try:
        with httpx.Client(base_url=url, headers=headers, timeout=10) as api:
            yield Served(app, agent, url, token, api)
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()
        app.close()


def browser_login(page: Any, url: str, token: str) -> None:
    """Log ``page`` in at ``url`` as a person does: paste ``token`` into the form."""
    page.goto(f"{url}/login")
    page.fill('input[name="token"]', token)
    with page.expect_navigation():
        page.click('button[type="submit"]')
    assert page.url == url + "/"


@contextlib.contextmanager
def logged_in(browser: Any, served: Served, *, expected: tuple[str, ...] = ()) -> Iterator[Any]:
    """A page logged in as alice, on the jobs table, with its event stream open; at the end,
    no errors on it but those containing one of ``expected``."""
    from playwright.sync_api import expect

    context = browser.new_context()
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("dialog", lambda dialog: errors.append(f"a dialog opened: {dialog.message}"))
    page.on(
        "console",
        lambda m: errors.append(f"{m.text} {m.location}") if m.type == "error" else None,
    )
    browser_login(page, served.url, served.token)
    expect(page.locator("#live")).to_have_text("live", timeout=5000)
    yield page
    context.close()
    unexpected = [e for e in errors if not any(text in e for text in expected)]
    assert unexpected == [], "the page raised errors"


@pytest.fixture
def page(browser: Any, served: Served) -> Iterator[Any]:
    """A page logged in as alice, on the jobs table, with its event stream open."""
    with logged_in(browser, served) as page:
        yield page
