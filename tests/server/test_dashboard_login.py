"""Dashboard logins that cannot be forged: the token only in a same-origin form POST, a login
id (stored as its digest) in the cookie instead of the token, logout and expiry that end it,
and writes by cookie that need the page's CSRF token. Over plain HTTP, and in Chromium with
attacking pages served by a second local HTTP server (another port; another site too, when
reached as ``localhost`` instead of ``127.0.0.1``)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import sqlite3
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import pytest

import longcall

pytest.importorskip("longcall.server", reason="the server extra is not installed")
import httpx

from longcall.server.app import create_app
from longcall.server.dashboard.login_cookie import LOGIN_COOKIE, csrf_token
from server.conftest import Served, browser_login, live_server

EVIL = "https://evil.example"


# -- helpers ------------------------------------------------------------------------------------


def stored_logins(app: longcall.App) -> list[str]:
    """Every login_hash in lc_logins, read straight from the database."""
    if app.url.startswith("sqlite"):
        conn = sqlite3.connect(urlsplit(app.url).path[1:])
        try:
            return [r[0] for r in conn.execute("SELECT login_hash FROM lc_logins")]
        finally:
            conn.close()
    import psycopg

    with psycopg.connect(app.url, autocommit=True) as conn:
        return [r[0] for r in conn.execute("SELECT login_hash FROM lc_logins").fetchall()]


def post_login(url: str, token: str, **headers: str) -> httpx.Response:
    return httpx.post(url + "/login", data={"token": token}, headers=headers)


def csrf_of(page_html: str) -> str:
    found = re.search(r'<meta name="csrf-token" content="([0-9a-f]+)">', page_html)
    assert found, "the page carries no CSRF token"
    return found[1]


def create(served: Served, key: str) -> str:
    """A job of the served user; its id is the key in that user's namespace."""
    answer = served.api.post("/v1/jobs", json={"jobId": key, "toolName": "export"})
    assert answer.status_code == 201, answer.text
    return str(answer.json()["jobId"])


def state_of(served: Served, job_id: str) -> str:
    return str(served.api.get(f"/v1/jobs/{job_id}").json()["state"])


@contextlib.contextmanager
def other_server(page_html: str) -> Iterator[int]:
    """A second HTTP server on another local port, answering every GET with ``page_html``:
    the attacker's page."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = page_html.encode()
            self.send_response(200)
            self.send_header("content-type", "text/html; charset=utf-8")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def auto_login_page(dashboard: str, token: str) -> str:
    """A page that, once opened, posts ``token`` to the dashboard's login form."""
    return f"""<!doctype html><html><body>
<form id="f" method="post" action="{dashboard}/login">
<input name="token" value="{token}"></form>
<script>document.getElementById('f').submit();</script></body></html>"""


# -- the login form over HTTP -------------------------------------------------------------------


def test_a_token_in_the_address_logs_no_one_in(served: Served) -> None:
    """/login?token=… answers the form with a message and sets no cookie, GET or POST."""
    got = httpx.get(served.url + "/login", params={"token": served.token})
    assert got.status_code == 400 and "set-cookie" not in got.headers
    assert 'name="token"' in got.text and "not accepted" in got.text
    posted = httpx.post(served.url + "/login", params={"token": served.token}, data={"other": "x"})
    assert posted.status_code == 400 and "set-cookie" not in posted.headers
    assert stored_logins(served.app) == []


@pytest.mark.parametrize(
    "headers",
    [
        {"origin": EVIL},
        {"origin": "null"},
        {"origin": "http://127.0.0.1:1"},  # this host, another port
        {"sec-fetch-site": "cross-site"},
        {"sec-fetch-site": "same-site"},
    ],
)
def test_a_login_post_from_elsewhere_is_refused(served: Served, headers: dict[str, str]) -> None:
    """A login POST the browser says comes from another origin: 403, no cookie, no login."""
    answer = post_login(served.url, served.token, **headers)
    assert answer.status_code == 403 and "set-cookie" not in answer.headers
    assert "Login refused" in answer.text
    assert stored_logins(served.app) == []


