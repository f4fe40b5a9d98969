"""Deprecated module: the deliverer is :class:`longcall.Deliverer` now ("resume" named four
things; delivering a job's result to the agent is "delivery")."""

from __future__ import annotations

from typing import Any

from longcall.core.deprecation import deprecated


def __getattr__(name: str) -> Any:
    if name == "Resumer":
        deprecated("longcall.resumer.Resumer", "longcall.Deliverer")
        from longcall.jobs.delivery import Deliverer

        return Deliverer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
