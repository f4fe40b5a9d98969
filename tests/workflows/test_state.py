"""Run state for durable workflows: reducers, recorded changes, replay, restore, validation."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
from typing import Any, Literal

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from longcall.errors import LongcallError
from longcall.workflows.state import (
    Append,
    Custom,
    Merge,
    Messages,
    Reducer,
    RemoveMessage,
    Replace,
    State,
    StateError,
    StateSchemaValidator,
    StateValidationError,
    Transient,
)


class Msg(pydantic.BaseModel):
    id: str
    role: str
    content: str


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Opaque:
    """A plain class pydantic has no schema for."""


def msg(mid: str, content: str = "") -> dict[str, Any]:
    return {"id": mid, "role": "user", "content": content or mid}


# --- Replace and undeclared fields ---------------------------------------------------------


def test_replace_overwrites_and_starts_at_its_default() -> None:
    """A Replace field reads its default until set, then the latest value."""
    state = State({"n": Replace(default=0)})
    assert state.get("n") == 0
    state.set("n", 5)
    state.set("n", 7)
    assert state.get("n") == 7
    assert state.take_changes() == [("n", 5), ("n", 7)]


def test_undeclared_field_uses_get_default_until_set_then_replaces() -> None:
    """An undeclared field returns get's default until set, then behaves as Replace."""
    state = State()
    assert state.get("x") is None
    assert state.get("x", "fallback") == "fallback"
    state.set("x", [1])
    state.set("x", [2])
    assert state.get("x", "fallback") == [2]
    assert state.take_changes() == [("x", [1]), ("x", [2])]
    assert state.snapshot() == {"x": [2]}


def test_initial_value_is_a_fresh_copy_each_time() -> None:
    """Editing a default read through get does not change the next read."""
    state = State({"items": Replace(default=[]), "log": Append()})
    state.get("items").append("leak")
    state.get("log").append("leak")
    assert state.get("items") == []
    assert state.get("log") == []


def test_editing_a_value_from_get_does_not_change_state() -> None:
    """get returns a copy of a persisted value: an unrecorded edit cannot slip in."""
    state = State({"cfg": Merge()})
    state.set("cfg", {"a": [1]})
    state.get("cfg")["a"].append(2)
    assert state.get("cfg") == {"a": [1]}
    assert state.snapshot() == {"cfg": {"a": [1]}}


