"""Run state for durable workflows: named fields, each changed through its reducer.

A run's state is a set of named fields. :meth:`State.get` reads one; :meth:`State.set` hands
the update to the field's reducer, which computes the new value. On resume the engine
re-executes the workflow body and skips completed tasks, re-applying the changes each skipped
task recorded. That shapes the contract:

* every change to a persisted field is recorded as ``(field, update)``;
  :meth:`State.apply_changes` replays such a list and reaches the same values;
* persisted values are kept in their JSON form, converted once at ``set`` time, so the live
  run and a replay (which reads the changes back from the store) see identical values;
* transient fields are neither recorded nor persisted: after a resume they hold their
  default until code run in this attempt sets them.

Reducers: :class:`Replace` (the default for undeclared fields), :class:`Append`,
:class:`Transient`, :class:`Messages` (with :class:`RemoveMessage`), :class:`Merge` and
:class:`Custom`. :class:`StateSchemaValidator` checks field types at workflow boundaries and
reports every mismatch at once.
"""

from __future__ import annotations

import copy
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import pydantic
from pydantic_core import to_jsonable_python

from longcall.errors import LongcallError

__all__ = [
    "Append",
    "Custom",
    "Merge",
    "Messages",
    "Reducer",
    "RemoveMessage",
    "Replace",
    "State",
    "StateError",
    "StateSchemaValidator",
    "StateValidationError",
    "Transient",
]

_MISSING: Any = object()


