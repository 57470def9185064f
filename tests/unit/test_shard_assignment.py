"""Shards: the group assignor's rules, shard topic names, and submit's routing (no broker)."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from events.log.kafka import MemberShards, assign_shards, shard_topics
from scheduler.cli.settings import partition_names
from scheduler.cli.shards import route, shard_source


def member(*shards: str, held: dict[str, int] | None = None) -> MemberShards:
    return MemberShards({s: (f"in.{s}",) for s in shards}, held or {})


def test_two_fresh_members_split_two_shards() -> None:
    assert assign_shards({"m1": member("a", "b"), "m2": member("a", "b")}) == {"m1": ["a"], "m2": ["b"]}


def test_a_joining_member_takes_only_what_exceeds_the_holders_fair_share() -> None:
    # The module docstring's worked example: m1 runs both; m2 joins.
    both = {"a": 3, "b": 3}
    assert assign_shards({"m1": member("a", "b", held=both), "m2": member("a", "b")}) == {"m1": ["a"], "m2": ["b"]}
    # Sticky the other way round too: m2 already holds a, so a stays there.
    got = assign_shards({"m1": member("a", "b", held={"b": 4}), "m2": member("a", "b", held={"a": 4})})
    assert got == {"m1": ["b"], "m2": ["a"]}


def test_claims_beyond_the_fair_share_are_given_up() -> None:
    # 4 shards, 3 members: shares 2, 1, 1 — not 2, 2, 0 as a plain ceiling cap would leave it.
    got = assign_shards({
        "m1": member("a", "b", "c", "d", held={"a": 1, "b": 1}),
        "m2": member("a", "b", "c", "d", held={"c": 1, "d": 1}),
        "m3": member("a", "b", "c", "d"),
    })
    assert got == {"m1": ["a", "b"], "m2": ["c"], "m3": ["d"]}


def test_the_survivor_takes_every_shard() -> None:
    assert assign_shards({"m2": member("a", "b", held={"b": 5})}) == {"m2": ["a", "b"]}


def test_newest_claim_wins_over_a_stale_one() -> None:
    # m1 was expelled holding a (generation 2), m2 got a in generation 4; m1 comes back.
    got = assign_shards({"m1": member("a", held={"a": 2}), "m2": member("a", held={"a": 4})})
    assert got == {"m1": [], "m2": ["a"]}


def test_only_members_that_may_run_a_shard_get_it() -> None:
    got = assign_shards({"m1": member("a", "b"), "m2": member("b"), "m3": member()})
    assert got == {"m1": ["a"], "m2": ["b"], "m3": []}


def test_unreadable_user_data_is_a_member_that_runs_nothing() -> None:
    assert MemberShards.decode(b"not json").topics == {}
    spec = member("a", held={"a": 7})
    assert MemberShards.decode(spec.encode()) == spec


@settings(max_examples=300)
@given(
    st.dictionaries(
        st.sampled_from(["m1", "m2", "m3", "m4"]),
        st.tuples(st.sets(st.sampled_from("abcdef")), st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 9))),
        min_size=1,
    )
)
def test_every_shard_goes_to_exactly_one_eligible_member(raw: dict[str, tuple[set[str], dict[str, int]]]) -> None:
    members = {m: member(*sorted(shards), held=held) for m, (shards, held) in raw.items()}
    got = assign_shards(members)
    assert set(got) == set(members)
    owners: dict[str, str] = {}
    for m, shards in got.items():
        for s in shards:
            assert s in members[m].topics, f"{s} given to {m}, which may not run it"
            assert s not in owners, f"{s} given twice"
            owners[s] = m
    assert set(owners) == {s for spec in members.values() for s in spec.topics}
    assert assign_shards(dict(reversed(members.items()))) == got  # the same answer in any member order
    # Balanced when everyone may run everything: loads differ by at most one.
    if len({frozenset(spec.topics) for spec in members.values()}) == 1:
        loads = [len(s) for s in got.values()]
        assert max(loads) - min(loads) <= 1


def test_shard_topic_names() -> None:
    default = shard_topics("default")
    assert (default.inputs, default.decisions, default.deadletter) == (
        ("evsched.inputs",), "evsched.decisions", "evsched.deadletter")
    gpu = shard_topics("gpu", input_topics=["a", "b"], decisions_topic="d")
    assert (gpu.inputs, gpu.decisions, gpu.deadletter) == (("a.gpu", "b.gpu"), "d.gpu", "evsched.deadletter.gpu")
    with pytest.raises(ValueError, match="partition name"):
        shard_topics("no/slash")
    assert (shard_source("default"), shard_source("gpu")) == ("evsched", "evsched/gpu")


def test_partition_names_accept_repeats_and_comma_lists() -> None:
    assert partition_names(["a,b", "b", " c "]) == ("a", "b", "c")
    assert partition_names(None) == ()


def test_submit_routes_by_partition_and_broadcasts_config_and_priority_classes() -> None:
    def rec(i: int, kind: str, **data: object) -> tuple[bytes, bytes]:
        return b"k", orjson.dumps({"id": f"e{i}", "source": "s", "type": kind, "data": data})

    cfg = rec(0, "config.updated", yaml="partitions: []")
    pc = rec(1, "priorityclass.upserted", name="high", value=10)
    node_a = rec(2, "node.added", node_id="n", capacity={}, partition="a")
    node_default = rec(3, "node.added", node_id="n", capacity={})
    stray = rec(4, "node.added", node_id="n", capacity={}, partition="zzz")
    routed, errors = route([cfg, pc, node_a, node_default, stray], ["a", "default"])
    assert routed == {"a": [cfg, pc, node_a], "default": [cfg, pc, node_default]}
    assert len(errors) == 1 and "'zzz'" in errors[0]


@settings(max_examples=300)
@given(
    st.sets(st.sampled_from("abcdefgh"), min_size=1),
    st.dictionaries(st.sampled_from(["m1", "m2", "m3", "m4"]), st.dictionaries(st.sampled_from("abcdefgh"),
                                                                             st.integers(0, 9)), min_size=1),
)
def test_members_that_may_run_the_same_shards_get_loads_within_one(
    shards: set[str], claims: dict[str, dict[str, int]]
) -> None:
    members = {m: member(*sorted(shards), held={s: g for s, g in held.items() if s in shards})
               for m, held in claims.items()}
    loads = [len(s) for s in assign_shards(members).values()]
    assert sum(loads) == len(shards)
    assert max(loads) - min(loads) <= 1
