"""Broker addresses: parse ``mqtt://`` / ``mqtts://`` URLs and redact them for logs.

Credentials from the environment or a file: ``events.log.credentials``.

>>> a = parse_broker_url("mqtt://bob:s3cret@broker.local:1884")
>>> (a.host, a.port, a.tls, a.username, a.password)
('broker.local', 1884, False, 'bob', 's3cret')
>>> a.redacted()
'mqtt://bob:***@broker.local:1884'
>>> parse_broker_url("mqtts://broker.local").port
8883
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

_DEFAULT_PORTS = {"mqtt": 1883, "mqtts": 8883}


@dataclass(frozen=True)
class BrokerAddress:
    """Where the broker is and how to log in. ``repr`` never shows the password."""

    host: str
    port: int
    tls: bool
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    def with_credentials(self, username: str | None, password: str | None) -> BrokerAddress:
        """Explicit credentials (e.g. from the environment) win over those in the URL."""
        if username is None and password is None:
            return self
        return dataclasses.replace(
            self,
            username=username if username is not None else self.username,
            password=password if password is not None else self.password,
        )

    def redacted(self) -> str:
        """The URL as it may appear in logs: the password, if any, is ``***``."""
        scheme = "mqtts" if self.tls else "mqtt"
        user = ""
        if self.username is not None:
            user = self.username + (":***" if self.password is not None else "") + "@"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{user}{host}:{self.port}"


def parse_broker_url(url: str) -> BrokerAddress:
    """``mqtt://[user:pass@]host[:port]`` or ``mqtts://…`` → ``BrokerAddress``.

    Raises ``ValueError`` with a message that never contains the password.
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        # urlsplit's own messages may echo the netloc (and so the password): keep ours generic.
        raise ValueError("MQTT URL is malformed (expected mqtt://[user:pass@]host:port)") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise ValueError(f"MQTT URL scheme must be mqtt or mqtts, not {scheme!r}")
    if not parts.hostname:
        raise ValueError("MQTT URL has no host")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError("MQTT URL must not have a path, query or fragment")
    return BrokerAddress(
        host=parts.hostname,
        port=port if port is not None else _DEFAULT_PORTS[scheme],
        tls=scheme == "mqtts",
        username=unquote(parts.username) if parts.username is not None else None,
        password=unquote(parts.password) if parts.password is not None else None,
    )
