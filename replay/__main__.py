"""``python -m replay`` runs the ``evsched`` command line, like ``python -m scheduler`` (docs/contract.md §6)."""

from scheduler.cli.main import run

run()
