"""The sampler's own process: what it costs on the reference sampler, as a ratio to in-process.

Each budget runs ``specverify check specverify.samplers:reference`` as a user does, a fresh command
each time, with ``--in-process`` and without (the sampler's own process, started by the command:
its torch import is counted), ``--repeats`` times each, alternating, and reports the median
isolated wall time as a ratio to the median in-process one measured in the same run, the harness's
share of each run (``run.timing``), and whether the two gave the same numbers (they must: the
generator's state travels with every call).

    python benchmarks/bench_isolation.py [--budgets quick standard] [--repeats 3] [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch


def timed(budget: str, isolation: str) -> tuple[float, dict]:
    """One ``specverify check`` command, timed from its start to its exit; its JSON."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        command = [sys.executable, "-m", "specverify", "check", "specverify.samplers:reference", "--budget", budget, "--seed", "0", "--json", str(out), "--quiet"]
        if isolation == "in-process":
            command.append("--in-process")
        start = time.perf_counter()
        subprocess.run(command, check=False, stdout=subprocess.DEVNULL)
        seconds = time.perf_counter() - start
        return seconds, json.loads(out.read_text())


def numbers(result: dict) -> list[tuple]:
    return [(c["id"], c["status"], c["p_value"], c["samples"]) for c in result["checks"]]


def write(rows: list[dict], out: Path) -> None:
    """Results so far, as JSON and as the markdown table the README quotes."""
    machine = {"platform": platform.platform(), "cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(), "torch": torch.__version__}
    out.mkdir(parents=True, exist_ok=True)
    (out / "isolation.json").write_text(json.dumps({"machine": machine, "rows": rows}, indent=2))
    lines = [
        "# The sampler's own process: cost on the reference sampler",
        "",
        f"`python benchmarks/bench_isolation.py` ({machine['platform']}, {machine['cpus']} CPUs, torch {machine['torch']}): "
        "`specverify check specverify.samplers:reference --budget B` with and without `--in-process`, each a fresh command "
        "timed to its exit, median of the repeats, alternating",
        "",
        "| budget | repeats | in-process s | isolated s | overhead | calls | rows | harness share (in-process / isolated) | same numbers |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['budget']} | {r['repeats']} | {r['in_process_seconds']} | {r['isolated_seconds']} | {r['overhead_ratio']:+.1%} | {r['calls']:,} | "
            f"{r['rows']:,} | {r['harness_share_in_process']:.0%} / {r['harness_share_isolated']:.0%} | {r['same_numbers']} |"
        )
    (out / "isolation.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", nargs="*", default=["quick", "standard"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="benchmarks/results")
    args = parser.parse_args()
    rows = []
    for budget in args.budgets:
        here_times, isolated_times = [], []
        for _ in range(args.repeats):
            here_s, here = timed(budget, "in-process")
            isolated_s, isolated = timed(budget, "process")
            here_times.append(here_s)
            isolated_times.append(isolated_s)
        here_s, isolated_s = statistics.median(here_times), statistics.median(isolated_times)
        row = {
            "budget": budget,
            "repeats": args.repeats,
            "in_process_seconds": round(here_s, 2),
            "isolated_seconds": round(isolated_s, 2),
            "in_process_all": [round(t, 2) for t in here_times],
            "isolated_all": [round(t, 2) for t in isolated_times],
            "overhead_ratio": round(isolated_s / here_s - 1, 4),
            "calls": isolated["run"]["sampler_calls"],
            "rows": isolated["run"]["sampler_rows"],
            "harness_share_in_process": here["run"]["timing"]["harness_share"],
            "harness_share_isolated": isolated["run"]["timing"]["harness_share"],
            "same_numbers": numbers(here) == numbers(isolated),
            "verdicts": [here["verdict"], isolated["verdict"]],
        }
        rows.append(row)
        write(rows, Path(args.out))
        print(
            f"{budget}: in-process {here_s:.1f} s, isolated {isolated_s:.1f} s "
            f"(overhead {row['overhead_ratio']:+.1%}, {row['calls']:,} calls, {row['rows']:,} rows); harness share "
            f"{row['harness_share_in_process']:.0%} / {row['harness_share_isolated']:.0%}; same numbers: {row['same_numbers']}"
        )


if __name__ == "__main__":
    main()
