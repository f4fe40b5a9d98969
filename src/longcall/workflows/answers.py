"""Checking a run's answers before anything is stored: one place for every check.

:func:`check_answers` says whether each key can be answered now (a question the run waits on,
or one it will ask next together with it); :func:`answer_problems` checks each value against
its question's JSON schema (with ``jsonschema``, from the server extra). The run itself
checks the value's type again when it takes the answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from longcall.core.runs import Interrupt, Run, RunStatus
from longcall.errors import InvalidAnswer, RunStateError
from longcall.workflows.engine import KEY


def key_number(key: str) -> int:
    """The number of a continuation key (``interrupt-3`` is 3); 0 for any other key."""
    return int(key.rsplit("-", 1)[1]) if KEY.match(key) else 0


def _gap(last_asked: int, number: int, filled: set[int]) -> bool:
    """Whether a question between the last one asked and ``number`` has no answer in
    ``filled`` (counted, not walked: a key's number may be huge)."""
    between = sum(1 for n in filled if last_asked < n < number)
    return between < number - last_asked - 1


def check_answers(run: Run, known: dict[str, Interrupt], values: Mapping[str, Any]) -> None:
    """Refuse, before anything is stored, answers that cannot be taken.

    A key must name a question the run waits on (asked, not answered), or one it has not
    asked yet that follows the questions asked without a gap (``interrupt-2`` given
    together with ``interrupt-1``, which the run waits on); the run takes such an answer
    ahead when it asks. Any other key (``interrupt-7`` while the run waits on
    ``interrupt-1``), a question already answered (answers are final) and an empty
    resume raise :class:`InvalidAnswer` listing every key at fault.
    """
    if run.status is not RunStatus.WAITING_INPUT:
        raise RunStateError(f"run {run.run_id!r} is {run.status.value}, not waiting for input")
    waiting = sorted(
        (k for k, i in known.items() if i.asked_at is not None and not i.answered),
        key=key_number,
    )
    last_asked = max((key_number(k) for k, i in known.items() if i.asked_at is not None), default=0)
    # Numbers an answer ahead may follow: recorded before (asked, or given ahead by an
    # earlier resume) or given now.
    filled = {key_number(k) for k in known} | {key_number(k) for k in values}
    answers_waiting = any(key in waiting for key in values)
    waits_on = ", ".join(waiting) or "no question"
    problems = []
    for key in values:
        record = known.get(key)
        if not KEY.match(key):
            message = "not a continuation key (interrupt-1, interrupt-2, …)"
        elif record is not None and record.answered:
            message = "already answered (an answer is final)"
        elif record is not None and record.asked_at is not None:
            continue
        elif (
            not answers_waiting
            or key_number(key) <= last_asked
            or _gap(last_asked, key_number(key), filled)
        ):
            message = (
                f"the run has not asked {key} (it waits on {waits_on}; a later question "
                "is answered only together with that one and every one between)"
            )
        else:
            continue
        problems.append({"key": key, "path": "", "message": message})
    if not values:
        problems.append({"key": "", "path": "", "message": "no values to resume with"})
    if problems:
        raise InvalidAnswer(run.run_id, problems)


def answer_problems(
    interrupts: Mapping[str, Interrupt], values: Mapping[str, Any]
) -> list[dict[str, str]]:
    """Answers that do not fit the JSON schema of the question they answer, as
    ``{"key", "path", "message"}`` (the shape of :class:`~longcall.errors.InvalidAnswer`).

    Checked with a Draft 2020-12 validator; a question without a schema takes anything, and
    so does one not asked yet (the run checks that answer when it asks).
    """
    # jsonschema ships no type information (typeshed's types-jsonschema has it).
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    problems: list[dict[str, str]] = []
    for key, value in values.items():
        asked = interrupts.get(key)
        if asked is None or asked.schema is None:
            continue
        try:
            validator = Draft202012Validator(asked.schema)
            found = sorted(validator.iter_errors(value), key=lambda e: e.json_path)
        except SchemaError:  # not a schema this validator reads: the run checks the answer
            continue
        problems += [
            {"key": key, "path": ".".join(str(p) for p in e.absolute_path), "message": e.message}
            for e in found
        ]
    return problems
