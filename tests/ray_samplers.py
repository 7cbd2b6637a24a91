"""Samplers for tests/test_ray.py, importable by name in a Ray actor (tests/ is on its path)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from specverify.samplers import reference

_calls = 0


def kills_its_actor_once(target_probs, draft_probs, draft_tokens, generator=None):
    """The reference, but on its third call in some process it kills that process's parent (the
    Ray actor supervising it) once per test, as a lost node would: a mark file says it happened."""
    global _calls
    _calls += 1
    mark = Path(os.environ["SPECVERIFY_TEST_KILL_MARK"])
    if _calls == 3 and not mark.exists():
        mark.write_text(str(os.getppid()))
        os.kill(os.getppid(), signal.SIGKILL)
    return reference(target_probs, draft_probs, draft_tokens, generator=generator)
