"""``submit``'s id policy: a line without an ``id`` gets one derived from its text and its
occurrence among identical lines of the same submission, so a legitimate repeat in one file
(the same ask added again after its release, a second identical release) is kept, while
submitting the same file twice is still harmless (the copies are duplicates)."""

from __future__ import annotations

from pathlib import Path

import orjson

from events.log.file import FileLog
from scheduler.cli.run import prepare_submission
from tests.cli import evsched
from tests.procs import fixed_batch

NODE = b'{"type": "node.added", "data": {"node_id": "n1", "capacity": {"vcore": 1000}}}'
APP = b'{"type": "app.added", "data": {"app_id": "a", "queue": "root.default", "user": "u"}}'
ASK = b'{"type": "ask.added", "data": {"app_id": "a", "ask_id": "k", "resources": {"vcore": 1000}}}'
RELEASE = b'{"type": "allocation.released", "data": {"app_id": "a", "ask_id": "k"}}'


def ids(lines: list[bytes]) -> list[str]:
    good, errors = prepare_submission(lines)
    assert not errors
    return [orjson.loads(value)["id"] for _, value in good]


def test_identical_lines_of_one_submission_get_distinct_ids_and_a_resubmission_the_same() -> None:
    first = ids([NODE, APP, ASK, RELEASE, ASK, RELEASE])
    assert len(set(first)) == 6
    assert ids([NODE, APP, ASK, RELEASE, ASK, RELEASE]) == first
    assert ids([b'{"id": "mine", ' + ASK[1:]]) == ["mine"]


def test_the_same_ask_added_again_after_its_release_is_scheduled_again(tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"\n".join([NODE, APP, ASK, RELEASE, ASK, RELEASE, ASK]) + b"\n")
    evsched("submit", "--log", str(log_dir), str(path))
    evsched("submit", "--log", str(log_dir), str(path))  # the same file twice: copies only
    evsched("run", "--log", str(log_dir), "--once", *fixed_batch(1))  # a cycle per input
    with FileLog(log_dir, readonly=True) as log:
        outs = [orjson.loads(r.value) for r in log.iter_outputs()]
    rejected = [o["data"]["reason"] for o in outs if o["type"] == "input.rejected"]
    assert rejected == ["duplicate"] * 7
    assert [o["data"]["ask_id"] for o in outs if o["type"] == "allocation.decided"] == ["k", "k", "k"]
