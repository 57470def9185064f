"""Subcommand registration for the ``evsched`` CLI: each command's arguments and handler."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from events.codec import dumps, encode_output
from scheduler.cli.config_arg import load_config_arg
from scheduler.cli.flags import add_log_arguments, add_service_arguments, mqtt_prefix, positive_int
from scheduler.cli.settings import ServiceSettings, default


def cmd_simulate(args: argparse.Namespace) -> int:
    """``evsched simulate FILE.jsonl [--config F] [--state]``."""
    from scheduler.service.cycle_gc import CycleCollector
    from scheduler.simulation.simulate import Simulation

    config = load_config_arg(args.config)
    try:
        fh = sys.stdin.buffer if args.file == "-" else open(args.file, "rb")  # noqa: SIM115
    except OSError as exc:
        print(f"evsched: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
        return 1
    sim = Simulation(config)
    out = sys.stdout.buffer
    # Garbage collection as the service does it: young collections after cycles, not every
    # 50,000 new objects of a long input file (scheduler.service.cycle_gc).
    with fh, CycleCollector() as collector:
        for line in fh:
            outputs = sim.feed(line)
            for event in outputs:
                out.write(encode_output(event) + b"\n")
            if outputs:
                collector.after_cycle()
        for event in sim.finish():
            out.write(encode_output(event) + b"\n")
    if args.state:
        out.write(dumps(sim.engine.state_form()) + b"\n")
    out.flush()
    return 0


def cmd_config_check(args: argparse.Namespace) -> int:
    """``evsched config check F.yaml``."""
    from scheduler.cli.config_arg import check_config_file

    code, lines = check_config_file(args.file)
    stream = sys.stdout if code == 0 else sys.stderr
    for line in lines:
        print(line if code == 0 else f"  - {line}", file=stream)
    return code


def _count(text: str) -> int:
    """An argparse type: an integer ≥ 0."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 1 (or 0: keep all), not {value}")
    return value


def add_commands(sub: Any) -> None:
    """Register every subcommand on the parser's subparsers object."""
    from scheduler.cli.http_wiring import add_http_arguments
    from scheduler.cli.k8s import add_k8s_command
    from scheduler.cli.logging_setup import add_logging_arguments
    from scheduler.cli.run import cmd_config_apply, cmd_run, cmd_submit

    p = sub.add_parser("run", help="the scheduler service")
    p.add_argument("--config", metavar="F", help="queue configuration YAML, appended to the log as config.updated")
    add_log_arguments(p, mqtt=True)
    add_service_arguments(p)
    p.add_argument("--mqtt", metavar="URL", help="publish outputs to MQTT: mqtt://[user@]host:port "
                   "(the password: EVSCHED_MQTT_PASSWORD or --mqtt-password-file, never in the URL)")
    p.add_argument("--mqtt-ingest", action="store_true", help="accept node events from MQTT into the input log")
    p.add_argument("--mqtt-prefix", type=mqtt_prefix, default=default(ServiceSettings, "mqtt_prefix"), metavar="P",
                   help="first topic level(s) of every MQTT topic (default %(default)s): one per deployment sharing "
                   "a broker, e.g. site-a/evsched")
    p.add_argument("--mqtt-ca", metavar="FILE", help="mqtts://: the CA certificate(s) to trust (default: the system's)")
    p.add_argument("--mqtt-cert", metavar="FILE", help="mqtts://: evsched's client certificate (PEM; docs/security.md)")
    p.add_argument("--mqtt-key", metavar="FILE", help="mqtts://: the certificate's key (default: in --mqtt-cert)")
    p.add_argument("--once", action="store_true", help="process every input present, then exit")
    p.add_argument("--accept-admin-on-inputs", action="store_true",
                   help="accept config.updated and priorityclass events from every input channel, as before the "
                   "admin channel (the default: only from the admin channel — config apply, priorityclass apply, "
                   "submit --config — else input.rejected 'not-authorized'); said at start-up (docs/security.md)")
    p.add_argument("--serial-commits", action="store_true",
                   help="Kafka transactions: commit each cycle before reading the next (by default a cycle's "
                   "transaction commits while the next cycles are read and decided, and those then commit "
                   "together in one transaction; cycles commit in order either way)")
    p.add_argument("--batch", type=positive_int, default=default(ServiceSettings, "batch"), metavar="N",
                   help="inputs per cycle (default %(default)s); under a backlog batches double up to --max-batch")
    p.add_argument("--max-batch", type=positive_int, metavar="N",
                   help="largest batch while catching up on a backlog (default 4 x --batch; --batch's value "
                   "gives fixed batches)")
    p.add_argument("--snapshot-dir", metavar="DIR",
                   help="where snapshots go (default: DIR/snapshots for the embedded log; "
                   "./evsched-data/snapshots/GROUP for Kafka, one subdirectory per shard)")
    p.add_argument("--snapshot-every", type=int, default=default(ServiceSettings, "snapshot_every"), metavar="N",
                   help="cycles between snapshots")
    p.add_argument("--snapshot-keep", type=_count, default=default(ServiceSettings, "snapshot_keep"), metavar="N",
                   help="snapshots kept, newest first (default %(default)s; 0 keeps all: `replay state`, `explain` and "
                   "parallel `verify` start from the nearest one)")
    add_http_arguments(p)
    add_logging_arguments(p)
    p.set_defaults(handler=cmd_run)

    p = sub.add_parser("submit", help="validate and append input events")
    p.add_argument("file", metavar="FILE.jsonl", help="input events, one per line ('-' for stdin); a simulate "
                   "file's 'schedule' lines are skipped")
    p.add_argument("--config", metavar="F", help="queue configuration YAML, appended first (config.updated), so "
                   "the file's events are read under it")
    p.add_argument("--admin", action="store_true",
                   help="the operator's submission: append every event to the admin channel, the only one "
                   "config.updated and priorityclass events are accepted from (docs/security.md)")
    add_log_arguments(p)
    p.set_defaults(handler=cmd_submit)

    p = sub.add_parser("simulate", help="run the core alone over a JSONL file, deterministically")
    p.add_argument("file", metavar="FILE.jsonl", help="input lines ('-' for stdin)")
    p.add_argument("--config", metavar="F", help="queue configuration YAML (default: built-in)")
    p.add_argument("--state", action="store_true", help="print the final state as the last line")
    p.set_defaults(handler=cmd_simulate)

    from scheduler.cli.audit import add_audit
    from scheduler.cli.logcat import add_log_commands
    from scheduler.cli.mqtt import add_mqtt_commands
    from scheduler.cli.pending import add_pending
    from scheduler.cli.replay import add_replay_commands
    from scheduler.cli.serve import add_serve

    add_replay_commands(sub)
    add_log_commands(sub)
    from scheduler.cli.admin import add_admin_commands

    add_admin_commands(sub)
    add_audit(sub)
    add_serve(sub)
    add_pending(sub)
    add_mqtt_commands(sub)
    add_k8s_command(sub)

    p = sub.add_parser("config", help="queue configuration tools")
    csub = p.add_subparsers(dest="config_command", metavar="SUBCOMMAND")
    csub.required = True
    c = csub.add_parser("check", help="validate a YuniKorn queue configuration")
    c.add_argument("file", metavar="F.yaml")
    c.set_defaults(handler=cmd_config_check)
    c = csub.add_parser("apply", help="validate a queue configuration and append it to the input log "
                        "(config.updated): it applies to the inputs after it")
    c.add_argument("file", metavar="F.yaml")
    add_log_arguments(c)
    c.set_defaults(handler=cmd_config_apply)
