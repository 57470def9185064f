"""Hostile-input strategies and values shared by the hypothesis fuzz and security tests (tests/unit).

Values are chosen to hit the edges the decoder, the config loader and the log reader must
survive: int32/int64/uint64 edges and integers past what JSON parsers handle, strings at
and past the length limits, identifiers that would be path traversal or MQTT wildcards,
control and non-characters, deep nesting. Events start valid and are then mutated, so most
examples get past JSON parsing and exercise the field validators and the core.
"""

from __future__ import annotations

import json
from typing import Any, cast

from hypothesis import strategies as st

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

EDGE_INTS = [
    0, 1, -1,
    INT32_MIN, INT32_MAX, INT32_MIN - 1, INT32_MAX + 1,
    INT64_MIN, INT64_MAX, INT64_MIN - 1, INT64_MAX + 1,
    2**64 - 1, 2**64, 10**30, -(10**30), 10**400,
    1_000_000_000, 1_000_000_001, 2_000_000_000, 2_000_001_000,
]  # fmt: skip

# Identifiers that must never reach a file name or a topic level as they are.
HOSTILE_IDS = [
    "", ".", "..", "../../x", "..\\..\\x", "a/b", "/abs", "+", "#", "a+b", "a#b", "evsched/+/#",
    "\x00", "a\x00b", "\n", "\r\n", "\t", "\x7f", "\x85", "\u2028", "\ufeff", "\ufffe", "\uffff",
    "\U0010ffff", "\ufdd0", "%00", "%2F", "%", "CON", "nul", " ", "x" * 253, "x" * 254, "x" * 10_000,
    "é", "😀" * 64, "日本語", "\u202eevil",
]  # fmt: skip

EDGE_STRINGS = [*HOSTILE_IDS, "default", "root", "root.default", "x" * 4096, "x" * 4097, "1970-01-01T00:00:00Z"]

EDGE_TIMES = [
    "1970-01-01T00:00:00Z", "0001-01-01T00:00:00Z", "0001-01-01T00:00:00+01:00", "0001-01-01T00:59:59+01:00",
    "9999-12-31T23:59:59Z", "9999-12-31T23:59:59-01:00", "9998-12-31T23:59:59Z", "2024-02-30T00:00:00Z",
    "2024-01-01T00:00:00", "2024-01-01T25:00:00Z", "2024-01-01T00:00:00+24:00", "2024-01-01T00:00:00.123456789Z",
    "2024-01-01", "2024-W01-1T00:00Z", "yesterday", "", "2024-01-01T00:00:00Z" * 1000,
]  # fmt: skip

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from(EDGE_INTS),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(EDGE_STRINGS),
    st.text(max_size=40),
)

json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)

ids = st.one_of(st.sampled_from(HOSTILE_IDS), st.text(min_size=1, max_size=20), st.just("a1"))
resources = st.dictionaries(
    st.one_of(st.sampled_from(["vcore", "memory", "gpu", "", "x" * 300]), st.text(max_size=8)),
    st.one_of(st.sampled_from(EDGE_INTS), st.integers(0, 10**6), scalars),
    max_size=4,
)


def _valid_events() -> st.SearchStrategy[dict[str, Any]]:
    """One valid input event of every type (the mutations below make them hostile)."""
    res = {"vcore": 1000, "memory": 2**30}
    datas = {
        "app.added": {"app_id": "a1", "queue": "root.default", "user": "u", "groups": ["g"], "tags": {"k": "v"}},
        "app.removed": {"app_id": "a1"},
        "ask.added": {"app_id": "a1", "ask_id": "k1", "resources": res, "priority": 5, "tags": {}},
        "ask.removed": {"app_id": "a1", "ask_id": "k1"},
        "allocation.released": {"app_id": "a1", "ask_id": "k1"},
        "node.added": {"node_id": "n1", "capacity": {"vcore": 8000, "memory": 2**34}, "attributes": {}},
        "node.updated": {"node_id": "n1", "occupied": res, "schedulable": True},
        "node.removed": {"node_id": "n1"},
        "config.updated": {"yaml": "partitions:\n  - name: default\n    queues:\n      - name: root\n"
                                   "        submitacl: '*'\n        queues:\n          - name: default\n"},
        "priorityclass.upserted": {"name": "pc", "value": 10, "global_default": False},
        "priorityclass.deleted": {"name": "pc"},
    }  # fmt: skip
    envelope = {"specversion": "1.0", "id": "e1", "source": "fuzz", "time": "2024-01-01T00:00:00Z"}
    return st.sampled_from(sorted(datas)).map(
        lambda t: envelope | {"type": t, "data": dict(cast(dict[str, Any], datas[t]))}
    )


def _field_value(key: str) -> st.SearchStrategy[Any]:
    if key in ("app_id", "ask_id", "node_id", "required_node", "id", "source", "partition", "name"):
        return st.one_of(ids, scalars)
    if key in ("capacity", "occupied", "resources"):
        return st.one_of(resources, scalars)
    if key in ("priority", "value"):
        return st.one_of(st.sampled_from(EDGE_INTS), st.integers(INT32_MIN - 2, INT32_MAX + 2), scalars)
    if key == "time":
        return st.one_of(st.sampled_from(EDGE_TIMES), scalars)
    if key == "yaml":
        return st.one_of(st.sampled_from(HOSTILE_YAML), st.text(max_size=60), scalars)
    return st.one_of(scalars, json_values)


