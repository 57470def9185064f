"""Handlers of ``evsched run`` and ``evsched submit``: open the log, start the service or append."""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import logging
import os
import sys
import time
from typing import TYPE_CHECKING, Any

import orjson

from events.codec import decode_input_object
from events.log.clock import wall_clock_us
from events.log.credentials import CredentialError, redact_logs
from events.log.file import is_log
from events.log.open import open_log
from events.log.port import Leased, LogError, LogFenced, LogMismatch, LogRefused
from events.models import InputRejected
from events.native import loaded_build
from events.producer import key_of
from events.times import format_time, parse_time
from scheduler.cli.admin import admin_lines, append_records
from scheduler.cli.config_arg import load_config_arg
from scheduler.cli.credentials import prepare_run
from scheduler.cli.logging_setup import setup_logging
from scheduler.cli.service_wiring import (
    ConfigAfterInputs,
    append_config,
    open_service,
    stop_on_signals,
    use_transactions,
)
from scheduler.cli.settings import ServiceSettings, log_settings, service_settings
from scheduler.config import SchedulerConfig
from scheduler.service.cycle_gc import CycleCollector

if TYPE_CHECKING:
    from events.log.file_submit import SubmissionServer

SUBMIT_SOURCE = "evsched-submit"
MAX_WARNINGS = 20  # submit's warnings about unknown apps and queues shown, then a count
LOG = logging.getLogger("evsched")


def prepare_submission(
    lines: list[bytes], schedule_lines: list[int] | None = None, numbers: list[int] | None = None
) -> tuple[list[tuple[bytes, bytes]], list[str]]:
    """Validate JSONL lines for ``submit``: ((key, record) pairs to append, one error per bad line).

    A missing ``source`` becomes ``evsched-submit`` and a missing ``id`` a hash of the
    line and of its occurrence among identical lines of this submission (docs/submit.md):
    an identical line repeated in one file is a new event (the same ask added again after
    its release), while submitting the same file twice is harmless (the copies are
    duplicates).
    A simulate file's ``{"type": "schedule"}`` lines are skipped (the service decides when
    cycles run); their line numbers go to ``schedule_lines``, and the good records' to ``numbers``.
    """
    good: list[tuple[bytes, bytes]] = []
    errors: list[str] = []
    seen: dict[bytes, int] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            errors.append(f"line {number}: not valid JSON: {exc}")
            continue
        if isinstance(obj, dict) and obj.get("type") == "schedule":
            if schedule_lines is not None:
                schedule_lines.append(number)
            continue
        if isinstance(obj, dict):
            obj.setdefault("source", SUBMIT_SOURCE)
            if "id" not in obj:
                text = line.strip()
                nth = seen[text] = seen.get(text, 0) + 1
                obj["id"] = hashlib.sha256(text if nth == 1 else text + b"#%d" % nth).hexdigest()[:24]
        result = decode_input_object(obj, append_time_us=0, position=f"line {number}")
        if isinstance(result, InputRejected):
            errors.append(f"line {number}: {result.reason}: {result.message}")
            continue
        good.append((key_of(result.type, result.data).encode(), orjson.dumps(obj)))
        if numbers is not None:
            numbers.append(number)
    return good, errors


def config_line(config: SchedulerConfig, source: str, time_us: int | None = None) -> bytes:
    """A ``config.updated`` input line carrying ``config`` (id from its checksum: the same file twice is a copy);
    ``time_us``: its event time (absent: the log's append time)."""
    record: dict[str, object] = {"id": f"config-{config.checksum[:16]}", "source": source, "type": "config.updated",
                                 "data": {"yaml": config.yaml}}
    if time_us is not None:
        record["time"] = format_time(time_us)
    return orjson.dumps(record)


def time_before(records: list[tuple[bytes, bytes]]) -> int:
    """An event time before every record's (and before now): ``submit --config``'s config goes to
    the admin channel, and the cycle merges channels by event time (docs/events.md)."""
    earliest = wall_clock_us()
    for _, value in records:
        stamp = orjson.loads(value).get("time")
        if isinstance(stamp, str):
            try:
                earliest = min(earliest, parse_time(stamp))
            except ValueError:
                continue
    return earliest - 1


