"""An offline scripted chat model for LangGraph: deterministic, no network, for demos and tests.

It follows :class:`longcall.Rule` rules like the built-in scripted agent: a user's text that
matches a rule makes it call the rule's tools (with fresh call ids, as a real model assigns
them); tool messages after its last call make it say what
:func:`longcall.testing.scripted.default_reply` says about each. ``bind_tools`` works as a real
chat model's does, so a prebuilt ReAct agent or a custom graph takes it unchanged.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict, Field

from longcall.agents import FunctionResponse
from longcall.langgraph._protocol import message_text, response_body
from longcall.testing.scripted import Rule, default_reply


class ScriptedChatModel(BaseChatModel):
    """A ``BaseChatModel`` that answers by rules instead of a model."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    rules: Sequence[Rule] = Field(default_factory=tuple)
    fallback: str = "I can help with the tasks I have tools for."
    replies: Callable[[FunctionResponse], str] = default_reply

    @property
    def _llm_type(self) -> str:
        return "longcall-scripted"

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: str | None = None, **kwargs: Any
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """The model with ``tools`` bound: it calls only tools it was given."""
        names = [convert_to_openai_tool(t)["function"]["name"] for t in tools]
        return self.bind(tool_names=names, **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        answer = self._answer(messages, kwargs.get("tool_names"))
        return ChatResult(generations=[ChatGeneration(message=answer)])

    def _answer(self, messages: list[BaseMessage], tool_names: Sequence[str] | None) -> AIMessage:
        answered = _tool_messages_at_end(messages)
        if answered:
            text = " ".join(
                self.replies(FunctionResponse(m.tool_call_id, m.name or "", response_body(m)))
                for m in answered
            )
            return AIMessage(content=text)
        last_human = next((m for m in reversed(messages) if isinstance(m, HumanMessage)), None)
        text = (message_text(last_human) if last_human is not None else None) or ""
        for rule in self.rules:
            match = rule.match(text)
            if match is None:
                continue
            if not rule.calls:
                return AIMessage(content=rule.reply or self.fallback)
            calls = []
            for name, args in rule.calls:
                if tool_names is not None and name not in tool_names:
                    raise ValueError(
                        f"rule {rule.pattern!r} calls tool {name!r}, which is not bound "
                        f"(bound: {sorted(tool_names)})"
                    )
                values: Any = args(match) if callable(args) else args
                calls.append({"name": name, "args": dict(values), "id": _call_id()})
            return AIMessage(content="", tool_calls=calls)
        return AIMessage(content=self.fallback)


def _tool_messages_at_end(messages: list[BaseMessage]) -> list[ToolMessage]:
    """The tool messages after the last model message, when the conversation ends in them."""
    tail: list[ToolMessage] = []
    for message in reversed(messages):
        if not isinstance(message, ToolMessage):
            break
        tail.insert(0, message)
    return tail


def _call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"