def test_reducers_are_immutable_values() -> None:
    """Reducers are frozen and compare by their settings."""
    reducer = Replace(default=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        reducer.default = 2  # type: ignore[misc]
    assert Replace(default=1) == reducer
    assert Replace(default=2) != reducer
    other_kind: object = Transient(default=1)
    assert other_kind != reducer


def test_a_field_that_is_not_a_reducer_is_refused() -> None:
    """State refuses a field declared with something that is not a Reducer."""
    with pytest.raises(TypeError, match="'n'"):
        State({"n": 0})  # type: ignore[dict-item]


# --- Append ----------------------------------------------------------------------------------


def test_append_adds_each_set_as_one_item_and_never_overwrites() -> None:
    """Each set appends exactly one item, a list included; earlier items stay."""
    state = State({"log": Append()})
    state.set("log", "a")
    state.set("log", ["b", "c"])
    state.set("log", None)
    state.set("log", "a")
    assert state.get("log") == ["a", ["b", "c"], None, "a"]
    assert state.take_changes() == [("log", "a"), ("log", ["b", "c"]), ("log", None), ("log", "a")]


# --- Messages --------------------------------------------------------------------------------


def test_messages_upsert_replaces_in_place_and_appends_new_ids() -> None:
    """A known id is replaced where it stands; a new id goes to the end."""
    state = State({"chat": Messages()})
    state.set("chat", msg("1", "hello"))
    state.set("chat", [msg("2"), msg("3")])
    state.set("chat", msg("1", "hello, edited"))
    state.set("chat", msg("4"))
    assert [m["id"] for m in state.get("chat")] == ["1", "2", "3", "4"]
    assert state.get("chat")[0]["content"] == "hello, edited"


def test_messages_accepts_pydantic_models_and_stores_json() -> None:
    """Pydantic messages are upserted by .id and kept as JSON dicts."""
    state = State({"chat": Messages()})
    state.set(
        "chat", [Msg(id="a", role="user", content="hi"), Msg(id="b", role="ai", content="yo")]
    )
    state.set("chat", Msg(id="a", role="user", content="hi again"))
    assert state.get("chat") == [
        {"id": "a", "role": "user", "content": "hi again"},
        {"id": "b", "role": "ai", "content": "yo"},
    ]


def test_messages_removal_by_id() -> None:
    """RemoveMessage removes the message with that id and keeps the others' order."""
    state = State({"chat": Messages()})
    state.set("chat", [msg("1"), msg("2"), msg("3")])
    state.set("chat", RemoveMessage("2"))
    assert [m["id"] for m in state.get("chat")] == ["1", "3"]


def test_messages_list_mixing_messages_and_removals_applies_in_order() -> None:
    """A list of upserts and removals is applied item by item, in order."""
    state = State({"chat": Messages()})
    state.set("chat", [msg("1"), msg("2"), msg("3")])
    state.set(
        "chat",
        [RemoveMessage("1"), msg("3", "edited"), msg("4"), RemoveMessage("4"), msg("1", "back")],
    )
    chat = state.get("chat")
    assert [m["id"] for m in chat] == ["2", "3", "1"]
    assert chat[1]["content"] == "edited"
    assert chat[2]["content"] == "back"


def test_messages_a_duplicate_id_within_one_list_keeps_the_first_position() -> None:
    """Within one update, a repeated id ends at its first position with the last content."""
    state = State({"chat": Messages()})
    state.set("chat", [msg("a", "first"), msg("b"), msg("a", "second")])
    assert state.get("chat") == [msg("a", "second"), msg("b")]


@pytest.mark.parametrize(
    "bad", [{"role": "user", "content": "no id"}, {"id": None}, [msg("ok"), {"content": "x"}]]
)
def test_messages_without_an_id_are_refused_and_nothing_changes(bad: Any) -> None:
    """A message without an id raises ValueError naming the field; nothing is stored or
    recorded."""
    state = State({"chat": Messages()})
    state.set("chat", msg("1"))
    state.take_changes()
    with pytest.raises(ValueError, match=r"'chat'.*a message needs an 'id'"):
        state.set("chat", bad)
    assert state.get("chat") == [msg("1")]
    assert state.take_changes() == []


def test_messages_non_string_id_is_refused() -> None:
    """Message ids must be strings."""
    state = State({"chat": Messages()})
    with pytest.raises(ValueError, match="must be a string"):
        state.set("chat", {"id": 7})


def test_messages_removing_an_unknown_id_is_refused() -> None:
    """Removing an id that is not present raises ValueError naming it."""
    state = State({"chat": Messages()})
    state.set("chat", msg("1"))
    with pytest.raises(ValueError, match="'nope'"):
        state.set("chat", RemoveMessage("nope"))
    assert state.get("chat") == [msg("1")]


def test_messages_removals_survive_a_json_round_trip_of_the_changes() -> None:
    """Recorded removals stay removals after the changes go through JSON and are replayed."""
    fields = {"chat": Messages()}
    live = State(fields)
    live.set("chat", [msg("1"), msg("2")])
    live.set("chat", [RemoveMessage("1"), msg("3")])
    changes = json.loads(json.dumps(live.take_changes()))
    replayed = State(fields)
    replayed.apply_changes(changes)
    assert replayed.get("chat") == [msg("2"), msg("3")]
    assert replayed.snapshot() == live.snapshot()


# --- Merge and Custom ------------------------------------------------------------------------


def test_merge_is_shallow_and_the_update_wins() -> None:
    """Merge adds and overwrites top-level keys; a nested dict is replaced, not merged."""
    state = State({"cfg": Merge()})
    assert state.get("cfg") == {}
    state.set("cfg", {"a": 1, "nested": {"x": 1, "y": 2}})
    state.set("cfg", {"b": 2, "nested": {"x": 9}})
    state.set("cfg", {"a": 3})
    assert state.get("cfg") == {"a": 3, "b": 2, "nested": {"x": 9}}


def test_merge_refuses_a_non_dict_and_names_the_field() -> None:
    """A Merge update that is not a dict raises TypeError naming the field; nothing changes."""
    state = State({"cfg": Merge()})
    state.set("cfg", {"a": 1})
    state.take_changes()
    with pytest.raises(TypeError, match=r"'cfg'.*dict.*list"):
        state.set("cfg", [("a", 2)])
    assert state.get("cfg") == {"a": 1}
    assert state.take_changes() == []


def test_custom_calls_fn_with_current_and_update_from_its_default() -> None:
    """Custom stores fn(current, update), starting from its default."""
    state = State({"best": Custom(lambda cur, upd: max(cur, upd), default=0)})
    assert state.get("best") == 0
    for value in (3, 1, 8, 2):
        state.set("best", value)
    assert state.get("best") == 8
    assert state.take_changes() == [("best", 3), ("best", 1), ("best", 8), ("best", 2)]


def test_custom_fn_that_edits_current_then_fails_leaves_the_state_unchanged() -> None:
    """A Custom fn gets a copy of the value: an in-place edit before it raises is not kept."""

    def push(current: list[int], update: int) -> list[int]:
        current.append(update)
        if update < 0:
            raise ValueError("negative")
        return current

    state = State({"stack": Custom(push, default=[])})
    state.set("stack", 1)
    state.set("stack", 2)
    with pytest.raises(ValueError, match=r"'stack'.*negative"):
        state.set("stack", -1)
    assert state.get("stack") == [1, 2]
    assert state.take_changes() == [("stack", 1), ("stack", 2)]


def test_custom_output_is_stored_in_json_form() -> None:
    """A Custom fn returning a tuple stores a list, as the store would give it back."""
    state = State({"pair": Custom(lambda cur, upd: (cur, upd), default=0)})
    state.set("pair", 1)
    assert state.get("pair") == [0, 1]


# --- Transient -------------------------------------------------------------------------------


def test_transient_is_neither_recorded_nor_snapshotted() -> None:
    """A Transient field changes the value but not take_changes nor snapshot."""
    state = State({"tmp": Transient(default=[]), "n": Replace(default=0)})
    state.set("tmp", [1, 2, 3])
    state.set("n", 1)
    assert state.get("tmp") == [1, 2, 3]
    assert state.take_changes() == [("n", 1)]
    assert state.snapshot() == {"n": 1}


def test_transient_keeps_the_raw_object_even_if_not_json() -> None:
    """A Transient field holds any object, by identity, without JSON conversion."""
    handle = object()
    model = Msg(id="a", role="user", content="hi")
    state = State({"conn": Transient(), "m": Transient()})
    state.set("conn", handle)
    state.set("m", model)
    assert state.get("conn") is handle
    assert state.get("m") is model


# --- recorded changes, replay, JSON ----------------------------------------------------------


def test_take_changes_returns_changes_once() -> None:
    """take_changes empties the record; later sets start a new one."""
    state = State()
    state.set("a", 1)
    assert state.take_changes() == [("a", 1)]
    assert state.take_changes() == []
    state.set("a", 2)
    assert state.take_changes() == [("a", 2)]


def test_apply_changes_does_not_record_them_again() -> None:
    """Replayed changes update values but are not recorded a second time."""
    state = State({"log": Append()})
    state.apply_changes([("log", "a"), ["log", "b"]])
    assert state.get("log") == ["a", "b"]
    assert state.take_changes() == []


def test_persisted_values_are_stored_and_recorded_in_json_form() -> None:
    """Models, dataclasses, tuples, sets and datetimes are converted at set time."""
    state = State()
    when = datetime.datetime(2024, 5, 1, 12, 30, tzinfo=datetime.UTC)
    state.set("m", Msg(id="a", role="user", content="hi"))
    state.set("p", Point(1, 2))
    state.set("t", (1, 2))
    state.set("d", {1: "int key"})
    state.set("w", when)
    assert state.snapshot() == {
        "m": {"id": "a", "role": "user", "content": "hi"},
        "p": {"x": 1, "y": 2},
        "t": [1, 2],
        "d": {"1": "int key"},
        "w": "2024-05-01T12:30:00Z",
    }
    changes = state.take_changes()
    assert changes[0] == ("m", {"id": "a", "role": "user", "content": "hi"})
    assert changes[2] == ("t", [1, 2])
    assert json.loads(json.dumps(changes)) == [list(change) for change in changes]


@pytest.mark.parametrize("bad", [object(), {"k": object()}, float("nan"), float("inf")])
def test_a_value_json_cannot_hold_is_refused_naming_the_field(bad: Any) -> None:
    """set raises TypeError naming the field and leaves value and record unchanged."""
    state = State({"log": Append()})
    state.set("log", 1)
    state.take_changes()
    with pytest.raises(TypeError, match=r"'log'.*JSON"):
        state.set("log", bad)
    with pytest.raises(TypeError, match=r"'other'.*JSON"):
        state.set("other", bad)
    assert state.get("log") == [1]
    assert state.get("other") is None
    assert state.take_changes() == []


def test_a_persisted_default_json_cannot_hold_is_refused() -> None:
    """A persisted field's default must be JSON data; a transient one's need not be."""
    with pytest.raises(TypeError, match="'x'"):
        State({"x": Replace(default=object())})
    State({"x": Transient(default=object())})


# A property test: whatever sets a workflow makes, replaying its recorded changes into a fresh
# State reaches the same snapshot, also after the changes went through JSON (the store).

FIELDS: dict[str, Reducer] = {
    "r": Replace(default="start"),
    "a": Append(),
    "m": Messages(),
    "g": Merge(),
    "c": Custom(lambda cur, upd: (cur * 31 + upd) % 1_000_003, default=1),
    "t": Transient(),
}

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)
message_ids = st.sampled_from(["m1", "m2", "m3"])
messages = st.builds(lambda mid, text: {"id": mid, "text": text}, message_ids, st.text(max_size=3))
message_items = messages | message_ids.map(RemoveMessage)

