"""Broker credentials: read from the environment or a secret file, never from the command line.

A password given as an argument ends up in the shell history and in ``ps`` output of every
user on the machine, so the CLI takes none. For Kafka (SASL) and MQTT it comes from:

* ``EVSCHED_<BROKER>_PASSWORD``: the password itself;
* ``--<broker>-password-file F`` or ``EVSCHED_<BROKER>_PASSWORD_FILE=F``: a file holding it
  (one trailing newline is dropped), the form Docker and Kubernetes secrets take — not both;
* the user name from ``EVSCHED_<BROKER>_USERNAME`` (for MQTT it may also be in the URL).

An MQTT URL with a password in it (``mqtt://user:pass@host``) is refused
(``refuse_password_in_url``) with a message that does not repeat the password. ``redact_logs``
keeps every known secret out of log lines as a second line of defence (a library that logs
its configuration, say). The command-line side (the ``--…-password-file`` flags, the checks
before ``run`` connects) is ``scheduler.cli.credentials``.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

MAX_SECRET_BYTES = 64 * 1024
_USER_PASSWORD_MECHANISMS = frozenset({"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"})
REDACTED = "***"


class CredentialError(ValueError):
    """A credential could not be read, or was given where it would leak. Never holds the secret."""


@dataclass(frozen=True)
class Credentials:
    """A user name and password; ``repr`` never shows the password."""

    username: str | None = None
    password: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class _Names:
    username: str
    password: str
    password_file: str


KAFKA = _Names("EVSCHED_KAFKA_USERNAME", "EVSCHED_KAFKA_PASSWORD", "EVSCHED_KAFKA_PASSWORD_FILE")
MQTT = _Names("EVSCHED_MQTT_USERNAME", "EVSCHED_MQTT_PASSWORD", "EVSCHED_MQTT_PASSWORD_FILE")


def read_secret_file(path: str) -> str:
    """The secret in ``path``: UTF-8 text, one trailing newline dropped, at most 64 KiB.

    Raises ``CredentialError`` (naming the file, never its content) when it cannot be read,
    is not a regular file, is empty or too large.
    """
    try:
        with open(path, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise CredentialError(f"password file {path!r} is not a regular file")
            data = handle.read(MAX_SECRET_BYTES + 1)
    except OSError as exc:
        raise CredentialError(f"cannot read password file {path!r}: {exc.strerror or exc}") from None
    if len(data) > MAX_SECRET_BYTES:
        raise CredentialError(f"password file {path!r} is larger than {MAX_SECRET_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise CredentialError(f"password file {path!r} is not UTF-8 text") from None
    text = text.removesuffix("\n").removesuffix("\r")
    if not text:
        raise CredentialError(f"password file {path!r} is empty")
    return text


def _resolve(names: _Names, environ: Mapping[str, str], password_file: str | None) -> Credentials:
    username = environ.get(names.username) or None
    path = password_file or environ.get(names.password_file) or None
    direct = environ.get(names.password) or None
    if path is not None and direct is not None:
        raise CredentialError(f"give the password in {names.password} or in a file, not both")
    password = read_secret_file(path) if path is not None else direct
    return Credentials(username, password)


def kafka_credentials(environ: Mapping[str, str], password_file: str | None = None) -> Credentials:
    """Kafka SASL credentials from ``EVSCHED_KAFKA_*`` and/or ``--kafka-password-file``."""
    return _resolve(KAFKA, environ, password_file)


def kafka_sasl(mechanism: str, environ: Mapping[str, str], password_file: str | None = None) -> dict[str, str | None]:
    """KafkaLog's SASL keyword arguments; ``CredentialError`` when PLAIN/SCRAM lacks a user or password."""
    creds = kafka_credentials(environ, password_file)
    if mechanism.upper() in _USER_PASSWORD_MECHANISMS and (creds.username is None or creds.password is None):
        raise CredentialError(
            f"--sasl-mechanism {mechanism} needs {KAFKA.username} and a password ({KAFKA.password}, "
            f"{KAFKA.password_file} or --kafka-password-file)"
        )
    return {"sasl_mechanism": mechanism, "sasl_plain_username": creds.username, "sasl_plain_password": creds.password}


def mqtt_credentials(environ: Mapping[str, str], password_file: str | None = None) -> Credentials:
    """MQTT credentials from ``EVSCHED_MQTT_*`` and/or ``--mqtt-password-file``."""
    return _resolve(MQTT, environ, password_file)


def refuse_password_in_url(url: str, *, env: str = MQTT.password) -> None:
    """Raise ``CredentialError`` if ``url`` carries a password (``scheme://user:pass@host``)."""
    try:
        has_password = urlsplit(url).password is not None
    except ValueError:
        return  # malformed: the URL parser reports it, without echoing the netloc
    if has_password:
        raise CredentialError(
            f"the URL contains a password; command lines leak (shell history, ps): give it in {env} "
            "or a --…-password-file instead, and leave it out of the URL"
        )


class _Redactor(logging.Filter):
    """Replaces every known secret in a record's final message (and traceback) with ``***``."""

    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        self.secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    def _scrub(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, REDACTED)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = self._scrub(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self._scrub(record.exc_text)
        return True


def redact_logs(secrets: Iterable[str | None], logger: logging.Logger | None = None) -> None:
    """Keep ``secrets`` out of every line the handlers of ``logger`` (default: root) write."""
    redactor = _Redactor(s for s in secrets if s)
    if not redactor.secrets:
        return
    for handler in (logger or logging.getLogger()).handlers:
        handler.addFilter(redactor)
