"""Samplers for tests/test_ray.py, importable by name in a Ray actor (tests/ is on its path)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from specverify.samplers import ReferenceSampler


def _parent_is_a_ray_actor() -> bool:
    """Whether this sampler's process was started by a Ray actor (Ray titles its workers ``ray::``)."""
    try:
        return b"ray::" in Path(f"/proc/{os.getppid()}/cmdline").read_bytes()
    except OSError:
        return False


class KillsItsActorOnce(ReferenceSampler):
    """The reference (same capabilities, so the same cases), but on its third call in a process a
    Ray actor started it kills that actor, once per test, as a lost node would: a mark file says
    it happened.  A sampler process on the driver's side never kills its parent (the test)."""

    calls = 0

    def __call__(self, target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
        type(self).calls += 1
        mark = os.environ.get("SPECVERIFY_TEST_KILL_MARK")  # absent in a sampler process started before the test set it
        if type(self).calls == 3 and mark and _parent_is_a_ray_actor() and not Path(mark).exists():
            Path(mark).write_text(str(os.getppid()))
            os.kill(os.getppid(), signal.SIGKILL)
        return super().__call__(target_probs, draft_probs, draft_tokens, generator, uniforms=uniforms)


class CountsWhereItRuns(ReferenceSampler):
    """The reference, that writes the rows it was called with to a file a process, named
    ``actor-<parent pid>`` where a Ray actor started it and ``local-<pid>`` elsewhere, under
    ``SPECVERIFY_TEST_HOSTS``: where the units ran."""

    rows = 0

    def __call__(self, target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
        type(self).rows += draft_tokens.shape[0]
        name = f"actor-{os.getppid()}" if _parent_is_a_ray_actor() else f"local-{os.getpid()}"
        hosts = os.environ.get("SPECVERIFY_TEST_HOSTS")  # absent in a sampler process started before the test set it
        if hosts is not None:
            (Path(hosts) / name).write_text(str(type(self).rows))
        return super().__call__(target_probs, draft_probs, draft_tokens, generator, uniforms=uniforms)


kills_its_actor_once = KillsItsActorOnce()
counts_where_it_runs = CountsWhereItRuns()