def test_a_login_post_from_the_servers_own_page_or_curl_is_accepted(served: Served) -> None:
    """The server's own Origin, Sec-Fetch-Site same-origin, or neither header: logged in."""
    for headers in (
        {"origin": served.url, "sec-fetch-site": "same-origin"},
        {"origin": served.url},
        {},
    ):
        answer = post_login(served.url, served.token, **headers)
        assert answer.status_code == 303, (headers, answer.text)
    assert len(stored_logins(served.app)) == 3
    refused = httpx.post(
        served.url + "/login", json={"token": served.token}, headers={"origin": served.url}
    )
    assert refused.status_code == 415 and "set-cookie" not in refused.headers


def test_the_cookie_holds_a_login_id_kept_only_as_its_digest(served: Served) -> None:
    """The cookie is not the token; the store has its sha256, not itself; it authenticates."""
    answer = post_login(served.url, served.token, origin=served.url)
    login_id = answer.cookies[LOGIN_COOKIE]
    assert login_id != served.token and served.token not in answer.headers["set-cookie"]
    flags = answer.headers["set-cookie"].lower()
    assert all(f in flags for f in ("httponly", "samesite=strict", "path=/", "max-age=43200"))
    assert "secure" not in flags  # plain http here; https gets Secure
    assert stored_logins(served.app) == [hashlib.sha256(login_id.encode()).hexdigest()]
    cookies = {LOGIN_COOKIE: login_id}
    assert httpx.get(served.url + "/", cookies=cookies).status_code == 200
    assert httpx.get(served.url + "/v1/jobs", cookies=cookies).status_code == 200
    # The digest itself, or the old cookie with the bearer token, logs no one in.
    digest = stored_logins(served.app)[0]
    assert httpx.get(served.url + "/v1/jobs", cookies={LOGIN_COOKIE: digest}).status_code == 401
    old = {"longcall_token": served.token}
    assert httpx.get(served.url + "/v1/jobs", cookies=old).status_code == 401
    assert httpx.get(served.url + "/", cookies=old).headers["location"] == "/login"


def test_logging_in_again_ends_the_browsers_previous_login(served: Served) -> None:
    """A browser that logs in again (as bob, say) has one login: its previous one ends."""
    first = served.login()
    bob = served.app.store.create_token(user_id="bob")[1]
    again = httpx.post(served.url + "/login", data={"token": bob}, cookies=first)
    assert again.status_code == 303
    assert httpx.get(served.url + "/v1/jobs", cookies=first).status_code == 401
    assert len(stored_logins(served.app)) == 1
    second = {LOGIN_COOKIE: again.cookies[LOGIN_COOKIE]}
    assert ">bob<" in httpx.get(served.url + "/", cookies=second).text


def test_over_https_the_cookie_is_secure_and_the_origin_is_https(served: Served) -> None:
    """Behind a local TLS proxy (X-Forwarded-Proto: https from 127.0.0.1, which uvicorn
    trusts) the cookie is Secure, and only the https origin may post the form."""
    https = served.url.replace("http://", "https://")
    proxied = {"x-forwarded-proto": "https"}
    plain = post_login(served.url, served.token, origin=served.url, **proxied)
    assert plain.status_code == 403  # the page the browser shows is https, its form too
    answer = post_login(served.url, served.token, origin=https, **proxied)
    assert answer.status_code == 303, answer.text
    assert "; secure" in answer.headers["set-cookie"].lower()


def test_logout_ends_the_login_and_the_old_cookie_then_fails(served: Served) -> None:
    """POST /logout with the page's token deletes the login: its cookie replayed is refused."""
    cookies = served.login()
    page = httpx.get(served.url + "/", cookies=cookies)
    csrf = csrf_of(page.text)
    # Without the token (a form on another page), or by GET, nothing ends.
    assert httpx.post(served.url + "/logout", cookies=cookies, data={}).status_code == 403
    forged = httpx.post(
        served.url + "/logout", cookies=cookies, data={"csrf": csrf}, headers={"origin": EVIL}
    )
    assert forged.status_code == 403
    assert httpx.get(served.url + "/logout", cookies=cookies).status_code == 405
    assert httpx.get(served.url + "/", cookies=cookies).status_code == 200

    out = httpx.post(served.url + "/logout", cookies=cookies, data={"csrf": csrf})
    assert out.status_code == 303 and out.headers["location"] == "/login"
    assert stored_logins(served.app) == []
    replayed = httpx.get(served.url + "/", cookies=cookies)
    assert replayed.status_code == 303 and replayed.headers["location"] == "/login"
    assert httpx.get(served.url + "/v1/jobs", cookies=cookies).status_code == 401


