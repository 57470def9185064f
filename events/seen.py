"""The seen input ids: which (source, id) pairs were applied, within bounded windows.

docs/contract.md §1: a repeated (source, id) pair is a duplicate and is ignored. Remembering every
id for ever made the set grow with the log and be rewritten into every snapshot, so two
rules bound it, both functions of the log alone (the order inputs were applied in):

* each source's last ``SEEN_WINDOW`` applied ids are remembered, in log order; an id older
  than its source's window is applied as a new event;
* at most ``SEEN_TOTAL`` ids are remembered across all sources: when an applied id takes the
  total over it, the oldest id of the source that has gone longest without an applied input
  is forgotten, and a source left without ids is forgotten altogether. So a source that goes
  quiet loses its window, oldest first, while others keep sending; the sources remembered
  are at most ``SEEN_TOTAL``.

Each add is O(1) however long a source keeps sending (a dict evicting from its front, as
before, re-scanned its deleted slots on every eviction until the next resize: a sawtooth
from 0.7 to 26 s per 100,000 events past the first million).

Snapshots keep each source's ids in log order and the sources in the order of their last
applied input (least recent first), so live, replay and a restored engine evict alike.

Worked example, window 3, total 4: ``rm`` applies 1, 2, 3, 4 → remembers 2, 3, 4; a
repeated 3 is a duplicate, a repeated 1 is applied again (→ 3, 4, 1). Then ``b`` applies
x and y: the total would be 5, so ``rm``, the least recently active source, forgets 3.
"""

from __future__ import annotations

from collections import OrderedDict, deque

SEEN_WINDOW = 1_000_000  # ids remembered per source (docs/events.md)
SEEN_TOTAL = 2_000_000  # ids remembered across all sources (docs/events.md)


class _Window:
    """One source's remembered ids: a set to look up, a queue in log order to evict from."""

    __slots__ = ("ids", "order")

    def __init__(self) -> None:
        self.ids: set[str] = set()
        self.order: deque[str] = deque()


class SeenIds:
    """Per source, the last ``window`` applied ids in log order, ``total`` at most in all (module docstring)."""

    __slots__ = ("by_source", "count", "last", "total", "window")

    def __init__(self, window: int | None = None, total: int | None = None) -> None:
        self.window = SEEN_WINDOW if window is None else window
        self.total = SEEN_TOTAL if total is None else max(total, self.window)
        # least recently active source first (the order the total evicts in)
        self.by_source: OrderedDict[str, _Window] = OrderedDict()
        self.count = 0  # ids remembered across sources
        self.last = ""  # the source of the last applied id ("" before any; sources are non-empty)

    def add(self, source: str, event_id: str) -> bool:
        """Remember an applied id; False when it is a duplicate (within the windows)."""
        by_source = self.by_source
        win = by_source.get(source)
        if win is None:
            win = by_source[source] = _Window()
        elif event_id in win.ids:
            return False
        elif source != self.last:
            by_source.move_to_end(source)
        self.last = source
        win.ids.add(event_id)
        win.order.append(event_id)
        if len(win.order) > self.window:
            win.ids.discard(win.order.popleft())
        else:
            self.count += 1
            if self.count > self.total:
                self._forget_oldest()
        return True

    def _forget_oldest(self) -> None:
        """The oldest id of the least recently active source (never the one just added to:
        the total is at least one window, so another source holds ids)."""
        source, win = next(iter(self.by_source.items()))
        win.ids.discard(win.order.popleft())
        self.count -= 1
        if not win.order:
            del self.by_source[source]

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, tuple) or len(key) != 2:
            return False
        win = self.by_source.get(key[0])
        return win is not None and key[1] in win.ids

    def __len__(self) -> int:
        return self.count

    def grouped(self) -> dict[str, list[str]]:
        """Ids by source, each list in log order, the sources least recently active first (the snapshot form)."""
        return {source: list(win.order) for source, win in self.by_source.items()}

    @classmethod
    def from_grouped(cls, grouped: dict[str, list[str]], window: int | None = None,
                     total: int | None = None) -> SeenIds:
        """Back from ``grouped`` (a snapshot; its order is the eviction order); the bounds are today's."""
        seen = cls(window, total)
        for source, ids in grouped.items():
            for event_id in ids:
                seen.add(source, event_id)
        return seen
