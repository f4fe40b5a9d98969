"""Where the dashboard finds ``runnable`` until it imports it from
:mod:`longcall.server.api.workers` (the dashboard is moving to ``server/dashboard/``); then
this module goes."""

from longcall.server.api.workers import runnable

__all__ = ["runnable"]
