"""The Kafka broker paused (SIGSTOP) for longer than the session timeout, then resumed: the service goes on.

A private Tansu broker (the shared session broker must not freeze under other tests) is
stopped with SIGSTOP while the service is in the middle of a stream of cycles, and
continued after 1.5 × the group session timeout. Both ways of running are paused: with the
input partitions assigned (the default) and as a member of a shard group (``--partition``),
whose membership the broker could expire during the pause. The service must stay up, say
that the log stopped answering and that it answered again, finish the inputs submitted
before and after the pause, and leave a log in which nothing was lost or written
differently: cycles 1, 2, 3 … (copies only identical), every input consumed, decisions
equal to ``simulate`` at the recorded cycle boundaries, and ``replay verify`` passing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scheduler.simulation.workload import WorkloadSpec
from tests.faults.harness import Judged, fault_workload, judge, verify_log, wait_consumed
from tests.kafka_broker import KafkaTopics, _start_tansu, fresh_topics, tansu_binary
from tests.kafka_run import kafka_args, read_all, simulate_with_recorded_boundaries, spawn_run, submit_file
from tests.procs import broker_unavailable, fixed_batch, stop_group
from tests.progress import ServiceWatch

pytestmark = [pytest.mark.faults, pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(300)]
SPEC = WorkloadSpec(nodes=100, apps=20, asks=4000, leaves=4, seed=13)
MODES = [  # (extra `evsched run` options, the group session timeout in ms they give)
    pytest.param([], 10_000, id="assigned"),  # the default: partitions assigned; 10 s is run's default timeout
    pytest.param(["--partition", "default", "--session-timeout-ms", "6000"], 6_000, id="shard-group"),  # a member
]


@contextlib.contextmanager
def private_tansu(log_dir: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A Tansu broker of this test's own (``tests.kafka_broker``'s start and stop), always continued and stopped."""
    try:
        binary = tansu_binary()
    except Exception as exc:
        broker_unavailable(f"Kafka test broker: no Tansu binary ({type(exc).__name__}: {exc})")
    proc, bootstrap, _ = _start_tansu(binary, log_dir)
    try:
        yield bootstrap, proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGCONT)
        stop_group(proc)


def freeze(broker: subprocess.Popen[bytes], seconds: float) -> None:
    """Stop the broker (SIGSTOP: its sockets stay open, nothing answers) for ``seconds``, then continue it."""
    os.killpg(broker.pid, signal.SIGSTOP)
    time.sleep(seconds)
    os.killpg(broker.pid, signal.SIGCONT)


def busy_with(service: subprocess.Popen[bytes], err: Path, after: int) -> int:
    """Wait until the service's cycle lines (``-v``) show an input past ``after`` consumed: it is
    mid-stream, seen within milliseconds rather than after a fixed time; the inputs consumed."""
    watch = ServiceWatch(service, err)
    assert watch.wait_consumed(after + 1), "the service exited"
    return watch.seen.consumed


def check_the_log(
    bootstrap: str, topics: KafkaTopics, log_args: list[str], submitted: int
) -> tuple[Judged, dict[str, Any]]:
    """Nothing lost or written differently: every submitted input there and consumed, cycles 1, 2, 3 …
    (copies only identical), decisions equal to ``simulate`` at the recorded boundaries, and
    ``replay verify`` passing. Returns the judged outputs and the verify report."""
    inputs, outs = read_all(bootstrap, topics)
    assert len(inputs) == submitted
    got = judge(outs, {f"{topics.inputs}/0": len(inputs)})
    assert got.decisions == simulate_with_recorded_boundaries(inputs, outs), "a decision was lost or changed"
    report = verify_log(log_args)
    assert report["ok"] and report["unconsumed_inputs"] == 0, report
    return got, report


