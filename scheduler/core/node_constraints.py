"""Where an ask may run: its node constraints (Kubernetes' node selector, required node affinity,
tolerations, host ports) against a node's labels, taints and host ports in use.

Pure and compiled. The semantics are Kubernetes' own (component-helpers ``nodeaffinity``,
``v1/helper`` ``ToleratesTaint``, the scheduler's ``NodePorts`` filter):

* ``node_selector``: the node has every label with that value;
* ``node_affinity``: the terms are ORed, a term's requirements ANDed (a term with none matches
  nothing); ``In``/``NotIn``/``Exists``/``DoesNotExist`` on labels (``NotIn`` holds when the label
  is absent), ``Gt``/``Lt`` compare the label read as an integer (a label that is not one fails);
  ``match_fields`` read ``metadata.name``, the node's id;
* tolerations: every ``NoSchedule`` and ``NoExecute`` taint (``PreferNoSchedule`` only scores) is
  tolerated by one toleration whose effect is empty or the taint's, whose key is the taint's
  (an empty key with ``Exists``: every key), and whose value is the taint's (``Equal``) or any (``Exists``);
* host ports: a wanted ``(protocol, port, ip)`` conflicts with one in use on the node for the
  same protocol and port when either address is ``0.0.0.0`` (every address) or they are equal.

``first_failure`` finds the first constraint a node fails, in kube-scheduler's filter order
(TaintToleration, NodeAffinity, NodePorts), or None when it passes; ``excluded_by`` names it —
what ``explain`` counts.
An ask without constraints (``Ask.constraints`` None: its event had none) never reaches this
module: it is placed by its resources alone, taints or not; one with constraints, even empty
ones, is kept off the nodes whose NoSchedule/NoExecute taints it does not tolerate.
"""

from __future__ import annotations

from typing import Final

from events.models import Constraints as ConstraintsModel
from events.models import Taint as TaintModel
from events.models import int64_text

IN: Final = 0
NOT_IN: Final = 1
EXISTS: Final = 2
DOES_NOT_EXIST: Final = 3
GT: Final = 4
LT: Final = 5
OPERATORS: Final = {"In": IN, "NotIn": NOT_IN, "Exists": EXISTS, "DoesNotExist": DOES_NOT_EXIST, "Gt": GT, "Lt": LT}
EVERY_ADDRESS: Final = "0.0.0.0"
FILTERING_EFFECTS: Final = frozenset({"NoSchedule", "NoExecute"})

NODE_SELECTOR: Final = "node selector mismatch"
NODE_AFFINITY: Final = "node affinity mismatch"

PortKey = tuple[str, int]  # (protocol, port)
HostPorts = dict[PortKey, dict[str, int]]  # (protocol, port) → address → allocations binding it


class Requirement:
    """One requirement of a term, compiled: the operator as a number, values as a set, Gt/Lt's bound."""

    __slots__ = ("bound", "key", "op", "values")

    def __init__(self, key: str, op: int, values: frozenset[str], bound: int) -> None:
        self.key = key
        self.op = op
        self.values = values
        self.bound = bound


class Term:
    """A node selector term: its label requirements and its ``metadata.name`` requirements."""

    __slots__ = ("expressions", "fields")

    def __init__(self, expressions: list[Requirement], fields: list[Requirement]) -> None:
        self.expressions = expressions
        self.fields = fields


class Toleration:
    __slots__ = ("effect", "exists", "key", "value")

    def __init__(self, key: str, exists: bool, value: str, effect: str) -> None:
        self.key = key
        self.exists = exists
        self.value = value
        self.effect = effect


class Taint:
    __slots__ = ("effect", "key", "value")

    def __init__(self, key: str, value: str, effect: str) -> None:
        self.key = key
        self.value = value
        self.effect = effect

    def text(self) -> str:
        """As ``kubectl`` writes it: ``key=value:Effect`` (``key:Effect`` without a value)."""
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


class Constraints:
    """An ask's node constraints, compiled from the event's ``Constraints`` once per ask."""

    __slots__ = ("host_ports", "selector", "terms", "tolerations", "wire")

    def __init__(self, selector: dict[str, str], terms: list[Term] | None, tolerations: list[Toleration],
                 host_ports: list[tuple[str, int, str]], wire: ConstraintsModel) -> None:
        self.selector = selector
        self.terms = terms
        self.tolerations = tolerations
        self.host_ports = host_ports  # (protocol, port, address), the address "0.0.0.0" for every one
        self.wire = wire  # the event's form: what snapshots keep


def _requirement(key: str, operator: str, values: list[str]) -> Requirement:
    op = OPERATORS[operator]
    bound = int(values[0]) if op in (GT, LT) else 0
    return Requirement(key, op, frozenset(values), bound)


