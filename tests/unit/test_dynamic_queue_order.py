"""Dynamic queues keep their siblings in order without renumbering (issue 32).

The rule (``scheduler.core.dynamic_queues``): configured children first in config order,
then dynamic ones by name, whatever order they were created and removed in. The old code
re-derived it from scratch on every creation (renumbering every sibling: quadratic in the
number of tag-rule leaves); the property test checks the kept order against that fold after
every step of random creations and removals.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.config import load_config
from scheduler.core.dynamic_queues import DYNAMIC_ORDER_BASE, create_path, dynamic_order, prune
from scheduler.core.partition import PartitionState
from tests.sim import root_queues

CONFIG = root_queues("""
    - name: z
    - name: b
      parent: true
""")
NAMES = st.text("aAbZ09_:#/@-", min_size=1, max_size=4) | st.sampled_from(["a" * 64, "a" * 63 + "b", "b"])


def _partition() -> PartitionState:
    spec = load_config(CONFIG).partitions[0]
    return PartitionState(spec.name, spec.root, spec.node_sort_policy, spec.resource_weights)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.sampled_from(["root", "root.b"]), NAMES), max_size=40))
def test_children_stay_in_the_order_a_from_scratch_renumber_gives(steps: list[tuple[bool, str, str]]) -> None:
    part = _partition()
    configured = {p: [c.name for c in part.queues[p].children] for p in ("root", "root.b")}
    for create, parent, name in steps:
        path = f"{parent}.{name}"
        if create and path not in part.queues:
            create_path(part.queues, part.settings, path)
        elif not create and path in part.queues and part.settings[path].dynamic:
            assert prune(part.queues[path], part.queues, part.settings) == [path]
        for p in ("root", "root.b"):
            children = part.queues[p].children
            dynamic = sorted(c.name for c in children if part.settings[c.path].dynamic)
            assert [c.name for c in children] == configured[p] + dynamic
            orders = [c.order for c in children]
            assert orders == sorted(orders) and len(set(orders)) == len(orders)
            assert all((c.order >= DYNAMIC_ORDER_BASE) == part.settings[c.path].dynamic for c in children)


def test_a_dynamic_order_follows_the_name_and_every_configured_sibling() -> None:
    names = ["-", "0", "A", "Z", "_", "a", "a" * 64, "aa", "ab", "b", "team-1", "team-10", "team-2"]
    assert sorted(names, key=dynamic_order) == sorted(names)
    assert min(map(dynamic_order, names)) > DYNAMIC_ORDER_BASE
