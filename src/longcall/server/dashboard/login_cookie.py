"""The dashboard's login cookie, and what a request it authenticates must show besides.

The cookie ``longcall_login`` holds a random login id (the store keeps only its digest, see
``app.access``), never the bearer token. A browser sends it with every request
to this host, whichever page asked: SameSite=Strict keeps it from other sites' requests, but
a page on this host at another port is the same site, and cookies are not kept apart by
port. So a write (any method but GET, HEAD and OPTIONS) that the cookie authenticates must
also carry the login's CSRF token in ``X-CSRF-Token``: an HMAC of the login id, which only
the dashboard's own pages know (they have it in a ``<meta>`` tag, readable by this origin
alone). And whenever the browser says where a write comes from (``Origin``,
``Sec-Fetch-Site``), that must be this server. A request with an Authorization header is
not cookie-authenticated and needs neither.
"""

from __future__ import annotations

import hashlib
import hmac
from contextvars import ContextVar
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response

from longcall.app import App
from longcall.core.access import Login
from longcall.errors import StoreError
from longcall.server.errors import error

LOGIN_COOKIE = "longcall_login"
CSRF_HEADER = "x-csrf-token"
CSRF_FIELD = "csrf"  # the same token, as a plain form's hidden field (the logout button)
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_DEFAULT_PORTS = {"http": 80, "https": 443}

# The CSRF token of the login a dashboard page is rendered for: set around the page's
# handler, read by the layout that writes it into the page.
page_csrf: ContextVar[str | None] = ContextVar("longcall_page_csrf", default=None)


def csrf_token(login_id: str) -> str:
    """The login's CSRF token: derived from the id, so nothing more is stored, and telling
    nothing of the id, so a token seen in a page cannot be turned into the cookie."""
    return hmac.new(login_id.encode(), b"longcall dashboard csrf", hashlib.sha256).hexdigest()


def csrf_matches(login_id: str, presented: str) -> bool:
    return hmac.compare_digest(csrf_token(login_id).encode(), presented.encode())


def _origin(url: str) -> tuple[str, str, int] | None:
    """``scheme://host[:port]`` as (scheme, host, port), default ports filled in."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if scheme not in _DEFAULT_PORTS or not host:
        return None
    return scheme, host, port if port is not None else _DEFAULT_PORTS[scheme]


def own_origins(request: Request) -> set[tuple[str, str, int]]:
    """The origins this server is reached at: the one the request names (its scheme and Host
    header) and, if configured, the public origin a proxy serves it at."""
    found = set()
    host = request.headers.get("host")
    if host:
        named = _origin(f"{request.url.scheme}://{host}")
        if named:
            found.add(named)
    public = request.app.state.settings.public_origin
    if public:
        configured = _origin(public)
        if configured:
            found.add(configured)
    return found


def foreign(request: Request) -> str | None:
    """Why the browser says this request comes from a page of another origin, or None when
    it says it is this server's own (or, like curl, says nothing)."""
    site = request.headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return f"the browser sent it from another site or origin (Sec-Fetch-Site: {site})"
    origin = request.headers.get("origin")
    if origin is not None and _origin(origin) not in own_origins(request):
        return f"it comes from {origin}, not from this server"
    return None


async def cookie_login(request: Request) -> Login | Response | None:
    """The live login the request's cookie names, None when it has no login cookie, or the
    answer to send instead: 401 for a login that has ended, 403 for a write that does not
    show it comes from the dashboard's own page, 503 when the store cannot be read."""
    login_id = request.cookies.get(LOGIN_COOKIE)
    if not login_id:
        return None
    app: App = request.app.state.longcall
    try:
        login = await app.in_thread(app.access.login_info, login_id)
    except StoreError as exc:
        return error(503, "store_unavailable", f"the store cannot be read: {exc}")
    if login is None:
        response = error(401, "unauthorized", "the login has ended or expired; log in again")
        response.headers["www-authenticate"] = "Bearer"
        return response
    if request.method not in SAFE_METHODS:
        why = foreign(request)
        if why is not None:
            return error(403, "cross_origin", f"refused: {why}")
        if not csrf_matches(login_id, request.headers.get(CSRF_HEADER, "")):
            return error(
                403,
                "csrf_token",
                "a change made with the login cookie needs the page's X-CSRF-Token header "
                "(or send an Authorization: Bearer header instead)",
                CSRF_HEADER,
            )
    request.state.login_id = login_id
    return login
