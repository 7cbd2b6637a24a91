"""The engine family end to end over seeds: false alarms with speculation off on both sides, and
whether each zoo engine is caught on every seed.

    python benchmarks/bench_engine_null.py                 # 20 seeds, quick: about 15 minutes on 2 cores
    python benchmarks/bench_engine_null.py --seeds 5
    python benchmarks/bench_engine_null.py --seeds 1 --budget standard --faults   # each fault at standard

Each run is ``specverify.check_engine`` at the quick budget, in this process, on the law checks
(the null members) or on the checks a member declares (the faulty ones).  The run's false-alarm
bound is its alpha (1e-4), so over 20 seeds of two null members a single false alarm has
probability under 0.004: any is a defect.  Results go to benchmarks/results/engine-null.{json,md}.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from _results import machine, table, write

import specverify
from specverify._budgets import BUDGETS
from specverify.zoo import ENGINE_MEMBERS

RESULTS = Path(__file__).parent / "results"
NULLS = ("engine-reference", "engine-speculation-never-on")


def run(name: str, seed: int, budget: str = "quick") -> tuple[set[str], float, float]:
    """The checks one member failed at ``budget`` for ``seed``, the largest smallest-detectable TV its
    law checks stated, and its seconds."""
    member = ENGINE_MEMBERS[name]
    select = list(member.caught_by) if member.caught_by else ["engine.law[*]"]
    start = time.perf_counter()
    result = specverify.check_engine(member.engine, budget=budget, seed=seed, isolation="in-process", select=select)
    claims = [c.min_detectable_tv for c in result.checks if c.min_detectable_tv is not None]
    failed = {c.id for c in result.checks if c.status == "fail"}
    return failed, max(claims, default=float("nan")), time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--budget", default="quick", help="the budget of every run (default quick)")
    parser.add_argument("--faults", action="store_true", help="the faulty members only (no null member)")
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args()
    rows = []
    for name, member in ENGINE_MEMBERS.items():
        if args.faults and name in NULLS:
            continue
        runs = [run(name, seed, args.budget) for seed in range(args.seeds)]
        met = sum(failed == set(member.caught_by) for failed, _, _ in runs)  # a null member: none failed
        rows.append(
            {
                "member": name,
                "declared": str(member.verdict),
                "seeds": args.seeds,
                "met": met,
                "worst_claimed_tv": max(tv for _, tv, _ in runs),
                "seconds": sum(s for _, _, s in runs),
            }
        )
        print(rows[-1], flush=True)
    lines = [
        f"# The engine family over seeds ({args.budget})",
        "",
        f"{args.seeds} seeds a member, in-process. A null member (speculation never changes the law) must never "
        "fail a law check; a faulty member must be caught by the checks it declares on every seed. The "
        f"{args.budget} budget's TV is {BUDGETS[args.budget].tv:g}; 'worst claimed TV' is the largest "
        "smallest-detectable TV a law check stated.",
        "",
        *table(
            ["member", "declared", "seeds meeting it", "worst claimed TV", "seconds"],
            [
                [
                    r["member"],
                    r["declared"],
                    f"{r['met']} / {r['seeds']}",
                    f"{r['worst_claimed_tv']:.3g}",
                    f"{r['seconds']:.0f}",
                ]
                for r in rows
            ],
        ),
    ]
    stem = "engine-null" if args.budget == "quick" else f"engine-null-{args.budget}"
    page = write(args.out, stem, {"machine": machine(), "rows": rows}, lines)
    print("\n".join(lines))
    print(f"written: {page}")


if __name__ == "__main__":
    main()
