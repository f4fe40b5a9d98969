"""The run page's history (time travel): each step opens to its output and the state after
it, and "Fork from step N" (asking first, with the login's CSRF token) opens the new run,
which reuses the steps before N (the server and the browser are set up in conftest.py)."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any
from urllib.parse import quote

import pytest

import longcall
from longcall.workflows import Append

pytest.importorskip("longcall.server", reason="the server extra is not installed")

from server.conftest import Served, logged_in


def three_steps(served: Served) -> tuple[str, Counter[int]]:
    """A completed run of alice's calling a counted task three times."""
    executed: Counter[int] = Counter()
    app = served.app

    @app.task(name="count")
    def count(i: int, ctx: longcall.TaskContext) -> int:
        executed[i] += 1
        ctx.set("seen", i)
        return i * 10

    @app.workflow("three", state={"seen": Append()})
    def three(start: int, ctx: longcall.TaskContext) -> list[int]:
        return [count(start + i) for i in range(3)]

    answer = served.api.post("/v1/runs", json={"workflowId": "three", "input": 1})
    assert answer.status_code == 201, answer.text
    run_id = str(answer.json()["runId"])
    deadline = time.monotonic() + 10
    while served.app.store.get_run(run_id).status is not longcall.RunStatus.COMPLETED:
        assert time.monotonic() < deadline, "the worker did not run it"
        time.sleep(0.05)
    return run_id, executed


def test_the_history_lists_each_step_and_its_fork_button_calls_the_api(served: Served) -> None:
    """The page lists the steps with output and state, and each fork form posts fromStep to
    the run's fork path, asking first."""
    run_id, _ = three_steps(served)
    page = served.page(f"/runs/{quote(run_id, safe='')}").text
    assert page.count('<details data-step="') == 3
    assert "Step 2: count (task), ok" in page
    assert "{&#34;seen&#34;:[1,2]}" in page or '{"seen":[1,2]}' in page
    assert f'data-path="/v1/runs/{run_id}/fork"' in page
    assert 'id="fork-2"' in page and "data-confirm=" in page


def test_a_run_is_forked_from_a_step_on_its_page(browser: Any, served: Served) -> None:
    """Opening step 2 shows its output and state; its fork button asks first, then opens the
    new run's page, and the worker executes steps 2 and 3 again but not step 1."""
    from playwright.sync_api import expect

    run_id, executed = three_steps(served)
    with logged_in(browser, served) as page:
        page.goto(f"{served.url}/runs/{quote(run_id, safe='')}")
        step = page.locator('details[data-step="2"]')
        expect(step.locator(".step-state")).to_be_hidden()
        step.locator("summary").click()
        expect(step.locator(".step-output")).to_have_text("20")
        expect(step.locator(".step-state")).to_have_text('{"seen":[1,2]}')
        step.get_by_role("button", name="Fork from step 2").click()
        dialog = page.locator("dialog#confirm")
        expect(dialog).to_be_visible()
        dialog.get_by_role("button", name="Fork the run").click()
        page.wait_for_url(lambda url: "/runs/run-" in url and run_id not in url, timeout=5000)
        fork_id = page.url.rsplit("/", 1)[1]
        expect(page.locator("h1 .badge")).to_have_text("completed", timeout=10000)
        expect(page.locator("[data-field=forkedFrom]")).to_have_text(run_id)
        expect(page.locator("[data-field=result]")).to_contain_text("30")
    fork = served.app.store.get_run(fork_id)
    assert (fork.forked_from, fork.forked_step, fork.user_id) == (run_id, 2, "alice")
    assert fork.result == [10, 20, 30]
    assert executed == {1: 1, 2: 2, 3: 2}
