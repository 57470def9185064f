"""The log that ``LogSettings`` name, opened read-only as a ``LogSource``: the embedded log, or Kafka."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from events.log.open import LogSettings
from replay.kafka_source import open_kafka_source
from replay.reader import LogSource, open_file_log


@contextmanager
def open_source(settings: LogSettings) -> Iterator[LogSource]:
    """The log ``settings`` name, read-only: the embedded log, or Kafka when ``settings.kafka`` is set."""
    if settings.kafka is not None:
        with open_kafka_source(settings) as kafka:
            yield kafka
        return
    with open_file_log(settings.directory) as source:
        yield source
