"""`longcall serve` with its worker loops: a loop that dies takes the server down with it."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

import pytest

import longcall
from longcall.jobs.dispatcher import Dispatcher
from longcall.server import runner


def test_serve_stops_when_its_worker_loops_die(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server whose delivery and dispatch loops are dead must not keep answering /healthz
    as if all were well: it stops, and the loop's error comes out of serve()."""
    app = longcall.App(f"sqlite:///{tmp_path / 'jobs.db'}")
    agent = longcall.ScriptedAgent(app, rules=[])

    async def broken(self: Dispatcher, stop: asyncio.Event) -> None:
        await asyncio.sleep(0.3)
        raise RuntimeError("the dispatcher broke")

    monkeypatch.setattr(Dispatcher, "run", broken)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))

    async def scenario() -> float:
        started = time.monotonic()
        with pytest.raises(ExceptionGroup) as raised:
            await asyncio.wait_for(runner.serve(app, agent=agent, sockets=[sock]), 30)
        assert [str(e) for e in raised.value.exceptions] == ["the dispatcher broke"]
        return time.monotonic() - started

    try:
        took = asyncio.run(scenario())
    finally:
        sock.close()
        app.close()
    assert took < 10, f"the server went on for {took:.1f} s after its loops died"
