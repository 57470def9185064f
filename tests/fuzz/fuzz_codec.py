"""Atheris harness: coverage-guided fuzzing of the event decoder and the core behind it.

Not collected by pytest (the name does not start with ``test_``); a long, optional run::

    .venv/bin/pip install -e '.[fuzz]'
    .venv/bin/python tests/fuzz/fuzz_codec.py -max_total_time=600 tests/fuzz/corpus/codec

Every input is decoded; an accepted event is applied to a fresh engine that already holds
a node, an app and an ask, and a cycle runs. Any exception, or an output over 1 MiB, is a
finding: atheris stops and writes the input to ``crash-<sha1>``.
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports(include=["events", "scheduler", "projections"]):
    from events.codec import decode_input, encode_output
    from events.models import InputEvent
    from events.times import format_time, parse_time
    from scheduler.core.engine import Engine

SETUP = [
    b'{"id":"s1","source":"f","type":"node.added","data":{"node_id":"n1","capacity":{"vcore":8000}}}',
    b'{"id":"s2","source":"f","type":"app.added","data":{"app_id":"a1","queue":"root.default","user":"u"}}',
    b'{"id":"s3","source":"f","type":"ask.added","data":{"app_id":"a1","ask_id":"k1","resources":{"vcore":1}}}',
]
MAX_OUTPUT = 1 << 20


def one_input(data: bytes) -> None:
    engine = Engine()
    for i, raw in enumerate([*SETUP, data]):
        result = decode_input(raw, append_time_us=1_700_000_000_000_000, position=f"inputs@{i}")
        if isinstance(result, InputEvent):
            assert parse_time(format_time(result.time_us)) == result.time_us
            engine.apply(result)
        else:
            assert result.reason and result.message
            engine.reject_raw(result)
    for event in engine.cycle(1_700_000_000_000_000, {"inputs": 4}):
        assert len(encode_output(event)) < MAX_OUTPUT, event.type


if __name__ == "__main__":
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
