"""Input and output event models (docs/contract.md §1–3): frozen pydantic models, extra fields forbidden.

An input record is a CloudEvents 1.0 structured envelope whose ``data`` is validated
against the model registered for its ``type`` in ``INPUT_DATA``. Outputs use the same
envelope with the models in ``OUTPUT_DATA``. Everything here is pure data: no I/O.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StrictBool,
    StrictInt,
    StrictStr,
    StringConstraints,
    model_serializer,
    model_validator,
)

from events.quantities import parse_quantity
from events.resources import MAX_QUANTITY
from events.units import VCORE, is_bytes

# Identifiers reach file names, topics and MQTT topic levels: bounded length, no control
# characters, no MQTT wildcards or path separators.
IDENTIFIER_CHARS = r"[^\x00-\x1f\x7f/#+]+"
PARTITION_CHARS = r"[A-Za-z0-9_-]+"
Identifier = Annotated[
    str, StringConstraints(strict=True, min_length=1, max_length=253, pattern=f"^{IDENTIFIER_CHARS}$")
]
Quantity = Annotated[int, Field(strict=True, ge=0, le=MAX_QUANTITY)]


def quantities_in_units(value: Any) -> Any:
    """A resource map's quantity strings read as a queue configuration reads them (``"4Gi"`` memory,
    ``"500m"`` or ``"2"`` vcore: ``events.quantities``), into the exact integers of internal units;
    integers pass as they are (bytes, milli-cores, counts). Anything else is an error naming the
    resource and its unit. Replay decodes the same record to the same integers.

    >>> quantities_in_units({"memory": "4Gi", "vcore": "500m", "pods": 3})
    {'memory': 4294967296, 'vcore': 500, 'pods': 3}
    >>> quantities_in_units({"vcore": 1.5})
    Traceback (most recent call last):
    ValueError: vcore: 1.5 is not a quantity: an integer in milli-cores, or a string such as "500m" or "2" (cores)
    """
    if type(value) is not dict:
        return value  # pydantic says what it expected
    normalised: dict[Any, Any] = {}
    for name, quantity in value.items():
        if type(quantity) is str and type(name) is str:
            try:
                quantity = parse_quantity(name, quantity)
            except ValueError as exc:
                raise ValueError(f"{exc}; {quantity_form(name)}") from None
        elif type(quantity) is not int and type(name) is str:
            raise ValueError(f"{name}: {quantity!r} is not a quantity: {quantity_form(name)}")
        normalised[name] = quantity
    return normalised


def quantity_form(name: str) -> str:
    """How a quantity of resource ``name`` is written in an input event (its unit, an example)."""
    if name == VCORE:
        return 'an integer in milli-cores, or a string such as "500m" or "2" (cores)'
    if is_bytes(name):
        return 'an integer in bytes, or a string such as "4Gi" or "500M"'
    return 'an integer count, or a string such as "4" or "2k"'


ResourceMap = Annotated[
    dict[Annotated[str, StringConstraints(min_length=1, max_length=253)], Quantity],
    BeforeValidator(quantities_in_units),
]
Tags = dict[Annotated[str, StringConstraints(max_length=253)], Annotated[str, StringConstraints(max_length=4096)]]
PartitionName = Annotated[
    str, StringConstraints(strict=True, min_length=1, max_length=64, pattern=f"^{PARTITION_CHARS}$")
]

MAX_RECORD_BYTES = 1024 * 1024

# Gang scheduling (docs/semantics.md#gang-scheduling): a task group's name is bounded as an
# identifier is, and may be empty (an ask of no task group); a placeholder timeout is at most
# a year of log time (YuniKorn's default, 15 minutes, when 0 or absent).
TaskGroupName = Annotated[str, StringConstraints(strict=True, max_length=253, pattern=f"^(?:{IDENTIFIER_CHARS})?$")]
MAX_PLACEHOLDER_TIMEOUT_MS = 365 * 24 * 3600 * 1000
PlaceholderTimeoutMs = Annotated[int, Field(strict=True, ge=0, le=MAX_PLACEHOLDER_TIMEOUT_MS)]


class Frozen(BaseModel):
    """Base for every event model: immutable, unknown fields rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid")


