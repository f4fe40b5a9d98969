"""The dashboard's safeguards and what it tells an operator: ends and answers ask first, the
search asks the store, a bad filter says so, a job's log has its whole life and its run, a
paused schedule fires at no time, a run no live worker can take says so, and a transcript
tells tool responses from the user (the server and the browser are set up in conftest.py)."""

from __future__ import annotations

import html
import re
import time
from typing import Any
from urllib.parse import urlencode

import pytest

import longcall
from longcall import CallIds, Delivery, JobState

pytest.importorskip("longcall.server", reason="the server extra is not installed")

from longcall import job_id_for
from longcall.server.dashboard.answers import answer_fields, answer_form
from longcall.store import NewJob
from server.conftest import Served, logged_in
from server.test_dashboard import ask, create, create_schedule, submit_refund

# alice's jobs made with these keys over POST /v1/jobs, in her namespace.
CSV = job_id_for("export:csv", "alice")
JSON_ID = job_id_for("export:json", "alice")


def text_of(page_html: str) -> str:
    """A page's text with its tags and entities gone, its whitespace collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page_html)).split())


def forms(page_html: str) -> dict[str, tuple[str, bool]]:
    """Each action form by its verb or id: its classes, and whether it asks first."""
    found = {}
    for tag in re.findall(r'<form class="action[^"]*"[^>]*>', page_html):
        name = re.search(r'(?:data-verb|id)="([^"]+)"', tag)
        classes = re.search(r'class="([^"]+)"', tag)
        assert name is not None and classes is not None
        found[name[1]] = (classes[1], "data-confirm=" in tag)
    return found


def many_jobs(served: Served, job_ids: list[str]) -> None:
    """alice's jobs, oldest first, straight into the store."""
    for job_id in job_ids:
        new = NewJob(job_id, "export", {}, CallIds(user_id="alice"), None)
        served.app.store.create_job(new, holder="test", dispatch_lease=0, dispatch=False)


def log_kinds(page_html: str) -> list[str]:
    """The Kind column of a page's event log, in order."""
    log = re.search(r'<tbody id="log">(.*?)</tbody>', page_html, re.S)
    assert log is not None
    return re.findall(r"<tr[^>]*><td>[^<]*</td><td>[^<]*</td><td>([^<]*)</td>", log[1])


A_TIME = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"


