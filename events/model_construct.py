"""Event models built from values already known valid, without validation (compiled).

``pydantic``'s ``model_construct`` handles defaults and aliases field by field; the core and
the decoder's fast path build every allocation decision, output envelope and common input
this way, a few hundred thousand per verified range, so it is one compiled call here
(docs/native.md): the same four slots a validated instance has, set directly.

>>> from events.models import NodeRemoved
>>> node = construct(NodeRemoved, {"node_id": "n1", "partition": "default"}, {"node_id"})
>>> node == NodeRemoved(node_id="n1"), node.model_fields_set
(True, {'node_id'})
"""

from __future__ import annotations

from typing import Any, Final, TypeVar

from pydantic import BaseModel

Model = TypeVar("Model", bound=BaseModel)

_NEW: Final = object.__new__  # BaseModel has no ``__new__`` of its own
# BaseModel's four slots, set through their descriptors: what ``object.__setattr__`` ends in,
# without its attribute lookup on every call.
_SET_DICT: Final = BaseModel.__dict__["__dict__"].__set__
_SET_FIELDS_SET: Final = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_SET_EXTRA: Final = BaseModel.__dict__["__pydantic_extra__"].__set__
_SET_PRIVATE: Final = BaseModel.__dict__["__pydantic_private__"].__set__


def construct(cls: type[Model], values: dict[str, Any], fields_set: set[str]) -> Model:
    """A model instance from values already known valid, laid out as validation lays it out.

    The same four attributes ``model_construct`` sets, without its per-field default and
    alias handling (the caller gives every field, in declaration order).
    """
    model: Model = _NEW(cls)
    _SET_DICT(model, values)
    _SET_FIELDS_SET(model, fields_set)
    _SET_EXTRA(model, None)
    _SET_PRIVATE(model, None)
    return model
