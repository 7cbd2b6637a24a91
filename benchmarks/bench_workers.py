"""Several workers: sampler rows a second with ``--workers N`` as a ratio to ``--workers 1``, same run.

Each setting runs ``specverify check specverify.samplers:reference`` as a user does, a fresh
command each time (its workers' torch imports counted), ``--repeats`` times, the worker counts
alternating, and reports the median wall time, the sampler rows the run drew (the same for every N:
units are seeded from their index, never their worker), rows a second and the ratio to one worker.
It also says whether the runs' JSON agree apart from timings and the workers' own record (they
must). Two selections: the whole battery, and the checks whose experiments span many units (where
spreading can pay: a check of one unit runs on one worker whatever N is); ``--check PATTERN``
makes the checks ``--only PATTERN`` selects a selection of their own.

With ``--loop`` it runs ``specverify loop specverify.samplers:loop_reference`` instead, the whole
loop battery; its rows are the samples its checks report (generations, and pairs of adjacent
tokens for ``loop.positions``), the same for every N.  A loop tallies its generations where it runs,
so one worker keeps one core busy and the harness's process waits: there a second worker is a second core.

Before the runs it measures the machine's own ceiling (:func:`ceiling`): the sampler's calls alone,
in one process and in N at once, so a speedup can be read against what the cores gave that hour.
``--spec`` runs another sampler instead (a zoo member, your own): where the spreading pays depends
on how the sampler's cost compares with the harness's (docs/statistics.md, "Workers").

    OMP_NUM_THREADS=1 python benchmarks/bench_workers.py [--budget standard] [--workers 1 2] [--repeats 3] [--loop]
        [--spec SPEC] [--selection NAME | --check PATTERN] [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import json
import os
import re
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
    (
        "many-unit checks",
        ["fit.conditional[[]zero-residual[]]", "fit.every-shape*", "fit.conditional[[]draft-narrower[]]"],
    ),
]

CHECK_SPEC, LOOP_SPEC = "specverify.samplers:reference", "specverify.samplers:loop_reference"


#: The ceiling's workload: ``calls`` calls of the sampler on one batch (16,384 rows, K = 4, V = 8,
#: float64), timed in one process; run alone and as N processes at once.
_CEILING = """
import importlib, sys, time, torch
torch.set_num_threads(1)
module, _, name = sys.argv[1].partition(":")
sampler, calls = getattr(importlib.import_module(module), name), int(sys.argv[2])
g = torch.Generator().manual_seed(0)
t = torch.rand(16384, 5, 8, generator=g, dtype=torch.float64); t /= t.sum(-1, keepdim=True)
d = torch.rand(16384, 4, 8, generator=g, dtype=torch.float64); d /= d.sum(-1, keepdim=True)
y = torch.multinomial(d.reshape(-1, 8), 1, generator=g).reshape(16384, 4)
sampler(t, d, y, g)
start = time.perf_counter()
for _ in range(calls):
    sampler(t, d, y, g)
print(time.perf_counter() - start)
"""


def ceiling(spec: str, n: int, seconds: float = 20.0) -> dict:
    """What this machine gives ``n`` processes at once: the sampler's own calls (no harness) run in
    one process, then in ``n`` at once, each the same calls; their rate as a ratio to one process's
    (``n`` on an ideal machine).  The workers' speedup is bounded by it, measured in the same run."""

    def run(copies: int, calls: int) -> list[float]:
        procs = [
            subprocess.Popen([sys.executable, "-c", _CEILING, spec, str(calls)], stdout=subprocess.PIPE, text=True)
            for _ in range(copies)
        ]
        outputs = [p.communicate()[0] for p in procs]
        if any(p.returncode for p in procs):
            raise SystemExit(
                f"the ceiling could not call {spec} as a chain sampler (target, draft, drafts, generator): see its "
                "error above"
            )
        return [float(out) for out in outputs]

    one = run(1, 1)[0]
    calls = max(1, round(seconds / one))
    alone = run(1, calls)[0]
    together = max(run(n, calls))
    return {
        "processes": n,
        "calls": calls,
        "alone_s": round(alone, 2),
        "together_s": round(together, 2),
        "ratio": round(n * alone / together, 3),
    }


def _stable(record: dict) -> dict:
    """What two runs must agree on; the plan's estimate (of seconds, for N workers) aside."""
    return reproducible({**record, "run": {k: v for k, v in record["run"].items() if k != "plan"}})


def _rows(record: dict, loop: bool) -> int:
    """The rows a run drew: the sampler's rows (a check), or the samples its checks report (a loop)."""
    return sum(c.get("samples") or 0 for c in record["checks"]) if loop else record["run"]["sampler_rows"]


