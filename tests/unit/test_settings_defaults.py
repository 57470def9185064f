"""One source for each setting: the command line's defaults are the settings dataclasses' own.

``evsched run`` with no flags must build exactly ``ServiceSettings(log=LogSettings())``, and
``--kafka`` alone the ``KafkaSettings`` defaults, which the Kafka adapter's own defaults match; a default
changed in the dataclass reaches the flag, one changed in a flag alone fails here.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from events.log.names import DEFAULT_ADMIN_TOPIC
from events.log.open import KafkaSettings, LogSettings
from scheduler.cli.main import build_parser
from scheduler.cli.settings import default, log_settings, service_settings
from scheduler.service.loop import Service
from scheduler.service.settings import ServiceSettings

ROOT = Path(__file__).resolve().parents[2]


def test_run_without_flags_is_the_default_service_settings() -> None:
    assert service_settings(build_parser().parse_args(["run"])) == ServiceSettings(log=LogSettings())


def test_kafka_flags_default_to_the_kafka_settings() -> None:
    for command in (["run"], ["submit", "-"], ["config", "apply", "q.yaml"]):  # replay reads as its own group
        kafka = log_settings(build_parser().parse_args([*command, "--kafka", "broker:9092"])).kafka
        assert kafka == KafkaSettings("broker:9092"), command  # run's timing flags default to the settings' too
    assert KafkaSettings("b").admin_topic == DEFAULT_ADMIN_TOPIC


def test_the_kafka_adapter_defaults_are_the_settings_defaults() -> None:
    """A log, shard membership or lease built without settings times its clients as the settings do."""
    from events.log.kafka import KafkaLog
    from events.log.kafka.lease import KafkaLease
    from events.log.kafka.membership import ShardMembership
    from events.log.kafka_options import client_options

    settings = KafkaSettings("b")
    timing = settings.group_timing()
    assert timing == {"session_timeout_ms": 10_000, "heartbeat_interval_ms": 500}
    for built in (KafkaLog, ShardMembership, KafkaLease):
        parameters = inspect.signature(built.__init__).parameters
        for name, value in timing.items():
            assert parameters[name].default == value, (built, name)
    log_parameters = inspect.signature(KafkaLog.__init__).parameters
    for name, value in settings.fetch_tuning().items():
        assert log_parameters[name].default == value, name
    assert inspect.signature(client_options).parameters["request_timeout_ms"].default == settings.request_timeout_ms


def test_kafka_outages_are_ridden_out_with_kafka_only() -> None:
    args = build_parser().parse_args(["run", "--kafka", "broker:9092"])
    with_kafka = service_settings(args)
    assert with_kafka.outage_s() == ServiceSettings.kafka_outage_s == 300.0
    assert service_settings(build_parser().parse_args(["run", "--kafka-outage-s", "60"])).outage_s() == 0.0
    no_restarts = build_parser().parse_args(["run", "--kafka", "b:1", "--kafka-outage-s", "0"])
    assert service_settings(no_restarts).outage_s() == 0


def test_the_service_takes_its_defaults_from_its_settings() -> None:
    from events.log.memory import MemoryLog

    plain, built = Service(MemoryLog()), Service.from_settings(MemoryLog(), ServiceSettings(log=LogSettings()))
    for service in (plain, built):
        assert service.batch_records == ServiceSettings.batch
        assert service.snapshot_every == ServiceSettings.snapshot_every
    assert built.max_batch_records == 4 * ServiceSettings.batch
    assert Service.from_settings(MemoryLog(), ServiceSettings(log=LogSettings(), batch=7, max_batch=9),
                                 name="x").max_batch_records == 9


def test_default_reads_a_field_or_says_why_not() -> None:
    assert default(ServiceSettings, "batch") == 5_000
    with pytest.raises(LookupError, match="no plain default"):
        default(ServiceSettings, "log")
    with pytest.raises(LookupError, match="no field"):
        default(ServiceSettings, "nope")


@pytest.mark.parametrize(("flag", "settings", "field"), [
    ("--session-timeout-ms", KafkaSettings, "session_timeout_ms"),
    ("--fetch-wait-ms", KafkaSettings, "fetch_wait_ms"),
    ("--request-timeout-ms", KafkaSettings, "request_timeout_ms"),
    ("--kafka-outage-s", ServiceSettings, "kafka_outage_s"),
    ("--batch", ServiceSettings, "batch"),
])
def test_the_docs_state_the_defaults_the_settings_have(flag: str, settings: type, field: str) -> None:
    """docs/events.md names each of these flags with its default: the settings' value, not a copy gone stale."""
    text = " ".join((ROOT / "docs" / "events.md").read_text(encoding="utf-8").split())
    stated = re.search(re.escape(f"`{flag} ") + r"[^`]*`[^`]{0,40}?default (\d+)", text)
    assert stated is not None, f"docs/events.md does not state {flag}'s default"
    assert float(stated.group(1)) == default(settings, field), flag
