"""A run's answer form, built from the JSON schema of each question the run waits on.

The form decides nothing by itself: a yes-or-no or a choice the schema gives no default for
starts unset, and the answer is shown for confirmation before it is sent.
"""

from __future__ import annotations

import json
from typing import Any

from markupsafe import Markup

from longcall.server.dashboard._render import Confirm, compact, fragment

ANSWER = Confirm(
    "Send this answer?",
    "The run goes on with it; an answer cannot be taken back.",
    "Send the answer",
    "Nothing was sent; the run still waits for the answer.",
)


def _deref(schema: Any, root: dict[str, Any]) -> Any:
    """A local ``$ref`` (``#/$defs/Name``, as pydantic writes them) replaced by its target."""
    if isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
        name = schema["$ref"].removeprefix("#/$defs/")
        return root.get("$defs", {}).get(name, schema)
    return schema


def simple_kind(schema: Any, root: dict[str, Any]) -> tuple[str, list[Any]] | None:
    """The input a value of ``schema`` gets (boolean, string, number, integer, or enum with its
    choices), or None when it needs JSON. ``X | None`` counts as X."""
    schema = _deref(schema, root)
    if not isinstance(schema, dict):
        return None
    options = schema.get("anyOf")
    if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
        other = next(o for o in options if o != {"type": "null"})
        return simple_kind(other, root)
    choices = schema.get("enum")
    if isinstance(choices, list) and choices:
        if all(isinstance(c, str | int | float | bool) or c is None for c in choices):
            return "enum", choices
        return None
    kind = schema.get("type")
    if kind in ("boolean", "string", "number", "integer"):
        return str(kind), []
    return None


def _control(
    key: str,
    prop: str,
    label: str,
    schema: dict[str, Any],
    found: tuple[str, list[Any]],
    *,
    required: bool = True,
) -> tuple[dict[str, Any], Any]:
    """One input of the answer form (what the template renders), and the value it starts
    with (... for none). An empty box of an optional property is left out. A yes or no, or a
    choice, starts unset unless the schema gives a default: nothing is decided for the person
    answering."""
    kind, choices = found
    control: dict[str, Any] = {
        "kind": kind,
        "key": key,
        "prop": prop,
        "label": label,
        "required": required,
        "name": f"{key}.{prop}" if prop else key,
    }
    default = schema.get("default", ...)
    if kind == "boolean":
        start = default if isinstance(default, bool) else ...
        control["checked"] = None if start is ... else ("true" if start else "false")
        return control, start
    if kind == "enum":
        chosen = default if default in choices else ...
        control["unset"] = chosen is ...
        control["options"] = [
            (compact(c), str(c), chosen is not ... and c == chosen) for c in choices
        ]
        return control, chosen
    if kind in ("number", "integer"):
        value = "" if default is ... or default is None else str(default)
        control["value"] = value
        return control, ... if value == "" else default
    value = "" if default is ... or default is None else str(default)
    control["value"] = value
    return control, value if value or required else ...


def _controls(key: str, schema: Any) -> tuple[list[dict[str, Any]], Any]:
    root = schema if isinstance(schema, dict) else {}
    target = _deref(schema, root)
    if isinstance(target, dict) and target.get("type") == "object":
        props = target.get("properties")
        kinds = {n: simple_kind(p, root) for n, p in (props or {}).items()}
        if props and all(kinds.values()) and not target.get("additionalProperties"):
            controls, answer = [], {}
            required = [r for r in target.get("required") or [] if r in props]
            # The required ones in the order the schema lists them, then the rest by name:
            # PostgreSQL keeps a schema as jsonb, which keeps an array's order but not the
            # order of an object's keys, and the form is the same on every store.
            rest = sorted(p for p in props if p not in required)
            for prop in [*dict.fromkeys(required), *rest]:
                sub = _deref(props[prop], root)
                label = sub.get("title") or prop
                kind = kinds[prop] or ("json", [])
                control, start = _control(key, prop, label, sub, kind, required=prop in required)
                controls.append(control)
                if start is not ...:
                    answer[prop] = start
            return controls, answer
    whole = simple_kind(target, root) if schema is not None else None
    if whole is not None:
        control, start = _control(key, "", "Answer", _deref(target, root), whole)
        return [control], start
    json_type = target.get("type") if isinstance(target, dict) else None
    start_text = {"object": "{}", "array": "[]"}.get(str(json_type), "null")
    control = {"kind": "json", "key": key, "name": key, "value": start_text}
    return [control], json.loads(start_text)


def answer_fields(key: str, schema: Any) -> tuple[Markup, Any]:
    """The inputs that answer one question, built from its JSON schema, and the answer they
    start with (... for none yet): an input per property of an object of simple values, one
    input for a simple value, a JSON box for anything else."""
    controls, start = _controls(key, schema)
    return fragment("answers.html", "controls", items=controls), start


def answer_form(path: str, url: str, pending: list[dict[str, Any]]) -> Markup:
    """The form answering the questions ``pending`` (as the API lists a run's), which posts
    to ``path``/answers on this server; ``url`` is the same for its curl command."""
    questions, body = [], {}
    for asked in pending:
        key = asked["key"]
        fields, start = answer_fields(key, asked["schema"])
        if start is not ...:  # an answer not given yet is left out, not sent as null
            body[key] = start
        refusals = [
            (p.get("path") or key, p.get("message", ""))
            for p in asked["error"] or []
            if isinstance(p, dict)
        ]
        questions.append(
            {
                "key": key,
                "prompt": asked["prompt"] or key,
                "refusals": refusals,
                "fields": fields,
                "schema": json.dumps(asked["schema"], indent=2, ensure_ascii=False),
            }
        )
    return fragment(
        "answers.html", "form", questions=questions, confirm=ANSWER, path=path, url=url, body=body
    )
