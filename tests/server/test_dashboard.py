"""The dashboard: login, escaping, the curl commands it shows, and the live page in Chromium
(the server and the browser are set up in conftest.py)."""

from __future__ import annotations

import concurrent.futures
import html
import json
import os
import re
import subprocess
import time
from typing import Any
from urllib.parse import quote

import pytest

import longcall

pytest.importorskip("longcall.server", reason="the server extra is not installed")
import httpx

from longcall import job_id_for
from longcall.server.dashboard.login_cookie import LOGIN_COOKIE
from server.conftest import Served, logged_in

MARKUP_ID = "<script>alert('id')</script>"
# As the templates escape it (markupsafe writes ' as &#39;).
ESCAPED_ID = "&lt;script&gt;alert(&#39;id&#39;)&lt;/script&gt;"


# alice's jobs made with these keys over POST /v1/jobs, in her namespace.
CSV = job_id_for("export:csv", "alice")
JSON_ID = job_id_for("export:json", "alice")


def create(served: Served, job_id: str, **fields: Any) -> dict[str, Any]:
    body = {"jobId": job_id, "toolName": "export", "args": {"fmt": "csv"}, **fields}
    answer = served.api.post("/v1/jobs", json=body)
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


def ask(served: Served, text: str) -> None:
    """Alice's turn with the agent, in a thread of its own: Playwright's loop runs in this one."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        turn = pool.submit(
            served.app.run_turn, served.agent, user_id="alice", session_id="s-1", text=text
        )
        turn.result(timeout=30)


def shown_curl(page_html: str, verb: str) -> str:
    """The curl command the job page shows beside one action's button."""
    form = re.search(
        rf'<form class="action[^"]*" data-verb="{verb}"[^>]*>(.*?)</form>', page_html, re.S
    )
    assert form is not None, f"no {verb} form"
    code = re.search(r'<pre class="curl"><code>(.*?)</code></pre>', form[1], re.S)
    assert code is not None, f"no curl command beside {verb}"
    return html.unescape(code[1])


# -- plain HTTP -------------------------------------------------------------------------------


def test_the_dashboard_needs_a_login_and_refuses_a_bad_token(served: Served) -> None:
    """/ without a cookie goes to /login; a bad token is refused; a good one sets the cookie."""
    bare = httpx.get(served.url + "/")
    assert bare.status_code == 303 and bare.headers["location"] == "/login"
    assert httpx.get(served.url + "/", cookies={LOGIN_COOKIE: "no-such"}).status_code == 303
    form = httpx.get(served.url + "/login")
    assert form.status_code == 200 and 'name="token"' in form.text
    refused = httpx.post(served.url + "/login", data={"token": "lc_no_such"})
    assert refused.status_code == 401 and "unknown or revoked" in refused.text
    assert "set-cookie" not in refused.headers

    accepted = httpx.post(served.url + "/login", data={"token": served.token})
    assert accepted.status_code == 303 and accepted.headers["location"] == "/"
    cookie = accepted.headers["set-cookie"].lower()
    assert cookie.startswith(f"{LOGIN_COOKIE}=")
    assert served.token.lower() not in cookie
    assert all(flag in cookie for flag in ("httponly", "samesite=strict", "path=/"))

    cookies = {LOGIN_COOKIE: accepted.cookies[LOGIN_COOKIE]}
    page = httpx.get(served.url + "/", cookies=cookies)
    assert page.status_code == 200 and "<h1>Jobs</h1>" in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["referrer-policy"] == "same-origin"
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text)
    assert csrf, "the page has no logout form with its CSRF token"
    out = httpx.post(served.url + "/logout", data={"csrf": csrf[1]}, cookies=cookies)
    assert out.status_code == 303 and out.headers["location"] == "/login"
    assert f'{LOGIN_COOKIE}=""; expires=' in out.headers["set-cookie"]


