"""Samplers for tests/test_ray.py, importable by name in a Ray actor (tests/ is on its path)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from specverify.samplers import ReferenceSampler


class KillsItsActorOnce(ReferenceSampler):
    """The reference (same capabilities, so the same cases), but on its third call in some process
    it kills that process's parent, the Ray actor supervising it, once per test, as a lost node
    would: a mark file says it happened."""

    calls = 0

    def __call__(self, target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
        type(self).calls += 1
        mark = Path(os.environ["SPECVERIFY_TEST_KILL_MARK"])
        if type(self).calls == 3 and not mark.exists():
            mark.write_text(str(os.getppid()))
            os.kill(os.getppid(), signal.SIGKILL)
        return super().__call__(target_probs, draft_probs, draft_tokens, generator, uniforms=uniforms)


kills_its_actor_once = KillsItsActorOnce()
