"""Logging the dashboard's browser in and out.

``GET /login`` shows a form; the form POSTs the token in its body. The token is never taken
from the address (proxies and histories keep addresses), and a POST that the browser says
comes from another origin is refused before the token is read, so no other page can log a
browser in under its own token. A good token makes a server-side login
(``app.access``) whose random id, not the token, goes in the cookie; ``POST
/logout`` (with the page's CSRF token) deletes it, so the cookie is worthless afterwards.
"""

from __future__ import annotations

from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from longcall.app import App
from longcall.errors import StoreError
from longcall.server.api.requests import read_body
from longcall.server.dashboard._render import HEADERS, message_page, page
from longcall.server.dashboard.login_cookie import (
    CSRF_FIELD,
    CSRF_HEADER,
    LOGIN_COOKIE,
    csrf_matches,
    foreign,
)

FORM_TYPE = "application/x-www-form-urlencoded"
MAX_FORM = 4096
# Where dashboards before logins kept the bearer token itself: no longer read, and cleared
# from the browser at the next login or logout.
OLD_TOKEN_COOKIE = "longcall_token"


def login_form(message: str = "", status: int = 200) -> Response:
    return page("login.html", "Log in", None, status=status, message=message)


async def login_page(request: Request) -> Response:
    """``GET /login``: the form. A token in the address logs no one in."""
    if "token" in request.query_params:
        return login_form(
            "A token in the address is not accepted: addresses are kept in histories and "
            "logs. Paste the token here instead (and consider revoking the one in the link).",
            400,
        )
    return login_form()


async def _form(request: Request) -> dict[str, list[str]] | Response:
    """The fields of a urlencoded form body, or the page to answer instead."""
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type != FORM_TYPE:
        return login_form(f"Send the form as {FORM_TYPE}.", 415)
    body = await read_body(request, MAX_FORM)
    if isinstance(body, Response):
        return body
    return parse_qs(body.decode(errors="replace"))


async def login(request: Request) -> Response:
    """``POST /login``: check where the form comes from, then the token; make a login and
    set its cookie."""
    why = foreign(request)
    if why is not None:
        return login_form(f"Login refused: {why}. Log in on this server's own page.", 403)
    form = await _form(request)
    if isinstance(form, Response):
        return form
    token = form.get("token", [""])[0].strip()
    if not token:
        return login_form("Paste a token.", 400)
    app: App = request.app.state.longcall
    ttl: float = request.app.state.settings.login_ttl
    previous = request.cookies.get(LOGIN_COOKIE)
    try:
        made = await app.in_thread(lambda: app.access.create_login(token, ttl=ttl))
        if made is not None and previous:
            await app.in_thread(app.access.end_login, previous)
    except StoreError as exc:
        return login_form(f"The store cannot be read: {exc}", 503)
    if made is None:
        return login_form("That token is unknown or revoked.", 401)
    response = RedirectResponse("/", status_code=303, headers=HEADERS)
    response.set_cookie(
        LOGIN_COOKIE,
        made[1],
        max_age=max(1, int(ttl)),
        httponly=True,
        samesite="strict",
        path="/",
        secure=request.url.scheme == "https",
    )
    response.delete_cookie(OLD_TOKEN_COOKIE, path="/", httponly=True, samesite="strict")
    return response


async def logout(request: Request) -> Response:
    """``POST /logout``: end the login the cookie names (the page's CSRF token in the form
    or the header says the page asked) and clear the cookie."""
    login_id = request.cookies.get(LOGIN_COOKIE)
    if login_id:
        why = foreign(request)
        presented = request.headers.get(CSRF_HEADER)
        if presented is None:
            form = await _form(request)
            presented = form.get(CSRF_FIELD, [""])[0] if isinstance(form, dict) else ""
        if why is not None or not csrf_matches(login_id, presented):
            return message_page(
                "Not logged out",
                "Not logged out",
                "Log out with the button on a dashboard page.",
                None,
                403,
                back=("/", "Jobs"),
                error=True,
            )
        app: App = request.app.state.longcall
        try:
            await app.in_thread(app.access.end_login, login_id)
        except StoreError as exc:
            text = f"The store cannot be written: {exc}"
            return message_page("Not logged out", "Not logged out", text, None, 503)
    response = RedirectResponse("/login", status_code=303, headers=HEADERS)
    response.delete_cookie(LOGIN_COOKIE, path="/", httponly=True, samesite="strict")
    response.delete_cookie(OLD_TOKEN_COOKIE, path="/", httponly=True, samesite="strict")
    return response


ROUTES: list[BaseRoute] = [
    Route("/login", login_page, methods=["GET"]),
    Route("/login", login, methods=["POST"]),
    Route("/logout", logout, methods=["POST"]),
]
