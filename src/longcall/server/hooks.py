"""Where the dashboard finds ``read_body`` until it imports it from
:mod:`longcall.server.api._requests` (the dashboard is moving to ``server/dashboard/``); then
this module goes."""

from longcall.server.api._requests import read_body

__all__ = ["read_body"]