# ---------------------------------------------------------------- where a pod may run (docs/contract.md §2)
# Node labels and taints on node events, a pod's node constraints on ``ask.added``, with Kubernetes'
# semantics (scheduler/core/node_constraints.py). Kubernetes' own bounds where it has them (a label
# key: a 253-character prefix, '/', a 63-character name; a label value: 63 characters); ours on the
# counts, each far above what a real pod or node carries.
MAX_LABEL_KEY = 317
MAX_LABEL_VALUE = 63
MAX_LABELS = 256  # a node's labels, a pod's nodeSelector
MAX_TAINTS = 64  # a node's taints
MAX_TERMS = 32  # required node affinity: nodeSelectorTerms
MAX_REQUIREMENTS = 32  # per term: matchExpressions, and matchFields
MAX_VALUES = 256  # per requirement
MAX_TOLERATIONS = 64
MAX_HOST_PORTS = 64
MAX_HOST_IP = 45  # an IPv6 address's longest text form
MAX_INT64 = 2**63 - 1
MIN_INT64 = -(2**63)

LabelKey = Annotated[str, StringConstraints(strict=True, min_length=1, max_length=MAX_LABEL_KEY)]
LabelValue = Annotated[str, StringConstraints(strict=True, max_length=MAX_LABEL_VALUE)]
Labels = Annotated[dict[LabelKey, LabelValue], Field(max_length=MAX_LABELS)]
TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


def int64_text(text: str) -> bool:
    """Kubernetes' ``strconv.ParseInt(text, 10, 64)`` succeeds: an optional sign, decimal digits, 64 bits.

    >>> int64_text("42"), int64_text("-7"), int64_text("+3"), int64_text("4.5"), int64_text(""), int64_text("9" * 20)
    (True, True, True, False, False, False)
    """
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or not digits.isascii() or not digits.isdigit():
        return False
    return MIN_INT64 <= int(text) <= MAX_INT64


class Taint(Frozen):
    """A node's taint: pods that do not tolerate it are kept off (NoSchedule, NoExecute)."""

    key: LabelKey
    value: LabelValue = ""
    effect: TaintEffect


Taints = Annotated[list[Taint], Field(max_length=MAX_TAINTS)]


class Toleration(Frozen):
    """A pod's toleration (Kubernetes ``v1.Toleration`` without ``tolerationSeconds``, which only
    delays an eviction): an empty key with ``Exists`` tolerates every taint; an empty effect, every effect."""

    key: Annotated[str, StringConstraints(strict=True, max_length=MAX_LABEL_KEY)] = ""
    operator: Literal["Equal", "Exists"] = "Equal"
    value: LabelValue = ""
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = ""

    @model_validator(mode="after")
    def _as_kubernetes_validates(self) -> Toleration:
        if self.operator == "Exists" and self.value:
            raise ValueError("a toleration with operator Exists has no value")
        if not self.key and self.operator != "Exists":
            raise ValueError("a toleration without a key must have operator Exists")
        return self


class NodeSelectorRequirement(Frozen):
    """One requirement of a node selector term: a label (or, in ``match_fields``, ``metadata.name``)
    against values. In/NotIn take values, Exists/DoesNotExist none, Gt/Lt one integer."""

    key: LabelKey
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: Annotated[list[LabelValue], Field(max_length=MAX_VALUES)] = []

    @model_validator(mode="after")
    def _as_kubernetes_validates(self) -> NodeSelectorRequirement:
        op, values = self.operator, self.values
        if op in ("In", "NotIn") and not values:
            raise ValueError(f"operator {op} needs at least one value")
        if op in ("Exists", "DoesNotExist") and values:
            raise ValueError(f"operator {op} takes no values")
        if op in ("Gt", "Lt") and (len(values) != 1 or not int64_text(values[0])):
            raise ValueError(f"operator {op} takes exactly one value, an integer")
        return self


Requirements = Annotated[list[NodeSelectorRequirement], Field(max_length=MAX_REQUIREMENTS)]


class NodeSelectorTerm(Frozen):
    """A term of required node affinity: every requirement holds (terms are ORed). ``match_fields``
    reads ``metadata.name`` only, with In/NotIn and one value (as the API server validates)."""

    match_expressions: Requirements = []
    match_fields: Requirements = []

    @model_validator(mode="after")
    def _fields_are_the_node_name(self) -> NodeSelectorTerm:
        for req in self.match_fields:
            if req.key != "metadata.name" or req.operator not in ("In", "NotIn") or len(req.values) != 1:
                raise ValueError("match_fields: key metadata.name, operator In or NotIn, exactly one value")
        return self