def cmd_submit(args: argparse.Namespace) -> int:
    """``evsched submit [--config F] [--log DIR | --kafka …] FILE.jsonl|-``."""
    setup_logging()
    config = load_config_arg(args.config)  # exits 1 with every reason when invalid
    try:
        raw = sys.stdin.buffer.read() if args.file == "-" else open(args.file, "rb").read()  # noqa: SIM115
    except OSError as exc:
        print(f"evsched: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
        return 1
    schedule_lines: list[int] = []
    numbers: list[int] = []
    good, errors = prepare_submission(raw.splitlines(), schedule_lines, numbers)
    if errors:  # all or nothing: half a submission is worse than none
        for err in errors:
            print(f"evsched submit: {err}", file=sys.stderr)
        print(f"evsched submit: nothing appended: {len(errors)} of {len(good) + len(errors)} events are invalid "
              "(fix them and submit the whole file again)", file=sys.stderr)
        return 1
    rules = []
    if config is not None:  # first, on the admin channel and earlier than the file's events: all are read under it
        rules.append((b"default", config_line(config, SUBMIT_SOURCE, time_before(good))))
    if schedule_lines:
        print(f"evsched submit: skipped {len(schedule_lines)} 'schedule' lines (first: line {schedule_lines[0]}): "
              "a simulate file's cycle marks; the service decides when cycles run", file=sys.stderr)
    _warn_unknown(args, good, numbers, rules)
    return _append(args, good, errors, rules)


def _warn_unknown(args: argparse.Namespace, good: list[tuple[bytes, bytes]], numbers: list[int],
                  rules: list[tuple[bytes, bytes]]) -> None:
    """Warn about events naming apps or queues that the embedded log does not know (scheduler.cli.submit_check)."""
    settings = log_settings(args)
    if settings.kafka is not None:
        return  # reading every input topic to warn would cost more than it tells
    from scheduler.cli.submit_check import known_in_log, submission_warnings

    known = known_in_log(settings.directory)
    for _, value in rules:
        known.see(orjson.loads(value))
    warnings = submission_warnings(known, zip(numbers, (value for _, value in good), strict=True))
    for warning in warnings[:MAX_WARNINGS]:
        print(f"evsched submit: warning: {warning}", file=sys.stderr)
    if len(warnings) > MAX_WARNINGS:
        print(f"evsched submit: warning: … and {len(warnings) - MAX_WARNINGS} more like these", file=sys.stderr)


def cmd_config_apply(args: argparse.Namespace) -> int:
    """``evsched config apply F [--log DIR | --kafka …]``: append a config change to the admin channel."""
    setup_logging()
    config = load_config_arg(args.file)
    assert config is not None
    return _append(args, [], [], [(b"default", config_line(config, "evsched-config-apply"))])


def _append(args: argparse.Namespace, good: list[tuple[bytes, bytes]], errors: list[str],
            rules: list[tuple[bytes, bytes]] | None = None) -> int:
    """Append ``rules`` to the admin channel, then ``good`` (to the admin channel too with
    ``--admin``, else the inputs), to the log ``args`` names; report on stderr; exit code."""
    settings = log_settings(args)
    admin = bool(getattr(args, "admin", False))
    stray = [] if admin else admin_lines(good)
    if stray:
        print(f"evsched submit: {len(stray)} rules changes ({', '.join(sorted(set(stray)))}) go to the resource "
              "managers' channel, where the service rejects them 'not-authorized'; an operator uses "
              "evsched config apply, priorityclass apply or submit --admin (docs/security.md)", file=sys.stderr)
    rules = list(rules or [])

    async def append() -> None:
        if rules:
            await append_records(settings, rules, errors, admin=True)
        if good:
            await append_records(settings, good, errors, admin=admin)

    try:
        asyncio.run(append())
    except LogError as exc:
        print(f"evsched submit: {exc}", file=sys.stderr)
        return 1
    for err in errors:
        print(f"evsched submit: {err}", file=sys.stderr)
    count = len(rules) + len(good)
    print(f"appended {count} events" + (f"; {len(errors)} lines rejected" if errors else ""), file=sys.stderr)
    return 1 if errors else 0


def cmd_run(args: argparse.Namespace) -> int:
    """``evsched run [--config F] [--log DIR | --kafka …] [--mqtt URL] [--once]``."""
    settings = service_settings(args)
    setup_logging(settings.log_format, settings.log_level, verbose=settings.verbose)
    try:
        redact_logs(prepare_run(args, os.environ))  # credentials from env/files only, kept out of logs
    except CredentialError as exc:
        LOG.error("%s", exc)
        return 1
    config = load_config_arg(settings.config)  # None without --config; exits 1 with every reason when invalid
    outage = KafkaOutage(settings.outage_s())
    while True:
        try:
            with CycleCollector() as collector:  # GC between cycles, not inside them
                return asyncio.run(_run(settings, config, collector))
        except (LogFenced, LogRefused, LogMismatch) as exc:  # a restart would fence the new owner or read the same
            LOG.error("%s; stopping", exc)
            return 1
        except ConfigAfterInputs as exc:
            LOG.error("%s", exc)
            return 1
        except LogError as exc:
            delay = outage.next_delay(time.monotonic())
            if delay is None:
                LOG.error("%s", exc)
                return 1
            # Everything decided is in the log: a restart restores it (snapshot + tail), as after a crash.
            LOG.warning("Kafka failed: %s; restarting from the log in %.0f s (attempt %d; gives up after %.0f s "
                        "more of failures, --kafka-outage-s)", exc, delay, outage.attempts, outage.remaining)
            time.sleep(delay)


async def accept_submissions(log: object) -> SubmissionServer | None:
    """The embedded log's submission socket, listening (None for Kafka, which producers write to directly)."""
    from events.log.file import FileLog
    from events.log.file_submit import SubmissionServer

    if not isinstance(log, FileLog):
        return None
    server = SubmissionServer(log)
    try:
        await server.start()
    except OSError as exc:  # e.g. a path over the 107 bytes a Unix socket's name may have
        LOG.warning("cannot accept submissions on %s (%s): `evsched submit` must wait until the service stops",
                    server.path, exc)
        return None
    LOG.info("accepting submissions on %s (evsched submit --log %s)", server.path, log.directory)
    return server


class KafkaOutage:
    """Backoff for in-process restarts after Kafka failures; a streak ends S seconds after its last failure.

    >>> o = KafkaOutage(60)
    >>> [o.next_delay(t) for t in (0, 1, 3, 7)], o.next_delay(61), o.next_delay(200)
    ([1.0, 2.0, 4.0, 8.0], None, 1.0)
    """

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self.attempts = 0
        self.remaining = 0.0
        self._streak_start: float | None = None
        self._last: float | None = None

    def next_delay(self, now: float) -> float | None:
        """Seconds to wait before the next attempt, or None when it is time to give up."""
        if self.limit_s <= 0:
            return None
        if self._last is None or now - self._last > self.limit_s:  # a new streak
            self._streak_start, self.attempts = now, 0
        self._last = now
        assert self._streak_start is not None
        self.remaining = self._streak_start + self.limit_s - now
        if self.remaining <= 0:
            return None
        self.attempts += 1
        return min(2.0 ** (self.attempts - 1), 30.0, self.remaining)


async def _run(settings: ServiceSettings, config: SchedulerConfig | None, collector: CycleCollector) -> int:
    LOG.info("core: %s", loaded_build())
    kafka = settings.log.kafka
    if kafka and settings.log.partitions:
        from scheduler.cli.shards import run_shards

        return await run_shards(settings, kafka, config, collector)
    transactional = await use_transactions(settings)
    if transactional is None:
        return 1
    if kafka is None and not is_log(settings.log.directory):
        LOG.warning("no log at %s: creating a new, empty one", os.path.abspath(settings.log.directory))
    log = await open_log(settings.log, transactional=transactional, fence_at_start=not settings.standby)
    # A Kafka read waits for records itself (KafkaLog's poll), so the loop needs no nap between reads.
    service, bridge = await open_service(settings, log, settings.snapshots(), poll_interval_s=0.0 if kafka else 0.2,
                                         collector=collector)
    stop_on_signals(service.stop)
    lease: Any = None
    http = None
    submissions = await accept_submissions(log)
    try:
        from scheduler.cli.http_wiring import MissingExtra, start_for_service

        try:
            http = await start_for_service(settings, service)  # before recovery: /readyz says 503 until done
        except (MissingExtra, OSError, ValueError) as exc:
            LOG.error("--http %s: %s", settings.http, exc)
            return 1
        if settings.standby:
            if not isinstance(log, Leased):
                LOG.error("--standby needs --kafka (the lease is a Kafka consumer group)")
                return 1
            lease = log.lease()
            lease.on_lost = service.stop  # finish the cycle in hand, then exit 1 (below)
            await lease.start()
            LOG.info("standby: waiting for the active lease (group %s.active)", kafka.group if kafka else "evsched")
            if not await lease.wait(service.stopping):
                return 0
            await log.take_over()  # fences the previous active instance before the log is read
        await service.start()
        await append_config(service, config, settings.config, settings)
        await service.run(once=settings.once)
        if lease is not None and not lease.held.is_set():
            return 1
    finally:
        if submissions is not None:
            await submissions.close()
        if http is not None:
            await http.stop()
        if lease is not None:
            await lease.close()  # after the last cycle is written: a standby may start at once
        if bridge is not None:
            await bridge.close()
        await log.close()
    return 0