def test_job_data_is_escaped_on_both_pages(served: Served) -> None:
    """A job id and arguments that look like markup come out as text, never as tags."""
    made = create(served, MARKUP_ID, args={"note": "<img src=x onerror=alert('args')>"})
    for path in ("/", "/jobs/" + quote(made["jobId"], safe="")):
        page = served.page(path)
        assert page.status_code == 200
        assert "<script>alert" not in page.text and "<img src=x" not in page.text
        assert ESCAPED_ID in page.text
    static = re.findall(r"<script[^>]*>", served.page("/").text)
    assert static == [
        '<script src="/static/vendor/htmx-2.0.11.min.js" defer>',
        '<script src="/static/vendor/htmx-ext-sse-2.2.4.min.js" defer>',
        '<script src="/static/dashboard.js" defer>',
    ]


def test_another_users_job_is_not_found(served: Served) -> None:
    """bob's job page answers alice with 404, like a job that does not exist."""
    bob = served.app.store.create_token(user_id="bob")[1]
    answer = served.api.post(
        "/v1/jobs",
        json={"jobId": "bobs", "toolName": "export"},
        headers={"authorization": f"Bearer {bob}"},
    )
    assert answer.status_code == 201
    assert served.page("/jobs/bobs").status_code == 404
    assert "bobs" not in served.page("/").text


