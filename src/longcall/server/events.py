"""Where the dashboard finds the API's stream helpers until it imports them from
:mod:`longcall.server.api` (``_streams``, ``events``); then this module goes."""

from __future__ import annotations

from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import StreamingResponse

from longcall.server.api._streams import stream
from longcall.server.api._streams import ticks as _ticks
from longcall.server.api.events import LOOKBACK

__all__ = ["LOOKBACK", "_stream", "_ticks"]


def _stream(request: Request, messages: AsyncIterator[bytes]) -> StreamingResponse:
    return stream(messages)
