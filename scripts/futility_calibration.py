"""Calibration of futility looks (``specverify.stats.FutilityPlan``): power kept, samples saved.

For each setting, many simulated decisions run the plan exactly as the loop family does
(:meth:`~specverify.stats.FutilityPlan.simulate`: counts drawn as multinomials up to each look,
:func:`~specverify.stats.gof_test` at each look, the final test at the end):

* under the **null** (counts from the law itself): how often it rejects (the level), how often it
  stops at a look, and its mean samples as a fraction of the fixed-sample design's;
* under the **least favourable** deviation of the planned TV (the hardest to see): how often it
  misses, against the ``1 - power`` the plan promises (with a binomial 99% upper bound).

Then the **schedule**: an experiment of several decisions stops only where all of them agree, so
the looks are chosen for experiments of 1 to 23 decisions (the loop family's).  Each candidate
schedule (looks, and the final test's share of the miss probability) is run under the null on the
chi-square limit (each decision's counts a Brownian motion in ``df`` dimensions, its statistic at a
look ``|W(t)|^2 / t``), and its mean samples are given against the fixed design's, with its final
sample's (what a failing sampler draws, since a look only accepts).  The library's (a
:class:`~specverify.stats.FutilityPlan`'s defaults) has the fewest on average among those whose
final sample stays within 10% of the fixed design's.

    python scripts/futility_calibration.py [--runs 4000] [--limit-runs 8000] [--output reports/futility-calibration.md]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from scipy import stats

from specverify.stats import FutilityPlan, least_favourable, samples_needed

#: (name, law, tv, alpha): a small-V law, a 64-cell law like the loop's 3-token sequences at a
#: level like a --tv 0.001 loop law group's share (1e-4 over 8 checks and 5 groups), and laws with
#: rare or forbidden cells.
SETTINGS = [
    ("7 cells", np.array([0.3, 0.25, 0.2, 0.1, 0.08, 0.05, 0.02]), 0.05, 1e-3),
    ("16 cells", np.random.default_rng(16).dirichlet(np.full(16, 2.0)), 0.02, 2.5e-6),
    ("64 cells", np.random.default_rng(64).dirichlet(np.full(64, 2.0)), 0.02, 2.5e-6),
    # cells a look must account for: a rare-cell tail (a final sample expects ~3 there), and an
    # exact test on two cells beside forbidden outcomes
    ("7 cells and 3 rare", np.array([0.3, 0.25, 0.2, 0.1, 0.08, 0.05, 0.02, 2e-4, 2e-4, 2e-4]), 0.05, 1e-6),
    ("2 cells and 2 forbidden", np.array([0.7, 0.3, 0.0, 0.0]), 0.05, 1e-6),
]

#: (name, [(df, alpha)] of its decisions): experiments as the loop family runs them at --tv 0.001
#: (a run's alpha 1e-4 over 8 checks, then over each check's decisions).
EXPERIMENTS = [
    ("1 decision (loop.law[plain])", [(50, 1.25e-5)]),
    ("2 decisions (temperature)", [(63, 1.25e-5 / 2)] * 2),
    ("3 decisions (mixed)", [(63, 1.25e-5 / 3)] * 3),
    ("5 decisions (separating)", [(40, 1.25e-5 / 5)] * 5),
    ("23 decisions (positions)", [(15, 1.25e-5 / 23)] * 23),
]
#: The library's schedule: a plan's defaults.
LIBRARY = FutilityPlan(tv=0.01, df=1, alpha=0.01, power=0.99)
LOOKS, FINAL_SHARE = LIBRARY.looks, LIBRARY.final_share
#: Candidate schedules (looks, final share); the first is the library's.
SCHEDULES = [
    (LOOKS, FINAL_SHARE),
    ((0.25, 0.5, 0.75), 0.5),
    ((0.3, 0.4, 0.5, 0.6, 0.7), 0.2),
    ((0.3, 0.4, 0.5, 0.6, 0.7, 0.8), 0.3),
    ((0.3, 0.45, 0.6, 0.75), 0.3),
    ((0.4, 0.55, 0.7, 0.85), 0.5),
]


def limit_cost(
    looks: tuple[float, ...],
    final_share: float,
    decisions: list[tuple[int, float]],
    tv: float,
    power: float,
    runs: int,
    rng: np.random.Generator,
) -> tuple[float, float]:
    """An experiment's mean samples under the null, and its final sample (what a failing sampler
    draws), each against the fixed design's, on the chi-square limit: it stops at the first look
    where every decision's statistic is below its bound."""
    t = np.asarray(looks)
    futile = np.ones((runs, t.size), dtype=bool)
    final = fixed = 0
    for df, alpha in decisions:
        plan = FutilityPlan(tv, df, alpha, power, looks=looks, final_share=final_share)
        final, fixed = final + plan.final_samples, fixed + samples_needed(tv, df, alpha, power)
        steps = rng.standard_normal((runs, t.size, df)) * np.sqrt(np.diff(t, prepend=0.0))[None, :, None]
        statistic = (np.cumsum(steps, axis=1) ** 2).sum(axis=-1) / t
        futile &= statistic < np.array([plan.bound(samples, df) for samples in plan.look_samples])
    stopped = np.where(futile.any(axis=1), futile.argmax(axis=1), t.size)
    return float(final * np.append(t, 1.0)[stopped].mean() / fixed), final / fixed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4000)
    parser.add_argument("--power", type=float, default=0.99)
    parser.add_argument("--limit-runs", type=int, default=8000, help="simulated experiments per schedule and size")
    parser.add_argument("--output", type=Path, default=Path("reports/futility-calibration.md"))
    args = parser.parse_args()
    lines = [
        "# Futility looks: power kept, samples saved",
        "",
        f"`python scripts/futility_calibration.py --runs {args.runs} --limit-runs {args.limit_runs}`; power "
        f"{args.power}, looks at {', '.join(map(str, LOOKS))} of a final sample sized for {FINAL_SHARE} of the miss "
        "probability.",
        "",
        "| law | TV | alpha | fixed n | final n | null: mean n / fixed | null: stopped at a look | null: rejected | "
        "least favourable: missed (promised <=) | 99% upper bound on the miss rate |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for index, (name, law, tv, alpha) in enumerate(SETTINGS):
        law = law / law.sum()
        df = int((law > 0).sum()) - 1
        plan = FutilityPlan(tv=tv, df=df, alpha=alpha, power=args.power)
        fixed = samples_needed(tv, df, alpha, args.power)
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
    lines += [
        "",
        "## The schedule: experiments whose decisions must all agree to stop",
        "",
        f"Null, chi-square limit, {args.limit_runs} experiments each; mean samples against the fixed design's "
        "(TV 0.001; the first row is the library's schedule).",
        "",
        "| looks | final share | "
        + " | ".join(name for name, _ in EXPERIMENTS)
        + " | mean | failing: final n / fixed |",
        "|---|---|" + "---|" * (len(EXPERIMENTS) + 2),
    ]
    rng = np.random.default_rng(len(SETTINGS))
    for looks, share in SCHEDULES:
        costs, finals = zip(
            *(
                limit_cost(looks, share, decisions, 0.001, args.power, args.limit_runs, rng)
                for _, decisions in EXPERIMENTS
            )
        )
        lines.append(
            f"| {', '.join(map(str, looks))} | {share} | "
            + " | ".join(f"{c:.3f}" for c in costs)
            + f" | {np.mean(costs):.3f} | {max(finals):.3f} |"
        )
        print(lines[-1], flush=True)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
