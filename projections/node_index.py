"""The sorted node index: schedulable nodes in policy order, with a fast first-fit search.

Nodes are kept sorted by ``(policy key, node_id)`` in blocks of a few dozen entries.
Each block also keeps, per resource type, the column of its nodes' available quantities
and a bound on that column's maximum (never below it). A first-fit search walks the blocks
in order and skips any block whose bounds cannot hold the request, so nodes that cannot
fit are rarely looked at; an update moves one node (O(log n) to find it, O(block) memmove
in C). Removing a node leaves the bounds as they are — re-taking the maximum of the
column there was a sixth of an allocation — and a search that scans a block in vain
tightens that block's bounds to the exact maxima, so skipping stays as sharp as before.

A column lives while some indexed node has a non-zero quantity of its type: each column
counts them, and once as many columns are dead as alive (and at least ``MIN_DEAD``), the
dead ones are dropped from every block and vector at once (amortised: each dead column
cost a pass over the nodes to add). A search for a type without a column finds no node,
as a search for a type every node has at 0. So a node agent that sends thousands of
resource names and then others does not leave a column per name for every node.

The policy key each node sorts by (``fair``, ``binpacking``) is ``projections.policies``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Final

from projections.policies import NodeSortPolicy, score_of, weight_items

MIN_DEAD: Final = 16  # dead columns tolerated before any compaction


def _bisect(scores: list[float], ids: list[str], score: float, node_id: str) -> int:
    """The first position whose ``(score, id)`` is not below ``(score, node_id)``.

    As ``bisect_left`` over ``(score, id)`` tuples (scores are never NaN), without a tuple
    per key: compiled, the scores compare as C doubles and ids only on a tie.
    """
    lo, hi = 0, len(scores)
    while lo < hi:
        mid = (lo + hi) >> 1
        s = scores[mid]
        if s < score or (s == score and ids[mid] < node_id):
            lo = mid + 1
        else:
            hi = mid
    return lo


def _col_max(col: list[int]) -> int:
    """``max(col)`` (0 when empty) as a typed loop: compiled, unboxed int comparisons."""
    if not col:
        return 0
    m = col[0]
    for q in col:
        if q > m:
            m = q
    return m


class _Block:
    __slots__ = ("cols", "ids", "maxes", "scores")

    def __init__(self, scores: list[float], ids: list[str], cols: list[list[int]]) -> None:
        self.scores = scores  # policy keys, ascending; ties by id
        self.ids = ids
        self.cols = cols
        self.maxes = [_col_max(c) for c in cols]

    def tighten(self) -> None:
        """Bounds back to the exact column maxima."""
        self.maxes = [_col_max(c) for c in self.cols]

    def rules_out(self, want: list[tuple[int, int]]) -> bool:
        """The block's bounds show that none of its nodes holds ``want``."""
        maxes = self.maxes
        return any(maxes[d] < q for d, q in want)

    def first_holding(self, want: list[tuple[int, int]], start: int) -> int:
        """The row of the first node from ``start`` on whose availability holds ``want`` (-1: none)."""
        cols = self.cols
        for i in range(start, len(self.ids)):
            if all(cols[d][i] >= q for d, q in want):
                return i
        return -1

    def first_row(self, want: list[tuple[int, int]]) -> int:
        """The row of the first node whose availability holds ``want``, or -1: the bounds rule the
        block out, or a scan found none (the bounds were loose: they are tightened)."""
        if self.rules_out(want):
            return -1
        i = self.first_holding(want, 0)
        if i < 0:
            self.tighten()
        return i