def _to_json(value: Any) -> Any:
    """``value`` as plain JSON data, exactly as it would read back from the store.

    Pydantic models, dataclasses, tuples, sets and datetimes become dicts, lists and strings.
    Raises TypeError for a value JSON cannot hold (an arbitrary object, NaN, infinity).
    """
    try:
        # The round trip, not just the conversion: a replay reads changes back from JSON, so
        # the live run must already see what JSON gives back (string keys, lists, no tuples).
        return json.loads(json.dumps(to_jsonable_python(value), allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"not JSON-serialisable: {exc}") from exc


class Reducer(ABC):
    """How a field's value changes on ``set``. Reducers are immutable and hold no value."""

    persisted: ClassVar[bool] = True

    @abstractmethod
    def initial(self) -> Any:
        """The field's value before any set; a fresh object on each call."""

    @abstractmethod
    def apply(self, current: Any, update: Any) -> Any:
        """The value after ``update``; never changes ``current`` in place."""

    def encode(self, update: Any) -> Any:
        """The update as recorded for a persisted field: its JSON form."""
        return _to_json(update)


@dataclass(frozen=True)
class Replace(Reducer):
    """Each set replaces the value. Fields nobody declared behave as ``Replace()``."""

    default: Any = None

    def initial(self) -> Any:
        return copy.deepcopy(self.default)

    def apply(self, current: Any, update: Any) -> Any:
        return update


@dataclass(frozen=True)
class Append(Reducer):
    """An append-only list: each set appends its value as one item (a list stays one item).

    Items are never overwritten or removed, so the value is the history of every set.
    """

    def initial(self) -> Any:
        return []

    def apply(self, current: Any, update: Any) -> Any:
        return [*current, update]


@dataclass(frozen=True)
class Transient(Reducer):
    """A runtime-only value: never recorded nor persisted, so it is back to ``default`` after a
    resume. Each set replaces it, and it keeps the raw object (no JSON conversion)."""

    persisted: ClassVar[bool] = False
    default: Any = None

    def initial(self) -> Any:
        return copy.deepcopy(self.default)

    def apply(self, current: Any, update: Any) -> Any:
        return update


@dataclass(frozen=True)
class RemoveMessage:
    """Set on a :class:`Messages` field to remove the message with this id."""

    id: str


# How a persisted Messages field records a RemoveMessage, which JSON would otherwise flatten
# into {"id": ...}, a message.
_REMOVE_KEY = "$remove"


def _removed_id(item: Any) -> str | None:
    """The id a removal names, or None when ``item`` is a message."""
    if isinstance(item, RemoveMessage):
        removed: Any = item.id
    elif isinstance(item, Mapping) and set(item) == {_REMOVE_KEY}:
        removed = item[_REMOVE_KEY]
    else:
        return None
    if not isinstance(removed, str):
        raise ValueError(f"RemoveMessage needs a string id, got {type(removed).__name__}")
    return removed


def _message_id(message: Any) -> str:
    message_id = message.get("id") if isinstance(message, Mapping) else getattr(message, "id", None)
    if message_id is None:
        # No generated ids: a replay would generate different ones and lose the upserts.
        raise ValueError("a message needs an 'id'")
    if not isinstance(message_id, str):
        raise ValueError(f"a message 'id' must be a string, got {type(message_id).__name__}")
    return message_id


@dataclass(frozen=True)
class Messages(Reducer):
    """Chat messages keyed by id: dicts with an ``"id"`` key or objects with ``.id``.

    Set one message or a list, which may mix messages and :class:`RemoveMessage` items,
    applied in order. A message whose id is present replaces it where it stands; a new id is
    appended; a removal of an id that is not present raises ValueError. Messages without an
    id are refused with ValueError.
    """

    def initial(self) -> Any:
        return []

    def encode(self, update: Any) -> Any:
        if isinstance(update, list | tuple):
            return [self._encode_one(item) for item in update]
        return self._encode_one(update)

    def _encode_one(self, item: Any) -> Any:
        if isinstance(item, RemoveMessage):
            return {_REMOVE_KEY: item.id}
        return _to_json(item)

    def apply(self, current: Any, update: Any) -> Any:
        items = update if isinstance(update, list | tuple) else [update]
        # A dict keeps insertion order, and assigning to an existing key keeps its position:
        # exactly upsert-in-place with appends at the end.
        by_id = {_message_id(message): message for message in current}
        for item in items:
            removed = _removed_id(item)
            if removed is None:
                by_id[_message_id(item)] = item
            elif removed in by_id:
                del by_id[removed]
            else:
                raise ValueError(f"no message with id {removed!r} to remove")
        return list(by_id.values())


@dataclass(frozen=True)
class Merge(Reducer):
    """A dict: each set merges its dict into the value, one level deep; the update wins."""

    def initial(self) -> Any:
        return {}

    def apply(self, current: Any, update: Any) -> Any:
        if not isinstance(update, Mapping):
            raise TypeError(f"a Merge field takes a dict, got {type(update).__name__}")
        return {**current, **update}


@dataclass(frozen=True)
class Custom(Reducer):
    """Each set stores ``fn(current, update)``; ``fn`` must be deterministic, since a replay
    calls it again with the same arguments."""

    fn: Callable[[Any, Any], Any]
    default: Any = None

    def initial(self) -> Any:
        return copy.deepcopy(self.default)

    def apply(self, current: Any, update: Any) -> Any:
        # A copy, so an fn that edits `current` in place cannot change the stored value
        # behind the recorded change.
        return self.fn(copy.deepcopy(current), update)


_REPLACE = Replace()


class State:
    """The values of one run's fields, and the changes to persisted fields not yet taken.

    Values of persisted fields are JSON data and :meth:`get` returns a copy: editing what it
    returned changes nothing, since such an edit would not be recorded and a replay would miss
    it. Transient fields hold and return the raw object.
    """

    def __init__(self, fields: Mapping[str, Reducer] | None = None) -> None:
        self._fields: dict[str, Reducer] = dict(fields or {})
        for name, reducer in self._fields.items():
            if not isinstance(reducer, Reducer):
                raise TypeError(f"state field {name!r}: {reducer!r} is not a Reducer")
            if reducer.persisted:
                try:
                    _to_json(reducer.initial())
                except TypeError as exc:
                    raise TypeError(f"state field {name!r}: default {exc}") from exc
        self._values: dict[str, Any] = {}
        self._pending: list[tuple[str, Any]] = []

    def _reducer(self, name: str) -> Reducer:
        return self._fields.get(name, _REPLACE)

    def get(self, name: str, default: Any = None) -> Any:
        """The field's value: its reducer's initial value for a declared field never set, and
        ``default`` for an undeclared one never set."""
        if name not in self._values:
            reducer = self._fields.get(name)
            return default if reducer is None else reducer.initial()
        value = self._values[name]
        return copy.deepcopy(value) if self._reducer(name).persisted else value

    def set(self, name: str, update: Any) -> None:
        """Apply ``update`` through the field's reducer and, if the field is persisted, record
        ``(name, update)`` in its JSON form.

        Raises TypeError or ValueError naming the field when the update is refused (not
        JSON-serialisable, or wrong for the reducer); the state is then unchanged and nothing
        is recorded.
        """
        encoded = self._apply(name, update)
        if self._reducer(name).persisted:
            self._pending.append((name, encoded))

    def _apply(self, name: str, update: Any) -> Any:
        """Store the new value and return the update as it would be recorded."""
        reducer = self._reducer(name)
        current = self._values[name] if name in self._values else reducer.initial()
        try:
            if not reducer.persisted:
                self._values[name] = reducer.apply(current, update)
                return update
            encoded = reducer.encode(update)
            # Converting the result too keeps a Custom reducer's output (a tuple, say) equal to
            # what restore() gets back from the store; it also leaves the stored value sharing
            # nothing with the recorded update.
            self._values[name] = _to_json(reducer.apply(current, encoded))
            return encoded
        except TypeError as exc:
            raise TypeError(f"state field {name!r}: {exc}") from exc
        except ValueError as exc:
            raise ValueError(f"state field {name!r}: {exc}") from exc

    def take_changes(self) -> list[tuple[str, Any]]:
        """The changes to persisted fields recorded since the last take, oldest first; the
        record is then empty."""
        changes, self._pending = self._pending, []
        return changes

    def apply_changes(self, changes: Iterable[Sequence[Any]]) -> None:
        """Re-apply recorded ``(field, update)`` changes (a skipped task's) in order, without
        recording them again. Pairs read back from JSON as two-item lists are fine."""
        for name, update in changes:
            self._apply(name, update)

    def snapshot(self) -> dict[str, Any]:
        """The persisted fields' values (declared ones even if never set), as JSON data."""
        names = [name for name, reducer in self._fields.items() if reducer.persisted]
        names += [name for name in self._values if name not in self._fields]
        return {name: self.get(name) for name in names}

    @classmethod
    def restore(cls, fields: Mapping[str, Reducer] | None, snapshot: Mapping[str, Any]) -> State:
        """A State whose persisted fields hold ``snapshot``'s values and whose transient
        fields hold their default. Nothing is recorded."""
        state = cls(fields)
        for name, value in snapshot.items():
            # A snapshot may hold a field the code has since made transient: it starts over.
            if not state._reducer(name).persisted:
                continue
            try:
                state._values[name] = _to_json(value)
            except TypeError as exc:
                raise TypeError(f"state field {name!r}: {exc}") from exc
        return state

    def __repr__(self) -> str:
        return f"State({self.snapshot()!r})"


@dataclass(frozen=True)
class StateError:
    """One mismatch: ``path`` is dotted, with list indexes as numbers (``order.items.2``)."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class StateValidationError(LongcallError):
    """The state does not match the schema; ``errors`` lists every mismatch."""

    def __init__(self, errors: Sequence[StateError]) -> None:
        self.errors = list(errors)
        lines = "\n".join(f"  {error}" for error in self.errors)
        count = len(self.errors)
        super().__init__(f"state does not match its schema ({count} error(s)):\n{lines}")


@dataclass(frozen=True)
class _Rule:
    path: str
    required: bool
    adapter: pydantic.TypeAdapter[Any] | None


def _check_path(path: str) -> str:
    if not path or "" in path.split("."):
        raise ValueError(f"bad state path {path!r}: use dotted names like 'order.items'")
    return path


def _lookup(state: Mapping[str, Any], path: str) -> Any:
    """The value at the dotted ``path`` through mappings and list indexes, or ``_MISSING``."""
    value: Any = state
    for part in path.split("."):
        if isinstance(value, Mapping):
            if part not in value:
                return _MISSING
            value = value[part]
        elif isinstance(value, list | tuple) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


class StateSchemaValidator:
    """Checks a state's fields against expected types and required paths.

    Immutable: :meth:`expect_type` and :meth:`require_field` return a new validator, so chain
    them (``StateSchemaValidator().expect_type("n", int).require_field("n")``).
    """

    __slots__ = ("_rules",)

    def __init__(self) -> None:
        self._rules: tuple[_Rule, ...] = ()

    def _with(self, rule: _Rule) -> StateSchemaValidator:
        validator = StateSchemaValidator()
        validator._rules = (*self._rules, rule)
        return validator

    def expect_type(self, path: str, expected: Any) -> StateSchemaValidator:
        """Check the value at ``path``, if present, against ``expected`` (a type or annotation:
        ``int``, ``list[str]``, a pydantic model, ``Literal[...]``, ``X | None``) without
        coercion: ``"5"`` is not an int. A missing value is fine unless also required."""
        # Built now, so an annotation pydantic cannot handle fails here, not at validation.
        adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(expected)
        return self._with(_Rule(_check_path(path), required=False, adapter=adapter))

    def require_field(self, path: str) -> StateSchemaValidator:
        """Require a value at ``path`` (``None`` counts as present)."""
        return self._with(_Rule(_check_path(path), required=True, adapter=None))

    def errors(self, state: Mapping[str, Any]) -> list[StateError]:
        """Every mismatch, in the order the rules were added; empty when the state is valid."""
        found: list[StateError] = []
        for rule in self._rules:
            value = _lookup(state, rule.path)
            if value is _MISSING:
                if rule.required:
                    found.append(StateError(rule.path, "required field missing"))
            elif rule.adapter is not None:
                found.extend(_type_errors(rule.path, rule.adapter, value))
        return found

    def validate(self, state: Mapping[str, Any]) -> None:
        """Raise :class:`StateValidationError` listing every mismatch, if there is any."""
        errors = self.errors(state)
        if errors:
            raise StateValidationError(errors)


def _type_errors(path: str, adapter: pydantic.TypeAdapter[Any], value: Any) -> list[StateError]:
    try:
        try:
            data = json.dumps(to_jsonable_python(value))
        except (TypeError, ValueError):
            # Not JSON data (a transient field's object): check the object itself.
            adapter.validate_python(value, strict=True)
        else:
            # Persisted values are JSON data, so JSON's strict rules fit: a list is a valid
            # tuple and a dict a valid model, but "5" is still not an int.
            adapter.validate_json(data, strict=True)
    except pydantic.ValidationError as exc:
        errors = []
        for error in exc.errors(include_url=False):
            loc = ".".join(str(part) for part in error["loc"])
            errors.append(StateError(f"{path}.{loc}" if loc else path, error["msg"]))
        return errors
    return []
