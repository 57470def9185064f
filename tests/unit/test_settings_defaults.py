"""One source for each setting: the command line's defaults are the settings dataclasses' own.

``evsched run`` with no flags must build exactly ``ServiceSettings(log=LogSettings())``, and
``--kafka`` alone the ``KafkaSettings`` defaults (but for the timings ``run`` sets); a default
changed in the dataclass reaches the flag, one changed in a flag alone fails here.
"""

from __future__ import annotations

import dataclasses

import pytest

from events.log.names import DEFAULT_ADMIN_TOPIC
from events.log.open import KafkaSettings, LogSettings
from scheduler.cli.main import build_parser
from scheduler.cli.settings import default, log_settings, service_settings
from scheduler.service.loop import Service
from scheduler.service.settings import ServiceSettings


def test_run_without_flags_is_the_default_service_settings() -> None:
    assert service_settings(build_parser().parse_args(["run"])) == ServiceSettings(log=LogSettings())


def test_kafka_flags_default_to_the_kafka_settings() -> None:
    for command in (["run"], ["submit", "-"], ["config", "apply", "q.yaml"]):  # replay reads as its own group
        kafka = log_settings(build_parser().parse_args([*command, "--kafka", "broker:9092"])).kafka
        assert kafka is not None
        # run's own Kafka timing flags have defaults of their own (the client's, said in their help)
        untimed = dataclasses.replace(kafka, session_timeout_ms=None, fetch_wait_ms=None, request_timeout_ms=None)
        assert untimed == KafkaSettings("broker:9092"), command
    assert KafkaSettings("b").admin_topic == DEFAULT_ADMIN_TOPIC


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
