"""The ``specverify`` command: its arguments (:mod:`.parser`), what each subcommand does
(:mod:`.commands`) and what a run prints (:mod:`.output`)."""

from .commands import main

__all__ = ["main"]
