"""Bearer tokens: who is asking, and which jobs they may see."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

from longcall.app import App
from longcall.core.jobs import Job
from longcall.errors import StoreError
from longcall.server.dashboard.login_cookie import cookie_login
from longcall.server.errors import error


@dataclass(frozen=True, slots=True)
class Principal:
    user_id: str | None
    admin: bool

    def may_see(self, job: Job) -> bool:
        return self.admin or (job.user_id is not None and job.user_id == self.user_id)


async def authenticate(request: Request) -> Principal | Response:
    """The caller of a bearer-token request, or the 401/503 answer to send instead."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if not header:
        # The dashboard's pages, event streams and buttons: its login cookie, whose writes
        # must also carry the page's CSRF token (see longcall.server.dashboard.login_cookie).
        login = await cookie_login(request)
        if login is not None:
            return login if isinstance(login, Response) else Principal(login.user_id, login.admin)
    if scheme.lower() != "bearer" or not token.strip():
        return _unauthorized("send an Authorization: Bearer <token> header")
    app: App = request.app.state.longcall
    try:
        info = await app.in_thread(app.access.token_info, token.strip())
    except StoreError as exc:
        return error(503, "store_unavailable", f"the store cannot be read: {exc}")
    if info is None:
        return _unauthorized("the token is unknown or revoked")
    return Principal(info.user_id, info.admin)


def _unauthorized(message: str) -> Response:
    response = error(401, "unauthorized", message)
    response.headers["www-authenticate"] = "Bearer"
    return response
