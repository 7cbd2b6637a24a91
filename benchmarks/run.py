"""Run every benchmark and print the ratios, one command.

    python benchmarks/run.py [--quick]

Each part writes JSON and markdown under benchmarks/results/ with the machine's description:

* throughput: the reference sampler against the seed document's per-token loop and against one
  ``torch.multinomial`` draw per row (bench_throughput.py);
* the chain, logits and tree references against one row-draw of the same shape, as a ratio
  (bench_reference_speed.py);
* the Triton sampler against the reference sampler on the same device (bench_triton.py; through
  Triton's interpreter on a machine without a GPU);
* time to verdict on the reference sampler and time to the first failure on each zoo member, at the
  standard budget (quick with ``--quick``; bench_verdict.py);
* samples needed to detect planted deviations against the noncentral chi-square bound, fixed-sample
  and sequential (bench_detection.py);
* generation speed of the Hypothesis strategies (bench_strategies.py).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes and fewer simulations")
    args = parser.parse_args()
    quick = ["--quick"] if args.quick else []
    parts = [
        ("throughput", ["bench_throughput.py"] + (["--repeats", "3"] if args.quick else [])),
        ("reference speed", ["bench_reference_speed.py"] + (["--repeats", "3"] if args.quick else [])),
        ("triton", ["bench_triton.py", "--quick"]),
        ("time to verdict", ["bench_verdict.py", "--budget", "quick" if args.quick else "standard"]),
        ("samples to detect", ["bench_detection.py", *quick]),
        ("strategies", ["bench_strategies.py"]),
    ]
    status = 0
    for title, command in parts:
        print(f"\n=== {title}: python benchmarks/{' '.join(command)}", flush=True)
        start = time.perf_counter()
        result = subprocess.run([sys.executable, str(HERE / command[0]), *command[1:]])
        print(f"=== {title}: {time.perf_counter() - start:.0f} s, exit {result.returncode}", flush=True)
        status = status or result.returncode
    return status


if __name__ == "__main__":
    raise SystemExit(main())
