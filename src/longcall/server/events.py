"""Server-sent event streams (being built)."""

from starlette.routing import BaseRoute

ROUTES: list[BaseRoute] = []
