"""Where a run's time goes: seconds by check and by vocabulary size, from its run JSON.

    python benchmarks/profile_run.py RUN.json [--top 15]
    python benchmarks/profile_run.py --spec specverify.samplers:logits_reference --budget standard

With ``--spec`` it runs ``specverify check SPEC --budget BUDGET --json`` first (timed with the
load average before and after); either way it prints the run's total, sampler and harness seconds,
the slowest checks with their rows and vocabulary sizes, the seconds by family, and the seconds
grouped by the largest vocabulary each check reached (a check's seconds counted once, under its
largest ``V``; the decisions of one experiment each show its rows, so rows are counted per decision).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from _results import table

#: Upper edges of the vocabulary bands the seconds are grouped by.
BANDS = (8, 64, 1_024, 8_192, 65_537, 1 << 40)


def band(vocab: int) -> str:
    low = 2
    for edge in BANDS:
        if vocab <= edge:
            return f"{low}..{edge}" if edge < 1 << 40 else f"> {low - 1}"
        low = edge + 1
    raise AssertionError("unreachable")


def profile(run: dict[str, Any], top: int) -> list[str]:
    timing = run["run"].get("timing", {})
    checks = sorted(run["checks"], key=lambda c: -(c.get("duration_s") or 0.0))
    total = sum(c.get("duration_s") or 0.0 for c in checks)
    rows = []
    for c in checks[:top]:
        reach = c.get("reach") or {}
        vocab = reach.get("vocab") or ["", ""]
        rows.append(
            [c["id"], f"{c.get('duration_s') or 0.0:.1f}", f"{c.get('samples') or 0:,}", f"{vocab[0]}..{vocab[1]}"]
        )
    by_band: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for c in checks:
        vocab = (c.get("reach") or {}).get("vocab")
        key = band(int(vocab[1])) if vocab else "none"
        by_band[key][0] += c.get("duration_s") or 0.0
        by_band[key][1] += c.get("samples") or 0
    by_family: dict[str, float] = defaultdict(float)
    for c in checks:
        by_family[c["family"]] += c.get("duration_s") or 0.0
    lines = [
        f"run: {run['run']['spec']} at {run['run']['budget']['name']}, verdict {run['verdict']}",
        f"total {timing.get('total_seconds')} s, sampler {timing.get('sampler_seconds')} s, "
        f"harness share {timing.get('harness_share')}; checks' own seconds sum to {total:.1f}",
        "",
        *table(["check", "seconds", "rows", "V"], rows),
        "",
        *table(["family", "seconds"], [[k, f"{v:.1f}"] for k, v in sorted(by_family.items(), key=lambda kv: -kv[1])]),
        "",
        *table(
            ["largest V", "seconds", "rows"],
            [[k, f"{s:.1f}", f"{int(n):,}"] for k, (s, n) in sorted(by_band.items(), key=lambda kv: -kv[1][0])],
        ),
    ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("json", nargs="?", help="a run JSON (omit with --spec)")
    parser.add_argument("--spec", help="run `specverify check SPEC` first")
    parser.add_argument("--budget", default="standard")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    if args.spec:
        path = Path(args.json) if args.json else Path(tempfile.mkdtemp()) / "run.json"
        command = [sys.executable, "-m", "specverify", "check", args.spec, "--budget", args.budget]
        command += ["--json", str(path), "-q", "--no-progress"]
        load, start = os.getloadavg()[0], time.perf_counter()
        subprocess.run(command, check=False)
        print(f"wall {time.perf_counter() - start:.1f} s, load {load:.2f} before, {os.getloadavg()[0]:.2f} after")
    elif args.json:
        path = Path(args.json)
    else:
        parser.error("give a run JSON or --spec")
    print("\n".join(profile(json.loads(path.read_text()), args.top)))


if __name__ == "__main__":
    main()
