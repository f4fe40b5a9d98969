"""An offline scripted model for the OpenAI Agents SDK: deterministic, no network.

It follows :class:`longcall.Rule` rules like the ADK scripted model: a user's text that
matches a rule makes it call the rule's tools (with deterministic call ids, which the SDK
requires), or reply with the rule's text; tool outputs at the end of its input make it say
what :func:`longcall.testing.scripted.default_reply` says about each.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from longcall.agents import FunctionResponse
from longcall.openai_agents.events import call_names, response_body
from longcall.testing.scripted import Rule, default_reply


class ScriptedModel(Model):
    """A ``Model`` that answers by rules instead of a language model."""

    def __init__(
        self,
        rules: Sequence[Rule] = (),
        *,
        fallback: str = "I can help with the tasks I have tools for.",
        replies: Callable[[FunctionResponse], str] = default_reply,
    ) -> None:
        self.rules = tuple(rules)
        self.fallback = fallback
        self.replies = replies
        self.inputs: list[list[dict[str, Any]]] = []  # every input it was given, in order

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: Any,
        tools: Any,
        output_schema: Any,
        handoffs: Any,
        tracing: Any,
        *,
        previous_response_id: str | None = None,
        conversation_id: str | None = None,
        prompt: Any = None,
    ) -> ModelResponse:
        given = [{"role": "user", "content": input}] if isinstance(input, str) else input
        items = [dict(i) for i in given]
        self.inputs.append(items)
        return ModelResponse(output=self.answer(items), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("ScriptedModel answers Runner.run, not Runner.run_streamed")

    def answer(self, items: list[dict[str, Any]]) -> list[Any]:
        """The output items for a model input (the whole conversation so far)."""
        outputs = _trailing_outputs(items)
        if outputs:
            names = call_names(items)
            text = " ".join(
                self.replies(
                    FunctionResponse(
                        str(o["call_id"]),
                        names.get(str(o["call_id"]), ""),
                        response_body(o.get("output")),
                    )
                )
                for o in outputs
            )
            return [_message(text, items)]
        text = _last_user_text(items)
        for rule in self.rules:
            match = rule.match(text)
            if match is None:
                continue
            if not rule.calls:
                return [_message(rule.reply or self.fallback, items)]
            calls = []
            for index, (name, args) in enumerate(rule.calls):
                values: Mapping[str, Any] = args(match) if callable(args) else args
                call_id = f"call_{_digest(items)}_{index}"
                calls.append(
                    ResponseFunctionToolCall(
                        id=f"fc_{call_id}",
                        call_id=call_id,
                        type="function_call",
                        name=name,
                        arguments=json.dumps(dict(values)),
                    )
                )
            return calls
        return [_message(self.fallback, items)]


def _digest(items: list[dict[str, Any]]) -> str:
    """A short hash of the conversation: the same input gives the same ids, a longer one
    (every later turn) others."""
    return hashlib.sha256(json.dumps(items, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _trailing_outputs(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    outputs: list[dict[str, Any]] = []
    for item in reversed(items):
        if item.get("type") != "function_call_output":
            break
        outputs.insert(0, item)
    return outputs


def _last_user_text(items: list[dict[str, Any]]) -> str:
    for item in reversed(items):
        if item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, str):
                return content
            return "".join(str(p.get("text", "")) for p in content or () if isinstance(p, Mapping))
    return ""


def _message(text: str, items: list[dict[str, Any]]) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id=f"msg_{_digest(items)}",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(text=text, type="output_text", annotations=[], logprobs=[])],
    )
