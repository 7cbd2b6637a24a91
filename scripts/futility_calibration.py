"""Calibration of futility looks (``specverify.stats.FutilityPlan``): power kept, samples saved.

For each setting, many simulated decisions run the plan exactly as the loop family does
(:meth:`~specverify.stats.FutilityPlan.simulate`: counts drawn as multinomials up to each look,
:func:`~specverify.stats.gof_test` at each look, the final test at the end):

* under the **null** (counts from the law itself): how often it rejects (the level), how often it
  stops at a look, and its mean samples as a fraction of the fixed-sample design's;
* under the **least favourable** deviation of the planned TV (the hardest to see): how often it
  misses, against the ``1 - power`` the plan promises (with a binomial 99% upper bound).

    python scripts/futility_calibration.py [--runs 4000] [--output reports/futility-calibration.md]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from scipy import stats

from specverify.stats import FutilityPlan, least_favourable, samples_needed

#: (name, law, tv, alpha): a small-V law, a 64-cell law like the loop's 3-token sequences, and a
#: level like a --tv 0.001 loop law group's share (1e-4 over 8 checks and 5 groups).
SETTINGS = [
    ("7 cells", np.array([0.3, 0.25, 0.2, 0.1, 0.08, 0.05, 0.02]), 0.05, 1e-3),
    ("16 cells", np.random.default_rng(16).dirichlet(np.full(16, 2.0)), 0.02, 2.5e-6),
    ("64 cells", np.random.default_rng(64).dirichlet(np.full(64, 2.0)), 0.02, 2.5e-6),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4000)
    parser.add_argument("--power", type=float, default=0.99)
    parser.add_argument("--output", type=Path, default=Path("reports/futility-calibration.md"))
    args = parser.parse_args()
    lines = [
        "# Futility looks: power kept, samples saved",
        "",
        f"`python scripts/futility_calibration.py --runs {args.runs}`; power {args.power}, looks at "
        "1/4, 1/2, 3/4 of a final sample sized for half the miss probability.",
        "",
        "| law | TV | alpha | fixed n | final n | null: mean n / fixed | null: stopped at a look | null: rejected | "
        "least favourable: missed (promised <=) | 99% upper bound on the miss rate |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for index, (name, law, tv, alpha) in enumerate(SETTINGS):
        law = law / law.sum()
        plan = FutilityPlan(tv=tv, df=law.size - 1, alpha=alpha, power=args.power)
        fixed = samples_needed(tv, law.size - 1, alpha, args.power)
        rng = np.random.default_rng(index)
        null = [plan.simulate(law, law, rng) for _ in range(args.runs)]
        worst = least_favourable(law, tv)
        missed = sum(not plan.simulate(law, worst, rng)[0] for _ in range(args.runs))
        upper = stats.beta.ppf(0.99, missed + 1, args.runs - missed)
        mean = np.mean([n for _, n in null]) / fixed
        lines.append(
            f"| {name} | {tv:g} | {alpha:g} | {fixed:,} | {plan.final_samples:,} | {mean:.3f} | "
            f"{np.mean([n < plan.final_samples for _, n in null]):.3f} | {sum(r for r, _ in null)} of {args.runs} | "
            f"{missed} of {args.runs} ({missed / args.runs:.4f}; {1 - args.power:g}) | {upper:.4f} |"
        )
        print(lines[-1], flush=True)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
