"""The publisher's outbox (drop-oldest-non-retained), its backoff, and broker URL handling."""

from __future__ import annotations

import pytest

from events.log.credentials import Credentials, mqtt_credentials
from scheduler.bridge.address import parse_broker_url
from scheduler.bridge.outbox import Backoff, Outbox


def test_full_outbox_drops_the_oldest_non_retained() -> None:
    box = Outbox(3)
    assert box.put("q", b"status-1", 1, True) is None
    assert box.put("d", b"d1", 1, False) is None
    assert box.put("d", b"d2", 1, False) is None
    dropped = box.put("d", b"d3", 1, False)
    assert dropped is not None and dropped.payload == b"d1"
    assert [m.payload for m in box.take(10)] == [b"status-1", b"d2", b"d3"]


def test_outbox_of_only_retained_drops_the_oldest_retained() -> None:
    box = Outbox(2)
    box.put("q1", b"a", 1, True)
    box.put("q2", b"b", 1, True)
    dropped = box.put("q3", b"c", 1, True)
    assert dropped is not None and (dropped.topic, dropped.retain) == ("q1", True)
    assert len(box) == 2


def test_take_keeps_publish_order_across_retained_and_plain() -> None:
    box = Outbox(10)
    for i, retain in enumerate([False, True, True, False, True]):
        box.put("t", b"%d" % i, 1, retain)
    assert [m.payload for m in box.take(2)] == [b"0", b"1"]
    assert [m.payload for m in box.take(10)] == [b"2", b"3", b"4"]
    assert box.take(1) == []


def test_clear_reports_how_many_were_discarded() -> None:
    box = Outbox(5)
    box.put("t", b"x", 1, False)
    box.put("t", b"y", 1, True)
    assert box.clear() == 2
    assert len(box) == 0


def test_outbox_needs_room_for_one() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Outbox(0)


def test_backoff_doubles_to_five_seconds_and_resets() -> None:
    backoff = Backoff()
    assert [backoff.next() for _ in range(9)] == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 5.0]
    backoff.reset()
    assert backoff.next() == 0.1


@pytest.mark.parametrize(
    ("url", "host", "port", "tls", "user", "password"),
    [
        ("mqtt://127.0.0.1:1883", "127.0.0.1", 1883, False, None, None),
        ("mqtt://broker", "broker", 1883, False, None, None),
        ("mqtts://broker", "broker", 8883, True, None, None),
        ("mqtts://u:p@broker:9000", "broker", 9000, True, "u", "p"),
        ("mqtt://us%40er:p%3Ass@broker:1", "broker", 1, False, "us@er", "p:ss"),
        ("MQTT://[::1]:1884/", "::1", 1884, False, None, None),
    ],
)
def test_parse_broker_url(url: str, host: str, port: int, tls: bool, user: str | None, password: str | None) -> None:
    a = parse_broker_url(url)
    assert (a.host, a.port, a.tls, a.username, a.password) == (host, port, tls, user, password)


@pytest.mark.parametrize(
    "url",
    ["http://broker", "broker:1883", "mqtt://", "mqtt://h:1/path", "mqtt://h:?q", "mqtt://u:p@h:x"],
)
def test_bad_urls_are_refused_without_echoing_secrets(url: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_broker_url(url)
    assert ":p@" not in str(info.value)


def test_redaction_hides_the_password_everywhere() -> None:
    a = parse_broker_url("mqtts://bob:hunter2@broker:8883")
    assert a.redacted() == "mqtts://bob:***@broker:8883"
    assert "hunter2" not in repr(a)
    assert parse_broker_url("mqtt://bob@b").redacted() == "mqtt://bob@b:1883"
    assert parse_broker_url("mqtt://[::1]:1").redacted() == "mqtt://[::1]:1"


def test_credentials_from_env_override_the_url() -> None:
    env = {"EVSCHED_MQTT_USERNAME": "svc", "EVSCHED_MQTT_PASSWORD": "pw", "OTHER": "x"}
    creds = mqtt_credentials(env)
    a = parse_broker_url("mqtt://old:old@b").with_credentials(creds.username, creds.password)
    assert (a.username, a.password) == ("svc", "pw")
    assert mqtt_credentials({}) == Credentials(None, None)
    b = parse_broker_url("mqtt://keep:me@b")
    assert b.with_credentials(None, None) is b