class NodeIndex:
    """Schedulable nodes sorted by policy key, searchable for the first node that fits."""

    def __init__(self, policy: NodeSortPolicy, weights: Mapping[str, float], block_size: int = 32) -> None:
        self.policy = policy
        self.weights = dict(weights)
        self._weight_items = weight_items(weights)  # computed once: key_of runs per allocation
        self._fair = policy is NodeSortPolicy.FAIR
        self._block_size = block_size
        self._blocks: list[_Block] = []
        # The last key of every block, for the bisect that finds a key's block.
        self._last_scores: list[float] = []
        self._last_ids: list[str] = []
        self._keys: dict[str, float] = {}  # node id -> its current policy key
        self._dims: dict[str, int] = {}
        self._avail: dict[str, list[int]] = {}  # node id -> available per dim
        self._users: list[int] = []  # per dim: indexed nodes with a non-zero quantity in it
        self._dead = 0  # dims whose count is 0
        # Per dim, a bound on every indexed node's available (never below the maximum): a
        # request above it in any dim fits nowhere, found without a look at any block. Raised
        # as nodes are indexed; made exact (the blocks' bounds) by a search that finds nothing.
        self._bound: list[int] = []

    def columns(self) -> int:
        """Resource-type columns held now (live and not yet dropped)."""
        return len(self._dims)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._keys

    def key(self, node_id: str) -> float | None:
        """The node's current policy key (its place in the order, with its id), or None when not indexed."""
        return self._keys.get(node_id)

    def key_of(self, capacity: dict[str, int], available: dict[str, int]) -> float:
        """The policy key a node with this capacity and availability gets (as ``node_sort_key``)."""
        score = score_of(capacity, available, self._weight_items)
        return score if self._fair else 1.0 - score

    def _dim(self, name: str) -> int:
        dim = self._dims.get(name)
        if dim is None:
            dim = self._dims[name] = len(self._dims)
            self._users.append(0)
            self._dead += 1  # until a vector counts a quantity in it
            for block in self._blocks:
                block.cols.append([0] * len(block.ids))
                block.maxes.append(0)
            for vec in self._avail.values():
                vec.append(0)
            self._bound.append(0)
        return dim

    def _vector(self, available: dict[str, int]) -> list[int]:
        dims = self._dims
        vec = [0] * len(dims)
        for name, qty in available.items():
            d = dims.get(name)
            if d is None:  # a new type: one more column everywhere, this vector included
                d = self._dim(name)
                vec.append(0)
            vec[d] = qty
        return vec

    def upsert(self, node_id: str, capacity: dict[str, int], available: dict[str, int]) -> None:
        """Insert a node, or move it to where its new usage puts it."""
        if node_id in self._keys:
            self.remove(node_id)
        score = self.key_of(capacity, available)
        vec = self._vector(available)
        self._count(vec, 1)
        self._keys[node_id] = score
        self._avail[node_id] = vec
        bound = self._bound
        for d, q in enumerate(vec):
            if q > bound[d]:
                bound[d] = q
        if not self._blocks:
            self._blocks.append(_Block([score], [node_id], [[q] for q in vec]))
            self._last_scores.append(score)
            self._last_ids.append(node_id)
            return
        b = _bisect(self._last_scores, self._last_ids, score, node_id)
        if b == len(self._blocks):
            b -= 1
        block = self._blocks[b]
        i = _bisect(block.scores, block.ids, score, node_id)
        block.scores.insert(i, score)
        block.ids.insert(i, node_id)
        maxes = block.maxes
        for d, q in enumerate(vec):
            block.cols[d].insert(i, q)
            if q > maxes[d]:
                maxes[d] = q
        self._last_scores[b] = block.scores[-1]
        self._last_ids[b] = block.ids[-1]
        if len(block.ids) > 2 * self._block_size:
            self._split(b)

    def _split(self, b: int) -> None:
        block = self._blocks[b]
        half = len(block.ids) // 2
        left = _Block(block.scores[:half], block.ids[:half], [c[:half] for c in block.cols])
        right = _Block(block.scores[half:], block.ids[half:], [c[half:] for c in block.cols])
        self._blocks[b : b + 1] = [left, right]
        self._last_scores[b : b + 1] = [left.scores[-1], right.scores[-1]]
        self._last_ids[b : b + 1] = [left.ids[-1], right.ids[-1]]

    def remove(self, node_id: str) -> None:
        """Take a node out of the index (no-op when absent)."""
        score = self._keys.pop(node_id, None)
        if score is None:
            return
        self._count(self._avail.pop(node_id), -1)
        b = _bisect(self._last_scores, self._last_ids, score, node_id)
        block = self._blocks[b]
        i = _bisect(block.scores, block.ids, score, node_id)
        del block.scores[i]
        del block.ids[i]
        for col in block.cols:
            del col[i]  # the bound in block.maxes stays valid: it only has to be ≥ the maximum
        if block.ids:
            self._last_scores[b] = block.scores[-1]
            self._last_ids[b] = block.ids[-1]
        else:
            del self._blocks[b]
            del self._last_scores[b]
            del self._last_ids[b]
        if self._dead >= MIN_DEAD and self._dead * 2 >= len(self._dims):
            self._compact()

    def _count(self, vec: list[int], sign: int) -> None:
        users = self._users
        for d, q in enumerate(vec):
            if q:
                before = users[d]
                users[d] = before + sign
                if before == 0:
                    self._dead -= 1
                elif before + sign == 0:
                    self._dead += 1

    def _compact(self) -> None:
        """Drop every dead column from the dims, the blocks and the vectors."""
        keep = [d for d in range(len(self._users)) if self._users[d]]
        names = sorted(self._dims, key=self._dims.__getitem__)
        self._dims = {names[d]: i for i, d in enumerate(keep)}
        self._users = [self._users[d] for d in keep]
        self._dead = 0
        for block in self._blocks:
            block.cols = [block.cols[d] for d in keep]
            block.maxes = [block.maxes[d] for d in keep]
        self._bound = [self._bound[d] for d in keep]
        for node_id, vec in self._avail.items():
            self._avail[node_id] = [vec[d] for d in keep]

    def _wanted(self, request: dict[str, int]) -> list[tuple[int, int]] | None:
        """The request's positive quantities by column, or None when no node can hold it (a type
        no node has, or a quantity above every node's available in its column)."""
        dims = self._dims
        want: list[tuple[int, int]] = []
        for name, qty in request.items():
            if qty <= 0:
                continue
            d = dims.get(name)
            if d is None:
                return None
            want.append((d, qty))
        bound = self._bound
        for d, q in want:
            if bound[d] < q:
                return None
        return want

    def first_fit(self, request: dict[str, int]) -> str | None:
        """The id of the first node in order whose availability holds the request."""
        want = self._wanted(request)
        if want is None:
            return None
        if not want:
            return self._blocks[0].ids[0] if self._blocks else None
        found = self._first_fit2(want[0], want[1]) if len(want) == 2 else self._first_fit_any(want)
        if found is None:
            self._tighten_bound()
        return found

    def _first_fit_any(self, want: list[tuple[int, int]]) -> str | None:
        for block in self._blocks:
            i = block.first_row(want)
            if i >= 0:
                return block.ids[i]
        return None

    def _tighten_bound(self) -> None:
        """The bound back to the blocks' bounds (a search that found nothing has looked at them all)."""
        bound = [0] * len(self._bound)
        for block in self._blocks:
            maxes = block.maxes
            for d in range(len(bound)):
                if maxes[d] > bound[d]:
                    bound[d] = maxes[d]
        self._bound = bound

    def _first_fit2(self, first: tuple[int, int], second: tuple[int, int]) -> str | None:
        # The common case (vcore + memory) unrolled: this loop is the allocation hot path.
        d0, q0 = first
        d1, q1 = second
        for block in self._blocks:
            maxes = block.maxes
            if maxes[d0] < q0 or maxes[d1] < q1:
                continue
            col0 = block.cols[d0]
            col1 = block.cols[d1]
            for i in range(len(col0)):
                if col0[i] >= q0 and col1[i] >= q1:
                    return block.ids[i]
            block.tighten()  # scanned in vain: its bounds were loose
        return None

    def fitting(self, request: dict[str, int]) -> Iterator[str]:
        """The ids of the nodes whose availability holds the request, in order: ``first_fit``
        and the ones after it, skipping the blocks whose bounds rule them out (for asks that
        take the first of these that passes their node constraints)."""
        want = self._wanted(request)
        if want is None:
            return
        for block in self._blocks:
            i = block.first_row(want)
            while i >= 0:
                yield block.ids[i]
                i = block.first_holding(want, i + 1)

    def ordered(self) -> Iterator[str]:
        """Node ids in index order (schedulable nodes only)."""
        for block in self._blocks:
            yield from block.ids

    def check(self) -> None:
        """Assert the internal invariants (sortedness, maxima, bookkeeping); for tests."""
        keys = [(s, n) for block in self._blocks for s, n in zip(block.scores, block.ids, strict=True)]
        assert keys == sorted(keys), "blocks out of order"
        assert len(keys) == len(self._keys) == len(set(keys))
        assert len(self._last_scores) == len(self._last_ids) == len(self._blocks)
        for b, block in enumerate(self._blocks):
            assert block.ids and len(block.scores) == len(block.ids)
            assert (self._last_scores[b], self._last_ids[b]) == (block.scores[-1], block.ids[-1])
            for d, col in enumerate(block.cols):
                assert len(col) == len(block.ids)
                assert block.maxes[d] >= max(col)
                assert self._bound[d] >= max(col)
            for i, node_id in enumerate(block.ids):
                assert self._keys[node_id] == block.scores[i]
                assert [c[i] for c in block.cols] == self._avail[node_id]
        users = [sum(1 for vec in self._avail.values() if vec[d]) for d in range(len(self._dims))]
        assert users == self._users, "column use counts"
        assert self._dead == users.count(0)
        assert sorted(self._dims.values()) == list(range(len(self._dims)))
