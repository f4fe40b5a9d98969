"""Where the dashboard finds the runs API's helpers until it imports them from
:mod:`longcall.server.api.runs` (the dashboard is moving to ``server/dashboard/``); then
this module goes."""

from longcall.server.api.runs import STATUSES, details_json, visible_run

__all__ = ["STATUSES", "details_json", "visible_run"]