operations = st.one_of(
    st.tuples(st.just("r"), json_values),
    st.tuples(st.just("a"), json_values),
    st.tuples(st.just("m"), message_items | st.lists(message_items, max_size=4)),
    st.tuples(st.just("g"), st.dictionaries(st.sampled_from("xyz"), json_values, max_size=3)),
    st.tuples(st.just("c"), st.integers(-1000, 1000)),
    st.tuples(st.just("t"), json_values),
    st.tuples(st.sampled_from(["u", "v"]), json_values),  # undeclared fields
)


@settings(max_examples=200, deadline=None)
@given(st.lists(operations, max_size=25))
def test_replaying_recorded_changes_reaches_the_same_snapshot(
    ops: list[tuple[str, Any]],
) -> None:
    """A fresh State fed A's recorded changes (directly or through JSON) equals A's snapshot."""
    live = State(FIELDS)
    for name, update in ops:
        # A removal of an absent message is refused, so it is not recorded either.
        with contextlib.suppress(ValueError):
            live.set(name, update)
    changes = live.take_changes()
    assert all(name != "t" for name, _ in changes)

    direct = State(FIELDS)
    direct.apply_changes(changes)
    assert direct.snapshot() == live.snapshot()

    from_store = State(FIELDS)
    from_store.apply_changes(json.loads(json.dumps(changes)))
    assert from_store.snapshot() == live.snapshot()

    snapshot = live.snapshot()
    assert json.loads(json.dumps(snapshot, allow_nan=False)) == snapshot
    assert State.restore(FIELDS, snapshot).snapshot() == snapshot


