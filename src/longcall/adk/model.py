"""An offline scripted model for ADK: deterministic, no network, for demos and tests.

It follows :class:`longcall.Rule` rules like the built-in scripted agent: a user's text that
matches a rule makes it call the rule's tools; a function response makes it say what
:func:`longcall.testing.scripted.default_reply` says. Call ids are left empty (ADK assigns them).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any

from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from pydantic import ConfigDict, Field

from longcall.agents import FunctionResponse
from longcall.testing.scripted import Rule, default_reply


class ScriptedLlm(BaseLlm):
    """A ``BaseLlm`` that answers by rules instead of a model."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    model: str = "longcall-scripted"
    rules: Sequence[Rule] = Field(default_factory=tuple)
    fallback: str = "I can help with the tasks I have tools for."
    replies: Callable[[FunctionResponse], str] = default_reply

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        yield LlmResponse(
            content=self._answer(llm_request.contents or []),
            turn_complete=True,
            # Zero, not missing: ADK's telemetry warns about a response without usage.
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=0, candidates_token_count=0, total_token_count=0
            ),
        )

    def _answer(self, contents: list[types.Content]) -> types.Content:
        last = contents[-1] if contents else None
        parts = list(last.parts or []) if last is not None else []
        responses = [p.function_response for p in parts if p.function_response]
        if responses:
            text = " ".join(
                self.replies(FunctionResponse(r.id or "", r.name or "", dict(r.response or {})))
                for r in responses
            )
            return _model_text(text)
        text = "".join(p.text for p in parts if p.text)
        for rule in self.rules:
            match = rule.match(text)
            if match is None:
                continue
            if not rule.calls:
                return _model_text(rule.reply or self.fallback)
            calls = []
            for name, args in rule.calls:
                values: Any = args(match) if callable(args) else args
                calls.append(
                    types.Part(function_call=types.FunctionCall(name=name, args=dict(values)))
                )
            return types.Content(role="model", parts=calls)
        return _model_text(self.fallback)


def _model_text(text: str) -> types.Content:
    return types.Content(role="model", parts=[types.Part(text=text)])
