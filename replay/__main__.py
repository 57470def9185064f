"""``python -m replay`` runs the ``evsched`` command line, like ``python -m scheduler`` (CONTRACT §6)."""

from scheduler.cli.main import run

run()