def compile_constraints(model: ConstraintsModel) -> Constraints:
    """The core's form of an event's constraints. Even empty ones constrain: node taints keep an
    ask with constraints off (it tolerates nothing), while an ask without any (``constraints``
    absent from its event) is placed by its resources alone, as before constraints existed."""
    terms: list[Term] | None = None
    if model.node_affinity is not None:
        terms = [
            Term([_requirement(r.key, r.operator, r.values) for r in term.match_expressions],
                 [_requirement(r.key, r.operator, r.values) for r in term.match_fields])
            for term in model.node_affinity
        ]
    tolerations = [Toleration(t.key, t.operator == "Exists", t.value, t.effect) for t in model.tolerations]
    ports: list[tuple[str, int, str]] = [(str(p.protocol), p.port, p.host_ip or EVERY_ADDRESS)
                                         for p in model.host_ports]
    return Constraints(dict(model.node_selector), terms, tolerations, ports, model)


def compile_taints(models: list[TaintModel]) -> list[Taint]:
    return [Taint(t.key, t.value, t.effect) for t in models]


def _holds(req: Requirement, value: str | None) -> bool:
    """One requirement against the label's value (None: the node has no such label)."""
    op = req.op
    if op == IN:
        return value is not None and value in req.values
    if op == NOT_IN:
        return value is None or value not in req.values
    if op == EXISTS:
        return value is not None
    if op == DOES_NOT_EXIST:
        return value is None
    if value is None or not int64_text(value):
        return False
    return int(value) > req.bound if op == GT else int(value) < req.bound


def _term_matches(term: Term, node_id: str, labels: dict[str, str]) -> bool:
    if not term.expressions and not term.fields:
        return False  # an empty term selects nothing (Kubernetes)
    for req in term.expressions:
        if not _holds(req, labels.get(req.key)):
            return False
    return all(_holds(req, node_id if req.key == "metadata.name" else None) for req in term.fields)


def affinity_matches(terms: list[Term], node_id: str, labels: dict[str, str]) -> bool:
    """Required node affinity: some term matches."""
    return any(_term_matches(term, node_id, labels) for term in terms)


def tolerates(tolerations: list[Toleration], taint: Taint) -> bool:
    """Some toleration tolerates the taint (``v1.Toleration.ToleratesTaint``)."""
    for t in tolerations:
        if t.effect and t.effect != taint.effect:
            continue
        if t.key and t.key != taint.key:
            continue
        if t.exists or t.value == taint.value:
            return True
    return False


def untolerated(tolerations: list[Toleration], taints: list[Taint]) -> Taint | None:
    """The first NoSchedule/NoExecute taint not tolerated, or None."""
    for taint in taints:
        if taint.effect in FILTERING_EFFECTS and not tolerates(tolerations, taint):
            return taint
    return None


def port_conflict(wanted: list[tuple[str, int, str]], in_use: HostPorts) -> tuple[str, int, str] | None:
    """The first wanted host port already bound on the node, or None."""
    for protocol, port, address in wanted:
        bound = in_use.get((protocol, port))
        if bound and (address == EVERY_ADDRESS or EVERY_ADDRESS in bound or address in bound):
            return protocol, port, address
    return None


# What a node fails first: an untolerated taint, NODE_SELECTOR or NODE_AFFINITY, a wanted host port in use
Failure = Taint | str | tuple[str, int, str]


def first_failure(c: Constraints, node_id: str, labels: dict[str, str], taints: list[Taint],
                  host_ports: HostPorts) -> Failure | None:
    """The first constraint the node fails (kube-scheduler's filter order), or None when it passes.
    Nothing is formatted: the node searches ask this of node after node; ``excluded_by`` words it."""
    if taints:
        taint = untolerated(c.tolerations, taints)
        if taint is not None:
            return taint
    for key, value in c.selector.items():
        if labels.get(key) != value:
            return NODE_SELECTOR
    if c.terms is not None and not affinity_matches(c.terms, node_id, labels):
        return NODE_AFFINITY
    if c.host_ports and host_ports:
        return port_conflict(c.host_ports, host_ports)
    return None


def excluded_by(c: Constraints, node_id: str, labels: dict[str, str], taints: list[Taint],
                host_ports: HostPorts) -> str | None:
    """``first_failure`` in words (what ``explain`` counts), or None when the node passes."""
    failure = first_failure(c, node_id, labels, taints, host_ports)
    if failure is None or isinstance(failure, str):
        return failure
    if isinstance(failure, Taint):
        return f"untolerated taint {failure.text()}"
    protocol, port, address = failure
    where = "" if address == EVERY_ADDRESS else f" on {address}"
    return f"host port {protocol}/{port}{where} in use"


def bind_ports(in_use: HostPorts, ports: list[tuple[str, int, str]], sign: int) -> None:
    """Count an allocation's host ports in (``sign`` 1) or out (-1) of its node's ports in use."""
    for protocol, port, address in ports:
        key = (protocol, port)
        bound = in_use.get(key)
        if bound is None:
            bound = in_use[key] = {}
        left = bound.get(address, 0) + sign
        if left > 0:
            bound[address] = left
        else:
            bound.pop(address, None)
            if not bound:
                del in_use[key]


def ports_of_allocations(port_lists: list[list[tuple[str, int, str]]]) -> HostPorts:
    """A node's host ports in use folded from scratch (what the incremental count must equal)."""
    in_use: HostPorts = {}
    for ports in port_lists:
        bind_ports(in_use, ports, 1)
    return in_use