class HostPort(Frozen):
    """A port the pod binds on its node's address ``host_ip`` ("" or "0.0.0.0": every address)."""

    port: Annotated[int, Field(strict=True, ge=1, le=65535)]
    protocol: Literal["TCP", "UDP", "SCTP"] = "TCP"
    host_ip: Annotated[str, StringConstraints(strict=True, max_length=MAX_HOST_IP)] = ""


class Constraints(Frozen):
    """Where an ask may run (Kubernetes' NodeAffinity, TaintToleration and NodePorts filters):
    a node passes when it has every ``node_selector`` label, matches one ``node_affinity`` term
    (None: no required affinity), tolerates its NoSchedule and NoExecute taints, and has the
    ``host_ports`` free."""

    node_selector: Labels = {}
    node_affinity: Annotated[list[NodeSelectorTerm], Field(min_length=1, max_length=MAX_TERMS)] | None = None
    tolerations: Annotated[list[Toleration], Field(max_length=MAX_TOLERATIONS)] = []
    host_ports: Annotated[list[HostPort], Field(max_length=MAX_HOST_PORTS)] = []


# ---------------------------------------------------------------- inputs (docs/contract.md §2)


class AppAdded(Frozen):
    app_id: Identifier
    queue: Annotated[str, StringConstraints(strict=True, max_length=1024)] = ""  # "": placement rules choose
    user: Annotated[str, StringConstraints(strict=True, max_length=253)]
    groups: list[Annotated[str, StringConstraints(strict=True, max_length=253)]] = []
    tags: Tags = {}
    partition: PartitionName = "default"
    # Gang scheduling (YuniKorn's AddApplicationRequest): the total of the app's placeholder asks
    # over all task groups, what to do when its placeholders time out, and after how long.
    placeholder_ask: ResourceMap = {}
    gang_scheduling_style: Literal["Soft", "Hard"] = "Soft"
    placeholder_timeout_ms: PlaceholderTimeoutMs = 0  # 0: YuniKorn's default, 15 minutes


class AppRemoved(Frozen):
    app_id: Identifier
    partition: PartitionName = "default"


class AskAdded(Frozen):
    app_id: Identifier
    ask_id: Identifier
    resources: ResourceMap
    priority: StrictInt | None = None  # range (int32) checked by the core: reason priority-range
    priority_class: Annotated[str, StringConstraints(strict=True, max_length=253)] | None = None
    required_node: Identifier | None = None
    tags: Tags = {}
    partition: PartitionName = "default"
    preempt_other: StrictBool | None = None  # None: from the priority class (PreemptLowerPriority)
    allow_preemption: StrictBool = True  # may this ask's allocation be a preemption victim
    placeholder: StrictBool = False  # a gang's placeholder, replaced later by a real ask of its task group
    task_group: TaskGroupName = ""  # the gang's task group ("": none)
    constraints: Constraints | None = None  # where it may run (None: any node its resources fit)


class AskRemoved(Frozen):
    app_id: Identifier
    ask_id: Identifier
    partition: PartitionName = "default"


class AllocationReleased(Frozen):
    app_id: Identifier
    ask_id: Identifier
    partition: PartitionName = "default"


class NodeAdded(Frozen):
    node_id: Identifier
    capacity: ResourceMap
    occupied: ResourceMap = {}
    schedulable: StrictBool = True
    attributes: Tags = {}
    partition: PartitionName = "default"
    labels: Labels | None = None  # None: none (Kubernetes' node labels, what constraints select on)
    taints: Taints | None = None  # None: none


class NodeUpdated(Frozen):
    node_id: Identifier
    capacity: ResourceMap | None = None
    occupied: ResourceMap | None = None
    schedulable: StrictBool | None = None
    partition: PartitionName = "default"
    labels: Labels | None = None  # None: unchanged; else the node's labels from now on
    taints: Taints | None = None  # None: unchanged; else the node's taints from now on


class NodeRemoved(Frozen):
    node_id: Identifier
    partition: PartitionName = "default"


class ConfigUpdated(Frozen):
    yaml: Annotated[str, StringConstraints(strict=True, max_length=MAX_RECORD_BYTES)]
    partition: PartitionName = "default"


