"""Two-sample calibration: the test engine mode uses, its false-alarm rate and its stated power, measured.

    python benchmarks/bench_two_sample.py            # about a minute on 2 cores
    python benchmarks/bench_two_sample.py --checks 500

For laws of 4, 16 and 64 outcomes (some rare, as a next-token law is), in one group and in 8 groups
(prefixes), it measures:

* the null: both arms from one law, ``n`` samples each; the rejection rate at 1e-2 and 1e-3 against
  the nominal level;
* the power: arms sized by :func:`~specverify.stats.two_sample_samples_needed` to detect TV 0.05 at
  power 0.9 (alpha 1e-3), spread evenly over the groups, the least favourable difference of exactly
  that TV planted in every group of one arm, then of the other (the joint law's TV is then 0.05); the
  detection rate against 0.9, and at 0.8x the TV (where it must fall).

Everything is seeded; results go to benchmarks/results/two-sample.{json,md} with the machine's description.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from _results import machine, table, write

from specverify._seeds import derive_seed
from specverify.stats import least_favourable, two_sample_min_tv, two_sample_samples_needed, two_sample_test

RESULTS = Path(__file__).parent / "results"
TV, ALPHA, POWER = 0.05, 1e-3, 0.9


def _law(k: int, shift: int = 0) -> np.ndarray:
    """``k`` outcomes: three quarters of them common, the rest rare (down to 1/20 of a common one)."""
    common = np.ones(k - k // 4)
    rare = np.geomspace(0.5, 0.05, k // 4) if k // 4 else np.zeros(0)
    law = np.roll(np.concatenate([common, rare]), shift)
    return law / law.sum()


def _counts(generator: np.random.Generator, laws: np.ndarray, n: int, checks: int) -> np.ndarray:
    return np.stack([generator.multinomial(n, law, size=checks) for law in laws], axis=1)  # [checks, G, C]


def _rate(a: np.ndarray, b: np.ndarray, level: float) -> float:
    return float(np.mean([two_sample_test(x, y).pvalue <= level for x, y in zip(a, b)]))


def measure(k: int, groups: int, checks: int) -> dict[str, object]:
    laws = np.stack([_law(k, shift=g) for g in range(groups)])
    df = groups * (k - 1)
    # each arm's samples, spread evenly over the groups: the joint law's TV is what is planned for
    n = -(-two_sample_samples_needed(TV, df, ALPHA, POWER) // groups)
    generator = np.random.default_rng(derive_seed("bench_two_sample", k, groups))
    same = _counts(generator, laws, n, checks), _counts(generator, laws, n, checks)
    row: dict[str, object] = {"outcomes": k, "groups": groups, "samples_per_arm_per_group": n}
    row["null_rate_1e-2"] = _rate(*same, 1e-2)
    row["null_rate_1e-3"] = _rate(*same, 1e-3)
    for scale in (1.0, 0.8):
        moved = np.stack([least_favourable(law, scale * TV) for law in laws])
        on = _rate(_counts(generator, moved, n, checks), _counts(generator, laws, n, checks), ALPHA)
        off = _rate(_counts(generator, laws, n, checks), _counts(generator, moved, n, checks), ALPHA)
        row[f"detected_at_{scale:g}tv_on_moved"] = on
        row[f"detected_at_{scale:g}tv_off_moved"] = off
    row["stated_tv"] = two_sample_min_tv(n * groups, n * groups, df, ALPHA, POWER)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", type=int, default=1_000, help="simulated runs a figure (default 1,000)")
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args()
    start = time.perf_counter()
    rows = [measure(k, groups, args.checks) for k in (4, 16, 64) for groups in (1, 8)]
    seconds = time.perf_counter() - start
    header = ["outcomes", "groups", "n per arm and group", "null 1e-2", "null 1e-3", "detected at TV", "at 0.8 TV"]
    lines = [
        "# Two-sample calibration (engine mode's test)",
        "",
        f"Arms sized for TV {TV} at power {POWER}, alpha {ALPHA}; {args.checks:,} simulated runs a figure;"
        f" detection is the smaller of the two directions (either arm moved). {seconds:.0f} s.",
        "",
        *table(
            header,
            [
                [
                    r["outcomes"],
                    r["groups"],
                    f"{r['samples_per_arm_per_group']:,}",
                    f"{r['null_rate_1e-2']:.4f}",
                    f"{r['null_rate_1e-3']:.4f}",
                    f"{min(r['detected_at_1tv_on_moved'], r['detected_at_1tv_off_moved']):.3f}",  # type: ignore[type-var]
                    f"{min(r['detected_at_0.8tv_on_moved'], r['detected_at_0.8tv_off_moved']):.3f}",  # type: ignore[type-var]
                ]
                for r in rows
            ],
        ),
    ]
    data = {"machine": machine(), "tv": TV, "alpha": ALPHA, "power": POWER, "checks": args.checks, "rows": rows}
    page = write(args.out, "two-sample", data, lines)
    print("\n".join(lines))
    print(f"written: {page}")


if __name__ == "__main__":
    main()
