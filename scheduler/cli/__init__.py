"""The ``evsched`` command line: one thin module per command group; nothing below it sees argv."""

from scheduler.cli.main import main, run

__all__ = ["main", "run"]
