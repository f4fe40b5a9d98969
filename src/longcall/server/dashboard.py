"""The dashboard at ``/`` (being built)."""

from starlette.routing import BaseRoute

ROUTES: list[BaseRoute] = []