def timed(
    spec: str, budget: str, workers: int, only: list[str], loop: bool = False, tv: float | None = None
) -> tuple[float, float, dict]:
    """One ``specverify check`` (``loop``) command: its wall seconds, its CPU seconds (children included), its JSON."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        verb, quiet = ("loop", ["--quiet"]) if loop else ("check", ["--quiet", "--no-progress"])
        command = [
            sys.executable,
            "-m",
            "specverify",
            verb,
            spec,
            "--budget",
            budget,
            "--seed",
            "0",
            "--workers",
            str(workers),
            "--json",
            str(out),
            *quiet,
            *([] if tv is None else ["--tv", f"{tv:g}"]),
        ]
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
    parser.add_argument(
        "--tv",
        type=float,
        default=None,
        metavar="EPS",
        help="a budget sized for TV EPS (the CLI's --tv; --budget its base)",
    )
    parser.add_argument(
        "--loop", action="store_true", help="the loop reference's battery (specverify loop) instead of the check's"
    )
    parser.add_argument(
        "--spec", default=None, help=f"the sampler to run (default {CHECK_SPEC}, or {LOOP_SPEC} with --loop)"
    )
    parser.add_argument(
        "--selection",
        choices=[name for name, _ in SELECTIONS],
        action="append",
        help="run only this selection (repeatable; default: each)",
    )
    parser.add_argument(
        "--check",
        action="append",
        metavar="PATTERN",
        help="a selection of its own: the checks --only PATTERN runs (repeatable; instead of --selection)",
    )
    parser.add_argument("--out", default="benchmarks/results")
    args = parser.parse_args()
    rows = []
    spec = args.spec or (LOOP_SPEC if args.loop else CHECK_SPEC)
    top = max(args.workers)
    limit = None if args.loop or top == 1 else ceiling(spec, top)
    if limit is not None:
        print({"ceiling": limit}, flush=True)
    if args.check:
        selections = [(pattern, [pattern]) for pattern in args.check]
    else:
        selections = [(name, only) for name, only in SELECTIONS if args.selection is None or name in args.selection]
    for name, only in [("whole loop battery", [])] if args.loop else selections:
        runs: dict[int, list[tuple[float, float, dict]]] = {n: [] for n in args.workers}
        for _ in range(args.repeats):
            for n in args.workers:
                runs[n].append(timed(spec, args.budget, n, only, args.loop, args.tv))
        base = statistics.median(r[0] for r in runs[args.workers[0]])
        reference = _stable(runs[args.workers[0]][0][2])
        for n in args.workers:
            wall = statistics.median(r[0] for r in runs[n])
            drawn = _rows(runs[n][0][2], args.loop)
            rows.append(
                {
                    "selection": name,
                    "workers": n,
                    "median_wall_s": round(wall, 2),
                    "median_cpu_s": round(statistics.median(r[1] for r in runs[n]), 2),
                    "sampler_rows": drawn,
                    "rows_per_s": round(drawn / wall),
                    "speedup": round(base / wall, 3),
                    "verdict": runs[n][0][2]["verdict"],
                    "json_identical": all(_stable(r[2]) == reference for r in runs[n]),
                }
            )
            print(rows[-1], flush=True)
    host = machine()
    setting = f"tv{args.tv:g}" if args.tv is not None else args.budget
    flag = (
        (" --loop" if args.loop else "")
        + ("" if args.spec is None else f" --spec {args.spec}")
        + "".join(f" --selection '{name}'" for name in args.selection or [])
        + "".join(f" --check '{p}'" for p in args.check or [])
    )
    command = f"specverify {'loop' if args.loop else 'check'} {spec}"
    lines = [
        f"# Workers: rows a second against one worker, budget {setting}, {spec}",
        "",
        "`OMP_NUM_THREADS=1 python benchmarks/bench_workers.py --budget "
        f"{args.budget}{'' if args.tv is None else f' --tv {args.tv:g}'}{flag} --repeats {args.repeats}` on "
        f"{host['cpus']} CPUs ({host['platform']}), load average at the end {host['load_average'][0]:.1f}; median of "
        f"{args.repeats} alternating runs, each a fresh `{command} --workers N` command.",
        "",
    ]
    if limit is not None:
        lines += [
            "The machine's ceiling, measured first: the sampler's own calls (a batch of 16,384 rows, K = 4, V = 8) "
            f"took {limit['alone_s']} s in one process and {limit['together_s']} s in each of {limit['processes']} at "
            f"once: {limit['ratio']:.2f}x one process's rate ({limit['processes']}x on an ideal machine), no harness "
            "in it.",
            "",
        ]
    header = [
        "selection",
        "workers",
        "median wall (s)",
        "median CPU (s)",
        "sampler rows",
        "rows/s",
        "speedup vs 1",
        "verdict",
        "JSON identical to 1 worker",
    ]
    cells = [
        [
            r["selection"],
            r["workers"],
            r["median_wall_s"],
            r["median_cpu_s"],
            f"{r['sampler_rows']:,}",
            f"{r['rows_per_s']:,}",
            f"{r['speedup']:.2f}x",
            r["verdict"],
            "yes" if r["json_identical"] else "NO",
        ]
        for r in rows
    ]
    chosen = "".join(
        "-" + re.sub(r"[^a-z0-9.]+", "-", name.lower()).strip("-") for name in args.check or args.selection or []
    )
    name = (
        f"workers-{setting}"
        + ("-loop" if args.loop else "")
        + chosen
        + ("" if args.spec is None else "-" + args.spec.rsplit(":", 1)[-1].replace("_", "-"))
    )
    write(
        args.out,
        name,
        {"machine": host, "budget": setting, "spec": spec, "ceiling": limit, "rows": rows},
        lines + table(header, cells),
    )


if __name__ == "__main__":
    main()
