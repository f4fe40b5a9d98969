"""The dashboard's live updates: what changes through the API or the store while a page is
open shows up without a reload, rendered by the server, and what the page's filter leaves
out never does (the server and the browser are set up in conftest.py)."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

pytest.importorskip("longcall.server", reason="the server extra is not installed")

from longcall import job_id_for
from server.conftest import Served
from server.test_dashboard import create, create_schedule, submit_refund

CSV = job_id_for("export:csv", "alice")
JSON_ID = job_id_for("export:json", "alice")


def test_a_job_completed_through_the_api_changes_its_row_and_its_page(
    page: Any, served: Served
) -> None:
    """The jobs table and the job's page, open, follow a completion made elsewhere: the
    badges, the fields, the log, and the actions turned off."""
    from playwright.sync_api import expect

    # htmx is told not to add its inline <style>, which the Content-Security-Policy refuses.
    assert page.locator("style").count() == 0
    create(served, "export:csv")
    row = page.locator("#jobs tr", has=page.get_by_role("link", name=CSV, exact=True))
    expect(row.locator(".badge.state-started")).to_be_visible(timeout=5000)
    served.api.post(f"/v1/jobs/{CSV}/complete", json={"result": {"rows": 7}})
    expect(row.locator(".badge.state-succeeded")).to_be_visible(timeout=5000)

    create(served, "export:json")
    page.get_by_role("link", name=JSON_ID, exact=True).click()
    expect(page.locator("#live")).to_have_text("live", timeout=5000)
    expect(page.locator("#finished")).to_be_hidden()
    served.api.post(f"/v1/jobs/{JSON_ID}/progress", json={"progress": {"percent": 30}})
    expect(page.locator("[data-field=progress]")).to_contain_text('"percent": 30', timeout=5000)
    expect(page.locator('form[data-verb="complete"] button')).to_be_enabled()
    served.api.post(f"/v1/jobs/{JSON_ID}/complete", json={"result": {"rows": 9}})
    expect(page.locator("h1 .badge")).to_have_text("succeeded", timeout=5000)
    expect(page.locator("[data-field=result]")).to_contain_text('"rows": 9')
    expect(page.locator("#log")).to_contain_text("succeeded")
    expect(page.locator("#finished")).to_be_visible()
    expect(page.locator('form[data-verb="complete"] button')).to_be_disabled()


def test_a_job_the_filter_leaves_out_never_appears(page: Any, served: Served) -> None:
    """On the succeeded jobs, a started job stays out until it succeeds; on a search, a job
    that does not match stays out while one that matches comes in."""
    from playwright.sync_api import expect

    page.goto(f"{served.url}/?state=succeeded")
    expect(page.locator("#live")).to_have_text("live", timeout=5000)
    create(served, "export:csv")
    create(served, "export:json")
    served.api.post(f"/v1/jobs/{JSON_ID}/complete", json={"result": {}})
    expect(page.get_by_role("link", name=JSON_ID, exact=True)).to_be_visible(timeout=5000)
    # The whole list comes in each update: the started job was left out of this one.
    expect(page.locator("#jobs tr")).to_have_count(1)
    served.api.post(f"/v1/jobs/{CSV}/complete", json={"result": {}})
    expect(page.locator("#jobs tr")).to_have_count(2, timeout=5000)

    page.goto(f"{served.url}/?q=needle")
    expect(page.locator("#live")).to_have_text("live", timeout=5000)
    expect(page.locator("#empty")).to_have_text("No jobs match “needle”.")
    create(served, "hay-1")
    create(served, "needle-1")
    needle = job_id_for("needle-1", "alice")
    expect(page.get_by_role("link", name=needle, exact=True)).to_be_visible(timeout=5000)
    expect(page.locator("#jobs tr")).to_have_count(1)
    expect(page.locator("#empty")).to_be_hidden()


def test_a_run_advanced_through_the_api_moves_on_its_page_and_in_the_list(
    page: Any, served: Served
) -> None:
    """An answer given through the API moves the open run page from its question to
    completed (the stream then ends: "finished"), and the runs list follows."""
    from playwright.sync_api import expect

    run_id = submit_refund(served)
    page.goto(f"{served.url}/runs/{run_id}")
    expect(page.locator("#live")).to_have_text("live", timeout=5000)
    expect(page.locator("#answers")).to_be_visible()
    answer = {"interrupt-1": {"approved": True, "amount": 5, "channel": "email"}}
    assert served.api.post(f"/v1/runs/{run_id}/answers", json=answer).status_code == 202
    expect(page.locator("h1 .badge")).to_have_text("completed", timeout=10000)
    expect(page.locator("#answer")).to_contain_text("not waiting for an answer")
    expect(page.locator("#log")).to_contain_text("answered")
    expect(page.locator("#cancel button")).to_be_disabled()
    expect(page.locator("#live")).to_have_text("finished")

    page.goto(f"{served.url}/runs")
    expect(page.locator("#live")).to_have_text("live", timeout=5000)
    second = submit_refund(served, "o-2")
    row = page.locator("#runs tr", has=page.get_by_role("link", name=second, exact=True))
    expect(row.locator(".badge")).to_have_text("waiting_input", timeout=5000)
    served.api.delete(f"/v1/runs/{second}")
    expect(row.locator(".badge")).to_have_text("cancelled", timeout=5000)


def test_a_run_the_filter_leaves_out_never_appears(page: Any, served: Served) -> None:
    """On the completed runs, a run waiting for its answer stays out until it completes."""
    from playwright.sync_api import expect

    page.goto(f"{served.url}/runs?status=completed")
    expect(page.locator("#live")).to_have_text("live", timeout=5000)
    waiting = submit_refund(served, "o-1")
    done = submit_refund(served, "o-2")
    answer = {"interrupt-1": {"approved": True, "amount": 5, "channel": "email"}}
    served.api.post(f"/v1/runs/{done}/answers", json=answer)
    expect(page.get_by_role("link", name=done, exact=True)).to_be_visible(timeout=10000)
    expect(page.locator("#runs tr")).to_have_count(1)
    assert page.get_by_role("link", name=waiting, exact=True).count() == 0
    served.api.post(f"/v1/runs/{waiting}/answers", json=answer)
    expect(page.get_by_role("link", name=waiting, exact=True)).to_be_visible(timeout=10000)


def test_a_schedule_changed_through_the_api_changes_on_its_pages(page: Any, served: Served) -> None:
    """The schedules list shows a schedule made while it is open; the schedule's page shows
    a pause made through the API."""
    from playwright.sync_api import expect

    page.goto(f"{served.url}/schedules")
    expect(page.locator("#live")).to_have_text("live", timeout=5000)
    cron_id = create_schedule(served, "nightly")["cronId"]
    link = page.get_by_role("link", name="nightly", exact=True)
    expect(link).to_be_visible(timeout=5000)
    link.click()
    expect(page.locator("#live")).to_have_text("live", timeout=5000)
    served.api.patch(f"/v1/cron/{cron_id}", json={"paused": True})
    expect(page.locator("h1 .badge")).to_have_text("paused", timeout=5000)
    expect(page.locator("#next-paused")).to_be_visible()
    expect(page.locator("#pause button")).to_be_disabled()


def test_the_live_streams_send_html_for_the_caller_only(served: Served) -> None:
    """A stream is for a logged-in caller, refuses a filter the page would, and sends the
    page's pieces as escaped HTML with the ids they replace; another user's job is a 404."""
    assert httpx.get(f"{served.url}/live/jobs").status_code == 303
    cookies = served.login()
    bad = httpx.get(f"{served.url}/live/jobs?state=nope", cookies=cookies)
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_query"
    create(served, "export:csv", args={"note": "<b>bold</b>"})
    with httpx.stream("GET", f"{served.url}/live/jobs/{CSV}", cookies=cookies) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        lines: list[str] = []
        for line in stream.iter_lines():
            if not line:
                break
            lines.append(line)
    assert lines[0] == "event: update" and all(x.startswith("data: ") for x in lines[1:])
    data = "\n".join(x.removeprefix("data: ") for x in lines[1:])
    assert '<span class="live on" id="live" hx-swap-oob="true">live</span>' in data
    assert re.search(r'<h1 id="heading" hx-swap-oob="true">', data)
    assert "&lt;b&gt;bold&lt;/b&gt;" in data and "<b>" not in data
    bob = served.login(served.app.store.create_token(user_id="bob")[1])
    assert httpx.get(f"{served.url}/live/jobs/{CSV}", cookies=bob).status_code == 404


def test_a_carriage_return_in_the_data_cannot_end_a_line_of_the_stream() -> None:
    """Each line of an update is a data line; a carriage return is sent as &#13;, so text
    like "\\revent: close" stays text."""
    from longcall.server.dashboard._live import _message

    sent = _message("update", "<p>a\revent: close</p>\n<p>b</p>")
    assert sent == b"event: update\ndata: <p>a&#13;event: close</p>\ndata: <p>b</p>\n\n"