# --- snapshot and restore --------------------------------------------------------------------


def test_snapshot_lists_declared_persisted_fields_even_if_never_set() -> None:
    """A declared persisted field appears with its initial value; a transient one never."""
    state = State({"log": Append(), "n": Replace(default=0), "tmp": Transient(default=1)})
    assert state.snapshot() == {"log": [], "n": 0}


def test_restore_gives_persisted_values_and_transient_defaults() -> None:
    """A restored State holds the snapshot's values, transient defaults, and records nothing."""
    fields = {"log": Append(), "tmp": Transient(default="fresh"), "chat": Messages()}
    before = State(fields)
    before.set("log", "one")
    before.set("tmp", "from the lost attempt")
    before.set("chat", msg("1"))
    before.set("extra", {"k": 1})
    snapshot = json.loads(json.dumps(before.snapshot()))

    after = State.restore(fields, snapshot)
    assert after.get("log") == ["one"]
    assert after.get("chat") == [msg("1")]
    assert after.get("extra") == {"k": 1}
    assert after.get("tmp") == "fresh"
    assert after.take_changes() == []
    assert after.snapshot() == before.snapshot()

    after.set("log", "two")
    after.set("chat", msg("1", "edited"))
    assert after.get("log") == ["one", "two"]
    assert after.get("chat") == [msg("1", "edited")]


def test_restore_ignores_a_field_now_declared_transient() -> None:
    """A snapshot value for a field that is now transient is dropped: it starts at default."""
    state = State.restore({"tmp": Transient(default=0)}, {"tmp": 99, "n": 1})
    assert state.get("tmp") == 0
    assert state.snapshot() == {"n": 1}


# --- StateSchemaValidator --------------------------------------------------------------------


class Item(pydantic.BaseModel):
    sku: str
    qty: int


class Order(pydantic.BaseModel):
    id: str
    items: list[Item]


