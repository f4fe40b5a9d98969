"""Where the dashboard finds the jobs API's helpers until it imports them from
:mod:`longcall.server.api.jobs` (the dashboard is moving to ``server/dashboard/``); then
this module goes."""

from longcall.server.api.jobs import search_problem, visible_job

__all__ = ["search_problem", "visible_job"]
