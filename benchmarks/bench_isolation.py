"""The sampler's own process: what it costs on the reference sampler, as a ratio to in-process.

Each budget runs ``specverify check specverify.samplers:reference`` as a user does, a fresh command
each time, with ``--in-process`` and without (the sampler's own process, started by the command:
its torch import is counted), ``--repeats`` times each, alternating, and reports the median
isolated wall time as a ratio to the median in-process one measured in the same run, the harness's
share of each run (``run.timing``), and whether the two gave the same numbers (they must: the
generator's state travels with every call).

A second table times single calls (``SamplerUnderTest.step``, the path every check takes) by batch
size, in-process and through the worker, in the same process: a call's fixed cost (the round trip)
shows at 16 rows, the transport's per-byte cost at 65,536.

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
        command = [
            sys.executable,
            "-m",
            "specverify",
            "check",
            "specverify.samplers:reference",
            "--budget",
            budget,
            "--seed",
            "0",
            "--json",
            str(out),
            "--quiet",
        ]
        if isolation == "in-process":
            command.append("--in-process")
        start = time.perf_counter()
        subprocess.run(command, check=False, stdout=subprocess.DEVNULL)
        seconds = time.perf_counter() - start
        return seconds, json.loads(out.read_text())


#: (rows, K, V, calls timed) for the per-call table: small and large batches, a production vocabulary.
CALL_SHAPES = [(16, 4, 8, 400), (1024, 4, 8, 200), (65536, 4, 8, 20), (16, 4, 32000, 100)]


def per_call(rows: int, k: int, vocab: int, calls: int, isolation: str) -> float:
    """Median seconds of one ``step`` on fresh inputs of this shape (inputs built before timing)."""
    from specverify._calling.sut import SamplerUnderTest

    sut = SamplerUnderTest("specverify.samplers:reference", isolation=isolation)
    g = torch.Generator().manual_seed(0)
    inputs = []
    for _ in range(calls + 1):
        target = torch.rand(rows, k + 1, vocab, dtype=torch.float64, generator=g)
        draft = torch.rand(rows, k, vocab, dtype=torch.float64, generator=g)
        inputs.append(
            (
                target / target.sum(-1, keepdim=True),
                draft / draft.sum(-1, keepdim=True),
                torch.randint(0, vocab, (rows, k), generator=g),
            )
        )
    generator = sut.generator(1)
    times = []
    try:
        for index, (target, draft, drafts) in enumerate(inputs):
            start = time.perf_counter()
            sut.step(target, draft, drafts, generator=generator)
            if index:  # the first call warms up
                times.append(time.perf_counter() - start)
    finally:
        sut.close()
    return statistics.median(times)


def numbers(result: dict) -> list[tuple]:
    return [(c["id"], c["status"], c["p_value"], c["samples"]) for c in result["checks"]]


def write(rows: list[dict], out: Path, calls: list[dict] | None = None) -> None:
    """Results so far, as JSON and as the markdown table the README quotes."""
    machine = {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "isolation.json").write_text(json.dumps({"machine": machine, "rows": rows, "calls": calls or []}, indent=2))
    lines = [
        "# The sampler's own process: cost on the reference sampler",
        "",
        f"`python benchmarks/bench_isolation.py` ({machine['platform']}, {machine['cpus']} CPUs, torch "
        f"{machine['torch']}): `specverify check specverify.samplers:reference --budget B` with and without "
        "`--in-process`, each a fresh command timed to its exit, median of the repeats, alternating",
        "",
        "| budget | repeats | in-process s | isolated s | overhead | calls | rows | harness share (in-process / "
        "isolated) | same numbers |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['budget']} | {r['repeats']} | {r['in_process_seconds']} | {r['isolated_seconds']} | "
            f"{r['overhead_ratio']:+.1%} | {r['calls']:,} | {r['rows']:,} | {r['harness_share_in_process']:.0%} / "
            f"{r['harness_share_isolated']:.0%} | {r['same_numbers']} |"
        )
    if calls:
        lines += [
            "",
            "One call (`SamplerUnderTest.step` on the reference, fresh inputs each call, median; both modes in one "
            "process):",
            "",
            "| rows | K | V | in-process ms | isolated ms | ratio |",
            "|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {c['rows']:,} | {c['k']} | {c['vocab']:,} | {c['in_process_ms']} | {c['isolated_ms']} | "
            f"{c['ratio']:.2f} |"
            for c in calls
        ]
    (out / "isolation.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", nargs="*", default=["quick", "standard"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--no-calls", action="store_true", help="skip the per-call table")
    args = parser.parse_args()
    calls = []
    for rows_, k, vocab, n in [] if args.no_calls else CALL_SHAPES:
        here, isolated = per_call(rows_, k, vocab, n, "in-process"), per_call(rows_, k, vocab, n, "process")
        calls.append(
            {
                "rows": rows_,
                "k": k,
                "vocab": vocab,
                "calls": n,
                "in_process_ms": round(1e3 * here, 3),
                "isolated_ms": round(1e3 * isolated, 3),
                "ratio": round(isolated / here, 3),
            }
        )
        print(
            f"one call, {rows_:,} rows, K={k}, V={vocab:,}: in-process {1e3 * here:.2f} ms, isolated "
            f"{1e3 * isolated:.2f} ms ({isolated / here:.2f}x)"
        )
    rows: list[dict] = []
    write(rows, Path(args.out), calls)
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
        write(rows, Path(args.out), calls)
        print(
            f"{budget}: in-process {here_s:.1f} s, isolated {isolated_s:.1f} s (overhead {row['overhead_ratio']:+.1%}, "
            f"{row['calls']:,} calls, {row['rows']:,} rows); harness share {row['harness_share_in_process']:.0%} / "
            f"{row['harness_share_isolated']:.0%}; same numbers: {row['same_numbers']}"
        )


if __name__ == "__main__":
    main()
