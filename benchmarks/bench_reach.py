"""Reach at a small TV: a whole ``check`` (or ``loop``) run at ``--tv EPS``, its wall and CPU
seconds, the machine's load, the run's harness share and the guarantee it prints.

CPU seconds are the children's user + system time (the CLI and its sampler processes, from
``resource``), so a loaded machine shows as wall time well above CPU time / cores.  Each run is
one subprocess of the public CLI, as a user types it.

    python benchmarks/bench_reach.py [--tv 0.001] [--workers 2] [--loop] [--only PATTERN ...] [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REFERENCE = {"check": "specverify.samplers:reference", "loop": "specverify.samplers:loop_reference"}


def measure(
    command: str, tv: float, workers: int, only: list[str], extra: list[str], keep: Path | None = None
) -> dict[str, object]:
    """One CLI run: its verdict, guarantee, timing and the resources it used."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        argv = [
            sys.executable,
            "-m",
            "specverify",
            command,
            REFERENCE[command],
            "--tv",
            str(tv),
            "--workers",
            str(workers),
            "--json",
            str(out),
            *(["--no-progress"] if command == "check" else []),  # a loop shows no progress bar
            *[a for p in only for a in ("--only", p)],
            *extra,
        ]
        load_before = os.getloadavg()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        data = json.loads(out.read_text()) if out.exists() else {}
        if keep is not None and out.exists():
            keep.write_text(out.read_text())  # the run's own JSON beside the figures
    run = data.get("run", {})
    checks = data.get("checks", [])
    return {
        "command": " ".join(["specverify", *argv[3:]]).replace(str(out), "RUN.json"),
        "exit": done.returncode,
        "verdict": data.get("verdict"),
        "guarantee": next(
            (line.strip() for line in done.stdout.splitlines() if line.strip().startswith("every statistical check")),
            None,
        ),
        "wall_seconds": round(wall, 1),
        "cpu_seconds": round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 1),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "timing": run.get("timing"),
        "sampler_rows": run.get("sampler_rows"),
        "statuses": {s: sum(c["status"] == s for c in checks) for s in sorted({c["status"] for c in checks})},
        "slowest": sorted(
            (
                {
                    "id": c["id"],
                    "seconds": round(c.get("duration_s") or 0, 1),
                    "samples": c.get("samples"),
                    "tv": c.get("min_detectable_tv"),
                }
                for c in checks
            ),
            key=lambda c: -c["seconds"],
        )[:8],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tv", type=float, default=0.001)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--loop", action="store_true", help="the loop reference with specverify loop")
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args()
    command = "loop" if args.loop else "check"
    args.out.mkdir(parents=True, exist_ok=True)
    name = f"reach-{command}-tv{args.tv:g}-workers{args.workers}" + ("-only" if args.only else "")
    result = measure(command, args.tv, args.workers, args.only, [], keep=args.out / f"{name}.run.json")
    result["machine"] = {"platform": platform.platform(), "cpus": os.cpu_count()}
    (args.out / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
