"""Replay looks for snapshots where ``evsched run`` writes them, for Kafka too (scheduler.cli.settings)."""

from __future__ import annotations

import pytest

from scheduler.cli.main import build_parser
from scheduler.cli.settings import log_settings, service_settings, snapshot_settings


@pytest.mark.parametrize("extra", [[], ["--group", "team-a"], ["--partition", "gpu"],
                                   ["--group", "g", "--partition", "p"]])
def test_replay_reads_the_snapshots_run_writes_with_kafka(extra: list[str]) -> None:
    parser = build_parser()
    run = parser.parse_args(["run", "--kafka", "k:9092", *extra])
    written = service_settings(run).snapshots()
    partition = extra[extra.index("--partition") + 1] if "--partition" in extra else None
    if partition:  # a shard's snapshots go to a directory of its own (scheduler.cli.shards)
        written = f"{written}/{partition}"
    replay = parser.parse_args(["replay", "explain", "--kafka", "k:9092", *extra, "--ask", "a/k"])
    assert snapshot_settings(replay, log_settings(replay)).directory == written
    explicit = parser.parse_args(["replay", "explain", "--kafka", "k:9092", "--snapshot-dir", "S", "--ask", "a/k"])
    assert snapshot_settings(explicit, log_settings(explicit)).directory == "S"


def test_replay_reads_the_embedded_logs_own_snapshots() -> None:
    replay = build_parser().parse_args(["replay", "verify", "--log", "L"])
    assert snapshot_settings(replay, log_settings(replay)).directory == "L/snapshots"
