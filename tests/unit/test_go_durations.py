"""Queue delays parse as Go's ``time.ParseDuration`` does (scheduler/config/godurations.py), checked against Go itself.

YuniKorn reads ``preemption.delay``, ``application.unschedasks.backoff.delay`` and
``quota.preemption.delay`` with ``time.ParseDuration``; a text Go refuses, or a duration that is
not positive, falls back to the default. The parser must agree with Go on every text, to the
nanosecond: a fraction Go truncates (``8.05ms`` is 8,050,000 ns, not a float's 8,050,000.000001),
a fraction of a nanosecond (0), a sum past 2⁶³ − 1 ns (an error). The Go side runs the real
``time.ParseDuration`` (a Go toolchain, as the conformance harness needs: a skip without one,
a failure under CI).
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from scheduler.config.godurations import go_duration_ns, go_duration_us

GO_PROGRAM = """package main

import (
	"bufio"
	"fmt"
	"os"
	"time"
)

func main() {
	in := bufio.NewScanner(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for in.Scan() {
		d, err := time.ParseDuration(in.Text())
		if err != nil {
			fmt.Fprintln(out, "error")
		} else {
			fmt.Fprintln(out, int64(d))
		}
	}
}
"""

EDGES = [
    "0", "-0", "+0", "", "s", ".s", "1.s", ".5s", "1..5s", "1", "10", "1.5", "-1ns", "+1ns", "1ns", "0.5ns",
    "0.999999999ns", "8.05ms", "16.1ms", "32.7ms", "1.1s", "4.35s", "1h1.1s", "1m30s", "1h2m3s4ms5us6ns",
    "1µs", "1μs", "1us", "1mss", "1sm", "1S", "1H", "1 s", " 1s", "1s ", "٣s", "²s", "1e3s", "0x10s",
    "2562047h", "2562048h", "2562047h47m16s", "2562047h47m16.854775807s", "2562047h47m16.854775808s",
    "-2562047h47m16.854775808s", "9223372036854775807ns", "9223372036854775808ns", "-9223372036854775808ns",
    "99999999999999999999ns", "0.000000000000000000000000001s", "1.00000000000000000000000000001h",
    "3000000h", "0.1ns", "1.0000001s", "123456789.123456789ms",
]


def generated(count: int) -> list[str]:
    """Texts of Go's grammar, mostly valid: 1-3 parts of digits, a fraction, a unit; some noise."""
    rng = random.Random(20261128)
    units = ["ns", "us", "µs", "ms", "s", "m", "h", "", "x"]
    out = []
    for _ in range(count):
        text = rng.choice(["", "", "", "-", "+"])
        for _ in range(rng.randint(1, 3)):
            whole = str(rng.randint(0, 10 ** rng.randint(0, 12))) if rng.random() < 0.9 else ""
            fraction = "." + "".join(rng.choice("0123456789") for _ in range(rng.randint(0, 12))) \
                if rng.random() < 0.5 else ""
            text += whole + fraction + rng.choice(units)
        out.append(text)
    return out


def go_parse(texts: list[str], workdir: Path) -> list[int | None]:
    if shutil.which("go") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI needs Go to check the duration parser against time.ParseDuration")
        pytest.skip("no Go toolchain on the PATH: the duration parser is checked against time.ParseDuration")
    source = workdir / "parse.go"
    source.write_text(GO_PROGRAM)
    done = subprocess.run(["go", "run", str(source)], input="\n".join(texts) + "\n", capture_output=True,
                          text=True, timeout=280, check=True, cwd=workdir)
    return [None if line == "error" else int(line) for line in done.stdout.splitlines()]


def test_every_text_parses_as_go_parses_it(tmp_path: Path) -> None:
    texts = [t for t in EDGES + generated(3000) if "\n" not in t]
    want = go_parse(texts, tmp_path)
    assert len(want) == len(texts)
    disagree = [(text, ours, go) for text, go in zip(texts, want, strict=True)
                if (ours := go_duration_ns(text)) != go]
    assert disagree == []


def test_microseconds_round_a_fraction_away_from_zero() -> None:
    # log time counts microseconds: 1 ns of delay is 1 µs, 8.05 ms is exactly 8,050 µs
    assert [go_duration_us(t) for t in ("1ns", "-1ns", "999ns", "1001ns", "8.05ms", "0.5ns", "soon")] == [
        1, -1, 1, 2, 8050, 0, None]
