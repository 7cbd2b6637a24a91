"""The plan against the run: ``--plan``'s estimated seconds and rows as a ratio to the real run's, same run.

For each setting, ``specverify check specverify.samplers:reference ... --plan`` prints the plan
(the checks rehearsed against the exact law, each shape timed on the sampler); then the same
command without ``--plan`` runs the battery. Both are fresh commands, as a user runs them. The
table gives the estimate, the real wall time, their ratio, the plan's rows against the rows the
run drew, and the largest per-check row ratios (the checks the plan counts worst).

    OMP_NUM_THREADS=1 python benchmarks/bench_plan.py [--settings standard tv=0.001] [--workers 1]
        [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _results import machine, table, write

REFERENCE = "specverify.samplers:reference"


def _flags(setting: str) -> list[str]:
    return ["--tv", setting.removeprefix("tv=")] if setting.startswith("tv=") else ["--budget", setting]


def _command(setting: str, workers: int, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "specverify",
        "check",
        REFERENCE,
        *_flags(setting),
        "--seed",
        "0",
        "--workers",
        str(workers),
        *extra,
    ]


def measure(setting: str, workers: int) -> dict:
    """One plan and one run of ``setting``: the estimate, the real time and rows, per check."""
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        printed = subprocess.run(
            _command(setting, workers, "--plan"), check=True, capture_output=True, text=True
        ).stdout
        plan_seconds = time.perf_counter() - start
        estimate = float(re.search(r"about ([\d,]+) s", printed).group(1).replace(",", ""))
        plan_rows = {
            line.split()[0]: int(line.split()[2].replace(",", ""))
            for line in printed.splitlines()
            if len(line.split()) >= 4 and line.split()[2].replace(",", "").isdigit()
        }
        real = Path(tmp) / "run.json"
        start = time.perf_counter()
        subprocess.run(
            _command(setting, workers, "--json", str(real), "--quiet", "--no-progress"),
            check=False,
            stdout=subprocess.DEVNULL,
        )
        wall = time.perf_counter() - start
        record = json.loads(real.read_text())
    drew = {
        result["id"]: int(result.get("samples") or 0) for result in record["checks"]
    }  # planned checks of one result each
    ratios = sorted(((plan_rows[c] / drew[c], c) for c in plan_rows if drew.get(c)), reverse=True)
    return {
        "setting": setting,
        "workers": workers,
        "verdict": record["verdict"],
        "plan_seconds": round(plan_seconds, 1),
        "estimated_s": estimate,
        "real_s": round(wall, 1),
        "estimate_over_real": round(estimate / wall, 3),
        "plan_rows": sum(plan_rows.values()),
        "run_rows": record["run"]["sampler_rows"],
        "worst_row_ratios": [{"check": c, "plan_over_run": round(r, 3)} for r, c in ratios[:3] + ratios[-3:]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", nargs="+", default=["standard", "tv=0.001"])
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--out", default="benchmarks/results")
    args = parser.parse_args()
    rows = []
    for setting in args.settings:
        rows.append(measure(setting, args.workers))
        print(rows[-1], flush=True)
    host = machine()
    lines = [
        "# The plan against the run (reference sampler)",
        "",
        f"`OMP_NUM_THREADS=1 python benchmarks/bench_plan.py --settings {' '.join(args.settings)} --workers "
        f"{args.workers}` on {host['cpus']} CPUs ({host['platform']}), load average at the end "
        f"{host['load_average'][0]:.1f}: each a fresh `--plan` command, then the same command run.",
        "",
    ]
    header = [
        "setting",
        "workers",
        "verdict",
        "plan took (s)",
        "estimated (s)",
        "real (s)",
        "estimate / real",
        "plan rows",
        "run rows",
    ]
    cells = [
        [
            r["setting"],
            r["workers"],
            r["verdict"],
            r["plan_seconds"],
            f"{r['estimated_s']:,.0f}",
            f"{r['real_s']:,.0f}",
            f"{r['estimate_over_real']:.2f}",
            f"{r['plan_rows']:,}",
            f"{r['run_rows']:,}",
        ]
        for r in rows
    ]
    name = (
        "plan-"
        + "-".join(s.replace("=", "") for s in args.settings)
        + ("" if args.workers == 1 else f"-workers{args.workers}")
    )
    write(args.out, name, {"machine": host, "rows": rows}, lines + table(header, cells))


if __name__ == "__main__":
    main()
