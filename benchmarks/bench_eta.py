"""The progress bar's estimate of time left, replayed on recorded runs: within 2x at every point?

``record`` runs zoo chain members through ``specverify.check`` (the sampler in its own process, as
the CLI runs it) and keeps, with their times since the start, every event the progress bar is
given: the plan, each check's start and rows, each result.  ``replay`` feeds those events to the
estimate the bar shows (:func:`specverify._cli.eta.replay`) and compares its time left with the
time that was in fact left, at every event after the first 10% of the run; both are read at the
bar's resolution, one second.  The worst ratio (larger over smaller) is the figure in
docs/benchmarks.md.  The recordings are kept (``benchmarks/results/eta-*.json``) and a test
replays them (``tests/test_eta.py``).

    python benchmarks/bench_eta.py record [--budget quick] [MEMBER ...]
    python benchmarks/bench_eta.py replay [RECORDING ...]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import machine, table, write  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"

#: Failing and passing chain members of the zoo, as bench_failing_vs_passing.py pairs them.
MEMBERS = ["replacement_from_target", "reference_sampler", "relaxed_acceptance", "exponential_race"]


def record(member: str, budget_name: str) -> dict[str, Any]:
    """One run of ``specverify.zoo:member``, with every event the progress bar is given, timed."""
    import specverify
    from specverify._budgets import resolve_budget
    from specverify._cli.eta import planned_costs

    budget = resolve_budget(budget_name)
    events: list[list[Any]] = []
    start = time.perf_counter()

    def now() -> float:
        return round(time.perf_counter() - start, 4)

    def on_plan(planned: list[Any]) -> None:
        events.append([now(), "plan", planned_costs(planned, budget)])  # replayed with the costs of the day

    def progress(planned: Any, rows: int) -> None:
        events.append([now(), "rows", planned.id, rows])

    def on_result(result: Any) -> None:
        events.append([now(), "result", result.id])

    load = os.getloadavg()[0]
    run = specverify.check(
        f"specverify.zoo:{member}", budget=budget, progress=progress, on_result=on_result, on_plan=on_plan
    )
    return {
        "member": member,
        "budget": budget_name,
        "verdict": run.verdict,
        "seconds": now(),
        "load_average": [load, os.getloadavg()[0]],
        "events": events,
    }


def costs(member: str, budget_name: str) -> list[list[Any]]:
    """The plan's cost of each check of a zoo member's run, as the bar weighs them (planned again: no call is made)."""
    from specverify._budgets import resolve_budget
    from specverify._cli.eta import planned_costs
    from specverify._run import plan
    from specverify._run._driver import load_sut

    budget = resolve_budget(budget_name)
    subject = load_sut(f"specverify.zoo:{member}", isolation="in-process")
    return planned_costs(plan(subject, budget), budget)


def worst(recording: dict[str, Any]) -> float:
    """The largest ratio (larger over smaller) of the estimated and the true time left."""
    from specverify._cli.eta import replay

    planned = costs(recording["member"], recording["budget"])
    return max(max(e, a) / min(e, a) for _, e, a in replay(recording["events"], planned, recording["seconds"]))


def worst_counting(recording: dict[str, Any]) -> float:
    """The same worst ratio for the estimate the bar showed before: time so far x checks left / checks done."""
    events = recording["events"]
    end, planned = recording["seconds"], next(e[2] for e in events if e[1] == "plan")
    begun, done, current, out = next(e[0] for e in events if e[1] == "plan"), 0, None, 1.0
    for event in events:
        if event[1] == "rows" and event[2] != current:
            done, current = done + (current is not None), event[2]
        if event[0] >= begun + 0.1 * (end - begun):
            left = max((event[0] - begun) * (len(planned) - done) / done, 1.0) if done else float("inf")
            out = max(out, max(left, max(end - event[0], 1.0)) / min(left, max(end - event[0], 1.0)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["record", "replay"])
    parser.add_argument("names", nargs="*", help="record: zoo members; replay: recordings (default: all kept)")
    parser.add_argument("--budget", default="quick")
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args()
    if args.mode == "record":
        for member in args.names or MEMBERS:
            data = record(member, args.budget)
            path = Path(args.out) / f"eta-{member}-{args.budget}.json"
            path.write_text(json.dumps(data) + "\n")
            print(f"{member}: {data['verdict']} in {data['seconds']:.1f} s (load {data['load_average']}): {path}")
        return
    paths = [Path(p) for p in args.names] or sorted(RESULTS.glob("eta-*-*.json"))
    rows = []
    for path in paths:
        if path.name == "eta-replay.json":
            continue
        data = json.loads(path.read_text())
        rows.append(
            [
                data["member"],
                data["verdict"],
                f"{data['seconds']:.1f}",
                f"{worst(data):.2f}",
                f"{worst_counting(data):.1f}",
            ]
        )
    lines = [
        "Estimated time left against the time in fact left, at every event after the first 10% of each run",
        "(both read at the bar's one-second resolution); worst ratio, larger over smaller.",
        "",
        *table(["member", "verdict", "run seconds", "worst ratio, by cost", "checks done (before)"], rows),
    ]
    print("\n".join(lines))
    write(args.out, "eta-replay", {"machine": machine(), "rows": rows}, lines)


if __name__ == "__main__":
    main()
