"""``python -m scheduler`` runs the ``evsched`` command line."""

from scheduler.cli.main import run

run()
