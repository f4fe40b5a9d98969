"""The one backoff every retry loop draws from: exponential, capped, jittered in its upper half."""

from __future__ import annotations

import pytest

from longcall.core.backoff import exponential, exponential_ceiling, jittered


def test_ceilings_grow_by_the_factor_up_to_the_cap() -> None:
    ceilings = [exponential_ceiling(n, base=0.5, cap=5.0) for n in range(1, 7)]
    assert ceilings == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    assert exponential_ceiling(0, base=0.5, cap=5.0) == 0.5  # no attempt yet: the base
    assert exponential_ceiling(3, base=1.0, cap=100.0, factor=3.0) == 9.0


@pytest.mark.parametrize("attempt", [1, 2, 5, 40])
def test_waits_are_drawn_between_half_and_all_of_the_ceiling(attempt: int) -> None:
    ceiling = exponential_ceiling(attempt, base=0.2, cap=30.0)
    waits = [exponential(attempt, base=0.2, cap=30.0) for _ in range(2000)]
    assert all(ceiling / 2 <= w <= ceiling for w in waits)
    # Spread over the whole range, not bunched at one end (clients must not retry in step).
    assert min(waits) < ceiling * 0.55 and max(waits) > ceiling * 0.95


def test_jittered_keeps_zero_at_zero() -> None:
    assert jittered(0.0) == 0.0
