"""``/metrics`` (being built)."""

from typing import Any

from starlette.routing import BaseRoute

ROUTES: list[BaseRoute] = []


class Metrics:
    def __init__(self, app: Any) -> None:
        self.app = app
