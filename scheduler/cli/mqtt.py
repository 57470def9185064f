"""``evsched mqtt clear``: delete a partition's retained queue status from an MQTT broker, on request.

The bridge publishes each queue's status retained under ``<prefix>/<partition>/queues/…``,
so a subscriber sees it at once. After a deployment is retired, renamed or re-configured,
those messages stay on the broker (queues that no longer exist look alive). ``mqtt clear
--mqtt URL [--mqtt-prefix P] [--partition NAME]`` overwrites each with an empty retained
message, which is MQTT's way of deleting it, and prints the topics it cleared.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

from events.log.credentials import MQTT as MQTT_ENV
from events.log.credentials import CredentialError, mqtt_credentials, refuse_password_in_url
from scheduler.cli.flags import mqtt_prefix


def add_mqtt_commands(sub: Any) -> None:
    """Register ``mqtt clear``."""
    p = sub.add_parser("mqtt", help="MQTT tools (clear a partition's retained queue status)")
    msub = p.add_subparsers(dest="mqtt_command", metavar="SUBCOMMAND")
    msub.required = True
    c = msub.add_parser("clear", help="delete the retained queue status of one partition under a prefix")
    c.add_argument("--mqtt", required=True, metavar="URL", help="mqtt://[user@]host:port (password: "
                   "EVSCHED_MQTT_PASSWORD or --mqtt-password-file)")
    c.add_argument("--mqtt-password-file", metavar="F", help="file holding the MQTT password")
    c.add_argument("--mqtt-prefix", type=mqtt_prefix, default="evsched", metavar="P",
                   help="the deployment's topic prefix (default evsched)")
    c.add_argument("--partition", default="default", metavar="NAME", help="the scheduler partition (default default)")
    c.set_defaults(handler=cmd_mqtt_clear)


def cmd_mqtt_clear(args: argparse.Namespace) -> int:
    """Handler of ``mqtt clear``: exit 0 with the cleared topics on stdout, 1 when the broker cannot be reached."""
    from scheduler.bridge.mqtt import clear_retained

    environ = dict(os.environ)
    try:
        refuse_password_in_url(args.mqtt)
        if args.mqtt_password_file:
            environ[MQTT_ENV.password_file] = args.mqtt_password_file
        creds = mqtt_credentials(environ)
        cleared = asyncio.run(clear_retained(args.mqtt, args.partition, prefix=args.mqtt_prefix,
                                             username=creds.username, password=creds.password))
    except (CredentialError, ValueError) as exc:
        print(f"evsched mqtt clear: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # aiomqtt.MqttError and OSError: the broker cannot be reached
        if type(exc).__name__ != "MqttError" and not isinstance(exc, OSError):
            raise
        print(f"evsched mqtt clear: cannot reach {args.mqtt}: {exc}", file=sys.stderr)
        return 1
    for topic in cleared:
        print(topic)
    print(f"evsched mqtt clear: cleared {len(cleared)} retained messages under "
          f"{args.mqtt_prefix}/{args.partition}/queues/", file=sys.stderr)
    return 0
