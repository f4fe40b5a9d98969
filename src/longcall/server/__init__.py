"""The HTTP service: ``longcall serve`` (extra ``server``).

``api/`` is the REST API (jobs, runs, schedules, webhooks, event streams, ``/openapi.json``
generated from its declarations and ``/docs``); ``dashboard/`` the pages a browser signs in
to; ``app.py`` puts them together with the middleware. Both use the :class:`~longcall.App`
and longcall's public types only.
"""

try:
    import starlette  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "the longcall server needs its extra; install it with: pip install 'longcall[server]'"
    ) from exc

from longcall.server.app import create_app

__all__ = ["create_app"]
