"""The EventLog port: what the service needs from a log, whatever stores it.

A log has two sides. *Inputs* are one or more channels (the embedded log has two,
``inputs`` and ``admin``; Kafka has one per topic-partition, ``evsched.inputs/0``, and
its admin topic's, ``evsched.admin/0``), each an ordered
sequence of records at stable integer offsets (0, 1, 2, …). *Outputs* are a single
ordered sequence (the embedded log's ``outputs`` stream, Kafka's decisions topic).

Positions are maps ``{channel: next offset to read}``; ``cycle.completed`` records them,
so a restart resumes exactly where the last complete cycle stopped.

Optional capabilities are declared, not sniffed: ``TransactionalLog`` (outputs and input
offsets commit as one), ``CommitsOffsets`` (input positions committed for lag monitoring),
``DeadLetters`` (unreadable records parked elsewhere), ``Leased`` (active/standby) and
``GappedOutputs`` (output offsets that hold no record), all Kafka's today. Every adapter
(memory, file, Kafka) passes the shared contract suite in ``tests/contracts/log_contract.py``,
capabilities included.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable


class LogRecord(NamedTuple):
    """One stored record: where it is, its bytes, and when the log accepted it.

    A named tuple: replay makes one per record it reads (hundreds of thousands), and it is
    built at under half a frozen dataclass's cost (benchmarks/RESULTS.md).
    """

    channel: str
    offset: int
    value: bytes
    append_time_us: int
    key: bytes | None = None

    @property
    def position(self) -> str:
        """``channel@offset``: how rejections and explanations name this record."""
        return f"{self.channel}@{self.offset}"


class LogError(Exception):
    """The log cannot do what was asked (disk full, broker gone, corrupt beyond repair)."""


class LogInUse(LogError):
    """Another process holds the embedded log's writer lock (a running service, or another tool)."""


class LogRefused(LogError):
    """The broker refused this client (untrusted certificate, wrong credentials): retrying
    with the same settings cannot help."""


class LogMismatch(LogError):
    """The log holds other data than the state restored from it says it consumed (an input
    topic deleted and re-created): restarting reads the same, so it stops."""


class LogFenced(LogError):
    """Another instance took this log over (Kafka: a newer producer with the same transactional
    id): nothing this instance writes from now on will be visible; stop or restore afresh."""


class EventLog(Protocol):
    """Port for the scheduler's durable log. All methods are coroutines."""

    async def append_inputs(self, records: Sequence[tuple[bytes | None, bytes]]) -> None:
        """Append input records ``(key, value)``; durable when this returns."""

    async def append_admin(self, records: Sequence[tuple[bytes | None, bytes]]) -> None:
        """Append records ``(key, value)`` to the admin channel (the only channel rules
        changes are accepted from: ``events.models.ADMIN_TYPES``); durable when this returns."""

    async def admin_channels(self) -> list[str]:
        """The input channels (of ``input_channels``) that are admin channels."""

    async def read_inputs(self, positions: Mapping[str, int], max_records: int) -> list[LogRecord]:
        """Up to ``max_records`` input records after ``positions`` (missing channel → from 0).

        Records of one channel come in offset order. May return fewer (or none) when no
        more are available right now; never blocks waiting for new records longer than
        a short poll.
        """

    async def input_channels(self) -> list[str]:
        """The input channels this instance reads, in a fixed order."""

    async def input_end(self) -> dict[str, int]:
        """For every input channel, the offset one past its last record."""

    async def append_outputs(self, values: Sequence[bytes]) -> None:
        """Append output records in order; durable (acknowledged, fsynced) when this returns."""

    async def read_outputs(self, start: int = 0, max_records: int | None = None) -> list[LogRecord]:
        """Output records from offset ``start`` on, in order (all of them when no max)."""

    async def output_end(self) -> int:
        """Offset one past the last output record."""

    async def close(self) -> None:
        """Release files, connections and background tasks."""


@runtime_checkable
class TransactionalLog(Protocol):
    """A log that can commit a cycle's outputs and its input positions as one (Kafka with a transactional id)."""

    @property
    def transactional(self) -> bool:
        """Whether this log's cycles go through ``append_cycle`` (False: no transactional id)."""

    async def append_cycle(self, values: Sequence[bytes], positions: Mapping[str, int]) -> int | None:
        """The outputs and ``positions`` in one transaction; the output offset after them (None: nothing written)."""


@runtime_checkable
class CommitsOffsets(Protocol):
    """A log whose consumer group records the input positions (lag monitoring; recovery reads the output log)."""

    async def commit(self, positions: Mapping[str, int]) -> None:
        """Commit ``{channel: next offset}`` once the outputs before them are acknowledged."""


@runtime_checkable
class DeadLetters(Protocol):
    """A log with somewhere to park unreadable input records' raw bytes (Kafka's dead-letter topic)."""

    async def dead_letter(self, record: LogRecord, error: str) -> None:
        """Park ``record`` with why it could not be read."""


@runtime_checkable
class Leased(Protocol):
    """A log whose instances run active/standby under a lease (``evsched run --standby``)."""

    def lease(self) -> Any:
        """The lease of this log's instances (``events.log.kafka.KafkaLease``)."""

    async def take_over(self) -> None:
        """Fence the previous owner before this instance reads the log (once it holds the lease)."""


@runtime_checkable
class GappedOutputs(Protocol):
    """An output log whose offsets may hold no record (Kafka's transaction markers): a read of one
    offset asks for a few, and an empty read before the end does not mean the end."""

    gapped_outputs: bool

