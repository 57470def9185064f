"""Quantity parsing: YuniKorn's own ParseQuantity/ParseVCore tables plus our edge cases."""

from __future__ import annotations

import pytest

from scheduler.config import parse_quantity

K, M, G, T, P, E = 10**3, 10**6, 10**9, 10**12, 10**15, 10**18
KI, MI, GI, TI, PI, EI = 1 << 10, 1 << 20, 1 << 30, 1 << 40, 1 << 50, 1 << 60

# pkg/common/resources/quantity_test.go TestParseQuantity (input, expected or error fragment)
YUNIKORN_QUANTITY = [
    ("0", 0),
    ("1", 1),
    (" 25k ", 25 * K),
    (" 25  k ", 25 * K),
    ("9223372036854775807", 9223372036854775807),
    ("9223372036854775808", "overflow"),
    ("1000E", "overflow"),
    ("5X", "invalid"),
    ("500m", "invalid"),
    ("-1", "invalid"),
    ("2k", 2 * K),
    ("3M", 3 * M),
    ("4G", 4 * G),
    ("5T", 5 * T),
    ("6P", 6 * P),
    ("7E", 7 * E),
    ("2Ki", 2 * KI),
    ("3Mi", 3 * MI),
    ("4Gi", 4 * GI),
    ("5Ti", 5 * TI),
    ("6Pi", 6 * PI),
    ("7Ei", 7 * EI),
]

# TestParseVCore
YUNIKORN_VCORE = [
    ("0", 0),
    ("1", 1000),
    (" 25k ", 25 * K * 1000),
    (" 25  k ", 25 * K * 1000),
    ("9223372036854775", 9223372036854775000),
    ("9223372036854776", "overflow"),
    ("1000P", "overflow"),
    ("5X", "invalid"),
    ("500m", 500),
    ("-1", "invalid"),
    ("2k", 2 * K * 1000),
    ("3M", 3 * M * 1000),
    ("4G", 4 * G * 1000),
    ("5T", 5 * T * 1000),
    ("6P", 6 * P * 1000),
    ("7E", "overflow"),
    ("2Ki", 2 * 1000 * KI),
    ("3Mi", 3 * 1000 * MI),
    ("4Gi", 4 * 1000 * GI),
    ("5Ti", 5 * 1000 * TI),
    ("6Pi", 6 * 1000 * PI),
    ("7Ei", "overflow"),
]

OURS = [
    ("memory", 5, 5),  # a YAML int
    ("memory", 0, 0),
    ("vcore", 2, 2000),
    ("vcore", "0m", 0),
    ("vcore", "1500m", 1500),
    ("vcore", "9223372036854775807m", 9223372036854775807),
    ("memory", "1G", 10**9),
    ("memory", "1Gi", 2**30),
    ("memory", "007", 7),
    ("gpu", "3", 3),  # any other resource is a plain count
    ("VCORE", "1", 1),  # the vcore rule is case-sensitive, like YuniKorn's
    ("memory", "\u00a012Ki\u3000", 12 * KI),  # Go's TrimSpace trims unicode spaces
    ("memory", "1\tk", 1000),
    ("memory", -1, "invalid"),
    ("memory", 2**63, "overflow"),
    ("vcore", "1.5", "invalid"),  # no fractions, also not for vcore
    ("vcore", "0.5", "invalid"),
    ("memory", "+1", "invalid"),
    ("memory", "1e3", "invalid"),
    ("memory", "", "invalid"),
    ("memory", "   ", "invalid"),
    ("memory", "Gi", "invalid"),
    ("memory", "1K", "invalid suffix"),  # only lower-case k for 10^3
    ("memory", "1Ki ", 1024),
    ("memory", "1mi", "invalid suffix"),
    ("memory", "1m", "invalid suffix"),  # milli only for vcore
    ("vcore", "1mi", "invalid suffix"),
    ("memory", "1 0", "invalid"),
    ("memory", "1_000", "invalid"),
    ("memory", "0x10", "invalid"),
    ("memory", "\u0663", "invalid"),  # a non-ASCII digit
    ("memory", "1\x1c", "invalid"),  # \x1c is Python white space, not Go's
    ("memory", True, "expected a string or an integer"),
    ("memory", 1.0, "expected a string or an integer"),
    ("memory", None, "expected a string or an integer"),
]


def _check(name: str, value: object, expected: int | str) -> None:
    if isinstance(expected, int):
        assert parse_quantity(name, value) == expected
    else:
        with pytest.raises(ValueError, match=expected):
            parse_quantity(name, value)


@pytest.mark.parametrize(("value", "expected"), YUNIKORN_QUANTITY)
def test_yunikorn_parse_quantity_table(value: str, expected: int | str) -> None:
    _check("memory", value, expected)


@pytest.mark.parametrize(("value", "expected"), YUNIKORN_VCORE)
def test_yunikorn_parse_vcore_table(value: str, expected: int | str) -> None:
    _check("vcore", value, expected)


@pytest.mark.parametrize(("name", "value", "expected"), OURS)
def test_quantity_edge_cases(name: str, value: object, expected: int | str) -> None:
    _check(name, value, expected)


def test_error_names_resource_and_value() -> None:
    with pytest.raises(ValueError, match=r"'12X'.*'memory'"):
        parse_quantity("memory", "12X")
