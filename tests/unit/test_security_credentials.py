"""Broker credentials come from the environment or a file, never the command line, never a log line.

Unit tests of ``events.log.credentials`` and ``scheduler.cli.credentials``, then the CLI as
a user runs it (a subprocess, its stderr captured at DEBUG): a password on the command line is refused without being
repeated, and one from a file really logs in to a mosquitto that requires it.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import subprocess
from pathlib import Path
from urllib.parse import quote

import orjson
import pytest

from events.log.credentials import (
    MAX_SECRET_BYTES,
    CredentialError,
    Credentials,
    kafka_credentials,
    kafka_sasl,
    mqtt_credentials,
    read_secret_file,
    redact_logs,
    refuse_password_in_url,
)
from scheduler.bridge.address import parse_broker_url
from scheduler.cli.credentials import prepare_run
from tests.cli import evsched

ROOT = Path(__file__).resolve().parents[2]
SECRET = "pa55-Wörd:with@odd/chars"


def secret_file(tmp_path: Path, content: bytes = SECRET.encode() + b"\n") -> str:
    path = tmp_path / "secret"
    path.write_bytes(content)
    path.chmod(0o600)
    return str(path)


# ---------------------------------------------------------------- reading secrets


def test_a_secret_file_is_read_without_its_trailing_newline(tmp_path: Path) -> None:
    assert read_secret_file(secret_file(tmp_path)) == SECRET
    assert read_secret_file(secret_file(tmp_path, b"x\r\n")) == "x"
    assert read_secret_file(secret_file(tmp_path, b" keep spaces ")) == " keep spaces "


@pytest.mark.parametrize(
    ("content", "match"),
    [(b"", "empty"), (b"\n", "empty"), (b"\xff\xfe", "not UTF-8"), (b"x" * (MAX_SECRET_BYTES + 1), "larger")],
)
def test_bad_secret_files_are_refused_without_their_content(tmp_path: Path, content: bytes, match: str) -> None:
    with pytest.raises(CredentialError, match=match) as info:
        read_secret_file(secret_file(tmp_path, content))
    assert "x" * 100 not in str(info.value)


def test_missing_files_and_directories_are_refused(tmp_path: Path) -> None:
    with pytest.raises(CredentialError, match="cannot read"):
        read_secret_file(str(tmp_path / "absent"))
    with pytest.raises(CredentialError, match=r"cannot read|not a regular file"):
        read_secret_file(str(tmp_path))


def test_credentials_from_the_environment_or_a_file(tmp_path: Path) -> None:
    path = secret_file(tmp_path)
    assert kafka_credentials({}) == Credentials(None, None)
    environ = {"EVSCHED_KAFKA_USERNAME": "bob", "EVSCHED_KAFKA_PASSWORD": "p"}
    assert kafka_credentials(environ) == Credentials("bob", "p")
    assert kafka_credentials({"EVSCHED_KAFKA_PASSWORD_FILE": path}).password == SECRET
    assert kafka_credentials({}, path).password == SECRET
    assert mqtt_credentials({"EVSCHED_MQTT_PASSWORD_FILE": path, "EVSCHED_MQTT_USERNAME": "a"}) == Credentials(
        "a", SECRET
    )
    with pytest.raises(CredentialError, match="not both"):
        mqtt_credentials({"EVSCHED_MQTT_PASSWORD": "p"}, path)


def test_sasl_plain_needs_a_user_and_a_password() -> None:
    with pytest.raises(CredentialError, match="EVSCHED_KAFKA_USERNAME and a password"):
        kafka_sasl("PLAIN", {"EVSCHED_KAFKA_PASSWORD": SECRET})
    options = kafka_sasl("SCRAM-SHA-256", {"EVSCHED_KAFKA_USERNAME": "u", "EVSCHED_KAFKA_PASSWORD": SECRET})
    assert options == {"sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": "u", "sasl_plain_password": SECRET}
    assert kafka_sasl("GSSAPI", {})["sasl_plain_password"] is None


def test_reprs_never_show_a_password() -> None:
    assert SECRET not in repr(Credentials("u", SECRET))
    address = parse_broker_url("mqtt://u:p4ss@h:1").with_credentials(None, SECRET)
    assert SECRET not in repr(address) and SECRET not in address.redacted()
    for url in ["mqtt://u:p4ss@h:x", "mqtt://u:p4ss@h/path", "http://u:p4ss@h"]:
        with pytest.raises(ValueError) as info:
            parse_broker_url(url)
        assert "p4ss" not in str(info.value)


@pytest.mark.parametrize("url", ["mqtt://u:p4ss@h:1", "mqtts://:p4ss@h", "mqtt://u:@h"])
def test_a_password_in_a_url_is_refused_without_repeating_it(url: str) -> None:
    with pytest.raises(CredentialError, match="EVSCHED_MQTT_PASSWORD") as info:
        refuse_password_in_url(url)
    assert "p4ss" not in str(info.value)


@pytest.mark.parametrize("url", ["mqtt://u@h:1", "mqtt://h", "mqtt://[::1]:1", "mqtt://h:x"])
def test_urls_without_a_password_pass(url: str) -> None:
    refuse_password_in_url(url)


def test_prepare_run_points_the_bridge_at_the_password_file(tmp_path: Path) -> None:
    path = secret_file(tmp_path)
    environ: dict[str, str] = {}
    args = argparse.Namespace(mqtt="mqtt://u@h:1", mqtt_password_file=path, kafka=None, sasl_mechanism=None)
    assert prepare_run(args, environ) == [SECRET]
    assert environ == {"EVSCHED_MQTT_PASSWORD_FILE": path}
    assert mqtt_credentials(environ).password == SECRET
    with pytest.raises(CredentialError, match="cannot read"):
        prepare_run(argparse.Namespace(mqtt="mqtt://h", mqtt_password_file=str(tmp_path / "no")), {})


def test_redaction_keeps_secrets_out_of_messages_arguments_and_tracebacks() -> None:
    logger = logging.getLogger("test.redaction")
    logger.propagate = False
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    handler = Collect()
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    try:
        redact_logs([SECRET, None, ""], logger)
        logger.warning("connecting with %s", SECRET)
        logger.warning(f"inline {SECRET}")
        try:
            raise RuntimeError(f"auth failed for {SECRET}")
        except RuntimeError:
            logger.exception("boom")
    finally:
        logger.removeHandler(handler)
    text = "\n".join(lines)
    assert SECRET not in text
    assert text.count("***") == 3 and "RuntimeError" in text


# ---------------------------------------------------------------- the CLI, as a user runs it


def test_run_refuses_a_password_on_the_command_line(tmp_path: Path) -> None:
    done = evsched("run", "--once", "--log", str(tmp_path / "log"), "--mqtt", f"mqtt://bob:{SECRET}@127.0.0.1:1",
                   check=False, text=True)
    assert done.returncode == 1
    assert "contains a password" in done.stderr
    assert SECRET not in done.stderr + done.stdout
    assert not (tmp_path / "log").exists()  # refused before anything was opened


def test_a_missing_password_file_fails_at_once(tmp_path: Path) -> None:
    done = evsched("run", "--once", "--log", str(tmp_path / "log"), "--mqtt", "mqtt://bob@127.0.0.1:1",
                   "--mqtt-password-file", str(tmp_path / "absent"), check=False, text=True)  # fmt: skip
    assert done.returncode == 1 and "cannot read password file" in done.stderr


def test_kafka_credentials_never_reach_the_output(tmp_path: Path) -> None:
    events = tmp_path / "in.jsonl"
    events.write_text('{"type": "node.added", "data": {"node_id": "n1", "capacity": {"vcore": 1}}}\n')
    common = ["--kafka", "127.0.0.1:1", "--sasl-mechanism", "PLAIN", "--security-protocol", "SASL_PLAINTEXT"]
    no_user = evsched("submit", *common, "--kafka-password-file", secret_file(tmp_path), str(events),
                      check=False, text=True)
    assert no_user.returncode == 1 and "needs EVSCHED_KAFKA_USERNAME" in no_user.stderr
    refused = evsched("run", "--once", "-v", "--kafka-outage-s", "0", *common, env={"EVSCHED_KAFKA_USERNAME": "bob",
                      "EVSCHED_KAFKA_PASSWORD": SECRET}, check=False, text=True)  # fmt: skip
    assert refused.returncode == 1  # nothing listens on port 1
    for done in (no_user, refused):
        assert SECRET not in done.stderr + done.stdout


@pytest.mark.mqtt
def test_a_password_file_logs_in_to_a_broker_that_requires_it(tmp_path: Path) -> None:
    from tests.mqtt_broker import MqttReader, new_private_broker

    broker = new_private_broker(users={"evsched": SECRET})  # mosquitto, else amqtt: logins required
    log = tmp_path / "log"
    lines = [{"id": "n", "source": "t", "type": "node.added", "data": {"node_id": "n1", "capacity": {"vcore": 8}}},
             {"id": "a", "source": "t", "type": "app.added", "data": {"app_id": "a1", "queue": "root.default",
                                                                        "user": "u"}},
             {"id": "k", "source": "t", "type": "ask.added", "data": {"app_id": "a1", "ask_id": "k1",
                                                                        "resources": {"vcore": 1}}}]  # fmt: skip
    (tmp_path / "in.jsonl").write_bytes(b"\n".join(orjson.dumps(line) for line in lines))
    assert evsched("submit", "--log", str(log), str(tmp_path / "in.jsonl"), check=False, text=True).returncode == 0
    url = f"mqtt://evsched@127.0.0.1:{broker.port}"

    async def run_and_read(password_args: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str],
                                                                                    list[tuple[str, bytes]]]:
        reader_url = f"mqtt://evsched:{quote(SECRET, safe='')}@127.0.0.1:{broker.port}"
        async with MqttReader(reader_url, "evsched/default/#") as reader:
            done = await asyncio.to_thread(lambda: evsched("run", "--once", "-v", "--log", str(log), "--mqtt", url,
                                                           *password_args, env=env, check=False, text=True))
            return done, [(t, p) for t, p, _ in await reader.until_marker()]  # all the run published

    with broker:
        good, seen = asyncio.run(run_and_read(["--mqtt-password-file", secret_file(tmp_path)], {}))
        wrong, _ = asyncio.run(run_and_read([], {"EVSCHED_MQTT_PASSWORD": "not-" + SECRET}))
    assert good.returncode == 0, good.stderr[-2000:]
    assert any(json_type(p) == "allocation.decided" for _, p in seen), seen
    assert "MQTT publisher mqtt://evsched:***@127.0.0.1" in good.stderr
    assert "connection refused" in wrong.stderr.lower() or "not authori" in wrong.stderr.lower(), wrong.stderr[-2000:]
    for done in (good, wrong):
        assert SECRET not in done.stderr + done.stdout


def json_type(payload: bytes) -> str | None:
    try:
        value = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return None
    return value.get("type") if isinstance(value, dict) else None
