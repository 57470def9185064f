"""The test brokers' own behaviour: one that cannot start fails the run under CI=true (naming
what is missing) and is skipped elsewhere; the MQTT tests never use a broker that happens to
listen on 1883; the pacing helper reads the service's cycle lines."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests import kafka_broker, mqtt_broker
from tests.procs import broker_unavailable, in_ci
from tests.progress import ServiceWatch


@pytest.mark.parametrize(("value", "ci"), [("true", True), ("1", True), ("yes", True), ("", False), ("false", False),
                                           ("0", False)])
def test_ci_is_any_value_but_empty_0_false_or_no(monkeypatch: pytest.MonkeyPatch, value: str, ci: bool) -> None:
    monkeypatch.setenv("CI", value)
    assert in_ci() is ci


def test_an_unavailable_broker_fails_under_ci_and_skips_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true and no mosquitto"):
        broker_unavailable("no mosquitto")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="no mosquitto"):
        broker_unavailable("no mosquitto")


def test_no_mqtt_broker_program_names_both_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mqtt_broker, "mosquitto_binary", lambda: None)
    monkeypatch.setattr(mqtt_broker, "has_amqtt", lambda: False)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"no mosquitto .* and no amqtt"):
        mqtt_broker.new_private_broker()


def test_a_tansu_that_cannot_execute_fails_under_ci(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    missing = str(tmp_path / "no-tansu-here")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true and Kafka test broker: cannot execute Tansu binary"):
        kafka_broker._start_tansu(missing, tmp_path)


def test_without_mqtt_url_the_session_broker_is_private_not_one_on_1883(monkeypatch: pytest.MonkeyPatch) -> None:
    # Something listens on 1883 (this test's socket, or whatever was there already): the tests
    # still start a broker of their own, elsewhere.
    monkeypatch.delenv("MQTT_URL", raising=False)
    squatter = socket.socket()
    with contextlib.suppress(OSError):
        squatter.bind(("127.0.0.1", 1883))
        squatter.listen()
    with squatter, mqtt_broker.session_broker_url() as url:
        port = int(url.rsplit(":", 1)[1])
        assert url == f"mqtt://127.0.0.1:{port}" and port != 1883
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=5):
        pass  # stopped with the session


def test_mqtt_url_is_an_explicit_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MQTT_URL", "mqtt://broker.example:1884")
    with mqtt_broker.session_broker_url() as url:
        assert url == "mqtt://broker.example:1884"


def test_service_watch_counts_one_shards_cycles_and_waits_for_progress(tmp_path: Path) -> None:
    err = tmp_path / "run.err"
    at = "2026-01-01 00:00:00,000 DEBUG   evsched.service"
    lines = [
        f"{at}.beta: recovered 4 cycles from the log (last cycle 4, state sha256:00); resuming at {{'t/0': 8}} "
        "with 12 inputs waiting",
        f"{at}.beta: cycle 5 written: 2 inputs, 3 outputs; 10 inputs consumed",
        f"{at}.default: cycle 9 written: 2 inputs, 3 outputs; 18 inputs consumed",
        f"{at}.beta: cycle 6 written: 2 inputs, 2 outputs; 12 inputs consumed",
        f"{at}.beta: cycle 7 written: 2 inp",  # a line still being written
    ]
    err.write_text("\n".join(lines))
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    watch = ServiceWatch(proc, err, "beta")
    assert watch.wait_ready()
    seen = watch.seen
    assert (seen.waiting, seen.cycles, seen.inputs, seen.last_cycle, seen.consumed) == (12, 2, 4, 6, 12)
    assert not watch.wait_cycles(3)  # the process has exited: no more lines will come
    with err.open("a") as f:
        f.write("uts, 2 outputs; 14 inputs consumed\n")
    assert watch.wait_consumed(14) and watch.seen.last_cycle == 7
    everything = ServiceWatch(proc, err)
    assert everything.wait_cycles(4) and everything.seen.inputs == 8
