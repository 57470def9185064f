"""The operator's commands that change the rules: ``evsched priorityclass apply|delete``.

They append to the log's *admin channel* (the embedded log's ``admin`` channel, Kafka's
``evsched.admin`` topic), the only channel the service accepts ``config.updated`` and
``priorityclass.*`` from (docs/security.md). ``config apply`` and ``submit --config`` /
``submit --admin`` go the same way (``append_records``).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Mapping, Sequence

import orjson

from events.log.open import LogSettings, open_log
from events.log.port import LogError, LogInUse
from events.models import ADMIN_TYPES
from scheduler.cli.flags import add_log_arguments
from scheduler.cli.logging_setup import setup_logging
from scheduler.cli.settings import log_settings

Record = tuple[bytes, bytes]
ADMIN_SOURCE = "evsched-admin"


async def append_records(settings: LogSettings, records: list[Record], errors: list[str], *, admin: bool) -> None:
    """Append ``records`` to the log ``settings`` names: its admin channel when ``admin``, else its inputs.

    With Kafka shards (``--partition``) each record goes to its shard's topics; ``records`` is
    left holding those appended (the unroutable are added to ``errors``).
    """
    if settings.kafka and settings.partitions:
        from scheduler.cli.shards import submit_to_shards

        records[:] = await submit_to_shards(settings, records, errors, admin=admin)
        return
    if settings.kafka is None and not settings.partitions:  # (--partition without --kafka: open_log says why not)
        append_embedded(settings.directory, records, admin=admin)
        return
    log = await open_log(settings, writes_only=True)
    try:
        await (log.append_admin(records) if admin else log.append_inputs(records))
    finally:
        await log.close()


def append_embedded(directory: str, records: list[Record], *, admin: bool, wait_s: float = 5.0) -> None:
    """Append to the embedded log in ``directory``: directly when no process holds it, else through
    the running service's submission socket (``events.log.file_submit``). Another tool holding the
    lock for a moment (a second ``submit``) is waited for, up to ``wait_s`` seconds."""
    from events.log.file import FileLog
    from events.log.file_submit import ServiceNotListening, submit_to_service

    deadline = time.monotonic() + wait_s
    while True:
        try:
            log = FileLog(directory)
        except LogInUse as in_use:
            try:
                submit_to_service(directory, records, admin=admin)
                return
            except ServiceNotListening:
                if time.monotonic() >= deadline:
                    raise LogError(f"{in_use}, which accepts no submissions (not `evsched run`, or not yet "
                                   "listening)") from None
                time.sleep(0.1)
                continue
        with log:
            (log.append_admin_sync if admin else log.append_inputs_sync)(records)
        return


def admin_lines(records: Sequence[Record]) -> list[str]:
    """The types of the records that only the admin channel may carry, one entry per record."""
    found = []
    for _, value in records:
        try:
            kind = orjson.loads(value).get("type")
        except (orjson.JSONDecodeError, AttributeError):
            continue
        if kind in ADMIN_TYPES:
            found.append(str(kind))
    return found


def _append_one(args: argparse.Namespace, record: Mapping[str, object], what: str) -> int:
    setup_logging()
    settings = log_settings(args)
    records: list[Record] = [(b"default", orjson.dumps(record))]
    errors: list[str] = []
    try:
        asyncio.run(append_records(settings, records, errors, admin=True))
    except LogError as exc:
        print(f"evsched priorityclass: {exc}", file=sys.stderr)
        return 1
    for err in errors:
        print(f"evsched priorityclass: {err}", file=sys.stderr)
    if not records:
        return 1
    print(f"appended {what} to the admin channel", file=sys.stderr)
    return 0


def cmd_priorityclass_apply(args: argparse.Namespace) -> int:
    """``evsched priorityclass apply NAME --value N``: a ``priorityclass.upserted`` on the admin channel."""
    data: dict[str, object] = {"name": args.name, "value": args.value, "global_default": args.global_default,
                               "preemption_policy": args.preemption_policy, "partition": args.partition_name}
    record = {"id": f"priorityclass-{_digest(data)}", "source": ADMIN_SOURCE,
              "type": "priorityclass.upserted", "data": data}
    return _append_one(args, record, f"priorityclass.upserted {args.name!r} (value {args.value})")


def cmd_priorityclass_delete(args: argparse.Namespace) -> int:
    """``evsched priorityclass delete NAME``: a ``priorityclass.deleted`` on the admin channel."""
    data: dict[str, object] = {"name": args.name, "partition": args.partition_name}
    record = {"id": f"priorityclass-del-{_digest(data)}", "source": ADMIN_SOURCE, "type": "priorityclass.deleted",
              "data": data}
    return _append_one(args, record, f"priorityclass.deleted {args.name!r}")


def _digest(data: dict[str, object]) -> str:
    """An id part from the content: the same command twice is a duplicate (applied once)."""
    import hashlib

    return hashlib.sha256(orjson.dumps(data, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def add_admin_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``priorityclass apply|delete``."""
    pc = sub.add_parser("priorityclass", help="change priority classes (appended to the admin channel)")
    pcs = pc.add_subparsers(dest="priorityclass_command", required=True)
    p = pcs.add_parser("apply", help="create or replace a priority class")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--value", type=int, required=True, metavar="N", help="the class's priority")
    p.add_argument("--global-default", action="store_true", help="the priority of asks that name no class")
    p.add_argument("--preemption-policy", choices=["Never", "PreemptLowerPriority"], default="Never")
    p.add_argument("--partition-name", default="default", metavar="P", help="the scheduler partition (default)")
    add_log_arguments(p)
    p.set_defaults(handler=cmd_priorityclass_apply)
    p = pcs.add_parser("delete", help="delete a priority class")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--partition-name", default="default", metavar="P", help="the scheduler partition (default)")
    add_log_arguments(p)
    p.set_defaults(handler=cmd_priorityclass_delete)
