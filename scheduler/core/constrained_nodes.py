"""The nodes an ask with node constraints may take: the first in node order that fits and passes,
and the one it would reserve.

Asks without constraints never come here: their search is the node index's ``first_fit`` and the
reservation candidates kept per request shape (``scheduler.core.reserve_candidates``), untouched.
A constrained ask's search takes the index's ``first_fit`` when it passes (the plain ask's cost),
else walks the index's nodes that hold its request, in order (``NodeIndex.fitting``: blocks whose
bounds rule it out are skipped), and checks each against its constraints until one passes:
O(fitting nodes before the first that passes), O(nodes that fit) when none does. Its reservation
looks at every indexed node (O(nodes), only for an ask that fits nowhere and may reserve). The
cycle's shape memos are read (a shape no free node holds, a constrained ask of it fits nowhere
either) but never written from a constrained ask's failure.
"""

from __future__ import annotations

from events.resources import Resources, fits
from scheduler.core.node_constraints import Constraints, excluded_by, first_failure
from scheduler.core.objects import Node
from scheduler.core.partition import PartitionState
from scheduler.core.reserve_candidates import fit_in_score


def node_excludes(c: Constraints, node: Node) -> str | None:
    """The constraint of ``c`` that ``node`` fails, in words (``node_constraints.excluded_by``), or None."""
    return excluded_by(c, node.node_id, node.labels, node.taints, node.host_ports)


def node_admits(c: Constraints, node: Node) -> bool:
    """``node`` passes ``c`` (``node_excludes`` is None, without wording the failure: the searches' check)."""
    return first_failure(c, node.node_id, node.labels, node.taints, node.host_ports) is None


def first_admitting(part: PartitionState, request: Resources, c: Constraints) -> Node | None:
    """The first node in order (schedulable, unreserved) that holds ``request`` and passes ``c``.

    The index's ``first_fit`` first: when that node passes (no taint, selector or port keeps the
    ask off it: a Kubernetes pod with nothing to say), the search costs what a plain ask's does;
    only otherwise are the nodes that fit walked one by one."""
    nodes = part.nodes
    first = part.index.first_fit(request)
    if first is None:
        return None  # no node holds it
    node = nodes[first]
    if node_admits(c, node):
        return node
    for node_id in part.index.fitting(request):
        node = nodes[node_id]
        if node_admits(c, node):
            return node
    return None


def reservable_admitting(part: PartitionState, request: Resources, c: Constraints) -> Node | None:
    """The node to reserve for a constrained ask, as ``ReserveCandidates.best`` picks among all
    nodes: of the indexed nodes whose capacity holds it and that pass ``c``, the lowest
    ``fit_in_score``, the first in node order on ties; None when there is none."""
    best: Node | None = None
    best_score = 0.0
    nodes = part.nodes
    for node_id in part.index.ordered():
        node = nodes[node_id]
        if not fits(request, node.capacity) or not node_admits(c, node):
            continue
        score = fit_in_score(request, node.indexed_available)
        if best is None or score < best_score:
            best, best_score = node, score
    return best

