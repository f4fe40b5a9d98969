"""The HTTP service: ``longcall serve`` (extra ``server``).

So far it takes signed deliveries from outside (``POST /v1/hooks/{source}``) and answers
health checks; the rest of the API builds on the same app.
"""

try:
    import starlette  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "the longcall server needs its extra; install it with: pip install 'longcall[server]'"
    ) from exc

from longcall.server.app import create_app

__all__ = ["create_app"]