def test_the_curl_command_beside_a_button_does_what_the_button_does(served: Served) -> None:
    """The complete command, run by the shell with the token in $LONGCALL_TOKEN, ends the job."""
    odd_id = create(served, "report 'q3'/emea?#1")["jobId"]  # alice's: ends in @<16 hex>
    command = shown_curl(served.page("/jobs/" + quote(odd_id, safe="")).text, "complete")
    suffix = odd_id.rpartition("@")[2]
    assert command.startswith(
        f"curl -X POST '{served.url}/v1/jobs/report%20%27q3%27%2Femea%3F%231@{suffix}/complete'"
    )
    assert "-d '{\"result\":{}}'" in command
    env = {**os.environ, "LONGCALL_TOKEN": served.token}
    ran = subprocess.run(
        ["bash", "-c", command + " --silent --show-error"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    answer = json.loads(ran.stdout)
    assert answer["changed"] is True and answer["job"]["jobId"] == odd_id
    assert answer["job"]["state"] == "succeeded" and answer["job"]["result"] == {}


def test_every_action_shows_its_api_call(served: Served) -> None:
    """Each button's command posts its default body to that action's URL."""
    create(served, "export:csv")
    page = served.page(f"/jobs/{CSV}").text
    expected = {
        "progress": {"progress": {"percent": 50}, "notifyModel": False},
        "complete": {"result": {}},
        "fail": {},
        "cancel": {},
        "extend": {"deadline": "30m"},
    }
    for verb, body in expected.items():
        command = shown_curl(page, verb)
        url = f"{served.url}/v1/jobs/{CSV}/{verb}"
        assert command.startswith(f"curl -X POST '{url}' \\\n"), command
        assert '-H "Authorization: Bearer $LONGCALL_TOKEN"' in command
        data = re.search(r"-d '(.*)'$", command)
        assert data is not None and json.loads(data[1]) == body, command


def submit_refund(served: Served, order_id: str = "o-1") -> str:
    """A refund run of alice's, once the worker has it waiting for the approval."""
    answer = served.api.post("/v1/runs", json={"workflowId": "refund", "input": {"id": order_id}})
    assert answer.status_code == 201, answer.text
    run_id = str(answer.json()["runId"])
    deadline = time.monotonic() + 10
    while served.app.store.get_run(run_id).status is not longcall.RunStatus.WAITING_INPUT:
        assert time.monotonic() < deadline, "the worker did not run the refund"
        time.sleep(0.05)
    return run_id


def test_the_run_page_builds_the_answer_form_from_the_schema(served: Served) -> None:
    """One input per property (yes/no radios, number, select, text), the curl commands beside
    the buttons, markup in the data shown as text; the runs page lists the run; bob gets 404."""
    run_id = submit_refund(served, MARKUP_ID)
    listed = served.page("/runs")
    assert listed.status_code == 200 and f'href="/runs/{run_id}"' in listed.text
    assert 'href="/runs?status=waiting_input"' in listed.text
    page = served.page(f"/runs/{run_id}")
    assert page.status_code == 200
    assert "<script>alert" not in page.text and ESCAPED_ID in page.text
    form = re.search(
        r'<form class="action decision" id="answers"[^>]*>(.*?)</form>', page.text, re.S
    )
    assert form is not None
    controls = re.findall(r"<(input|select)[^>]*name=\"([^\"]+)\"[^>]*>", form[1])
    assert controls == [
        ("input", "interrupt-1.approved"),  # yes
        ("input", "interrupt-1.approved"),  # no
        ("input", "interrupt-1.amount"),
        ("select", "interrupt-1.channel"),
        ("input", "interrupt-1.note"),
    ]
    assert form[1].count('type="radio"') == 2 and 'type="number" step="1"' in form[1]
    command = html.unescape(re.findall(r'<pre class="curl"><code>(.*?)</code>', form[1], re.S)[0])
    assert command.startswith(f"curl -X POST '{served.url}/v1/runs/{run_id}/answers' \\\n")
    # No decision is made for alice: approved is left out until she picks yes or no (an empty
    # note is left out too); the channel starts at the schema's default.
    body = {"interrupt-1": {"channel": "email"}}
    assert command.endswith(f"-d '{json.dumps(body, separators=(',', ':'))}'")
    cancel = re.search(
        r'<form class="action danger" id="cancel"[^>]*>(.*?)</form>', page.text, re.S
    )
    assert cancel is not None
    assert html.unescape(cancel[1]).count(f"curl -X DELETE '{served.url}/v1/runs/{run_id}'") == 1

    bob = served.login(served.app.store.create_token(user_id="bob")[1])
    assert httpx.get(f"{served.url}/runs/{run_id}", cookies=bob).status_code == 404
    assert run_id not in httpx.get(f"{served.url}/runs", cookies=bob).text


# -- in the browser ---------------------------------------------------------------------------


def test_a_new_job_appears_and_completing_it_resumes_the_agent(page: Any, served: Served) -> None:
    """A job made through the API shows up live; Complete succeeds it and the agent replies."""
    from playwright.sync_api import expect

    create(served, "export:csv")
    row = page.locator("#jobs tr", has=page.get_by_role("link", name=CSV, exact=True))
    expect(row).to_be_visible(timeout=5000)
    expect(row.locator(".badge.state-started")).to_be_visible()

    # The agent's call to export attaches the job to alice's session.
    ask(served, "export please")
    expect(row).to_contain_text("s-1", timeout=5000)
    row.get_by_role("link").click()
    expect(page.locator("#transcript")).to_contain_text("export please", timeout=5000)
    expect(page.locator("#transcript")).to_contain_text("I've started export.")

    complete = page.locator('form[data-verb="complete"]')
    complete.locator("textarea").fill('{"rows": 42}')
    expect(complete.locator(".curl")).to_contain_text('-d \'{"result":{"rows":42}}\'')
    complete.get_by_role("button", name="Complete", exact=True).click()
    expect(page.locator("h1 .badge")).to_have_text("succeeded", timeout=5000)
    expect(page.locator("#outcome")).to_have_text("Done; the job is succeeded.")
    expect(page.locator("#transcript")).to_contain_text(
        "export has finished: rows 42.", timeout=10000
    )
    expect(page.locator("dd [data-field=delivery]")).to_have_text("delivered")
    expect(page.locator("#log")).to_contain_text("succeeded")
    expect(complete.get_by_role("button")).to_be_disabled()  # the job has finished


def test_markup_in_job_data_shows_as_text_in_the_browser(page: Any, served: Served) -> None:
    """A job id like <script> is shown as text, rendered by the server and added live alike."""
    from playwright.sync_api import expect

    shown_id = create(served, MARKUP_ID)["jobId"]
    expect(page.get_by_role("link", name=shown_id, exact=True)).to_be_visible(timeout=5000)
    page.reload()
    expect(page.get_by_role("link", name=shown_id, exact=True)).to_be_visible()
    page.get_by_role("link", name=shown_id, exact=True).click()
    expect(page.locator("h1")).to_contain_text(shown_id)
    page.locator('form[data-verb="fail"] input').fill("</pre><b>bold</b>")
    page.get_by_role("button", name="Fail", exact=True).click()
    page.get_by_role("dialog").get_by_role("button", name="Fail the job").click()
    expect(page.locator("h1 .badge")).to_have_text("failed", timeout=5000)
    expect(page.locator("#log")).to_contain_text("</pre><b>bold</b>")
    assert page.locator("b").count() == 0


def test_a_run_is_answered_through_its_answer_form(browser: Any, served: Served) -> None:
    """From the header to the run: a missing answer is refused naming the field and the run
    still waits; a full answer continues it, and the page shows it complete with its events."""
    # Chromium logs the refused answer's 422 as a console error: that one is expected.
    with logged_in(browser, served, expected=("status of 422",)) as page:
        answer_through_the_form(page, served)


def answer_through_the_form(page: Any, served: Served) -> None:
    from playwright.sync_api import expect

    run_id = submit_refund(served)
    page.get_by_role("link", name="Runs", exact=True).click()
    link = page.get_by_role("link", name=run_id, exact=True)
    expect(link).to_be_visible(timeout=5000)
    expect(page.locator("#runs tr", has=link).locator(".badge")).to_have_text("waiting_input")
    link.click()
    expect(page.locator("#live")).to_have_text("live", timeout=5000)
    form = page.locator("#answers")
    expect(form).to_contain_text("Approve the refund?")

    dialog = page.get_by_role("dialog")
    # Nothing is decided for alice: with no yes or no picked, nothing is sent.
    form.get_by_role("button", name="Answer").click()
    expect(page.locator("#outcome")).to_have_text(
        "interrupt-1: choose yes or no for “Approved”.", timeout=5000
    )
    expect(dialog).to_be_hidden()
    approved = form.get_by_role("group", name="Approved")
    approved.get_by_label("Yes").check()
    form.get_by_role("button", name="Answer").click()
    dialog.get_by_role("button", name="Send the answer").click()
    expect(page.locator("#outcome")).to_have_text(
        "interrupt-1: 'amount' is a required property", timeout=5000
    )
    assert served.app.store.get_run(run_id).status is longcall.RunStatus.WAITING_INPUT

    form.get_by_label("Amount").fill("30")
    form.get_by_label("Channel").select_option("phone")
    form.get_by_label("Note").fill("<b>ok</b>")
    answer = {"approved": True, "amount": 30, "channel": "phone", "note": "<b>ok</b>"}
    body = json.dumps({"interrupt-1": answer}, separators=(",", ":"))
    expect(form.locator(".curl")).to_contain_text(f"-d '{body}'")
    # The answer is shown before it goes; going back sends nothing.
    form.get_by_role("button", name="Answer").click()
    expect(dialog).to_contain_text("Send this answer?")
    expect(dialog.locator(".sent")).to_contain_text('"amount": 30')
    dialog.get_by_role("button", name="Go back").click()
    expect(page.locator("#outcome")).to_have_text(
        "Nothing was sent; the run still waits for the answer."
    )
    assert served.app.store.get_run(run_id).status is longcall.RunStatus.WAITING_INPUT
    form.get_by_role("button", name="Answer").click()
    dialog.get_by_role("button", name="Send the answer").click()
    expect(page.locator("h1 .badge")).to_have_text("completed", timeout=10000)
    expect(page.locator("#answer")).to_contain_text("not waiting for an answer")
    expect(page.locator("[data-field=result]")).to_contain_text('"channel": "phone"')
    expect(page.locator("#log")).to_contain_text("answered")
    expect(page.locator("#cancel button")).to_be_disabled()
    expect(page.locator("#live")).to_have_text("finished")
    assert page.locator("b").count() == 0
    assert served.app.store.get_run(run_id).result == answer


def test_a_message_is_sent_to_a_run_from_its_page(browser: Any, served: Served) -> None:
    """A run waiting in ctx.recv: a message without a topic is refused naming the field and
    nothing is kept; one with a topic is kept, the run receives it and completes, and the
    form is disabled once the run has finished."""
    from playwright.sync_api import expect

    answer = served.api.post("/v1/runs", json={"workflowId": "inbox"})
    assert answer.status_code == 201, answer.text
    run_id = str(answer.json()["runId"])
    with logged_in(browser, served, expected=("status of 422",)) as page:
        page.goto(f"{served.url}/runs/{quote(run_id, safe='')}")
        expect(page.locator("#live")).to_have_text("live", timeout=5000)
        form = page.locator("#send-message form")
        form.get_by_label("Message (JSON)").fill('{"n": 1}')
        expect(form.locator(".curl")).to_contain_text(f"/v1/runs/{run_id}/messages")
        form.get_by_role("button", name="Send a message").click()
        expect(page.locator("#outcome")).to_have_text("topic: Field required", timeout=5000)
        assert served.app.store.get_run(run_id).status is not longcall.RunStatus.COMPLETED
        form.get_by_label("Topic").fill("orders")
        expect(form.locator(".curl")).to_contain_text('"topic":"orders"')
        form.get_by_role("button", name="Send a message").click()
        expect(page.locator("#outcome")).to_have_text(
            "Sent: message 1 on “orders”, kept until the run receives it.", timeout=5000
        )
        expect(page.locator("h1 .badge")).to_have_text("completed", timeout=10000)
        expect(page.locator("[data-field=result]")).to_contain_text('"n": 1')
        expect(page.locator("#send-message button")).to_be_disabled()
    assert served.app.store.get_run(run_id).result == {"n": 1}


# -- schedules --------------------------------------------------------------------------------


def create_schedule(served: Served, name: str) -> dict[str, Any]:
    """A yearly schedule of alice's refund (it never fires during a test by itself)."""
    body = {
        "name": name,
        "workflowId": "refund",
        "cronExpression": "@yearly",
        "timezone": "Europe/Berlin",
        "input": {"id": "nightly"},
        "concurrencyPolicy": "skip",
    }
    answer = served.api.post("/v1/cron", json=body)
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


def test_the_schedule_pages_show_it_and_each_curl_command_does_what_its_button_does(
    served: Served,
) -> None:
    """The table and the page show the schedule (markup in its name as text) with its next five
    fire times; the pause, trigger and delete commands, run by the shell, pause it, start a run
    and delete it; bob gets 404."""
    cron = create_schedule(served, MARKUP_ID)
    cron_id = cron["cronId"]
    listed = served.page("/schedules")
    assert listed.status_code == 200 and f'href="/schedules/{cron_id}"' in listed.text
    assert "<script>alert" not in listed.text and ESCAPED_ID in listed.text
    assert "@yearly" in listed.text and "Europe/Berlin" in listed.text
    page = served.page(f"/schedules/{cron_id}")
    assert page.status_code == 200 and "<script>alert" not in page.text
    assert 'href="/schedules">Schedules</a>' in page.text  # the header links here
    upcoming = re.search(r'<tbody id="next">(.*?)</tbody>', page.text, re.S)
    assert upcoming is not None and upcoming[1].count("<tr>") == 5
    assert "-01-01 00:00:00 +01:00" in upcoming[1]  # midnight of New Year in Berlin

    def command(form: str) -> str:
        found = re.search(
            rf'<form class="action[^"]*" id="{form}"[^>]*>(.*?)</form>', page.text, re.S
        )
        assert found is not None, f"no {form} form"
        code = re.search(r'<pre class="curl"><code>(.*?)</code></pre>', found[1], re.S)
        assert code is not None, f"no curl command beside {form}"
        return html.unescape(code[1])

    url = f"{served.url}/v1/cron/{cron_id}"
    assert command("pause") == (
        f"curl -X PATCH '{url}' \\\n"
        '  -H "Authorization: Bearer $LONGCALL_TOKEN" \\\n'
        "  -H 'Content-Type: application/json' \\\n"
        "  -d '{\"paused\":true}'"
    )
    assert command("unpause").endswith("-d '{\"paused\":false}'")
    assert command("trigger") == (
        f"curl -X POST '{url}/trigger' \\\n  -H \"Authorization: Bearer $LONGCALL_TOKEN\""
    )

    def run(line: str) -> str:
        env = {**os.environ, "LONGCALL_TOKEN": served.token}
        shell = ["bash", "-c", line + " --silent --show-error --fail"]
        done = subprocess.run(shell, env=env, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert json.loads(run(command("pause")))["paused"] is True
    assert served.app.store.get_cron(cron_id).paused is True
    triggered = json.loads(run(command("trigger")))
    assert triggered["outcome"] == "triggered"
    assert served.app.store.get_run(triggered["runId"]).cron_id == cron_id

    bob = served.login(served.app.store.create_token(user_id="bob")[1])
    assert httpx.get(f"{served.url}/schedules/{cron_id}", cookies=bob).status_code == 404
    assert cron_id not in httpx.get(f"{served.url}/schedules", cookies=bob).text

    assert run(command("delete")) == ""
    assert served.page(f"/schedules/{cron_id}").status_code == 404


def test_a_schedule_is_paused_then_run_from_its_page(page: Any, served: Served) -> None:
    """From the header to the schedule: Pause pauses it and the buttons follow; Run now starts a
    run (a second one is skipped while it waits), listed with a link to the run's page."""
    from playwright.sync_api import expect

    cron_id = create_schedule(served, "nightly")["cronId"]
    page.get_by_role("link", name="Schedules", exact=True).click()
    link = page.get_by_role("link", name="nightly", exact=True)
    expect(link).to_be_visible(timeout=5000)
    expect(page.locator("#schedules tr", has=link).locator(".badge")).to_have_text("active")
    link.click()
    expect(page.locator("#live")).to_have_text("live", timeout=5000)
    expect(page.locator("#next tr")).to_have_count(5)
    expect(page.locator("#unpause button")).to_be_disabled()

    page.get_by_role("button", name="Pause", exact=True).click()
    expect(page.locator("h1 .badge")).to_have_text("paused", timeout=5000)
    expect(page.locator("#outcome")).to_have_text("Paused: nothing fires until it is unpaused.")
    expect(page.locator("#pause button")).to_be_disabled()
    expect(page.locator("#unpause button")).to_be_enabled()
    assert served.app.store.get_cron(cron_id).paused is True  # Playwright's loop runs here

    page.get_by_role("button", name="Run now", exact=True).click()
    expect(page.locator("#outcome")).to_contain_text("Started run run-", timeout=5000)
    first = page.locator("#fires tr").first
    expect(first.locator(".badge")).to_have_text("triggered")
    expect(page.locator("dd [data-field=executionCount]")).to_have_text("1")
    run_link = first.get_by_role("link")
    run_id = run_link.inner_text()
    assert served.app.store.get_run(run_id).cron_id == cron_id
    expect(page.locator("dd [data-field=activeRunCount]")).to_have_text("1")

    page.get_by_role("button", name="Run now", exact=True).click()
    expect(page.locator("#outcome")).to_have_text(
        "Skipped: a run of this schedule is still active.", timeout=5000
    )
    expect(page.locator("#fires tr").first.locator(".badge")).to_have_text("trigger_skipped")
    expect(page.locator("dd [data-field=executionCount]")).to_have_text("1")

    page.locator("#fires").get_by_role("link", name=run_id).click()
    expect(page.locator("h1")).to_contain_text(run_id)
    expect(page.locator("h1 .badge")).to_have_text("waiting_input", timeout=10000)
