"""``evsched run``'s settings: the log, batching, snapshots, MQTT, standby and Kafka outages, as one frozen value.

The command line builds it once from its flags (``scheduler.cli.settings.service_settings``),
whose defaults are read from these fields; ``Service.from_settings`` takes it. Pure data: it
imports nothing that runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from events.log.names import DEFAULT_LOG_DIR
from events.log.open import LogSettings


@dataclass(frozen=True)
class ServiceSettings:
    """``evsched run``: the log, the service's batching and snapshots, MQTT, standby and Kafka outages."""

    log: LogSettings
    config: str | None = None
    mqtt: str | None = None
    mqtt_ingest: bool = False
    mqtt_prefix: str = "evsched"
    once: bool = False
    batch: int = 5_000
    max_batch: int | None = None  # None: 4 x batch
    snapshot_dir: str | None = None  # as given; ``snapshots()`` resolves the default
    snapshot_every: int = 100
    snapshot_keep: int = 2
    standby: bool = False
    transactions: bool = False  # required (exit 1 without); by default used where the broker has them
    no_transactions: bool = False  # at-least-once even where the broker has transactions
    kafka_outage_s: float = 300.0  # seconds of Kafka failures to ride out (0: exit at the first); ``outage_s``
    verbose: bool = False
    log_format: str = "text"  # stderr lines: text or json
    log_level: str = "info"
    http: str | None = None  # HOST:PORT of the HTTP surface (None: off)
    ready_max_lag: int = 10_000  # /readyz: most inputs waiting while still ready
    mqtt_ca: str | None = None  # mqtts://: the CA file to trust (default: the system's)
    mqtt_cert: str | None = None  # mqtts://: this client's certificate (PEM) …
    mqtt_key: str | None = None  # … and its key (default: in the certificate file)
    accept_admin_on_inputs: bool = False  # rules changes from any input channel (the old behaviour)
    serial_commits: bool = False  # each cycle's transaction commits before the next cycle is read

    def outage_s(self) -> float:
        """Seconds of log failures ``run`` rides out by restarting in-process: ``kafka_outage_s`` with
        Kafka; none with the embedded log (its failures are the disk's, which a restart does not mend)."""
        return self.kafka_outage_s if self.log.kafka else 0.0

    def snapshots(self) -> str:
        """The snapshot directory: ``--snapshot-dir``, else DIR/snapshots of the embedded log; with
        Kafka ./evsched-data/snapshots/GROUP, so recovery and replay never need a topic's first record."""
        if self.snapshot_dir:
            return self.snapshot_dir
        if self.log.kafka:
            return str(Path(DEFAULT_LOG_DIR) / "snapshots" / self.log.kafka.group)
        return str(Path(self.log.directory) / "snapshots")
