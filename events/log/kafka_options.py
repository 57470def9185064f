"""The keyword arguments every aiokafka client is built with: servers, client id, timeout, SASL/SSL security.

The one place Kafka's connection and security options are put together: the log adapter
(``events.log.kafka``), the shard group and the producer API (``events.producer``) all
build their clients from ``client_options``, so a security option is added once. This
module does not import aiokafka (the producer API stays importable without it).
Credentials live only in the options dict and the clients built from it: never in logs,
exceptions or reprs.
"""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from typing import Any

from events.log.names import DEFAULT_REQUEST_TIMEOUT_MS


def client_options(
    bootstrap_servers: str | Sequence[str],
    *,
    client_id: str = "evsched",
    request_timeout_ms: int | None = DEFAULT_REQUEST_TIMEOUT_MS,
    security_protocol: str = "PLAINTEXT",
    sasl_mechanism: str | None = None,
    sasl_plain_username: str | None = None,
    sasl_plain_password: str | None = None,
    ssl_context: ssl.SSLContext | None = None,
) -> dict[str, Any]:
    """The keyword arguments for an aiokafka client (``request_timeout_ms`` None: the client's default)."""
    servers = bootstrap_servers if isinstance(bootstrap_servers, str) else list(bootstrap_servers)
    optional = {
        "request_timeout_ms": request_timeout_ms,
        "security_protocol": security_protocol,
        "sasl_mechanism": sasl_mechanism,
        "sasl_plain_username": sasl_plain_username,
        "sasl_plain_password": sasl_plain_password,
        "ssl_context": ssl_context,
    }
    return {
        "bootstrap_servers": servers,
        "client_id": client_id,
        **{k: v for k, v in optional.items() if v is not None},
    }


TLS_PROTOCOLS = ("SSL", "SASL_SSL")


def tls_context(protocol: str, cafile: str | None = None, certfile: str | None = None,
                keyfile: str | None = None) -> ssl.SSLContext | None:
    """The TLS context ``protocol`` asks for (None for PLAINTEXT/SASL_PLAINTEXT): the brokers'
    certificates verified against ``cafile`` (else the system's CAs), host names checked, a
    client certificate when ``certfile`` is given. Raises ``ValueError`` with a clear reason."""
    files = {"--ssl-cafile": cafile, "--ssl-certfile": certfile, "--ssl-keyfile": keyfile}
    if protocol.upper() not in TLS_PROTOCOLS:
        given = [flag for flag, value in files.items() if value]
        if given:
            raise ValueError(f"{', '.join(given)} need --security-protocol SSL or SASL_SSL (not {protocol})")
        return None
    if keyfile and not certfile:
        raise ValueError("--ssl-keyfile needs --ssl-certfile")
    try:
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=cafile)
        if certfile:
            context.load_cert_chain(certfile, keyfile)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"cannot set up Kafka TLS: {exc}") from None
    return context
