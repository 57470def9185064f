"""One place for Kafka's connection and security options: the log's clients and the producer API share them."""

from __future__ import annotations

import ssl

from events.log.kafka_options import client_options
from events.producer import EvschedProducer


def test_client_options_leave_out_what_is_unset() -> None:
    assert client_options(("a:9092", "b:9092"), request_timeout_ms=None) == {
        "bootstrap_servers": ["a:9092", "b:9092"], "client_id": "evsched", "security_protocol": "PLAINTEXT",
    }


def test_the_producer_uses_the_logs_security_options() -> None:
    context = ssl.create_default_context()
    producer = EvschedProducer("k:9093", security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
                               sasl_plain_username="alice", sasl_plain_password="s3cret", ssl_context=context)
    log_side = client_options("k:9093", security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
                              sasl_plain_username="alice", sasl_plain_password="s3cret", ssl_context=context)
    security_keys = {"security_protocol", "sasl_mechanism", "sasl_plain_username", "sasl_plain_password",
                     "ssl_context"}
    assert {k: producer._options[k] for k in security_keys} == {k: log_side[k] for k in security_keys}
    assert "request_timeout_ms" not in producer._options  # the producer keeps aiokafka's own default
    assert producer._options["linger_ms"] == 5 and producer._options["client_id"] == "evsched-producer"
    assert "s3cret" not in repr(producer)
