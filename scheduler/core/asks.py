"""A pending ask, and an application's pending asks in allocation order: a sorted list typed for the compiler.

Order (``Ask.sort_key``): priority descending, then creation time ascending, then arrival
order (``seq``, unique per ask) — a total order. ``AskList`` keeps them in blocks of at
most 512 (an insert or removal moves one block's pointers); its comparisons read the
three fields directly, so no key tuple is built or stored per ask, and compiled (mypyc)
every call here is a C call — sortedcontainers' ``SortedKeyList``, which this replaces, is
interpreted Python that compiled code can only call through the interpreter.

>>> asks = AskList()
>>> for ask in (Ask("app", "a", {}, 5, 20, 2), Ask("app", "b", {}, 5, 10, 3), Ask("app", "c", {}, 9, 30, 4)):
...     asks.add(ask)
>>> [a.ask_id for a in asks], asks[0].ask_id, len(asks)
(['c', 'b', 'a'], 'c', 3)
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from events.resources import Resources
from scheduler.core.node_constraints import Constraints

Shape = tuple[tuple[str, int], ...]  # a request's items, in order: equal shapes fit the same nodes


def shape_of(resources: Resources) -> Shape:
    """A request's shape: what a cycle's memos key by (equal requests in equal item order).

    >>> shape_of({"vcore": 500, "memory": 1024})
    (('vcore', 500), ('memory', 1024))
    """
    return tuple(resources.items())


@dataclass(slots=True, eq=False)
class Ask:
    """A pending resource request of an application."""

    app_id: str
    ask_id: str
    resources: Resources
    priority: int
    created_us: int
    seq: int  # arrival order in the log: the last tie-break of every sort
    required_node: str | None = None
    priority_class: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    reserved_node: str | None = None  # the node held for this ask (scheduler.core.reservations)
    reserved_cycle: int = 0  # the cycle that made the reservation
    preempt_other: bool = False  # may preempt others (scheduler.core.preemption)
    allow_preemption: bool = True  # may its allocation be a victim
    preempt_check_us: int | None = None  # log time of the last preemption attempt
    preempt_triggered: bool = False  # victims were chosen for it: it never preempts again
    # The reserved node's ``version`` when this (reserved, plain) ask last failed to fit it
    # (-1: not since reserved); a cache for the reserved step, never state.
    fit_checked: int = -1
    placeholder: bool = False  # a gang's placeholder (scheduler.core.gang)
    task_group: str = ""  # its gang's task group ("": none)
    reserved_us: int = 0  # log time of the cycle that made the reservation (yunikorn-1.9's 60-minute timeout)
    constraints: Constraints | None = None  # where it may run (scheduler.core.node_constraints); None: anywhere

    # Written out (the dataclass's own would be the same): compiled, a native ``__init__``;
    # the one ``dataclass`` generates is interpreted, at ~0.6 µs per ask of the log.
    def __init__(
        self, app_id: str, ask_id: str, resources: Resources, priority: int, created_us: int, seq: int,
        required_node: str | None = None, priority_class: str | None = None, tags: dict[str, str] | None = None,
        reserved_node: str | None = None, reserved_cycle: int = 0, preempt_other: bool = False,
        allow_preemption: bool = True, preempt_check_us: int | None = None, preempt_triggered: bool = False,
        fit_checked: int = -1, placeholder: bool = False, task_group: str = "", reserved_us: int = 0,
        constraints: Constraints | None = None,
    ) -> None:
        self.app_id = app_id
        self.ask_id = ask_id
        self.resources = resources
        self.priority = priority
        self.created_us = created_us
        self.seq = seq
        self.required_node = required_node
        self.priority_class = priority_class
        self.tags = {} if tags is None else tags
        self.reserved_node = reserved_node
        self.reserved_cycle = reserved_cycle
        self.preempt_other = preempt_other
        self.allow_preemption = allow_preemption
        self.preempt_check_us = preempt_check_us
        self.preempt_triggered = preempt_triggered
        self.fit_checked = fit_checked
        self.placeholder = placeholder
        self.task_group = task_group
        self.reserved_us = reserved_us
        self.constraints = constraints

    def sort_key(self) -> tuple[int, int, int]:
        """Asks in an app: priority desc, then creation time asc, then arrival order.

        >>> a = Ask("app", "a", {"vcore": 1}, priority=5, created_us=20, seq=2)
        >>> b = Ask("app", "b", {"vcore": 1}, priority=5, created_us=10, seq=3)
        >>> c = Ask("app", "c", {"vcore": 1}, priority=9, created_us=30, seq=4)
        >>> [x.ask_id for x in sorted([a, b, c], key=Ask.sort_key)]
        ['c', 'b', 'a']
        """
        return (-self.priority, self.created_us, self.seq)


def before(a: Ask, b: Ask) -> bool:
    """``a.sort_key() < b.sort_key()``, field by field."""
    if a.priority != b.priority:
        return a.priority > b.priority
    if a.created_us != b.created_us:
        return a.created_us < b.created_us
    return a.seq < b.seq


class AskList:
    """Asks sorted by ``Ask.sort_key``: add, remove, index, iterate."""

    def __init__(self, load: int = 256) -> None:
        self._blocks: list[list[Ask]] = []
        self._len = 0
        self._load = load  # a block splits in halves above twice this
        # For the cycle's walk (``scheduler.core.cycle._hopeless``): how many asks have each
        # shape, and how many cannot be judged by their shape alone (a required node, node
        # constraints, or they may preempt). Counted at the first ``shape_counts`` call (only a full cluster
        # asks), then kept up to date; both fields are fixed while an ask is listed
        # (``update_ask`` takes the ask out to change its resources).
        self._shapes: dict[Shape, int] | None = None
        self._not_plain = 0

    def __len__(self) -> int:
        return self._len

    def __bool__(self) -> bool:
        return self._len > 0

    def __iter__(self) -> Iterator[Ask]:
        for block in self._blocks:
            yield from block

    def __getitem__(self, i: int) -> Ask:
        if i < 0:
            i += self._len
        if i < 0 or i >= self._len:
            raise IndexError("ask index out of range")
        for block in self._blocks:
            n = len(block)
            if i < n:
                return block[i]
            i -= n
        raise IndexError("ask index out of range")  # unreachable: the lengths sum to _len

    def shape_counts(self) -> tuple[dict[Shape, int], int]:
        """How many asks have each shape, and how many have a required node, constraints or may preempt.

        >>> asks = AskList()
        >>> asks.add(Ask("app", "a", {"vcore": 1}, 0, 0, 1)); asks.add(Ask("app", "b", {"vcore": 1}, 0, 0, 2))
        >>> asks.shape_counts()
        ({(('vcore', 1),): 2}, 0)
        """
        if self._shapes is None:
            shapes: dict[Shape, int] = {}
            self._not_plain = 0
            for block in self._blocks:
                for ask in block:
                    self._count(shapes, ask, 1)
            self._shapes = shapes
        return self._shapes, self._not_plain

    def _count(self, shapes: dict[Shape, int], ask: Ask, delta: int) -> None:
        shape = shape_of(ask.resources)
        left = shapes.get(shape, 0) + delta
        if left:
            shapes[shape] = left
        else:
            del shapes[shape]
        if ask.required_node is not None or ask.preempt_other or ask.constraints is not None:
            self._not_plain += delta

    def add(self, ask: Ask) -> None:
        """Insert ``ask`` after every ask not after it (as ``bisect_right``)."""
        if self._shapes is not None:
            self._count(self._shapes, ask, 1)
        blocks = self._blocks
        self._len += 1
        if not blocks:
            blocks.append([ask])
            return
        lo, hi = 0, len(blocks) - 1  # the first block whose last ask comes after ``ask``, else the last
        while lo < hi:
            mid = (lo + hi) >> 1
            if before(ask, blocks[mid][-1]):
                hi = mid
            else:
                lo = mid + 1
        block = blocks[lo]
        i, j = 0, len(block)
        while i < j:
            mid = (i + j) >> 1
            if before(ask, block[mid]):
                j = mid
            else:
                i = mid + 1
        block.insert(i, ask)
        load = self._load
        if len(block) > 2 * load:
            blocks[lo : lo + 1] = [block[:load], block[load:]]

    def set_resources(self, ask: Ask, resources: Resources) -> None:
        """Give ``ask`` (in the list) new resources: its place stays (the order reads no
        resources), its shape count moves."""
        if self._shapes is not None:
            self._count(self._shapes, ask, -1)
        ask.resources = resources
        if self._shapes is not None:
            self._count(self._shapes, ask, 1)

    def remove(self, ask: Ask) -> None:
        """Take out this very ask; ValueError when it is not in the list."""
        blocks = self._blocks
        lo, hi = 0, len(blocks)  # the first block whose last ask is not before ``ask``
        while lo < hi:
            mid = (lo + hi) >> 1
            if before(blocks[mid][-1], ask):
                lo = mid + 1
            else:
                hi = mid
        if lo < len(blocks):
            block = blocks[lo]
            i, j = 0, len(block)
            while i < j:
                mid = (i + j) >> 1
                if before(block[mid], ask):
                    i = mid + 1
                else:
                    j = mid
            if i < len(block) and block[i] is ask:
                del block[i]
                self._len -= 1
                if self._shapes is not None:
                    self._count(self._shapes, ask, -1)
                if not block:
                    del blocks[lo]
                return
        raise ValueError(f"ask {ask.ask_id!r} is not in the list")
