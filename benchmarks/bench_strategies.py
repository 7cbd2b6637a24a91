"""Generation speed of specverify's strategies: examples per second (no test body).

Run from the repository root: ``python benchmarks/bench_strategies.py``.
"""

from __future__ import annotations

import time

from hypothesis import HealthCheck, Phase, given, settings

from specverify import strategies as sv

EXAMPLES = 200

CASES = {
    "step_batches() defaults": lambda: sv.step_batches(),
    "step_batches(fit.conditional: V<=8, K<=4, 3 cases)": lambda: sv.step_batches(max_vocab=8, max_k=4, max_cases=3),
    "model_cases() defaults": lambda: sv.model_cases(),
    "model_cases(fit.model[random]: V<=4, K<=3, 256 cells)": lambda: sv.model_cases(
        max_vocab=4, max_k=3, max_cells=256
    ),
    "model_cases(fit.model[chain])": lambda: sv.model_cases(max_vocab=4, max_k=3, max_cells=256, kind="chain"),
    "model_cases(fit.model[low-precision])": lambda: sv.model_cases(
        max_vocab=4, max_k=3, max_cells=256, kind="low-precision"
    ),
    "model_cases(V<=8, K<=4, 4096 cells)": lambda: sv.model_cases(max_vocab=8, max_k=4, max_cells=4096),
}


def rate(strategy, examples: int = EXAMPLES) -> float:
    """Examples per second, generation only, derandomised so runs compare."""
    seen = []

    @settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def consume(case):
        seen.append(case)

    best = 0.0
    for _ in range(3):  # best of three: the machine may be shared
        seen.clear()
        start = time.perf_counter()
        consume()
        best = max(best, len(seen) / (time.perf_counter() - start))
    return best


if __name__ == "__main__":
    rate(sv.step_cases(), 20)  # warm up imports and torch
    for name, make in CASES.items():
        print(f"{name:58s} {rate(make()):8.0f} examples/s")