class PriorityClassUpserted(Frozen):
    name: Annotated[str, StringConstraints(strict=True, min_length=1, max_length=253)]
    value: StrictInt
    global_default: StrictBool = False
    preemption_policy: Literal["Never", "PreemptLowerPriority"] = "Never"
    partition: PartitionName = "default"


class PriorityClassDeleted(Frozen):
    name: Annotated[str, StringConstraints(strict=True, min_length=1, max_length=253)]
    partition: PartitionName = "default"


InputData = (
    AppAdded
    | AppRemoved
    | AskAdded
    | AskRemoved
    | AllocationReleased
    | NodeAdded
    | NodeUpdated
    | NodeRemoved
    | ConfigUpdated
    | PriorityClassUpserted
    | PriorityClassDeleted
)

INPUT_DATA: dict[str, type[Frozen]] = {
    "app.added": AppAdded,
    "app.removed": AppRemoved,
    "ask.added": AskAdded,
    "ask.removed": AskRemoved,
    "allocation.released": AllocationReleased,
    "node.added": NodeAdded,
    "node.updated": NodeUpdated,
    "node.removed": NodeRemoved,
    "config.updated": ConfigUpdated,
    "priorityclass.upserted": PriorityClassUpserted,
    "priorityclass.deleted": PriorityClassDeleted,
}


# Input types that change the rules (queue configuration, priority classes): accepted only
# from the admin channel in cycles that name one (CycleStarted.admin_channels).
ADMIN_TYPES = frozenset({"config.updated", "priorityclass.upserted", "priorityclass.deleted"})


class InputEnvelope(Frozen):
    """The CloudEvents envelope of an input record, before ``data`` is typed."""

    specversion: Literal["1.0"] = "1.0"
    id: Annotated[str, StringConstraints(strict=True, min_length=1, max_length=253)]
    source: Annotated[str, StringConstraints(strict=True, min_length=1, max_length=253)]
    type: StrictStr
    time: StrictStr | None = None
    data: dict[str, Any]


class InputEvent(Frozen):
    """A decoded, validated input: envelope fields plus typed data and the resolved time.

    ``time_us`` is the event time in microseconds since the epoch: the envelope's ``time``
    when present, otherwise the log's append time.
    """

    id: str
    source: str
    type: str
    time_us: int
    data: InputData


# ---------------------------------------------------------------- outputs (docs/contract.md §3)


class AllocationDecided(Frozen):
    decision_id: str
    cycle: int
    ask_id: str
    app_id: str
    partition: str
    queue: str
    node_id: str
    resources: dict[str, int]
    priority: int


GANG_DECIDED_DEFAULTS: dict[str, Any] = {"placeholder": False, "task_group": "", "replaced_ask_id": None,
                                         "replaced_decision_id": None}


