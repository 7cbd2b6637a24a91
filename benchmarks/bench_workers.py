"""Several workers: sampler rows a second with ``--workers N`` as a ratio to ``--workers 1``, same run.

Each setting runs ``specverify check specverify.samplers:reference`` as a user does, a fresh
command each time (its workers' torch imports counted), ``--repeats`` times, the worker counts
alternating, and reports the median wall time, the sampler rows the run drew (the same for every N:
units are seeded from their index, never their worker), rows a second and the ratio to one worker.
It also says whether the runs' JSON agree apart from timings and the workers' own record (they
must). Two selections: the whole battery, and the checks whose experiments span many units (where
spreading can pay: a check of one unit runs on one worker whatever N is).

With ``--loop`` it runs ``specverify loop specverify.samplers:loop_reference`` instead, the whole
loop battery; its rows are the samples its checks report (generations, and pairs of adjacent
tokens for ``loop.positions``), the same for every N.  A loop tallies its generations where it runs,
so one worker keeps one core busy and the harness's process waits: there a second worker is a second core.

``--spec`` runs another sampler instead (a zoo member, your own): where the spreading pays depends
on how the sampler's cost compares with the harness's (docs/statistics.md, "Workers").

    OMP_NUM_THREADS=1 python benchmarks/bench_workers.py [--budget standard] [--workers 1 2] [--repeats 3] [--loop] [--spec SPEC] [--selection NAME] [--out benchmarks/results]
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

CHECK_SPEC, LOOP_SPEC = "specverify.samplers:reference", "specverify.samplers:loop_reference"


def _stable(record: dict) -> dict:
    """What two runs must agree on; the plan's estimate (of seconds, for N workers) aside."""
    return reproducible({**record, "run": {k: v for k, v in record["run"].items() if k != "plan"}})


def _rows(record: dict, loop: bool) -> int:
    """The rows a run drew: the sampler's rows (a check), or the samples its checks report (a loop)."""
    return sum(c.get("samples") or 0 for c in record["checks"]) if loop else record["run"]["sampler_rows"]


def timed(budget: str, workers: int, only: list[str], loop: bool = False, tv: float | None = None, spec: str | None = None) -> tuple[float, float, dict]:
    """One ``specverify check`` (``loop``) command: its wall seconds, its CPU seconds (children included), its JSON."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        verb, quiet = ("loop", ["--quiet"]) if loop else ("check", ["--quiet", "--no-progress"])
        spec = spec or (LOOP_SPEC if loop else CHECK_SPEC)
        command = [sys.executable, "-m", "specverify", verb, spec, "--budget", budget, "--seed", "0",
                   "--workers", str(workers), "--json", str(out), *quiet, *([] if tv is None else ["--tv", f"{tv:g}"])]
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
    parser.add_argument("--tv", type=float, default=None, metavar="EPS", help="a budget sized for TV EPS (the CLI's --tv; --budget its base)")
    parser.add_argument("--loop", action="store_true", help="the loop reference's battery (specverify loop) instead of the check's")
    parser.add_argument("--spec", default=None, help=f"the sampler to run (default {CHECK_SPEC}, or {LOOP_SPEC} with --loop)")
    parser.add_argument("--selection", choices=[name for name, _ in SELECTIONS], action="append", help="run only this selection (repeatable; default: each)")
    parser.add_argument("--out", default="benchmarks/results")
    args = parser.parse_args()
    rows = []
    selections = [(name, only) for name, only in SELECTIONS if args.selection is None or name in args.selection]
    for name, only in [("whole loop battery", [])] if args.loop else selections:
        runs: dict[int, list[tuple[float, float, dict]]] = {n: [] for n in args.workers}
        for _ in range(args.repeats):
            for n in args.workers:
                runs[n].append(timed(args.budget, n, only, args.loop, args.tv, args.spec))
        base = statistics.median(r[0] for r in runs[args.workers[0]])
        reference = _stable(runs[args.workers[0]][0][2])
        for n in args.workers:
            wall = statistics.median(r[0] for r in runs[n])
            drawn = _rows(runs[n][0][2], args.loop)
            rows.append({
                "selection": name, "workers": n, "median_wall_s": round(wall, 2),
                "median_cpu_s": round(statistics.median(r[1] for r in runs[n]), 2),
                "sampler_rows": drawn, "rows_per_s": round(drawn / wall), "speedup": round(base / wall, 3),
                "verdict": runs[n][0][2]["verdict"], "json_identical": all(_stable(r[2]) == reference for r in runs[n]),
            })
            print(rows[-1], flush=True)
    host = machine()
    setting = f"tv{args.tv:g}" if args.tv is not None else args.budget
    spec = args.spec or (LOOP_SPEC if args.loop else CHECK_SPEC)
    flag = (" --loop" if args.loop else "") + ("" if args.spec is None else f" --spec {args.spec}") + "".join(f" --selection '{name}'" for name in args.selection or [])
    command = f"specverify {'loop' if args.loop else 'check'} {spec}"
    lines = [
        f"# Workers: rows a second against one worker, budget {setting}, {spec}",
        "",
        f"`OMP_NUM_THREADS=1 python benchmarks/bench_workers.py --budget {args.budget}{'' if args.tv is None else f' --tv {args.tv:g}'}{flag} --repeats {args.repeats}` on {host['cpus']} CPUs "
        f"({host['platform']}), load average at the end {host['load_average'][0]:.1f}; median of {args.repeats} "
        f"alternating runs, each a fresh `{command} --workers N` command.",
        "",
    ]
    header = ["selection", "workers", "median wall (s)", "median CPU (s)", "sampler rows", "rows/s", "speedup vs 1", "verdict", "JSON identical to 1 worker"]
    cells = [[r["selection"], r["workers"], r["median_wall_s"], r["median_cpu_s"], f"{r['sampler_rows']:,}", f"{r['rows_per_s']:,}",
              f"{r['speedup']:.2f}x", r["verdict"], "yes" if r["json_identical"] else "NO"] for r in rows]
    name = f"workers-{setting}" + ("-loop" if args.loop else "") + ("" if args.spec is None else "-" + args.spec.rsplit(":", 1)[-1].replace("_", "-"))
    write(args.out, name, {"machine": host, "budget": setting, "spec": spec, "rows": rows}, lines + table(header, cells))

if __name__ == "__main__":
    main()
