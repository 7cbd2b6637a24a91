"""Samples to detect a planted deviation, against the noncentral chi-square bound.

    python benchmarks/bench_detection.py            # about 2 minutes on 2 cores
    python benchmarks/bench_detection.py --quick    # about 20 seconds, coarser numbers

For planted deviations of TV 0.01, 0.005 and 0.001 (the least favourable deviation on a law of 16
outcomes, alpha 1e-6, power 0.99) it measures:

* fixed-sample G-test: the samples the test plans (the noncentral chi-square bound) and the samples
  it actually needs to reach power 0.99, found by simulating power on a grid of sample sizes;
  the bound must be within 1.2x of what is needed;
* anytime-valid sequential test: the samples at which failing runs stop (median, 90th and 99th
  percentiles), below the bound;
* two-stage decisions: the expected samples of a correct sampler against one stage;
* calibration of the G-test's chi-square tail at small expected counts, down to 1e-5.

Everything is seeded; results go to benchmarks/results/detection.json with the machine's
description, and a summary is printed.  :func:`measure_detection` is the entry point for other
benchmarks (issue 9).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy
from scipy import optimize, stats

from specverify._seeds import derive_seed
from specverify.stats import gof_pvalues, least_favourable, mixture_log_e_value, plan_two_stage, samples_needed
from specverify.stats._gof import _bartlett
from specverify.stats._gof_resampling import g_statistic

RESULTS = Path(__file__).parent / "results"


def _rng(*parts: object) -> np.random.Generator:
    return np.random.default_rng(derive_seed("bench_detection", *parts))


def fixed_sample_power(law: np.ndarray, tv: float, samples: int, alpha: float, checks: int, seed: object) -> float:
    """Simulated power of gof_test on ``samples`` draws from the least favourable deviation."""
    observed = _rng("fixed", seed, samples).multinomial(samples, least_favourable(law, tv), size=checks)
    return float((gof_pvalues(observed, law, alpha=alpha) <= alpha).mean())


def samples_to_power(law: np.ndarray, tv: float, alpha: float, power: float, checks: int) -> dict[str, Any]:
    """Samples at which the simulated power reaches ``power``, against the bound.

    Power is simulated on a grid from 0.7x to 1.3x the bound; the noncentral chi-square curve with
    its noncentrality scaled by a fitted efficiency ``c`` is fitted to all grid points at once (far
    steadier than reading one crossing off noisy points), so the samples needed are ``bound / c``.
    """
    df = law.size - 1
    bound = samples_needed(tv, df, alpha, power)
    grid = np.round(bound * np.arange(0.70, 1.301, 0.05)).astype(int)
    powers = np.array([fixed_sample_power(law, tv, int(n), alpha, checks, tv) for n in grid])
    critical = stats.chi2.isf(alpha, df)

    def misfit(c: float) -> float:
        return float(((stats.ncx2.sf(critical, df, c * 4 * tv * tv * grid) - powers) ** 2).sum())

    efficiency = float(optimize.minimize_scalar(misfit, bounds=(0.3, 3.0), method="bounded").x)
    return {
        "bound": int(bound),
        "needed": bound / efficiency,
        "bound_over_needed": efficiency,
        "power_at_bound": fixed_sample_power(law, tv, int(bound), alpha, checks, ("at-bound", tv)),
        "grid": [{"samples": int(n), "power": float(p)} for n, p in zip(grid, powers)],
    }


def sequential_stopping(
    law: np.ndarray, tv: float, alpha: float, power: float, runs: int, looks: int = 400
) -> dict[str, Any]:
    """Where failing runs stop: the e-value checked ``looks`` times up to twice the bound."""
    bound = samples_needed(tv, law.size - 1, alpha, power)
    schedule = np.unique(np.linspace(2 * bound / looks, 2 * bound, looks).astype(int))
    alternative = least_favourable(law, tv)
    generator = _rng("sequential", tv)
    counts = np.zeros((runs, 1, law.size))
    stopped = np.full(runs, np.inf)
    previous = 0
    for look in schedule:  # loops over looks, vectorised over runs
        counts[:, 0] += generator.multinomial(int(look - previous), alternative, size=runs)
        previous = look
        crossed = (mixture_log_e_value(counts, law[None, :], tv) >= math.log(1 / alpha)) & np.isinf(stopped)
        stopped[crossed] = look
    finite = np.isfinite(stopped)

    def quantile(q: float) -> float:
        return float(np.quantile(stopped, q) / bound)

    return {
        "bound": int(bound),
        "looks": int(schedule.size),
        "stopped_by_twice_the_bound": float(finite.mean()),
        "median_over_bound": quantile(0.5),
        "p90_over_bound": quantile(0.9),
        "p99_over_bound": quantile(0.99),
    }


def measure_detection(
    tvs: tuple[float, ...] = (0.01, 0.005, 0.001),
    cells: int = 16,
    alpha: float = 1e-6,
    power: float = 0.99,
    checks: int = 2_000,
    runs: int = 1_000,
) -> list[dict[str, Any]]:
    """Fixed-sample and sequential samples to detect each TV, against the bound."""
    law = np.full(cells, 1.0 / cells)
    rows = []
    for tv in tvs:
        started = time.perf_counter()
        rows.append(
            {
                "tv": tv,
                "cells": cells,
                "alpha": alpha,
                "power": power,
                "fixed": samples_to_power(law, tv, alpha, power, checks),
                "sequential": sequential_stopping(law, tv, alpha, power, runs),
                "seconds": time.perf_counter() - started,
            }
        )
    return rows


def two_stage_costs() -> list[dict[str, Any]]:
    """Expected samples of a correct sampler, two stages against one (TV 0.01, 16 outcomes)."""
    out = []
    for alpha, screens, confirmations, shrink in [(1e-6, 1, 1, 0), (4.5e-6, 20, 2, 0), (4.5e-6, 20, 2, 290)]:
        for screen_alpha in (1e-2, 1e-3, 1e-4):
            plan = plan_two_stage(
                0.01,
                15,
                alpha,
                screens=screens,
                screen_alpha=screen_alpha,
                confirmations=confirmations,
                shrink_screens=shrink,
            )
            out.append(
                {
                    "alpha": alpha,
                    "screens": screens,
                    "confirmations": confirmations,
                    "shrink_screens": shrink,
                    "screen_alpha": screen_alpha,
                    "confirm_alpha": plan.confirm_alpha,
                    "screen_samples": plan.screen_samples,
                    "confirm_samples": plan.confirm_samples,
                    "single_stage_samples": plan.single_stage_samples,
                    "false_positive_bound": plan.false_positive_bound,
                    "cost_ratio": plan.cost_ratio,
                }
            )
    return out


def g_tail_calibration(draws: int) -> list[dict[str, Any]]:
    """Actual over nominal rejection rate of the Bartlett-corrected G at small expected counts."""
    cases = [
        ("16 cells expecting 5 each", np.full(16, 1 / 16), 80),
        ("16 cells expecting 10 each (the pooling floor)", np.full(16, 1 / 16), 160),
        ("16 cells expecting 20 each", np.full(16, 1 / 16), 320),
        ("4 cells expecting 10 beside 4 expecting 200", np.r_[np.full(4, 10.0), np.full(4, 200.0)] / 840, 840),
    ]
    out = []
    for name, law, n in cases:
        generator = _rng("tail", name)
        statistics = []
        for _ in range(max(1, draws // 1_000_000)):  # chunks of a million draws
            counts = generator.multinomial(n, law, size=min(draws, 1_000_000))
            statistics.append(g_statistic(counts, n * law[None, :]) / _bartlett(law, np.array(float(n))))
        g = np.concatenate(statistics)
        levels = [level for level in (1e-2, 1e-3, 1e-4, 1e-5) if level * g.size >= 20]
        out.append(
            {
                "law": name,
                "draws": int(g.size),
                "actual_over_nominal": {
                    f"{level:g}": float((g >= stats.chi2.isf(level, law.size - 1)).mean() / level) for level in levels
                },
            }
        )
    return out


def machine() -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "scipy": scipy.__version__,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer simulated checks (coarser numbers)")
    parser.add_argument("--out", type=Path, default=RESULTS / "detection.json")
    args = parser.parse_args(argv)
    checks, runs, draws = (500, 300, 1_000_000) if args.quick else (2_000, 1_000, 4_000_000)
    started = time.perf_counter()
    detection = measure_detection(checks=checks, runs=runs)
    result = {
        "machine": machine(),
        "settings": {
            "checks_per_sample_size": checks,
            "sequential_runs": runs,
            "tail_draws": draws,
            "quick": args.quick,
        },
        "detection": detection,
        "two_stage": two_stage_costs(),
        "g_tail_calibration": g_tail_calibration(draws),
    }
    result["seconds"] = time.perf_counter() - started
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")

    print(f"samples to detect a least-favourable deviation, 16 outcomes, alpha 1e-6, power 0.99 ({checks} checks/size)")
    print(
        f"{'TV':>7} {'bound':>10} {'needed':>10} {'bound/needed':>13} {'power@bound':>12} {'seq median':>11} "
        f"{'seq p90':>8} {'seq p99':>8}"
    )
    for row in detection:
        fixed, seq = row["fixed"], row["sequential"]
        print(
            f"{row['tv']:>7g} {fixed['bound']:>10,} {fixed['needed']:>10,.0f} {fixed['bound_over_needed']:>13.3f} "
            f"{fixed['power_at_bound']:>12.4f} {seq['median_over_bound']:>10.2f}x {seq['p90_over_bound']:>7.2f}x "
            f"{seq['p99_over_bound']:>7.2f}x"
        )
    print("two stages against one, correct sampler (TV 0.01, 16 outcomes):")
    for row in result["two_stage"]:
        print(
            f"  alpha {row['alpha']:g}, {row['screens']} screens at {row['screen_alpha']:g}, "
            f"{row['shrink_screens']} shrink screens: {row['cost_ratio']:.2f}x"
        )
    print("G-test tail, actual / nominal rejection rate:")
    for row in result["g_tail_calibration"]:
        rates = ", ".join(f"{k}: {v:.2f}" for k, v in row["actual_over_nominal"].items())
        print(f"  {row['law']}: {rates}")
    print(f"written to {args.out} in {result['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
