"""Engines for the engine family's tests that must be loaded by spec in a worker's process."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from specverify.samplers import EngineReference
from specverify.zoo._history_loops import _MinTokensBonusOnly

#: Where :data:`small_calls` notes each call's process id: a fixed path, not one passed by the
#: environment (a worker may have started before a test set it).
CALLS = Path(tempfile.gettempdir()) / f"specverify-test-engine-calls-{os.getuid()}.txt"


class _CallsNoted(EngineReference):
    """The min-tokens-bonus-only zoo engine, called 2,048 rows at a time (a law check makes several
    calls a look, which ``--workers`` spreads), noting each call's process id in :data:`CALLS`."""

    max_batch = 2_048

    def __call__(self, prompts, num_tokens, params, seed, speculative):  # noqa: ANN001, ANN204
        with CALLS.open("a") as noted:
            noted.write(f"{os.getpid()}\n")
        return super().__call__(prompts, num_tokens, params, seed, speculative)


small_calls = _CallsNoted(_MinTokensBonusOnly())
