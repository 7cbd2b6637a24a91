"""Time to verdict for each kind: the harness's own reference of each kind, run as a user runs it,
at each budget asked for, with where the time went.

Each run is a fresh ``specverify <command> <spec> --budget B`` (or ``--tv T``), its start and
torch import counted, timed from start to exit; the run's JSON gives the verdict and its own
split of the time (the sampler's seconds and the harness's share of the run).

    python benchmarks/bench_time_to_verdict.py                      # quick and standard, every kind
    python benchmarks/bench_time_to_verdict.py --budgets quick --kinds chain logits
    python benchmarks/bench_time_to_verdict.py --budgets tv=0.001 --kinds chain

Results go to ``benchmarks/results/time-to-verdict.{json,md}`` (one stem: a later run with other
budgets or kinds replaces it, so run the table you want in one go).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import machine, table, write  # noqa: E402

#: kind -> (command, spec): each kind's reference, as docs/ name it.
KINDS = {
    "chain": ("check", "specverify.samplers:reference"),
    "logits": ("check", "specverify.samplers:logits_reference"),
    "tree": ("check", "specverify.samplers:tree_reference"),
    "loop": ("loop", "specverify.samplers:loop_reference"),
    "engine": ("engine", "specverify.samplers:engine_reference"),
}


def budget_options(budget: str) -> list[str]:
    """``quick`` -> ``--budget quick``; ``tv=0.001`` -> ``--tv 0.001``."""
    if budget.startswith("tv="):
        return ["--tv", budget.removeprefix("tv=")]
    return ["--budget", budget]


def timed(kind: str, budget: str) -> dict[str, object]:
    """One run of ``kind``'s reference at ``budget``: wall seconds, verdict and the run's own timing."""
    command, spec = KINDS[kind]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        argv = [sys.executable, "-m", "specverify", command, spec, *budget_options(budget)]
        argv += ["--seed", "0", "--json", str(out), "--quiet"] + (["--no-progress"] if command == "check" else [])
        load = os.getloadavg()[0]
        start = time.perf_counter()
        subprocess.run(argv, check=False, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - start
        data = json.loads(out.read_text())
    timing = data["run"].get("timing") or {}
    return {
        "kind": kind,
        "budget": budget,
        "verdict": data["verdict"],
        "wall_seconds": round(wall, 1),
        "sampler_seconds": timing.get("sampler_seconds"),
        "harness_share": timing.get("harness_share"),
        "load_at_start": round(load, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", nargs="+", default=["quick", "standard"], help="budgets, or tv=T")
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=list(KINDS))
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    args = parser.parse_args()
    rows = []
    for budget in args.budgets:
        for kind in args.kinds:
            rows.append(timed(kind, budget))
            print(rows[-1], flush=True)
    lines = [
        "# Time to verdict, by kind",
        "",
        "Each kind's reference, run as a user runs it (a fresh command, seed 0, its start counted); "
        "'harness share' is the run's time outside the sampler's calls, as its JSON states it.",
        "",
        *table(
            ["kind", "budget", "verdict", "wall s", "sampler s", "harness share", "load at start"],
            [
                [
                    r["kind"],
                    r["budget"],
                    r["verdict"],
                    r["wall_seconds"],
                    r["sampler_seconds"],
                    r["harness_share"],
                    r["load_at_start"],
                ]
                for r in rows
            ],
        ),
    ]
    page = write(args.out, "time-to-verdict", {"machine": machine(), "rows": rows}, lines)
    print("\n".join(lines))
    print(f"written: {page}")


if __name__ == "__main__":
    main()