def test_validator_accepts_a_valid_state() -> None:
    """A state matching every rule has no errors and validate returns."""
    validator = (
        StateSchemaValidator()
        .expect_type("count", int)
        .expect_type("status", Literal["open", "closed"])
        .expect_type("note", str | None)
        .expect_type("order", Order)
        .expect_type("order.items", list[Item])
        .expect_type("pair", tuple[int, str])
        .expect_type("scores", dict[str, float])
        .require_field("status")
        .require_field("note")
    )
    state = {
        "count": 3,
        "status": "open",
        "note": None,
        "order": {"id": "o1", "items": [{"sku": "a", "qty": 1}]},
        "pair": [1, "x"],
        "scores": {"a": 1, "b": 2.5},
    }
    assert validator.errors(state) == []
    validator.validate(state)


def test_validator_reports_every_error_with_its_path() -> None:
    """All mismatches come back at once, nested ones with their full path."""
    validator = (
        StateSchemaValidator()
        .expect_type("count", int)
        .expect_type("status", Literal["open", "closed"])
        .expect_type("order.items", list[Item])
        .expect_type("tags", list[str])
        .require_field("owner")
        .require_field("order.id")
    )
    state = {
        "count": "5",
        "status": "pending",
        "order": {
            "items": [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 2}, {"sku": 3, "qty": "x"}]
        },
        "tags": ["ok", 2],
    }
    errors = validator.errors(state)
    assert [error.path for error in errors] == [
        "count",
        "status",
        "order.items.2.sku",
        "order.items.2.qty",
        "tags.1",
        "owner",
        "order.id",
    ]
    assert errors[0].message == "Input should be a valid integer"
    assert errors[5] == StateError("owner", "required field missing")
    assert errors[6] == StateError("order.id", "required field missing")


def test_validator_does_not_coerce() -> None:
    """Strict checking: "5" is not an int, 1 is not a bool, "1" is not a float."""
    validator = (
        StateSchemaValidator().expect_type("n", int).expect_type("b", bool).expect_type("f", float)
    )
    assert [e.path for e in validator.errors({"n": "5", "b": 1, "f": "1"})] == ["n", "b", "f"]
    assert validator.errors({"n": 5, "b": True, "f": 1}) == []


def test_validator_skips_an_expected_field_that_is_absent_unless_required() -> None:
    """A missing expected field is fine; missing and required gives one error."""
    validator = StateSchemaValidator().expect_type("a", int).expect_type("b.c", int)
    assert validator.errors({}) == []
    assert validator.errors({"b": 5}) == []
    required = validator.require_field("a")
    assert required.errors({}) == [StateError("a", "required field missing")]


def test_validator_paths_reach_into_lists_by_index() -> None:
    """A numeric path segment indexes a list."""
    validator = StateSchemaValidator().expect_type("rows.1.n", int).require_field("rows.5")
    errors = validator.errors({"rows": [{"n": 1}, {"n": "two"}]})
    assert errors == [
        StateError("rows.1.n", "Input should be a valid integer"),
        StateError("rows.5", "required field missing"),
    ]


def test_validator_checks_model_instances_too() -> None:
    """A value that is a model instance (say, from a transient field) is checked as such."""
    validator = StateSchemaValidator().expect_type("o", Order).expect_type("bad", Order)
    state = {"o": Order(id="1", items=[]), "bad": Item(sku="a", qty=1)}
    assert [e.path for e in validator.errors(state)] == ["bad.id", "bad.items"]


def test_validate_raises_one_error_listing_them_all() -> None:
    """validate raises StateValidationError (a LongcallError) with each error on its line."""
    validator = StateSchemaValidator().expect_type("n", int).require_field("who")
    with pytest.raises(StateValidationError) as caught:
        validator.validate({"n": "x"})
    error = caught.value
    assert isinstance(error, LongcallError)
    assert error.errors == [
        StateError("n", "Input should be a valid integer"),
        StateError("who", "required field missing"),
    ]
    lines = str(error).splitlines()
    assert "n: Input should be a valid integer" in lines[1]
    assert "who: required field missing" in lines[2]
    assert len(lines) == 3


def test_validator_builders_return_new_validators() -> None:
    """expect_type and require_field leave the validator they were called on unchanged."""
    base = StateSchemaValidator()
    stricter = base.require_field("x")
    assert base.errors({}) == []
    assert stricter.errors({}) == [StateError("x", "required field missing")]


def test_validator_refuses_bad_paths_and_unknown_types_early() -> None:
    """An empty path segment or a type pydantic cannot check fails when the rule is added."""
    with pytest.raises(ValueError, match="bad state path"):
        StateSchemaValidator().require_field("a..b")
    with pytest.raises(pydantic.PydanticSchemaGenerationError):
        StateSchemaValidator().expect_type("x", Opaque)
