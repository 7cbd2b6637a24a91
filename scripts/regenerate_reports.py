"""Regenerate the example reports in ``reports/``: run each sampler, keep its JSON, render the pages.

    python scripts/regenerate_reports.py                  # the samplers in SPECS and the loops in LOOPS below
    python scripts/regenerate_reports.py SPEC [SPEC ...]  # any samplers, by 'module:attribute'
    python scripts/regenerate_reports.py --render-only    # re-render reports/*.json (after a template change)

Each run writes ``reports/<sampler>.json`` (the run result) and ``reports/<sampler>.html`` (its page);
``reports/index.html`` compares them all, sampler by check family.  Every run uses seed 0, so a
regeneration on the same software gives the same verdicts.  A loop in ``LOOPS`` runs the loop family
on its selection of checks (transformers' batch-1 ``generate()``: about 25 min on one CPU core).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import specverify
from specverify._contract import name_of
from specverify.report import build_index
from specverify.report._format import slug

#: The samplers whose reports are kept in the repository: the built-in samplers, the transformers
#: adapter, and zoo members showing each verdict a failing sampler can get.
SPECS = [
    "specverify.samplers:reference",
    "specverify.samplers:triton",
    "specverify.adapters.transformers:sampler",
    "specverify.zoo:sample_and_compare",
    "specverify.zoo:replacement_from_target",
    "specverify.zoo:ignores_generator",
]

#: The generation loops whose reports are kept, with the loop checks each runs (a subset: its verdict
#: is inconclusive at best; the checks' own results are the finding).
LOOPS = {"specverify.adapters.transformers_generate:loop": ["loop.output", "loop.determinism", "loop.law[top-k]"]}

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("specs", nargs="*", metavar="SPEC", help=f"samplers to run (default: {' '.join(SPECS)})")
    parser.add_argument(
        "--budget",
        default="quick",
        choices=sorted(specverify.BUDGETS),
        help="default: quick (about a minute a sampler)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "reports", help="default: reports/")
    parser.add_argument("--render-only", action="store_true", help="only re-render the JSON already in --out")
    args = parser.parse_args(argv)

    args.out.mkdir(parents=True, exist_ok=True)
    if args.render_only:
        paths = sorted(args.out.glob("*.json"))
    else:
        paths = []
        for spec in args.specs or SPECS:
            sampler = specverify.load_sampler(spec)
            path = args.out / f"{slug(name_of(sampler)) or 'run'}.json"
            start = time.perf_counter()
            result = specverify.check(sampler, budget=args.budget, seed=args.seed, spec=spec, json_path=path)
            print(f"{result.verdict:>20}  {spec}  ({time.perf_counter() - start:.0f} s) -> {path}")
            paths.append(path)
        for spec, select in LOOPS.items() if not args.specs else ():
            loop = specverify.load_sampler(spec)
            path = args.out / f"{slug(loop.name)}.json"
            start = time.perf_counter()
            result = specverify.check_loop(
                spec, budget=args.budget, seed=args.seed, select=select, spec=spec, json_path=path
            )
            print(f"{result.verdict:>20}  {spec} {' '.join(select)}  ({time.perf_counter() - start:.0f} s) -> {path}")
            paths.append(path)
    if not paths:
        print(f"no run JSON in {args.out}", file=sys.stderr)
        return 2
    return build_index([str(p) for p in paths], str(args.out / "index.html"))


if __name__ == "__main__":
    sys.exit(main())
