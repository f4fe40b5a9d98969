"""``AdkServerRunner``: resumes delivered through a running ``adk api_server`` over HTTP.

Where the agents run in ADK's own server (``adk api_server`` or ``adk web``, with
``--extra_plugins longcall.adk.LongcallPlugin``), a worker elsewhere need not build the agents
itself: this runner posts each resume to the server's ``/run``, and the plugin in the server
recognises it as the delivery holding the session's lease (its message answers exactly calls
that delivery claimed), so it runs at once under the deliverer's lease while user turns keep
waiting for it.

``/run`` rather than ``/run_sse``: it answers with a status code once the run has ended (500
when it failed), which a delivery needs to tell success from failure; ``/run_sse`` commits to
200 before the run starts and reports a failure inside the stream. The resumed turn's events
then arrive together rather than one by one, which only the deliverer's event listeners see.

What a server cannot do for a remote deliverer is check the delivery's fence before each of
its appends: this runner checks it right before posting, and the plugin joins only a live
delivery's claimed calls, so a deliverer that lost its lease before posting sends nothing.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import quote

import httpx
from google.adk.events.event import Event
from google.adk.sessions.session import Session

from longcall.adk.runner import (
    KnownCalls,
    holds_final_response,
    to_agent_event,
)
from longcall.agents import AgentEvent, Message
from longcall.errors import AgentError

EXCERPT = 300  # characters of an error response's body quoted in the error


class AdkServerRunner:
    """An :class:`~longcall.agents.AgentRunner` for one app of a running ADK server.

    ``base_url``: the server's address (``http://127.0.0.1:8000``). ``app_name``: the app to
    resume (the agents folder's name for it). ``headers``: sent with every request (a token
    for a server behind a proxy). ``timeout``: seconds a resumed turn may take before the
    delivery is given up and retried (the server then cancels the run). ``client``: an
    ``httpx.AsyncClient`` of your own to share connections (you close it); without one each
    call opens its own.
    """

    def __init__(
        self,
        base_url: str,
        *,
        app_name: str,
        headers: Mapping[str, str] | None = None,
        timeout: float = 600.0,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(
                f"base_url must be the ADK server's http:// or https:// address, not {base_url!r}"
            )
        if not app_name:
            raise ValueError("app_name must name one of the ADK server's apps")
        self.base_url = base_url.rstrip("/")
        self.app_name = app_name
        self.headers = dict(headers or {})
        self.timeout = httpx.Timeout(timeout, connect=10.0)
        self._client = client
        self._known_calls = KnownCalls()

    async def run(
        self, *, user_id: str, session_id: str, message: Message
    ) -> AsyncIterator[AgentEvent]:
        # Under the name of the call each answers, as AdkAgentRunner sends them.
        content = await self._known_calls.content(
            message,
            user_id=user_id,
            session_id=session_id,
            load=functools.partial(self._session, user_id, session_id),
            where=f" in app {self.app_name!r} at {self.base_url}",
        )
        if message.fence is not None:
            # The last moment this side can tell: once posted, the server's plugin joins the
            # run only while the delivery still holds the session.
            await message.fence.check_async()
        body = {
            "app_name": self.app_name,
            "user_id": user_id,
            "session_id": session_id,
            "new_message": content.model_dump(mode="json", by_alias=True, exclude_none=True),
        }
        response = await self._request("POST", "/run", json=body)
        for raw in _json_list(response, "POST /run"):
            yield to_agent_event(Event.model_validate(raw))

    async def has_function_response(self, *, user_id: str, session_id: str, call_id: str) -> bool:
        """Whether the session already holds a closing (terminal) response to ``call_id``."""
        session = await self._session(user_id, session_id)
        return session is not None and holds_final_response(session, call_id)

    async def transcript(self, *, user_id: str, session_id: str) -> list[AgentEvent]:
        """The session's events, in longcall's terms (empty for an unknown session)."""
        session = await self._session(user_id, session_id)
        return [] if session is None else [to_agent_event(e) for e in session.events]

    async def _session(self, user_id: str, session_id: str) -> Session | None:
        """The session as the server has it; None when it has no such session."""
        path = (
            f"/apps/{_segment(self.app_name)}/users/{_segment(user_id)}"
            f"/sessions/{_segment(session_id)}"
        )
        response = await self._request("GET", path)
        if response.status_code == 404:
            await self._check_app()
            return None
        _check(response, f"GET {path}")
        session = Session.model_validate(response.json())
        self._known_calls.saw(user_id, session_id, session)
        return session

    async def _check_app(self) -> None:
        """Tell a server without this app (a wrong name, the wrong server) from a session it
        does not have: the first is a mistake to fix, not a call to orphan."""
        response = await self._request("GET", "/list-apps")
        _check(response, "GET /list-apps")
        apps = response.json()
        if isinstance(apps, list) and self.app_name not in apps:
            raise AgentError(
                f"the ADK server at {self.base_url} serves no app {self.app_name!r} "
                f"(it serves {', '.join(map(str, apps)) or 'none'})"
            )

    async def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        url = self.base_url + path
        try:
            if self._client is not None:
                return await self._client.request(
                    method, url, headers=self.headers, timeout=self.timeout, **kwargs
                )
            async with httpx.AsyncClient(headers=self.headers, timeout=self.timeout) as client:
                return await client.request(method, url, **kwargs)
        except httpx.HTTPError as exc:
            raise AgentError(
                f"the ADK server at {self.base_url} did not answer {method} {path}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc


def _segment(value: str) -> str:
    return quote(value, safe="")


def _check(response: httpx.Response, what: str) -> None:
    if not response.is_success:
        raise AgentError(
            f"the ADK server answered {what} with {response.status_code}: "
            f"{response.text[:EXCERPT]!r}"
        )


def _json_list(response: httpx.Response, what: str) -> list[Any]:
    _check(response, what)
    try:
        body = response.json()
    except ValueError as exc:
        raise AgentError(f"the ADK server answered {what} with no JSON: {exc}") from exc
    if not isinstance(body, list):
        raise AgentError(f"the ADK server answered {what} with {type(body).__name__}, not events")
    return body