def test_a_login_expires_and_revoking_the_token_ends_it(db_url: str) -> None:
    """Past --login-ttl (default 12 h, on the fake clock) and after a revoke: not logged in."""
    clock = longcall.FakeClock()
    with longcall.App(db_url, clock=clock) as app, live_server(app) as client:
        info, token = app.store.create_token(user_id="alice")
        url = str(client.base_url).rstrip("/")
        first = {LOGIN_COOKIE: post_login(url, token).cookies[LOGIN_COOKIE]}
        clock.advance(12 * 3600 - 1)
        assert httpx.get(url + "/v1/jobs", cookies=first).status_code == 200
        clock.advance(1)
        assert httpx.get(url + "/v1/jobs", cookies=first).status_code == 401
        assert httpx.get(url + "/", cookies=first).headers["location"] == "/login"
        assert stored_logins(app) == []  # deleted as it was found expired

        second = {LOGIN_COOKIE: post_login(url, token).cookies[LOGIN_COOKIE]}
        assert httpx.get(url + "/v1/jobs", cookies=second).status_code == 200
        app.store.revoke_token(info.token_id)
        assert httpx.get(url + "/v1/jobs", cookies=second).status_code == 401


# -- writes made with the cookie ----------------------------------------------------------------


def test_a_cookie_write_needs_the_pages_csrf_token(served: Served) -> None:
    """Cancel by cookie: without the token, a wrong one, or from elsewhere, 403 and nothing
    changes; with the page's token it cancels. A bearer header needs no token."""
    victim = create(served, "victim")
    cookies = served.login()
    csrf = csrf_of(httpx.get(served.url + "/", cookies=cookies).text)
    cancel = f"{served.url}/v1/jobs/{victim}/cancel"

    def cookie_cancel(**headers: str) -> httpx.Response:
        return httpx.post(cancel, cookies=cookies, json={}, headers=headers)

    for headers in (
        {},
        {"x-csrf-token": "0" * 64},
        {"x-csrf-token": csrf_token("another login")},
        {"x-csrf-token": csrf, "origin": EVIL},
        {"x-csrf-token": csrf, "sec-fetch-site": "same-site"},
    ):
        refused = cookie_cancel(**headers)
        assert refused.status_code == 403, headers
        assert refused.json()["error"]["code"] in ("csrf_token", "cross_origin")
        assert state_of(served, victim) == "started"
    done = cookie_cancel(**{"x-csrf-token": csrf, "origin": served.url})
    assert done.status_code == 200, done.text
    assert state_of(served, victim) == "cancelled"

    by_curl = create(served, "by-curl")
    assert served.api.post(f"/v1/jobs/{by_curl}/cancel", json={}).status_code == 200


def test_every_write_of_the_api_refuses_the_cookie_without_the_token(served: Served) -> None:
    """Each POST, PUT, PATCH and DELETE route (webhooks aside, they are signed) answers a
    cookie without the CSRF token 403, before it reads the body or looks for the object."""
    cookies = served.login()
    writes = []
    for route in create_app(served.app).routes:
        path = getattr(route, "path", "")
        methods = (getattr(route, "methods", None) or set()) - {"GET", "HEAD", "OPTIONS"}
        if path.startswith("/v1/") and not path.startswith("/v1/hooks"):
            filled = re.sub(r"\{[^}]+\}", "x", path)
            writes += [(method, filled) for method in sorted(methods)]
    assert len(writes) >= 10, writes
    for method, path in writes:
        answer = httpx.request(method, served.url + path, cookies=cookies, json={})
        assert answer.status_code == 403, (method, path, answer.text)
        assert answer.json()["error"]["field"] == "x-csrf-token"


