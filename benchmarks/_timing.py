"""How a benchmark times functions against each other: median seconds a call, the functions taking
turns within each round, so a load that comes and goes on a shared machine weighs on all of them
alike and their ratios hold."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def timed(fns: dict[str, Callable[[], object]], repeats: int, min_seconds: float = 0.2) -> dict[str, float]:
    """Median seconds per call of each function over ``repeats`` rounds of at least ``min_seconds``
    each (one warm-up call each first)."""
    per_call: dict[str, list[float]] = {name: [] for name in fns}
    for fn in fns.values():
        fn()
    for _ in range(repeats):
        for name, fn in fns.items():
            calls, start = 0, time.perf_counter()
            while True:
                fn()
                calls += 1
                elapsed = time.perf_counter() - start
                if elapsed >= min_seconds:
                    break
            per_call[name].append(elapsed / calls)
    return {name: statistics.median(values) for name, values in per_call.items()}
