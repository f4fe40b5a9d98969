"""The resume loop's side of LangGraph: deliver function responses with ``Command(resume=...)``.

A user's turn invokes the graph with the user's message on the thread named by the session
id. A delivery finds the interrupts longcall's tools wait in (their values name the call) and
resumes those of the delivered calls by interrupt id, each with its job's function response:
the tool answers its call with a ``ToolMessage`` under the original call id and tool name.

- Parallel calls: each waits in its own interrupt (its own task). LangGraph finishes a step
  only when all its tasks have, so a result that arrives while a sibling call of the same
  model message still waits is written as that task's pending write and the model answers
  once, when the last of them is in (or expired). Results ready together are resumed in one
  command.
- A user's turn while calls wait is refused with :class:`CallsPending` before anything is
  written: a new message on an interrupted thread makes LangGraph drop the waiting calls.
- A duplicate completion is delivered once: :meth:`LangGraphRunner.has_function_response`
  reads the thread's messages and the pending writes of its current step. A run that stopped
  after writing the answer but before the model answered (a lost fence, a crash) is carried
  on by the next delivery, without writing the answer again.
- Progress updates are not written: an open call has no place for an intermediate answer in
  LangGraph, so only closing responses resume.
- A response for a call that waits in no interrupt of the thread raises
  :class:`~longcall.errors.UnknownCallError` before anything is written.
- A delivery's fence is checked right before each checkpoint write
  (:class:`~longcall.langgraph.fencing.FencedCheckpointSaver`).
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Command, StateSnapshot

from longcall.agents import AgentEvent, FunctionResponse, Message
from longcall.errors import AgentError, ConfigError, UnknownCallError
from longcall.langgraph._protocol import (
    CALL_KEY,
    FINAL_STATUSES,
    closes_call,
    pending_messages,
    to_agent_event,
    waiting_call,
)
from longcall.langgraph.fencing import FENCE_KEY, fenced
from longcall.langgraph.tool import APP_KEY, USER_KEY


class _Skip(enum.Enum):
    """No graph run at all (``None`` input is LangGraph's "go on with the open step")."""

    NOTHING = "nothing"


NOTHING = _Skip.NOTHING


@dataclass(frozen=True, slots=True)
class Answered:
    """The calls a thread holds a closing answer to, and whether its last run stopped before
    its end (nothing waits, yet it has more to run)."""

    calls: frozenset[str]
    stopped: bool


class CallsPending(AgentError):
    """A user's message on a thread whose long-running calls still wait for their results."""

    def __init__(self, session_id: str, call_ids: list[str]) -> None:
        super().__init__(
            f"thread {session_id!r} waits for long-running calls {call_ids}: a new message "
            "now would make LangGraph drop them. Send it once their results are in (cancel a "
            "job to answer its call at once)."
        )
        self.session_id = session_id
        self.call_ids = call_ids


def waiting_calls(state: StateSnapshot) -> dict[str, tuple[str, str, dict[str, Any]]]:
    """Call id -> (interrupt id, tool name, interrupt value) for each call that waits."""
    found: dict[str, tuple[str, str, dict[str, Any]]] = {}
    for task in state.tasks:
        for pending in task.interrupts:
            call = waiting_call(pending.value)
            if call is not None:
                found[call[0]] = (pending.id, call[1], dict(pending.value))
    return found


class LangGraphRunner:
    """An :class:`~longcall.agents.AgentRunner` over a compiled LangGraph graph.

    The graph needs a checkpointer (any ``BaseCheckpointSaver``); the runner uses a copy of
    the graph whose checkpointer is wrapped in a
    :class:`~longcall.langgraph.fencing.FencedCheckpointSaver`. Sessions are threads: the
    session id is the thread id, so session ids must not repeat across users (a thread whose
    checkpoints name another user is refused).
    """

    def __init__(self, graph: Any, *, app_name: str, messages_key: str = "messages") -> None:
        saver = getattr(graph, "checkpointer", None)
        if not isinstance(saver, BaseCheckpointSaver):
            raise ConfigError(
                "LangGraphRunner needs a graph compiled with a checkpointer "
                "(builder.compile(checkpointer=...)): its interrupts must outlive the process"
            )
        if not app_name:
            raise ConfigError("LangGraphRunner needs an app_name (the jobs' app)")
        self.checkpointer = fenced(saver)
        self.graph = graph.copy(update={"checkpointer": self.checkpointer})
        self.app_name = app_name
        self.messages_key = messages_key

    def _config(
        self, user_id: str, session_id: str, message: Message | None = None
    ) -> RunnableConfig:
        configurable: dict[str, Any] = {"thread_id": session_id, APP_KEY: self.app_name}
        if user_id:  # a job recorded without a user is delivered with "" for it
            configurable[USER_KEY] = user_id
        if message is not None and message.fence is not None:
            configurable[FENCE_KEY] = message.fence
        return {"configurable": configurable}

    async def _state(self, config: RunnableConfig) -> StateSnapshot:
        state: StateSnapshot = await self.graph.aget_state(config)
        return state

    def _owner_check(self, state: StateSnapshot, user_id: str, session_id: str) -> str | None:
        owner = (state.metadata or {}).get(USER_KEY)
        if owner and user_id and owner != user_id:
            return f"thread {session_id!r} belongs to another user"
        return None

    async def run(
        self, *, user_id: str, session_id: str, message: Message
    ) -> AsyncIterator[AgentEvent]:
        config = self._config(user_id, session_id, message)
        state = await self._state(config)
        stranger = self._owner_check(state, user_id, session_id)
        waiting = waiting_calls(state)
        graph_input: Any
        if message.text is not None:
            if stranger:
                raise AgentError(stranger)
            if waiting:
                raise CallsPending(session_id, sorted(waiting))
            graph_input = {self.messages_key: [HumanMessage(content=message.text)]}
        else:
            answered = await self._answered(state, config)
            graph_input = self._resume(message, waiting, answered, session_id, stranger)
            if graph_input is NOTHING:
                return
        known = {m.id for m in self._messages(state.values)}
        async for values in self.graph.astream(
            graph_input, config, stream_mode="values", durability="sync"
        ):
            for new in self._messages(values):
                if new.id in known:
                    continue
                known.add(new.id)
                yield to_agent_event(new, invocation_id=new.id or "", waiting=frozenset())
        for call_id, (_, name, value) in waiting_calls(await self._state(config)).items():
            # Not in the conversation: the pending map the call waits with, for the caller.
            pending = {k: v for k, v in value.items() if k != CALL_KEY}
            yield AgentEvent(
                author="longcall",
                invocation_id=call_id,
                function_responses=(FunctionResponse(call_id, name, pending),),
                long_running_ids=frozenset({call_id}),
            )

    def _resume(
        self,
        message: Message,
        waiting: Mapping[str, tuple[str, str, dict[str, Any]]],
        answered: Answered,
        session_id: str,
        stranger: str | None,
    ) -> Command[Any] | Literal[_Skip.NOTHING] | None:
        """The command that resumes the delivered calls' interrupts; ``None`` input (go on
        with the run) for calls answered in a run that stopped before its end;
        :data:`NOTHING` (no run) when there is nothing to write (progress only).
        UnknownCallError for a call that neither waits nor is answered in a stopped run."""
        to_finish = answered.calls if answered.stopped else frozenset()
        for response in message.function_responses:
            if stranger or (response.id not in waiting and response.id not in to_finish):
                raise UnknownCallError(
                    f"LangGraph thread {session_id!r} has no long-running call "
                    f"{response.id!r} waiting" + (f" ({stranger})" if stranger else "")
                )
        resume = {
            waiting[r.id][0]: dict(r.response)
            for r in message.function_responses
            if r.id in waiting and r.response.get("status") in FINAL_STATUSES
        }
        if resume:
            return Command(resume=resume)
        if any(r.id in to_finish for r in message.function_responses):
            return None
        return NOTHING

    def _messages(self, values: Any) -> list[BaseMessage]:
        found = values.get(self.messages_key) if isinstance(values, Mapping) else None
        return [m for m in found or [] if isinstance(m, BaseMessage)]

    async def transcript(self, *, user_id: str, session_id: str) -> list[AgentEvent]:
        """The thread's messages, in longcall's terms (empty for an unknown thread or one of
        another user)."""
        state = await self._state(self._config(user_id, session_id))
        if self._owner_check(state, user_id, session_id):
            return []
        waiting = frozenset(waiting_calls(state))
        return [
            to_agent_event(m, invocation_id=m.id or "", waiting=waiting)
            for m in self._messages(state.values)
        ]

    async def _answered(self, state: StateSnapshot, config: RunnableConfig) -> Answered:
        """The calls the thread holds a closing answer to (in its messages or the pending
        writes of its open step), and whether its last run stopped before its end."""
        saved = await self.checkpointer.aget_tuple(state.config or config)
        writes = saved.pending_writes if saved is not None else None
        in_step = {
            m.tool_call_id
            for m in pending_messages(writes, self.messages_key)
            if isinstance(m, ToolMessage) and closes_call(m, m.tool_call_id)
        }
        committed = {
            m.tool_call_id
            for m in self._messages(state.values)
            if isinstance(m, ToolMessage) and closes_call(m, m.tool_call_id)
        }
        # Nothing waits, yet a step is open or nodes are left to run: the run that wrote the
        # answer stopped (a lost fence, a crash) before the model could answer.
        stopped = not state.interrupts and bool(in_step or state.next)
        return Answered(frozenset(in_step | committed), stopped)

    async def has_function_response(self, *, user_id: str, session_id: str, call_id: str) -> bool:
        """Whether the thread already holds a closing answer to ``call_id`` (in its messages,
        or in a pending write of a step that waits for a sibling call) in a run that is done
        or waits.

        An answer written by a run that then stopped before its end (its delivery lost the
        fence, or crashed) is not counted: delivering it again goes on with that run (the
        answer is not written twice), so the model answers.
        """
        config = self._config(user_id, session_id)
        answered = await self._answered(await self._state(config), config)
        return call_id in answered.calls and not answered.stopped
