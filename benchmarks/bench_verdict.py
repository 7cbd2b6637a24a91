"""Time to verdict: the battery on the reference sampler, and time to the first failure on each zoo member.

Ratios to the baseline measured in the same run (the reference sampler's full run at the same
budget), plus the harness's own overhead: the share of a run's wall time not spent inside the
sampler.

    python benchmarks/bench_verdict.py [--budget quick|standard] [--members PATTERN ...] [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import platform
import time
from pathlib import Path

import torch

import specverify
from specverify._budgets import get_budget
from specverify.zoo import ZOO


def timed_run(sampler, budget) -> dict[str, object]:
    start = time.perf_counter()
    first: list[float] = []

    def note(result) -> None:
        if result.status in ("fail", "error") and not first:
            first.append(time.perf_counter() - start)

    result = specverify.check(sampler, budget=budget, seed=0, on_result=note)
    wall = time.perf_counter() - start
    inside = result.run["sampler_seconds"]
    return {
        "verdict": result.verdict,
        "seconds": wall,
        "first_failure_seconds": first[0] if first else None,
        "sampler_seconds": inside,
        "harness_share": (wall - inside) / wall,
        "rows": result.run["sampler_rows"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", default="quick", choices=["quick", "standard", "thorough"])
    parser.add_argument("--members", nargs="*", default=["*"], help="glob patterns on zoo member names")
    parser.add_argument("--out", default="benchmarks/results")
    args = parser.parse_args()
    budget = get_budget(args.budget).with_(timeout=60.0)
    baseline = timed_run(specverify.reference, budget)
    print(
        f"reference sampler, {args.budget} budget: {baseline['verdict']} in {baseline['seconds']:.1f} s, "
        f"{baseline['rows']:,} rows; harness share of the wall time {baseline['harness_share']:.0%}"
    )
    rows = []
    for name, member in ZOO.items():
        if not any(fnmatch.fnmatchcase(name, p) for p in args.members) or member.verdict == "conformant":
            continue
        run = timed_run(member, budget)
        run["member"] = name
        run["declared"] = member.verdict
        rows.append(run)
        first = run["first_failure_seconds"]
        ratio = (
            f"{first / baseline['seconds']:.2f}x of the reference's verdict time" if first is not None else "no failure"
        )
        print(
            f"{name:34s} {run['verdict']:20s} first failure {first if first is None else round(first, 1)} s ({ratio})"
        )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    machine = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "torch": torch.__version__,
    }
    (out / f"verdict-{args.budget}.json").write_text(
        json.dumps({"machine": machine, "budget": args.budget, "reference": baseline, "members": rows}, indent=2)
    )
    lines = [
        f"# Time to verdict, {args.budget} budget",
        "",
        f"`python benchmarks/bench_verdict.py --budget {args.budget}` on {machine}",
        "",
        f"Reference sampler (the baseline): {baseline['verdict']} in {baseline['seconds']:.1f} s over "
        f"{baseline['rows']:,} rows; the harness's own share of that time is {baseline['harness_share']:.0%} (the rest "
        "is the sampler).",
        "",
        "| member | declared | verdict | first failure (s) | ratio to the reference's verdict time | full run (s) |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        first = r["first_failure_seconds"]
        lines.append(
            f"| {r['member']} | {r['declared']} | {r['verdict']} | {'' if first is None else f'{first:.1f}'} | "
            f"{'' if first is None else format(first / baseline['seconds'], '.3f') + 'x'} | {r['seconds']:.1f} |"
        )
    (out / f"verdict-{args.budget}.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
