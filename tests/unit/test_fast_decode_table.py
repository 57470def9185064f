"""The fast decoder's field table (events/fast_decode.py) is the models' schema, field by field, limits included.

The fast path retypes what events/models.py declares — each data model's fields, their order,
defaults and bounds (253/4096/1024/64 characters, entry counts, quantities up to MAX_QUANTITY) — so that
compiled code can check a record without pydantic. This test reads the bounds from the models'
own annotations and probes every field of the table at each bound and one past it: the table's
checker must accept exactly what pydantic accepts there, and the unrolled ``ask.added`` path
must answer as the table does. A bound changed in one place only fails here.
"""

from __future__ import annotations

import typing
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from events import fast_decode
from events.models import INPUT_DATA, Frozen
from events.resources import MAX_QUANTITY

TABLE = fast_decode._FIELDS


def bounds(info: FieldInfo) -> set[int]:
    """Every length and value bound declared anywhere in a field's annotation (nested ones too)."""
    found: set[int] = set()

    def visit(thing: Any) -> None:
        for attr in ("max_length", "min_length", "le", "ge"):
            value = getattr(thing, attr, None)
            if isinstance(value, int) and not isinstance(value, bool):
                found.add(value)
        for meta in getattr(thing, "metadata", ()) or ():
            visit(meta)
        for arg in typing.get_args(thing):
            visit(arg)
        if hasattr(thing, "__metadata__"):
            for meta in thing.__metadata__:
                visit(meta)

    visit(info)
    visit(info.annotation)
    return found


def probes(limits: set[int]) -> list[Any]:
    """Values at and one past each bound, in every shape the input fields take, plus wrong types."""
    lengths = sorted({n for n in limits if n <= 5000} | {0, 1})
    texts = ["a" * m for n in lengths for m in (n, n + 1)] + ["x/y", "x#", "a b", "\x7f", "ok-1"]
    ints = sorted({0, 1, -1, MAX_QUANTITY, MAX_QUANTITY + 1, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1})
    values: list[Any] = [None, True, False, 1.5, [], {}, *texts, *ints]
    values += [{t: 1} for t in texts] + [{"k": t} for t in texts] + [{"k": i} for i in ints] + [[t] for t in texts]
    # and counts: a mapping or list of as many entries as a bound, and one more (a node's labels, a
    # task group list), so that a count changed in one place fails too
    counts = [m for n in lengths if 2 <= n <= 1024 for m in (n, n + 1)]
    values += [{f"k{i}": "v" for i in range(m)} for m in counts] + [{f"k{i}": 1 for i in range(m)} for m in counts]
    values += [[f"g{i}" for i in range(m)] for m in counts]
    return values




def leaves_to_pydantic(value: Any) -> bool:
    """The one deliberate difference: an integer past 64 bits (orjson reads up to 2**64 - 1) is left to
    pydantic, which accepts it for an unbounded ``StrictInt``; the core then rejects it (priority-range)."""
    return type(value) is int and not -(2**63) <= value < 2**63


def accepts(model: type[BaseModel], base: dict[str, Any], name: str, value: Any) -> bool:
    try:
        model.model_validate({**base, name: value})
    except ValidationError:
        return False
    return True


def minimal(model: type[Frozen]) -> dict[str, Any]:
    """The required fields of ``model`` with values the table's checkers accept."""
    samples = {"app_id": "a", "ask_id": "k", "node_id": "n", "user": "u", "resources": {"vcore": 1},
               "capacity": {"vcore": 1}}
    return {name: samples[name] for name, info in model.model_fields.items() if info.is_required()}


MODELS = sorted(TABLE, key=lambda m: m.__name__)


@pytest.mark.parametrize("model", MODELS, ids=[m.__name__ for m in MODELS])
def test_the_table_lists_each_models_fields_in_order_with_its_defaults(model: type[Frozen]) -> None:
    table = TABLE[model]
    assert [name for name, _, _ in table] == list(model.model_fields)
    for name, _, default in table:
        info = model.model_fields[name]
        if info.is_required():
            assert default is fast_decode._REQUIRED, name
        else:
            assert default is not fast_decode._REQUIRED and default() == info.get_default(call_default_factory=True)


@pytest.mark.parametrize("model", MODELS, ids=[m.__name__ for m in MODELS])
def test_each_checker_accepts_exactly_what_the_model_accepts_at_its_bounds(model: type[Frozen]) -> None:
    base = minimal(model)
    disagree = []
    for name, check, _ in TABLE[model]:
        for value in probes(bounds(model.model_fields[name])):
            fast = check(value) is not fast_decode._BAD
            if fast != accepts(model, base, name, value) and not leaves_to_pydantic(value):
                disagree.append((name, repr(value)[:40], "fast accepts" if fast else "fast rejects"))
    assert disagree == []


def test_the_unrolled_ask_added_answers_as_the_table_does() -> None:
    model = INPUT_DATA["ask.added"]
    table, allowed = TABLE[model], fast_decode._FAST["ask.added"][2]
    base = minimal(model)
    for name, _, _ in table:
        for value in probes(bounds(model.model_fields[name])):
            data = {**base, name: value}
            assert fast_decode._ask_added(data) == fast_decode.fast_data(model, table, allowed, data), (name, value)
        data = {k: v for k, v in base.items() if k != name}
        assert fast_decode._ask_added(data) == fast_decode.fast_data(model, table, allowed, data), name


def test_every_fast_type_is_a_registered_input_type() -> None:
    assert set(TABLE) <= set(INPUT_DATA.values())
    assert {t for t, m in INPUT_DATA.items() if m in TABLE} == set(fast_decode._FAST)