class GangDecided(AllocationDecided):
    """An ``allocation.decided`` of a gang (additive, docs/events.md): a placeholder, an ask of a
    task group, or a real ask that replaced a placeholder (``replaced_*``, on ``node_id``). Its
    fields at their defaults are left out of the JSON; a decision without any of them is a plain
    ``AllocationDecided`` (``events.codec.decode_output`` picks), so every other decision keeps its bytes."""

    placeholder: bool = False
    task_group: str = ""
    replaced_ask_id: str | None = None  # the placeholder this real allocation replaced (on node_id)
    replaced_decision_id: str | None = None

    @model_serializer(mode="wrap")
    def _drop_defaults(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        for key, default in GANG_DECIDED_DEFAULTS.items():
            if key in out and out[key] == default:
                del out[key]
        return out


class Preemptor(Frozen):
    """The ask a preemption was made for (in ``allocation.revoked``, reason ``preempted``)."""

    app_id: str
    ask_id: str
    queue: str


class AllocationRevoked(Frozen):
    """An allocation ends by the scheduler's decision; ``reason``: ``node-removed``, ``preempted``,
    ``quota-preempted`` (yunikorn-1.9: ``decision_id``, no preemptor), or a gang's (docs/events.md):
    ``placeholder-replaced``, ``placeholder-timeout``, ``app-failed``.

    For ``preempted`` also ``decision_id`` (the victim's) and ``preemptor`` (additive: both are
    left out of the JSON when absent, so other revocations keep their bytes)."""

    app_id: str
    ask_id: str
    node_id: str
    reason: str
    decision_id: str | None = None
    preemptor: Preemptor | None = None

    @model_serializer(mode="wrap")
    def _drop_absent(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        for key in ("decision_id", "preemptor"):
            if out.get(key) is None:
                out.pop(key, None)
        return out


class AskReserved(Frozen):
    """A node is held for one ask (additive, see docs/events.md); ``reason``: ``no-fit``,
    ``required-node``, ``preemption`` (the node where the preemptor's victims are released)."""

    app_id: str
    ask_id: str
    node_id: str
    reason: str


class AskUnreserved(Frozen):
    """A reservation ends; ``reason``: ``allocated``, ``removed``, ``node-removed``, ``required-node``,
    ``timeout``, ``preemption``, ``preemption-cancelled`` (the last three yunikorn-1.9 only)."""

    app_id: str
    ask_id: str
    node_id: str
    reason: str


class AskReleased(Frozen):
    """A pending ask the scheduler gave up (additive, docs/events.md); ``reason``:
    ``placeholder-timeout`` (its app's placeholders timed out before the gang started)."""

    app_id: str
    ask_id: str
    reason: str


AppState = Literal["New", "Accepted", "Starting", "Running", "Completing", "Completed", "Rejected", "Failed",
                   "Resuming", "Failing"]


class AppStateChanged(Frozen):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    app_id: str
    from_: AppState = Field(alias="from")
    to: AppState


class AppBackedOff(Frozen):
    """yunikorn-1.9's unschedulable-ask backoff (additive, docs/events.md): the app had ``asks``
    unschedulable asks in one try, as many as its queue's ``application.unschedasks.backoff``, so
    the walk skips it until ``until`` (log time: the cycle's time plus the queue's ``.delay``)."""

    app_id: str
    asks: int
    until: str


class AppPlaced(Frozen):
    """Where placement rules put a new app (additive, docs/events.md): the leaf and
    whether it was created dynamically for it."""

    app_id: str
    partition: str
    queue: str
    created: bool


class InputRejected(Frozen):
    input_id: str | None
    input_type: str | None
    reason: str
    message: str


class ConfigApplied(Frozen):
    checksum: str


class CycleStarted(Frozen):
    """Written first in every cycle's batch (additive, see docs/events.md): the inputs the
    cycle consumes and its time, so a cycle cut short by a crash can be re-run exactly."""

    cycle: int
    time: str
    inputs_from: dict[str, int]
    inputs_through: dict[str, int]
    rules_version: int = 1  # the scheduling rules that ran the cycle; absent in logs before it: 1
    # The input channels that may carry ADMIN_TYPES in this cycle; absent (None) in cycles
    # that accept them from any channel: logs written before the admin channel, or a
    # service run with --accept-admin-on-inputs. Written only when set (docs/events.md).
    admin_channels: list[str] | None = None


class CycleCompleted(Frozen):
    cycle: int
    time: str
    inputs_through: dict[str, int]
    decisions: int
    state_digest: str
    rules_version: int = 1  # as in CycleStarted
    # Partition → the rules profile it ran under, for the partitions not on the default
    # (yunikorn-1.5); absent (None) when every partition is on it, as in logs before the
    # field (docs/events.md). Written only when set.
    profiles: dict[str, str] | None = None


OutputData = (
    AllocationDecided
    | GangDecided
    | AllocationRevoked
    | AskReserved
    | AskUnreserved
    | AskReleased
    | AppStateChanged
    | AppBackedOff
    | AppPlaced
    | InputRejected
    | ConfigApplied
    | CycleStarted
    | CycleCompleted
)

OUTPUT_DATA: dict[str, type[Frozen]] = {
    "allocation.decided": AllocationDecided,
    "allocation.revoked": AllocationRevoked,
    "ask.reserved": AskReserved,
    "ask.unreserved": AskUnreserved,
    "ask.released": AskReleased,
    "app.state_changed": AppStateChanged,
    "app.backed_off": AppBackedOff,
    "app.placed": AppPlaced,
    "input.rejected": InputRejected,
    "config.applied": ConfigApplied,
    "cycle.started": CycleStarted,
    "cycle.completed": CycleCompleted,
}

OUTPUT_TYPE: dict[type[Frozen], str] = {model: name for name, model in OUTPUT_DATA.items()}
OUTPUT_TYPE[GangDecided] = "allocation.decided"


class OutputEvent(Frozen):
    """An output record: the envelope the scheduler publishes."""

    specversion: Literal["1.0"] = "1.0"
    id: str
    source: str
    type: str
    time: str
    data: OutputData
