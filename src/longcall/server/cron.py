"""Where the dashboard finds the cron API's helpers until it imports them from
:mod:`longcall.server.api.cron` (the dashboard is moving to ``server/dashboard/``); then
this module goes."""

from longcall.server.api.cron import details_json, listed_json, visible_cron

__all__ = ["details_json", "listed_json", "visible_cron"]