@pytest.mark.parametrize(("mode_args", "session_timeout_ms"), MODES)
def test_broker_paused_past_the_session_timeout_the_service_carries_on(
    tmp_path: Path, mode_args: list[str], session_timeout_ms: int
) -> None:
    pause_s = 1.5 * session_timeout_ms / 1000
    records = fault_workload(SPEC)
    first, second, third = records[:1000], records[1000:3500], records[3500:]
    topics = fresh_topics("pause")
    with private_tansu(tmp_path) as (bootstrap, broker):
        log_args = kafka_args(bootstrap, topics)
        submit_file(bootstrap, topics, first, tmp_path)
        err = tmp_path / "service.err"
        service = spawn_run([*log_args, *mode_args, *fixed_batch(5), "-v"], err)  # no --once: runs until stopped
        try:
            wait_consumed(bootstrap, topics, len(first), service)
            submit_file(bootstrap, topics, second, tmp_path)
            at_pause = busy_with(service, err, len(first))  # the second part's first cycle is written
            freeze(broker, pause_s)
            wait_consumed(bootstrap, topics, len(first) + len(second), service)
            submit_file(bootstrap, topics, third, tmp_path)
            wait_consumed(bootstrap, topics, len(records), service)
        finally:
            service.send_signal(signal.SIGTERM)
            code = service.wait(timeout=60)
        stderr = err.read_text(errors="replace")
        assert code == 0, stderr[-3000:]
        assert at_pause < len(first) + len(second), "the pause came after the work it was meant to interrupt"
        assert "no answer from the log for" in stderr and "the log answered again after" in stderr, stderr[-3000:]
        assert "Traceback" not in stderr, stderr[-3000:]

        got, report = check_the_log(bootstrap, topics, log_args, len(records))
        stall = next(line for line in stderr.splitlines() if "answered again after" in line)
        mode = " ".join(mode_args) or "partitions assigned"
        print(f"\nFAULTS Kafka SIGSTOP {pause_s:.0f} s ({mode}; session timeout {session_timeout_ms / 1000:.0f} s), "
              f"mid-stream at input {at_pause}: service stayed up; '{stall.split(': ', 1)[1]}'; "
              f"{len(got.decisions)} decisions equal simulate, {got.copies} identical copies, "
              f"replay verify ok over {report['cycles']} cycles")


def test_broker_silent_past_the_request_timeout_the_service_restarts_itself(tmp_path: Path) -> None:
    # Past the request timeout a Kafka call fails; `run` restores itself from the log
    # (--kafka-outage-s) instead of exiting, and nothing is lost or written differently.
    records = fault_workload(SPEC)
    first, second = records[:1000], records[1000:]
    topics = fresh_topics("outage")
    pause_s = 12.0
    with private_tansu(tmp_path) as (bootstrap, broker):
        log_args = kafka_args(bootstrap, topics)
        submit_file(bootstrap, topics, first, tmp_path)
        err = tmp_path / "service.err"
        service = spawn_run([*log_args, *fixed_batch(5), "--request-timeout-ms", "3000",
                             "--session-timeout-ms", "6000", "--kafka-outage-s", "120", "-v"], err)
        try:
            wait_consumed(bootstrap, topics, len(first), service)
            submit_file(bootstrap, topics, second, tmp_path)
            at_pause = busy_with(service, err, len(first))  # busy: appends in flight
            freeze(broker, pause_s)
            wait_consumed(bootstrap, topics, len(records), service)
        finally:
            service.send_signal(signal.SIGTERM)
            code = service.wait(timeout=60)
        stderr = err.read_text(errors="replace")
        assert code == 0, stderr[-3000:]
        assert at_pause < len(records), "the pause came after the work it was meant to interrupt"
        assert "restarting from the log" in stderr, stderr[-3000:]
        assert "Traceback" not in stderr, stderr[-3000:]
        got, report = check_the_log(bootstrap, topics, log_args, len(records))
        restarts = stderr.count("restarting from the log")
        print(f"\nFAULTS Kafka SIGSTOP {pause_s:.0f} s past a 3 s request timeout: {restarts} in-process "
              f"restart(s) from the log; {len(got.decisions)} decisions equal simulate, {got.copies} identical "
              f"copies, replay verify ok over {report['cycles']} cycles")
