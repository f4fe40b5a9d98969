"""Workflow versions and patches: ``@app.workflow(version=...)``, ``ctx.patched(...)``.

A run records the version of the workflow that started it, and only a worker that has
registered that (workflow, version) claims it, so a fleet running two versions during a
deploy never replays a run on code it was not started with.

A patch lets one version take both paths instead. ``ctx.patched("change-id")`` looks at the
body's next position without taking it:

* a marker of this change recorded there (a run that took the new path before): True, and
  the position is the marker's;
* another checkpoint recorded there (a run that went past this point on the old code):
  False, and nothing is taken, so the old run's positions stay where they were;
* nothing recorded there yet (a new run, or an old one that had not got this far): the
  marker is recorded at that position, and True.

Every replay answers the same: what it sees at that position was written by the first
answer. ``ctx.deprecate_patch("change-id")`` is the step that lets the old branch go: the
code takes the new path only, and a marker found at the position is passed over so runs that
recorded it still replay; nothing is recorded for new runs. See docs/workflows.md.

``Execution.patched`` (in the engine) takes the positions; this module has the rules.
"""

from __future__ import annotations

import re

from longcall.errors import InvalidValue

DEFAULT_VERSION = "1"  # a workflow that declares none; runs made before versions existed
VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")
MARKER = "longcall.patched"


def checked_version(version: object, field: str = "version") -> str:
    """A version: 1 to 64 letters, digits, ``.``, ``_``, ``+`` or ``-``, starting with a
    letter or digit (``"2"``, ``"2024-06-01"``, ``"v3.1"``)."""
    if isinstance(version, bool) or not isinstance(version, (str, int)):
        raise InvalidValue(field, f"is a string such as '2', not {version!r}")
    text = str(version)
    if not VERSION.fullmatch(text):
        raise InvalidValue(
            field,
            "is 1 to 64 letters, digits, '.', '_', '+' or '-', starting with a letter or "
            f"digit: {text[:70]!r} is not",
        )
    return text


def checked_change(change_id: object) -> str:
    """A patch's change id: a non-empty string of printable characters, at most 200."""
    if not isinstance(change_id, str) or not change_id.strip():
        raise InvalidValue("change_id", f"is a non-empty string, not {change_id!r}")
    if len(change_id) > 200 or not change_id.isprintable():
        raise InvalidValue("change_id", f"is at most 200 printable characters: {change_id[:40]!r}")
    return change_id
