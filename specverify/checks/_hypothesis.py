"""Hypothesis run as a pure function of a seed, for the smallest-case search (:mod:`._search`):
its settings, the isolation from the process's state and the machine's speed, and the stop a spent
shrinking budget raises."""

from __future__ import annotations

import contextlib
import math

from hypothesis import HealthCheck, Phase, Verbosity, settings

__all__ = ["ShrinkSpent", "isolated_search", "search_settings"]


def search_settings(max_examples: int) -> settings:
    """One round's search: generate then shrink, no database, no deadline, quiet; the seed is ours."""
    return settings(
        max_examples=max_examples,
        database=None,
        deadline=None,
        derandomize=False,
        phases=(Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
        verbosity=Verbosity.quiet,
    )


class ShrinkSpent(BaseException):
    """A round's shrinking budget is spent: ends Hypothesis's search at once (a ``BaseException``,
    so Hypothesis does not take it for a failure of its own to shrink)."""


@contextlib.contextmanager
def isolated_search():
    """Make a search a pure function of its seed: the same cases screened on any machine.

    Two Hypothesis internals, each guarded so that a future Hypothesis without them only loses the
    refinement:

    * Hypothesis seeds some draws with constants found in the *local* modules loaded in the
      process, so the same search would generate different cases in the CLI, a script or an xdist
      worker.  During the search no local constants are offered (and the cache of permitted
      constants is cleared on the way in and out, so the user's own tests are unaffected).
    * Hypothesis stops shrinking after five minutes of wall time, so a slower or busier machine would
      screen fewer cases and could reach another verdict.  During the search there is no wall-clock
      limit: shrinking is bounded by the count of cases screened (``_search.SHRINK_SCREENS_FACTOR``;
      past it the search raises :class:`ShrinkSpent`) and by Hypothesis's own count of shrinks.
    """
    from hypothesis.internal.conjecture import engine, providers

    previous_limit = getattr(engine, "MAX_SHRINKING_SECONDS", None)
    previous_locals = getattr(providers, "_get_local_constants", None)
    cache = getattr(getattr(providers, "CONSTANTS_CACHE", None), "cache", None)
    if previous_limit is not None:
        engine.MAX_SHRINKING_SECONDS = math.inf
    if previous_locals is not None and hasattr(providers, "Constants"):
        empty = providers.Constants()
        providers._get_local_constants = lambda: empty
    if cache is not None:
        cache.clear()
    try:
        yield
    finally:
        if previous_limit is not None:
            engine.MAX_SHRINKING_SECONDS = previous_limit
        if previous_locals is not None:
            providers._get_local_constants = previous_locals
        if cache is not None:
            cache.clear()
