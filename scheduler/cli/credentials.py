"""The command line's credential flags and checks; the reading itself is ``events.log.credentials``."""

from __future__ import annotations

import argparse
from collections.abc import MutableMapping

from events.log.credentials import KAFKA, MQTT, kafka_sasl, mqtt_credentials, refuse_password_in_url


def add_credential_arguments(p: argparse.ArgumentParser, *, mqtt: bool) -> None:
    """``--kafka-password-file`` (and ``--mqtt-password-file`` for commands that take ``--mqtt``)."""
    p.add_argument("--kafka-password-file", metavar="F",
                   help=f"file holding the Kafka SASL password (or set {KAFKA.password} / {KAFKA.password_file}); "
                   f"user name from {KAFKA.username}")
    if mqtt:
        p.add_argument("--mqtt-password-file", metavar="F",
                       help=f"file holding the MQTT password (or set {MQTT.password} / {MQTT.password_file}); "
                       f"user name in the URL or {MQTT.username}")


def prepare_run(args: argparse.Namespace, environ: MutableMapping[str, str]) -> list[str]:
    """Checks for ``evsched run``, before anything connects; returns the secrets to redact.

    Refuses a password in ``--mqtt``; makes ``--mqtt-password-file`` visible to the bridge
    (which reads ``EVSCHED_MQTT_PASSWORD_FILE``); reads every secret now, so a missing file
    fails at once with a clear message instead of at the first reconnect.
    """
    mqtt_url = getattr(args, "mqtt", None)
    secrets: list[str] = []
    if mqtt_url:
        refuse_password_in_url(mqtt_url)
        mqtt_file = getattr(args, "mqtt_password_file", None)
        if mqtt_file:
            environ[MQTT.password_file] = mqtt_file
        secrets.append(mqtt_credentials(environ).password or "")
    mechanism = getattr(args, "sasl_mechanism", None)
    if getattr(args, "kafka", None) and mechanism:
        sasl = kafka_sasl(mechanism, environ, getattr(args, "kafka_password_file", None))
        secrets.append(sasl["sasl_plain_password"] or "")
    return [s for s in secrets if s]
