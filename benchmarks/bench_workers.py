"""Several workers: sampler rows a second with ``--workers N`` as a ratio to ``--workers 1``, same run.

Each setting runs ``specverify check specverify.samplers:reference`` as a user does, a fresh
command each time (its workers' torch imports counted), ``--repeats`` times, the worker counts
alternating, and reports the median wall time, the sampler rows the run drew (the same for every N:
units are seeded from their index, never their worker), rows a second and the ratio to one worker.
It also says whether the runs' JSON agree apart from timings and the workers' own record (they
must). Two selections: the whole battery, and the checks whose experiments span many units (where
spreading can pay: a check of one unit runs on one worker whatever N is).

    OMP_NUM_THREADS=1 python benchmarks/bench_workers.py [--budget standard] [--workers 1 2] [--repeats 3] [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _results import machine, table, write

from specverify.report import reproducible

#: (name, --only patterns): the whole battery, and the checks of many units each.
SELECTIONS = [
    ("whole battery", []),
    ("many-unit checks", ["fit.conditional[[]zero-residual[]]", "fit.every-shape*", "fit.conditional[[]draft-narrower[]]"]),
]

def _stable(record: dict) -> dict:
    """What two runs must agree on; the plan's estimate (of seconds, for N workers) aside."""
    return reproducible({**record, "run": {k: v for k, v in record["run"].items() if k != "plan"}})


def timed(budget: str, workers: int, only: list[str]) -> tuple[float, float, dict]:
    """One ``specverify check`` command: its wall seconds, its CPU seconds (children included), its JSON."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        command = [sys.executable, "-m", "specverify", "check", "specverify.samplers:reference", "--budget", budget, "--seed", "0",
                   "--workers", str(workers), "--json", str(out), "--quiet", "--no-progress"]
        for pattern in only:
            command += ["--only", pattern]
        before = os.times()
        start = time.perf_counter()
        subprocess.run(command, check=False, stdout=subprocess.DEVNULL)
        seconds = time.perf_counter() - start
        after = os.times()
        cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
        return seconds, cpu, json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", default="standard")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="benchmarks/results")
    args = parser.parse_args()
    rows = []
    for name, only in SELECTIONS:
        runs: dict[int, list[tuple[float, float, dict]]] = {n: [] for n in args.workers}
        for _ in range(args.repeats):
            for n in args.workers:
                runs[n].append(timed(args.budget, n, only))
        base = statistics.median(r[0] for r in runs[args.workers[0]])
        reference = _stable(runs[args.workers[0]][0][2])
        for n in args.workers:
            wall = statistics.median(r[0] for r in runs[n])
            drawn = runs[n][0][2]["run"]["sampler_rows"]
            rows.append({
                "selection": name, "workers": n, "median_wall_s": round(wall, 2),
                "median_cpu_s": round(statistics.median(r[1] for r in runs[n]), 2),
                "sampler_rows": drawn, "rows_per_s": round(drawn / wall), "speedup": round(base / wall, 3),
                "verdict": runs[n][0][2]["verdict"], "json_identical": all(_stable(r[2]) == reference for r in runs[n]),
            })
            print(rows[-1], flush=True)
    host = machine()
    lines = [
        f"# Workers: rows a second against one worker, budget {args.budget}",
        "",
        f"`OMP_NUM_THREADS=1 python benchmarks/bench_workers.py --budget {args.budget}` on {host['cpus']} CPUs "
        f"({host['platform']}), load average at the end {host['load_average'][0]:.1f}; median of {args.repeats} "
        "alternating runs, each a fresh `specverify check specverify.samplers:reference --workers N` command.",
        "",
    ]
    header = ["selection", "workers", "median wall (s)", "median CPU (s)", "sampler rows", "rows/s", "speedup vs 1", "verdict", "JSON identical to 1 worker"]
    cells = [[r["selection"], r["workers"], r["median_wall_s"], r["median_cpu_s"], f"{r['sampler_rows']:,}", f"{r['rows_per_s']:,}",
              f"{r['speedup']:.2f}x", r["verdict"], "yes" if r["json_identical"] else "NO"] for r in rows]
    write(args.out, f"workers-{args.budget}", {"machine": host, "budget": args.budget, "rows": rows}, lines + table(header, cells))

if __name__ == "__main__":
    main()