def wait_until(check: Any, what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


# -- confirmation and the approval form -------------------------------------------------------


def test_ends_and_answers_ask_first_and_look_apart_from_harmless_actions(served: Served) -> None:
    """Fail, cancel, a run's cancel and a schedule's delete are marked danger and ask first;
    the answer form is marked a decision and asks first; the other buttons do neither."""
    create(served, "export:csv")
    assert forms(served.page(f"/jobs/{CSV}").text) == {
        "progress": ("action", False),
        "complete": ("action", False),
        "fail": ("action danger", True),
        "cancel": ("action danger", True),
        "extend": ("action", False),
        "redeliver": ("action", False),
    }
    run_id = submit_refund(served)
    assert forms(served.page(f"/runs/{run_id}").text) == {
        "answers": ("action decision", True),
        "cancel": ("action danger", True),
        "messages": ("action", False),
    }
    cron_id = create_schedule(served, "nightly")["cronId"]
    assert forms(served.page(f"/schedules/{cron_id}").text) == {
        "pause": ("action", False),
        "unpause": ("action", False),
        "trigger": ("action", False),
        "delete": ("action danger", True),
    }


def test_the_approval_form_decides_nothing_by_itself() -> None:
    """A yes-or-no or a choice the schema gives no default starts unset and out of the answer;
    one with a default starts at it; a question of one yes-or-no sends no answer at first."""
    schema = {
        "type": "object",
        "properties": {
            "loud": {"type": "boolean", "default": True},
            "ok": {"type": "boolean"},
            "tone": {"enum": ["a", "b"], "default": "b"},
            "level": {"enum": ["low", "high"]},
        },
        "required": ["ok", "level"],
    }
    controls, start = answer_fields("interrupt-1", schema)
    assert start == {"loud": True, "tone": "b"}
    assert re.findall(r'name="interrupt-1\.(\w+)" value="(\w+)" checked', controls) == [
        ("loud", "true")
    ]
    assert controls.count('<option value="" selected>— choose —</option>') == 1  # level's
    # The required ones first (the schema's order), then the rest by name.
    names = re.findall(r'data-prop="(\w+)"', controls)
    assert names == ["ok", "level", "loud", "tone"]

    whole, answer = answer_fields("interrupt-1", {"type": "boolean"})
    assert answer is ... and "checked" not in whole
    asked = [
        {"key": "interrupt-1", "prompt": "Go on?", "schema": {"type": "boolean"}, "error": None}
    ]
    assert "-d '{}'" in html.unescape(answer_form("/v1/runs/r", "http://x/v1/runs/r", asked))


def test_cancel_asks_first_and_going_back_changes_nothing(page: Any, served: Served) -> None:
    """Cancel looks apart from Complete; it opens a dialog whose Go back (focused) or Escape
    sends nothing; its yes cancels the job."""
    from playwright.sync_api import expect

    create(served, "export:csv")
    page.get_by_role("link", name=CSV, exact=True).click()
    expect(page.locator("h1 .badge")).to_have_text("started")

    def colour(verb: str) -> str:
        button = page.locator(f'form[data-verb="{verb}"] button')
        return str(button.evaluate("b => getComputedStyle(b).backgroundColor"))

    assert colour("cancel") == colour("fail") != colour("complete")

    dialog = page.get_by_role("dialog")
    cancel = page.locator('form[data-verb="cancel"]').get_by_role("button", name="Cancel")
    cancel.click()
    expect(dialog).to_contain_text("Cancel this job?")
    expect(dialog.get_by_role("button", name="Go back")).to_be_focused()
    dialog.get_by_role("button", name="Go back").click()
    expect(dialog).to_be_hidden()
    expect(page.locator("#outcome")).to_have_text("Nothing was sent; the job is as it was.")
    cancel.click()
    expect(dialog).to_be_visible()
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    assert served.app.store.get_job(CSV).state is JobState.STARTED

    cancel.click()
    dialog.get_by_role("button", name="Cancel the job").click()
    expect(page.locator("h1 .badge")).to_have_text("cancelled", timeout=5000)
    assert served.app.store.get_job(CSV).state is JobState.CANCELLED


# -- search and filters -----------------------------------------------------------------------


def test_the_search_asks_the_store_not_only_the_rows_loaded(served: Served) -> None:
    """A job older than the hundred the list loads is found by its text, in any case; a search
    that finds nothing says so; the API searches the same way."""
    many_jobs(served, ["needle-1", *(f"hay-{n}" for n in range(105))])
    assert "needle-1" not in served.page("/").text  # past the first hundred
    found = served.page("/?q=NEEDLE")
    assert found.status_code == 200 and 'href="/jobs/needle-1"' in found.text
    assert found.text.count("data-job-id=") == 1
    nothing = served.page("/?" + urlencode({"q": "%zz_"}))
    empty = re.search(r'<p id="empty" role="status">([^<]*)</p>', nothing.text)
    assert empty is not None and html.unescape(empty[1]) == "No jobs match “%zz_”."
    assert nothing.text.count("data-job-id=") == 0
    listed = served.api.get("/v1/jobs", params={"q": "needle"}).json()
    assert [j["jobId"] for j in listed["jobs"]] == ["needle-1"]
    assert served.api.get("/v1/jobs", params={"q": "%"}).json()["jobs"] == []


def test_an_unknown_filter_or_a_search_that_cannot_be_made_says_so(served: Served) -> None:
    """An unknown ?state= or ?status= is a 400 page naming it and the ones there are; a search
    too long or with a NUL is refused with the reason, on the page and over the API."""
    bad_state = served.page("/?state=bogus")
    assert bad_state.status_code == 400
    assert "There is no job state “bogus”. The states are: started, succeeded" in text_of(
        bad_state.text
    )
    assert 'href="/?state=started"' in bad_state.text
    bad_status = served.page("/runs?status=nope")
    assert bad_status.status_code == 400
    assert "There is no run status “nope”." in text_of(bad_status.text)
    assert 'href="/runs?status=queued"' in bad_status.text
    too_long = served.page("/?q=" + "x" * 201)
    assert too_long.status_code == 400
    assert "the search text is at most 200 characters" in text_of(too_long.text)
    with_nul = served.page("/?q=a%00b")
    assert with_nul.status_code == 400 and "NUL" in with_nul.text
    for q, reason, status in (("x" * 201, "at most 200", 422), ("a\x00b", "NUL", 400)):
        answer = served.api.get("/v1/jobs", params={"q": q})
        assert answer.status_code == status, answer.text
        assert answer.json()["error"]["field"] == "q" and reason in answer.text


def test_the_search_box_asks_the_server_and_says_when_nothing_matched(
    page: Any, served: Served
) -> None:
    """Typing finds a job that is not among the rows loaded; a search with no match empties
    the table and says so; the address keeps the search."""
    from playwright.sync_api import expect

    many_jobs(served, ["needle-1", *(f"hay-{n}" for n in range(105))])
    page.reload()
    expect(page.locator("#live")).to_have_text("live", timeout=5000)
    expect(page.locator("#jobs tr")).to_have_count(100)
    search = page.locator("#search")
    search.fill("NEEDLE")
    expect(page.get_by_role("link", name="needle-1", exact=True)).to_be_visible(timeout=5000)
    expect(page.locator("#jobs tr")).to_have_count(1)
    search.fill("no-such-thing")
    expect(page.locator("#empty")).to_have_text("No jobs match “no-such-thing”.", timeout=5000)
    expect(page.locator("#jobs tr")).to_have_count(0)
    assert "q=no-such-thing" in page.url


# -- one job's story --------------------------------------------------------------------------


def test_the_event_log_shows_when_the_job_was_created_attached_finished_and_delivered(
    served: Served,
) -> None:
    """A job made over HTTP, attached by the agent's call, completed and delivered has all four
    moments in its log, in the order they happened."""
    create(served, "export:csv")
    assert log_kinds(served.page(f"/jobs/{CSV}").text) == ["created"]
    ask(served, "export please")
    served.api.post(f"/v1/jobs/{CSV}/complete", json={"result": {"rows": 3}})
    wait_until(
        lambda: served.app.store.get_job(CSV).delivery is Delivery.DELIVERED,
        "the result was not delivered",
    )
    page = served.page(f"/jobs/{CSV}").text
    assert log_kinds(page) == ["created", "attached", "succeeded", "delivered"]
    times = re.findall(r'<tr[^>]*data-at="([^"]+)"', page)
    assert times == sorted(times) and len(times) == 4
    assert "to session s-1, call" in page and "the final response is in the session" in page


def test_the_event_log_adds_the_attach_and_the_delivery_live(page: Any, served: Served) -> None:
    """On an open job page, the agent's call adds "attached" to the log and the delivery of the
    result adds "delivered", after the finish."""
    from playwright.sync_api import expect

    create(served, "export:csv")
    page.get_by_role("link", name=CSV, exact=True).click()
    expect(page.locator("#live")).to_have_text("live", timeout=5000)
    kinds = page.locator("#log tr td:nth-child(3)")
    expect(kinds).to_have_text(["created"])
    ask(served, "export please")
    expect(kinds).to_have_text(["created", "attached"], timeout=5000)
    served.api.post(f"/v1/jobs/{CSV}/complete", json={"result": {"rows": 3}})
    expect(kinds).to_have_text(["created", "attached", "succeeded", "delivered"], timeout=10000)


def test_a_job_done_by_a_background_run_links_to_it_and_back(served: Served) -> None:
    """The job's page links to the run doing its work, with its status; the run's page links
    back to the job; a job without a run shows none."""
    create(served, "export:csv")
    create(served, "export:json")
    served.app.store.create_run("run-for-job", "refund", {"id": "o-9"}, user_id="alice", job_id=CSV)
    job_page = served.page(f"/jobs/{CSV}").text
    assert 'Background run</dt><dd><a href="/runs/run-for-job">run-for-job</a>' in job_page
    assert 'class="badge status-' in job_page
    assert "Background run" not in served.page(f"/jobs/{JSON_ID}").text
    run_page = served.page("/runs/run-for-job").text
    assert f'Doing the work of job</dt><dd><a href="/jobs/{CSV}">{CSV}</a>' in run_page


def test_the_transcript_labels_function_responses_as_the_tools(page: Any, served: Served) -> None:
    """The turns that carry only function responses (the result handed back into the session
    as the user's turn, too) are labelled "tool response"; only alice's own words are hers."""
    from playwright.sync_api import expect

    create(served, "export:csv")
    ask(served, "export please")
    served.api.post(f"/v1/jobs/{CSV}/complete", json={"result": {"rows": 3}})
    page.get_by_role("link", name=CSV, exact=True).click()
    transcript = page.locator("#transcript")
    expect(transcript).to_contain_text("export has finished: rows 3.", timeout=10000)
    responses = transcript.locator(".turn").filter(has_text="← export")
    expect(responses).to_have_count(2)  # the pending answer, then the result
    expect(responses.locator(".author")).to_have_text(["tool response", "tool response"])
    users = transcript.locator(".turn.user")
    expect(users).to_have_count(1)
    expect(users).to_contain_text("export please")


# -- schedules --------------------------------------------------------------------------------


def test_a_paused_schedule_shows_no_next_fire_time(served: Served) -> None:
    """Paused, the list and the page show no next fire time and no next fire times, only that
    it is paused; unpaused, they show them again."""
    cron_id = create_schedule(served, "nightly")["cronId"]
    row = re.compile(r'<tr data-cron-id="[^"]+">.*?</tr>', re.S)

    def listed() -> str:
        found = row.search(served.page("/schedules").text)
        assert found is not None
        return text_of(found[0])

    assert "(paused)" not in listed() and re.search(A_TIME, listed())
    served.api.patch(f"/v1/cron/{cron_id}", json={"paused": True})
    assert "— (paused)" in listed() and not re.search(A_TIME, listed())
    page = served.page(f"/schedules/{cron_id}").text
    assert '<span data-field="nextFireAt">— (paused)</span>' in page
    assert '<p class="note" id="next-paused">' in page
    assert re.search(r'<tbody id="next"></tbody>', page)
    served.api.patch(f"/v1/cron/{cron_id}", json={"paused": False})
    page = served.page(f"/schedules/{cron_id}").text
    assert "(paused)" not in listed() and "(paused)" not in text_of(page)
    upcoming = re.search(r'<tbody id="next">(.*?)</tbody>', page, re.S)
    assert upcoming is not None and upcoming[1].count("<tr>") == 5


def test_pausing_a_schedule_takes_its_next_fire_times_off_the_page(
    page: Any, served: Served
) -> None:
    """Pause replaces the next fire time and times with "paused" on the open page; Unpause
    brings them back."""
    from playwright.sync_api import expect

    cron_id = create_schedule(served, "nightly")["cronId"]
    page.goto(f"{served.url}/schedules/{cron_id}")
    next_fire = page.locator("dd [data-field=nextFireAt]")
    expect(page.locator("#next tr")).to_have_count(5)
    page.get_by_role("button", name="Pause", exact=True).click()
    expect(next_fire).to_have_text("— (paused)", timeout=5000)
    expect(page.locator("#next-paused")).to_be_visible()
    expect(page.locator("table.next")).to_be_hidden()
    page.get_by_role("button", name="Unpause", exact=True).click()
    expect(page.locator("#next tr")).to_have_count(5, timeout=5000)
    expect(page.locator("#next-paused")).to_be_hidden()
    expect(next_fire).not_to_have_text("— (paused)")


# -- runs no live worker can take -------------------------------------------------------------


def test_a_queued_run_no_live_worker_can_run_says_so(unworked: Served) -> None:
    """With no worker, a queued run's page and its row say that no live worker can run its
    workflow; a live worker that registered it silences both, one for other workflows does
    not; /v1/workers lists the live ones."""
    served = unworked
    answer = served.api.post("/v1/runs", json={"workflowId": "refund", "input": {"id": "o-1"}})
    run_id = answer.json()["runId"]
    note = '<p class="warning" id="no-worker" role="status">'

    def marked() -> tuple[bool, bool]:
        page = served.page(f"/runs/{run_id}").text
        listed = served.page("/runs").text
        return note in page, "no live worker can run it" in listed

    assert served.api.get("/v1/workers").json() == {"workers": []}
    assert marked() == (True, True)
    assert "No live worker can run the workflow “refund”" in text_of(
        served.page(f"/runs/{run_id}").text
    )
    served.app.store.beat_worker("w-1", ["refund"], ttl=60)
    assert marked() == (False, False)
    (worker,) = served.api.get("/v1/workers").json()["workers"]
    assert worker["workerId"] == "w-1" and worker["workflows"] == ["refund"]
    served.app.store.beat_worker("w-1", ["report"], ttl=60)
    assert marked() == (True, True)
    served.app.store.beat_worker("w-2", ["refund", "report"], ttl=-1)  # expired at once
    assert marked() == (True, True)


def test_a_run_no_live_worker_can_take_is_marked_live(browser: Any, unworked: Served) -> None:
    """The runs list marks a queued run while no live worker can run it and drops the mark
    when one that can starts beating; the run's page says why it waits."""
    from playwright.sync_api import expect

    served = unworked
    answer = served.api.post("/v1/runs", json={"workflowId": "refund", "input": {"id": "o-1"}})
    run_id = answer.json()["runId"]
    with logged_in(browser, served) as page:
        page.get_by_role("link", name="Runs", exact=True).click()
        link = page.get_by_role("link", name=run_id, exact=True)
        marks = page.locator("#runs tr", has=link).locator(".stranded")
        expect(marks).to_have_text(["no live worker can run it"], timeout=5000)
        served.app.store.beat_worker("w-1", ["refund"], ttl=60)
        expect(marks).to_have_count(0, timeout=5000)
        served.app.store.forget_worker("w-1")
        expect(marks).to_have_count(1, timeout=5000)
        link.click()
        note = page.locator("#no-worker")
        expect(note).to_be_visible()
        expect(note).to_contain_text("No live worker can run the workflow “refund”")
        assert served.app.store.get_run(run_id).status is longcall.RunStatus.QUEUED
