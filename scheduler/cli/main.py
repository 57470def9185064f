"""The ``evsched`` command line: a thin layer that parses arguments and calls the real code."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from scheduler.cli.commands import add_commands
from scheduler.cli.flags import ExitOneParser
from scheduler.service.gc_thresholds import tuned_gc


class _Version(argparse.Action):
    """``evsched --version``: the package version and the build of the core that runs (events.native)."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> NoReturn:
        from importlib.metadata import PackageNotFoundError, version

        from events.native import loaded_build

        try:
            number = version("evsched")
        except PackageNotFoundError:
            number = "(not installed)"
        print(f"evsched {number}, core: {loaded_build()}")
        parser.exit(0)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (subcommands register themselves in cli_commands)."""
    parser = ExitOneParser(
        prog="evsched",
        description="An event-sourced cluster scheduler with YuniKorn semantics.",
    )
    parser.add_argument("--version", action=_Version, help="the version and which core runs (compiled or pure Python)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    add_commands(sub)
    return parser


# The optional extras (pyproject.toml) and the modules they bring: a command that needs one says which.
EXTRAS = {"aiokafka": "kafka", "kafka": "kafka", "aiomqtt": "mqtt", "paho": "mqtt", "aiohttp": "http",
          "prometheus_client": "http"}


def missing_extra(exc: ModuleNotFoundError) -> str | None:
    """The message for a missing optional dependency (None when the module is not one of an extra's)."""
    top = (exc.name or "").split(".")[0]
    extra = EXTRAS.get(top)
    if extra is None:
        return None
    return (f"evsched: this needs the optional extra [{extra}] ({top} is not installed); "
            f"install it with: pip install 'evsched[{extra}]'")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with tuned_gc():
            code: int = args.handler(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except ModuleNotFoundError as exc:
        message = missing_extra(exc)
        if message is None:
            raise
        print(message, file=sys.stderr)
        return 1
    return code


def run() -> None:
    """``python -m scheduler``."""
    sys.exit(main())
