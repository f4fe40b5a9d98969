"""schemathesis against a real server on SQLite and on PostgreSQL: every operation, valid and
invalid requests, no 5xx and no answer the spec does not describe.

test_openapi.py runs many more cases in process, on SQLite only; this one is about the
backends agreeing with the spec over real HTTP, PostgreSQL's refusals included (a NUL, an
index entry too large): a few cases per operation, about a hundred in all.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest

pytest.importorskip("longcall.server", reason="the server extra is not installed")
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.core.failures import AcceptedNegativeData
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import ignored_auth, positive_data_acceptance

from server.test_openapi import service

CASES_PER_OPERATION = 4  # valid and invalid requests mixed
STREAMS = ["/v1/events", "/v1/runs/{runId}/events"]  # never end by themselves


# What negative cases may do and still be accepted: add query parameters the spec does not
# name (the API ignores them, as HTTP APIs commonly do: refusing them would break clients
# that add a cache buster), or leave out the Authorization header (the token is sent on
# every case; refusals without one are tested in test_jobs_api.py).
ALLOWED_VIOLATIONS = frozenset(
    {
        "query: violates `additionalProperties`",
        "header: violates `required` (was Authorization)",
    }
)


def counts(exc: BaseException) -> bool:
    """Whether a failure is a real disagreement between the spec and the server."""
    for failure in getattr(exc, "exceptions", [exc]):
        if isinstance(failure, AcceptedNegativeData):
            violations = {
                line.strip().lstrip("- ")
                for line in failure.message.splitlines()
                if "violates" in line
            }
            if violations and violations <= ALLOWED_VIOLATIONS:
                continue
        return True
    return False


def run_cases(
    operation: Any, base: str, token: str, failures: list[str], statuses: Counter[int]
) -> None:
    """Up to CASES_PER_OPERATION generated requests to ``operation``; the failures and the
    statuses answered are collected."""

    @given(
        case=st.one_of(
            operation.as_strategy(GenerationMode.POSITIVE),
            operation.as_strategy(GenerationMode.NEGATIVE),
        )
    )
    @settings(
        max_examples=CASES_PER_OPERATION,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def check(case: Any) -> None:
        try:
            # As in test_openapi.py: the token is always sent (refusals without one are
            # tested elsewhere), and some schema-valid requests are refused on purpose (a
            # cursor this API never gave, a NUL inside free JSON).
            response = case.call_and_validate(
                base_url=base,
                headers={"authorization": f"Bearer {token}"},
                excluded_checks=[ignored_auth, positive_data_acceptance],
            )
            statuses[response.status_code] += 1
        except (Exception, BaseExceptionGroup) as exc:  # schemathesis's FailureGroup is Base…
            if counts(exc):
                failures.append(f"{operation.label}: {str(exc)[:1500]}")
            else:
                statuses[0] += 1  # a case sent, its only "mismatch" one we allow

    check()


def test_a_live_server_keeps_to_its_spec(db_url: str, live: Any) -> None:
    """About 100 generated requests over HTTP: 0 server errors, 0 answers off the spec."""
    app, _, token = service(db_url)
    failures: list[str] = []
    statuses: Counter[int] = Counter()
    started = time.monotonic()
    with live(app) as client:
        base = str(client.base_url)
        schema = schemathesis.openapi.from_url(f"{base}/openapi.json").exclude(path=STREAMS)
        for result in schema.get_all_operations():
            run_cases(result.ok(), base, token, failures, statuses)
    app.close()
    took = time.monotonic() - started
    backend = db_url.split(":")[0]
    cases = sum(statuses.values()) + len(failures)
    print(
        f"\nschemathesis ({backend}): {cases} cases in {took:.0f} s, {len(failures)} failures;"
        f" answers {dict(sorted(statuses.items()))}"
    )
    assert not failures, "\n\n".join(failures)
    assert cases >= 50 and not any(status >= 500 for status in statuses)
    # statuses[0] counts the negative cases accepted only for an allowed reason.
