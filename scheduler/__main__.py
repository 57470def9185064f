"""``python -m scheduler`` runs the ``evsched`` command line."""

from scheduler.cli import run

run()
