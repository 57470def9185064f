"""SIGKILL campaign on Kafka: ≥ 50 kills during a 100,000-event run lose and change nothing.

The service reads its inputs from and writes its outputs to the test broker (fresh topics
per test), keeps snapshots in a directory, and is killed at random moments and restarted
until the kill count is reached, then run to the end. Kafka hands out records as fetches
return, so cycle boundaries depend on timing even without faults; the uninterrupted run to
compare with is therefore ``simulate`` over the same inputs with the cycle boundaries and
times the log records (an independent path: the in-memory core, not the service or its
recovery). Checked: cycles completed 1, 2, 3 … (copies only identical), every input
consumed, decisions equal to that run (a copy of a decision id only with identical
content), and ``evsched replay verify --kafka`` re-derives every cycle byte for byte.
Both cases run in ``make faults`` only.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.simulation.workload import WorkloadSpec
from tests.faults.harness import (
    CampaignCase,
    campaign_cases,
    fault_workload,
    finish_run,
    judge,
    kill_campaign,
    run_args,
    verify_log,
)
from tests.kafka_broker import KafkaTopics
from tests.kafka_run import kafka_args, read_all, simulate_with_recorded_boundaries, submit_file

pytestmark = [pytest.mark.faults, pytest.mark.kafka]
SMALL_SPEC = WorkloadSpec(nodes=300, apps=40, asks=8000, leaves=8, seed=5)


# The small case stays out of `make test`: tests/integration/test_kafka_service.py kills on Kafka there.
@pytest.mark.parametrize("case", campaign_cases(CampaignCase(SMALL_SPEC, batch=10, kills=4), small_is_fast=False))
def test_sigkills_on_kafka_lose_and_change_nothing(
    kafka_bootstrap: str, kafka_topics: KafkaTopics, tmp_path: Path, case: CampaignCase
) -> None:
    records = fault_workload(case.spec)
    # A tail (a tenth) submitted only after the kills: however far a life overshoots its planned
    # share, the work cannot run out before the campaign has made them (harness module doc).
    held_back = len(records) // 10
    submit_file(kafka_bootstrap, kafka_topics, records[:-held_back], tmp_path)
    log_args = kafka_args(kafka_bootstrap, kafka_topics)
    args = [*log_args, *run_args(case.batch), "--snapshot-dir", str(tmp_path / "snapshots")]
    campaign = kill_campaign(args, tmp_path, kills=case.kills, seed=2025, tail_held_back=True)
    assert campaign.kills >= case.kills and not campaign.finished, campaign.line()
    submit_file(kafka_bootstrap, kafka_topics, records[-held_back:], tmp_path)
    finish_run(args, tmp_path / "final.err")

    inputs, outs = read_all(kafka_bootstrap, kafka_topics)
    assert len(inputs) == len(records)
    got = judge(outs, {f"{kafka_topics.inputs}/0": len(inputs)})
    expected = simulate_with_recorded_boundaries(inputs, outs)
    assert len(expected) > case.spec.asks // 2
    assert got.decisions == expected, "a decision was lost or changed by the kills"
    report = verify_log(log_args)
    assert report["ok"] and report["unconsumed_inputs"] == 0 and report["incomplete_cycle"] is None, report
    print(f"\nFAULTS Kafka SIGKILL ({len(records)} events): {campaign.line()}; {len(got.decisions)} decisions equal "
          f"simulate at the recorded boundaries, {got.copies} identical copies, "
          f"{len(report['rerun_cycles'])} cycles re-run after a cut, replay verify ok over {report['cycles']} cycles")
