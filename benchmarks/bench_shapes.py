"""Time to verdict at production shapes, as ratios to the sampler's own time.

Two commands:

* ``by-vocab`` (default): the ``shapes`` family's conditional-law check at one shape per
  vocabulary size (4 to 262,144), on the reference sampler (or ``--sampler``); for each V the time
  to verdict, the sampler's own time inside it, their ratio, and the harness's share.
* ``gpu``: the standard budget's law checks of the ``shapes`` family at V = 128,256 on the Triton
  sampler (inputs and tallies on its device): time to verdict, and the fraction of the device's
  memory bandwidth the sampler's calls reached (bytes of probabilities read / its time / the peak).
  On a machine without CUDA it runs the same code through Triton's interpreter; give a small
  ``--vocab`` and ``--volume`` there.

    python benchmarks/bench_shapes.py by-vocab [--budget standard] [--vocabs 4 1024 ...] [--out benchmarks/results]
    python benchmarks/bench_shapes.py gpu [--vocab 128256] [--budget standard] [--peak-gbps 4800]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import torch

import specverify
from specverify._budgets import get_budget
from specverify._calling.sut import SamplerUnderTest
from specverify.checks import Context
from specverify.checks._shapes import Shape, ShapeConditionalCheck, ShapeTargetLawCheck

VOCABS = (4, 1_024, 8_192, 32_768, 131_072, 262_144)
#: Peak memory bandwidth (GB/s) of devices by name, where the driver does not report it.
PEAK_GBPS = {"H200": 4_800.0, "H100": 3_350.0, "A100": 2_039.0, "L40S": 864.0, "A10": 600.0}


def run_checks(sampler, checks, budget, row_elements: int, device: str | None = None) -> dict[str, object]:
    """Run ``checks`` (all at one shape of ``row_elements`` probabilities a row) on a fresh sampler
    handle; wall time, the sampler's own time, the probabilities it was given."""
    sut = SamplerUnderTest(sampler, device=device, timeout=budget.timeout)
    start = time.perf_counter()
    results = []
    for check in checks:
        ctx = Context(sut=sut, budget=budget, seed=0, alpha=budget.alpha / len(checks))
        results += check.run(ctx)
    wall = time.perf_counter() - start
    return {
        "statuses": {r.id: r.status for r in results},
        "claims": {r.id: r.min_detectable_tv for r in results if r.min_detectable_tv is not None},
        "seconds": wall,
        "sampler_seconds": sut.seconds,
        "harness_share": (wall - sut.seconds) / wall if wall > 0 else 0.0,
        "ratio_to_sampler": wall / sut.seconds if sut.seconds > 0 else None,
        "rows": sut.rows,
        "elements_read": sut.rows * row_elements,
    }


def by_vocab(args: argparse.Namespace) -> dict[str, object]:
    budget = get_budget(args.budget).with_(shape_max_vocab=max(args.vocabs))
    sampler = specverify.load_sampler(args.sampler)
    rows = []
    for vocab in args.vocabs:
        k = 2 if vocab <= 32_768 else 1
        row = run_checks(
            sampler, [ShapeConditionalCheck(shapes=(Shape(vocab, k),))], budget, Shape(vocab, k).row_elements()
        )
        row.update(V=vocab, K=k)
        rows.append(row)
        print(
            f"V={vocab:>7,} K={k}: {row['seconds']:6.2f} s to verdict, sampler {row['sampler_seconds']:6.2f} s (ratio "
            f"{row['ratio_to_sampler'] or float('nan'):.2f}, harness share {row['harness_share']:.0%}), "
            f"{row['rows']:,} rows"
        )
    return {"command": "by-vocab", "budget": args.budget, "sampler": args.sampler, "rows": rows}


def gpu(args: argparse.Namespace) -> dict[str, object]:
    from specverify.samplers import triton as triton_sampler

    budget = get_budget(args.budget)
    if args.volume:
        budget = budget.with_(shape_volume=args.volume)
    checks = [
        ShapeConditionalCheck(shapes=(Shape(args.vocab, 2),)),
        ShapeTargetLawCheck(shapes=(Shape(args.vocab, 2, actives=3),)),
    ]
    device = "cuda" if torch.cuda.is_available() else None
    row = run_checks(triton_sampler, checks, budget, Shape(args.vocab, 2).row_elements(), device=device)
    itemsize = 4  # the shapes family passes float32
    gbps = row["elements_read"] * itemsize / row["sampler_seconds"] / 1e9 if row["sampler_seconds"] else 0.0
    peak = args.peak_gbps
    if peak is None and torch.cuda.is_available():
        name = torch.cuda.get_device_name()
        peak = next((v for k, v in PEAK_GBPS.items() if k in name), None)
    row.update(
        V=args.vocab,
        device=torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu (Triton interpreter)",
        achieved_gbps=gbps,
        peak_gbps=peak,
        bandwidth_fraction=gbps / peak if peak else None,
    )
    print(
        f"Triton sampler, {args.budget} budget, V={args.vocab:,}: {row['seconds']:.2f} s to verdict "
        f"({', '.join(f'{k} {v}' for k, v in row['statuses'].items())}); sampler {row['sampler_seconds']:.2f} s, "
        f"{gbps:.1f} GB/s" + (f" = {gbps / peak:.1%} of {peak:g} GB/s" if peak else " (peak unknown: pass --peak-gbps)")
    )
    return {"command": "gpu", "budget": args.budget, **row}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    a = sub.add_parser("by-vocab")
    a.add_argument("--budget", default="standard", choices=["quick", "standard", "thorough"])
    a.add_argument("--vocabs", type=int, nargs="*", default=list(VOCABS))
    a.add_argument("--sampler", default="specverify.samplers:reference")
    b = sub.add_parser("gpu")
    b.add_argument("--budget", default="standard", choices=["quick", "standard", "thorough"])
    b.add_argument("--vocab", type=int, default=128_256)
    b.add_argument("--volume", type=int, default=None, help="input elements per shape (default: the budget's)")
    b.add_argument("--peak-gbps", type=float, default=None)
    for p in (a, b):
        p.add_argument("--out", default="benchmarks/results")
    args = parser.parse_args()
    if args.command is None:
        args = parser.parse_args(["by-vocab", *__import__("sys").argv[1:]])
    result = (gpu if args.command == "gpu" else by_vocab)(args)
    result.update(platform=platform.platform(), torch=torch.__version__, cores=torch.get_num_threads())
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = f"shapes-{result['command']}-{args.budget}.json"
    (out / name).write_text(json.dumps(result, indent=2))
    print(f"written {out / name}")


if __name__ == "__main__":
    main()
