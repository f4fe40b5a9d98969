"""``/openapi.json`` and ``/docs`` (being built)."""

from starlette.routing import BaseRoute

ROUTES: list[BaseRoute] = []