# -- in Chromium --------------------------------------------------------------------------------


@pytest.mark.parametrize("evil_host", ["localhost", "127.0.0.1"])
def test_a_page_elsewhere_cannot_log_the_browser_in(
    browser: Any, served: Served, evil_host: str
) -> None:
    """A page on another site (or this host at another port) that auto-posts mallory's
    token to /login: refused; a browser logged in as alice stays alice, one logged out
    stays out."""
    mallory = served.app.store.create_token(user_id="mallory")[1]
    html = auto_login_page(served.url, mallory)
    for logged_in_first in (False, True):
        context = browser.new_context()
        try:
            page = context.new_page()
            if logged_in_first:
                browser_login(page, served.url, served.token)
            before = {c["name"]: c["value"] for c in context.cookies()}
            with other_server(html) as port:
                with page.expect_navigation(url=f"{served.url}/login"):
                    page.goto(f"http://{evil_host}:{port}/")
                assert "Login refused" in page.content()
            after = {c["name"]: c["value"] for c in context.cookies()}
            assert after == before
            page.goto(served.url + "/")
            if logged_in_first:
                assert page.locator(".who").inner_text() == "alice"
            else:
                assert page.url == served.url + "/login"
        finally:
            context.close()
    assert len(stored_logins(served.app)) == 1  # alice's own


def test_a_page_on_another_port_cannot_make_a_change(browser: Any, served: Served) -> None:
    """alice is logged in; a page on this host at another port gets her cookie sent but not
    her CSRF token: its fetch and its form post change nothing."""
    from playwright.sync_api import expect

    victim = create(served, "victim")
    context = browser.new_context()
    try:
        page = context.new_page()
        browser_login(page, served.url, served.token)
        cancel = f"{served.url}/v1/jobs/{victim}/cancel"
        form = f"""<!doctype html><html><body>
<form id="f" method="post" action="{cancel}" enctype="text/plain">
<input name='{{"x":"' value='"}}'></form></body></html>"""
        with other_server(form) as port:
            page.goto(f"http://127.0.0.1:{port}/")
            for mode in ("no-cors", "cors"):
                page.evaluate(
                    """async ([url, mode]) => {
                        try {
                          await fetch(url, {method: 'POST', mode, credentials: 'include',
                            headers: {'content-type': 'text/plain'}, body: '{}'});
                        } catch (e) { /* a refused CORS read: the request went out */ }
                    }""",
                    [cancel, mode],
                )
            with page.expect_navigation():
                page.evaluate("document.getElementById('f').submit()")
            # The server's refusal, not the form's content type, is what answered.
            assert page.url == cancel
            refusal = json.loads(page.locator("body").inner_text())["error"]["code"]
            assert refusal in ("cross_origin", "csrf_token")
        assert state_of(served, victim) == "started"
        # The dashboard's own page, with the token, still can.
        page.goto(f"{served.url}/jobs/{victim}")
        page.locator('form[data-verb="cancel"]').get_by_role("button", name="Cancel").click()
        page.get_by_role("dialog").get_by_role("button", name="Cancel the job").click()
        expect(page.locator("h1 .badge")).to_have_text("cancelled", timeout=5000)
        assert state_of(served, victim) == "cancelled"
    finally:
        context.close()


def test_logging_out_in_the_browser_ends_the_login(browser: Any, served: Served) -> None:
    """The Log out button posts the page's token; the cookie it had is then refused."""
    context = browser.new_context()
    try:
        page = context.new_page()
        browser_login(page, served.url, served.token)
        cookie = {c["name"]: c["value"] for c in context.cookies()}[LOGIN_COOKIE]
        assert cookie != served.token
        with page.expect_navigation(url=f"{served.url}/login"):
            page.get_by_role("button", name="Log out").click()
        assert LOGIN_COOKIE not in {c["name"] for c in context.cookies()}
        page.goto(served.url + "/")
        assert page.url == served.url + "/login"
        replayed = httpx.get(served.url + "/", cookies={LOGIN_COOKIE: cookie})
        assert replayed.status_code == 303
    finally:
        context.close()
