"""SIGKILL campaign on the embedded log: ≥ 50 kills during a 100,000-event run lose and change nothing.

Two copies of the same inputs: one is run uninterrupted (the reference), the other is
killed at random moments and restarted until the kill count is reached, then run to the
end. The decisions must equal the reference's, content and order (copies only identical),
every input must be consumed, and ``evsched replay verify`` must pass on the killed log.
The ``small`` case is the fast subset ``make test`` runs.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from events.log.file import FileLog
from scheduler.simulation.workload import WorkloadSpec
from tests.cli import evsched_argv
from tests.faults.harness import (
    ROOT,
    CampaignCase,
    campaign_cases,
    fault_workload,
    finish_run,
    judge,
    kill_campaign,
    run_args,
    verify_log,
)
from tests.integration.test_service import outputs
from tests.logdrive import write_as_cluster

pytestmark = pytest.mark.faults
SMALL_SPEC = WorkloadSpec(nodes=900, apps=40, asks=15_000, leaves=8, seed=5)  # outlasts the first life


@pytest.mark.parametrize("case", campaign_cases(CampaignCase(SMALL_SPEC, batch=20, kills=5)))
def test_sigkills_during_a_run_lose_and_change_nothing(tmp_path: Path, case: CampaignCase) -> None:
    args = run_args(case.batch)
    records = fault_workload(case.spec)
    reference, crashed = tmp_path / "reference", tmp_path / "crashed"
    # The crashed log gets a tail only after the kills: however far a life overshoots its planned
    # share, the work cannot run out before the campaign has made them (harness module doc). The
    # part submitted first ends on a cycle boundary of the reference (cycles of exactly ``batch``).
    held_back = case.batch * (len(records) // case.batch // 10) + len(records) % case.batch
    with FileLog(reference) as log:
        write_as_cluster(log, records)
    with FileLog(crashed) as log:
        write_as_cluster(log, records[:-held_back])
    # The reference runs alongside the campaign (two cores); the campaign adapts to the pace.
    with open(tmp_path / "reference.err", "wb") as ref_err:
        ref = subprocess.Popen(evsched_argv("run", "--log", str(reference), *args),
                               cwd=ROOT, stdout=subprocess.DEVNULL, stderr=ref_err)
    try:
        campaign = kill_campaign(["--log", str(crashed), *args], tmp_path, kills=case.kills, seed=2024,
                                 tail_held_back=True)
    finally:
        assert ref.wait(timeout=900) == 0, (tmp_path / "reference.err").read_text()[-3000:]
    assert campaign.kills >= case.kills and not campaign.finished, campaign.line()
    with FileLog(crashed) as log:
        write_as_cluster(log, records[-held_back:])
    finish_run(["--log", str(crashed), *args], tmp_path / "final.err")

    end = {"inputs": len(records)}
    expected = judge(outputs(reference), end)
    got = judge(outputs(crashed), end)
    assert len(expected.decisions) > case.spec.asks // 2
    assert got.decisions == expected.decisions, "a decision was lost or changed by the kills"
    assert got.cycles == expected.cycles
    report = verify_log(["--log", str(crashed)])
    assert report["ok"] and report["unconsumed_inputs"] == 0 and report["incomplete_cycle"] is None, report
    print(f"\nFAULTS file-log SIGKILL ({len(records)} events): {campaign.line()}; "
          f"{len(got.decisions)} decisions equal the uninterrupted run's, {got.copies} identical copies, "
          f"{len(report['rerun_cycles'])} cycles re-run after a cut, replay verify ok over {report['cycles']} cycles")
