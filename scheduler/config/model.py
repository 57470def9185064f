"""The raw, strict pydantic model of YuniKorn's queue YAML (v1.5 ``configs.SchedulerConfig``).

Field names are exactly YuniKorn's YAML keys (lower case); any other key is rejected.
Input is the tree of ``yamltree`` (dicts, lists, ``Scalar`` leaves). Every leaf is coerced as
Go's YAML decoder would into the Go field type: string fields take the scalar's source
text (a YAML null becomes ``""``), integer fields need a YAML integer, booleans a YAML
boolean, floats a YAML number; a null leaves a field at its zero value. Nothing is
interpreted here: quantities stay strings, properties stay text.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict

from scheduler.config.yamltree import Scalar

UINT64_MAX = (1 << 64) - 1


def _found(value: object) -> str:
    if isinstance(value, Scalar):
        return value.describe()
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value)


def _to_str(value: object) -> object:
    if isinstance(value, Scalar):
        return "" if value.value is None else value.text
    raise ValueError(f"expected a string, found {_found(value)}")


def _to_opt_str(value: object) -> object:
    if isinstance(value, Scalar) and value.value is None:
        return None
    return _to_str(value)


def _to_uint64(value: object) -> object:
    if isinstance(value, Scalar):
        v = value.value
        if v is None:
            return 0
        if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= UINT64_MAX:
            return v
    raise ValueError(f"expected a non-negative integer, found {_found(value)}")


def _to_bool(value: object) -> object:
    if isinstance(value, Scalar):
        if value.value is None:
            return False
        if isinstance(value.value, bool):
            return value.value
    raise ValueError(f"expected true or false, found {_found(value)}")


def _to_opt_bool(value: object) -> object:
    if isinstance(value, Scalar) and value.value is None:
        return None
    return _to_bool(value)


def _to_float(value: object) -> object:
    if isinstance(value, Scalar):
        v = value.value
        if v is None:
            return 0.0
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            try:
                return float(v)
            except OverflowError:  # an integer past float's range: infinite, which validation refuses
                return math.inf if v > 0 else -math.inf
    raise ValueError(f"expected a number, found {_found(value)}")


def _null_or_map(value: object) -> object:
    if isinstance(value, Scalar):
        if value.value is None:
            return None
        raise ValueError(f"expected a mapping, found {_found(value)}")
    if isinstance(value, list):
        raise ValueError("expected a mapping, found a list")
    return value


def _null_or_list(value: object) -> object:
    if isinstance(value, Scalar):
        if value.value is None:
            return None
        raise ValueError(f"expected a list, found {_found(value)}")
    if isinstance(value, dict):
        raise ValueError("expected a list, found a mapping")
    return value


Str = Annotated[str, BeforeValidator(_to_str)]
OptStr = Annotated[str | None, BeforeValidator(_to_opt_str)]
UInt64 = Annotated[int, BeforeValidator(_to_uint64)]
Bool = Annotated[bool, BeforeValidator(_to_bool)]
OptBool = Annotated[bool | None, BeforeValidator(_to_opt_bool)]
Float = Annotated[float, BeforeValidator(_to_float)]
StrMap = Annotated[dict[str, Str] | None, BeforeValidator(_null_or_map)]
StrList = Annotated[list[Str] | None, BeforeValidator(_null_or_list)]
FloatMap = Annotated[dict[str, Float] | None, BeforeValidator(_null_or_map)]


class _Raw(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class RawFilter(_Raw):
    """``placementrules[].filter``: which users/groups a rule applies to."""

    type: Str = ""
    users: StrList = None
    groups: StrList = None


class RawPlacementRule(_Raw):
    """``placementrules[]``: one placement rule (applied by ``scheduler.core.placement``)."""

    name: Str = ""
    create: Bool = False
    filter: Annotated[RawFilter | None, BeforeValidator(_null_or_map)] = None
    parent: Annotated[RawPlacementRule | None, BeforeValidator(_null_or_map)] = None
    value: Str = ""


class RawLimit(_Raw):
    """``limits[]`` on a partition or queue: user/group limits (enforced by the core)."""

    limit: Str = ""
    users: StrList = None
    groups: StrList = None
    maxresources: StrMap = None
    maxapplications: UInt64 = 0


class RawResources(_Raw):
    """``resources``: guaranteed and max quantities, still as text."""

    guaranteed: StrMap = None
    max: StrMap = None


class RawChildTemplate(_Raw):
    """``childtemplate``: settings for leaves created dynamically below the queue."""

    maxapplications: UInt64 = 0
    properties: StrMap = None
    resources: Annotated[RawResources | None, BeforeValidator(_null_or_map)] = None


class RawQueue(_Raw):
    """One entry of ``queues``."""

    name: Str = ""
    parent: Bool = False
    resources: Annotated[RawResources | None, BeforeValidator(_null_or_map)] = None
    maxapplications: UInt64 = 0
    properties: StrMap = None
    adminacl: OptStr = None
    submitacl: OptStr = None
    childtemplate: Annotated[RawChildTemplate | None, BeforeValidator(_null_or_map)] = None
    queues: Annotated[list[RawQueue] | None, BeforeValidator(_null_or_list)] = None
    limits: Annotated[list[RawLimit] | None, BeforeValidator(_null_or_list)] = None


class RawPreemption(_Raw):
    """``preemption``: ``enabled`` (absent or null: enabled, as YuniKorn ``updatePreemption``), and
    yunikorn-1.9's ``quotapreemptionenabled`` (YUNIKORN-3193, ``scheduler.core.quota_preemption``;
    refused under yunikorn-1.5, as YuniKorn 1.5's strict parser refuses it)."""

    enabled: OptBool = None
    quotapreemptionenabled: OptBool = None


class RawNodeSortPolicy(_Raw):
    """``nodesortpolicy``: node ordering policy and per-resource weights."""

    type: Str = ""
    resourceweights: FloatMap = None


class RawPartition(_Raw):
    """One entry of ``partitions``."""

    name: Str = ""
    queues: Annotated[list[RawQueue] | None, BeforeValidator(_null_or_list)] = None
    placementrules: Annotated[list[RawPlacementRule] | None, BeforeValidator(_null_or_list)] = None
    limits: Annotated[list[RawLimit] | None, BeforeValidator(_null_or_list)] = None
    preemption: Annotated[RawPreemption | None, BeforeValidator(_null_or_map)] = None
    nodesortpolicy: Annotated[RawNodeSortPolicy | None, BeforeValidator(_null_or_map)] = None
    rules: Str = ""  # evsched's own: the rules profile (``scheduler.config.profiles``); "" = yunikorn-1.5


class RawConfig(_Raw):
    """The document: ``partitions`` plus YuniKorn's optional ``checksum`` (ignored)."""

    partitions: Annotated[list[RawPartition] | None, BeforeValidator(_null_or_list)] = None
    checksum: Str = ""


def parse_raw(tree: dict[str, Any]) -> RawConfig:
    """Validate the tree against the model (raises pydantic.ValidationError)."""
    return RawConfig.model_validate(tree)