@st.composite
def hostile_events(draw: st.DrawFn) -> dict[str, Any]:
    """A valid event with a few fields replaced by hostile values, removed, or added."""
    event = draw(_valid_events())
    for _ in range(draw(st.integers(0, 3))):
        target = draw(st.sampled_from(["envelope", "data"]))
        obj = event if target == "envelope" or not isinstance(event.get("data"), dict) else event["data"]
        keys = sorted(obj)
        action = draw(st.sampled_from(["replace", "replace", "replace", "drop", "add"]))
        if action == "replace" and keys:
            key = draw(st.sampled_from(keys))
            obj[key] = draw(_field_value(key))
        elif action == "drop" and keys:
            del obj[draw(st.sampled_from(keys))]
        else:
            obj[draw(st.sampled_from(["extra", "required_node", "priority_class", "partition", "type"]))] = draw(
                json_values
            )
    return event


def to_json_bytes(obj: Any) -> bytes:
    """JSON text the stdlib way: integers of any size, ``NaN``/``Infinity``, lone surrogates escaped.

    Unlike orjson (which refuses to write them) this produces exactly the hostile text a
    foreign producer could send.
    """
    return json.dumps(obj, ensure_ascii=False).encode("utf-8", "surrogatepass")


def nested(depth: int, open_: str = "[", close: str = "]") -> bytes:
    """``depth`` levels of nesting, e.g. ``[[[…]]]``."""
    return (open_ * depth + close * depth).encode()


# ---------------------------------------------------------------- YAML

BILLION_LAUGHS = "\n".join(
    [
        'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
        *(
            f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]"
            for i in range(8)
        ),
        "partitions: [*i]",
    ]
)

HOSTILE_YAML = [
    "",
    "---\n",
    "- a\n- b\n",
    "just a string",
    "42",
    "null",
    "!!binary aGVsbG8=",
    "!!python/object/apply:os.system ['true']",
    "!!python/name:os.system",
    "partitions: !!python/object/new:dict {}",
    "a: 1\n---\nb: 2\n",
    "a: 1\na: 2\n",
    "<<: {a: 1}\n",
    "{[1]: 2}",
    "a: &x [*x]\n",
    BILLION_LAUGHS,
    "[" * 5000 + "]" * 5000,
    "{a: " * 200 + "1" + "}" * 200,
    "partitions:\n  - name: default\n    queues:\n      - name: root\n        maxapplications: " + "9" * 5000 + "\n",
    "partitions:\n  - name: default\n    nodesortpolicy: {type: binpacking, resourceweights: {vcore: "
    + "9" * 400
    + "}}\n",
    "checksum: 2001-13-45\n",
    "checksum: 2001-02-30T00:00:00Z\n",
    "partitions: [{name: default, queues: [{name: root, maxapplications: 1e999}]}]\n",
    "partitions: [{name: default, queues: [{name: root, maxapplications: -1}]}]\n",
    "partitions: [{name: default, queues: [{name: root, maxapplications: 0x" + "f" * 100 + "}]}]\n",
    "partitions: [{name: default, queues: [{name: root, properties: {priority.offset: '99999999999999999999'}}]}]\n",
    "partitions: [{name: default, queues: [{name: root, queues: [{name: a, resources: "
    "{max: {memory: '" + "9" * 5000 + "Gi'}}}]}]}]\n",
    "partitions: [{name: '\x00'}]\n",
    "partitions: [{name: \"\\0\"}]\n",
    "\ufeffpartitions: []\n",
    "%YAML 1.1\n---\npartitions: []\n",
    "%TAG ! tag:yaml.org,2002:python/\n---\n!object:os.system []\n",
]

# Regexp pieces for user-supplied patterns (placement filters): nested quantifiers that make a
# backtracking engine exponential, constructs Go's regexp refuses (look-arounds,
# backreferences, possessive quantifiers, repeats over 1,000), broken syntax and Unicode.
REGEXP_PIECES = [
    r"(\w+\.?)+", r"(a|aa)+", r"(a*)*", r"(.*a){12}", r"(?=x)", r"(?<!x)", r"(a)\1", r"a{1001}", r"a++",
    r"[^@]+", "@", r"\.", "^", "$", r"\pL", "(?i)", "a{2,5}", "x|y", "[", ")", "é", r"\Q.*\E", "(?P<n>a)",
]  # fmt: skip
regexps = st.lists(st.sampled_from(REGEXP_PIECES), min_size=1, max_size=6).map("".join)
# Texts a hostile resource manager sends as a user or group name: long runs that drive
# backtracking, newlines (Go's ``$`` ends only at the end of the text), non-ASCII word characters.
REGEXP_TEXTS = ["a" * 60, "a" * 253, "a." * 126, "bob\n", "élan", "", "x@corp.example", "\x00"]
