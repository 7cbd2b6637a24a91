"""Record the built-in references' run JSON, or compare two records apart from timings.

A refactor that promises "behaviour unchanged" runs this before and after::

    python scripts/json_identity.py record before/      # on the old commit
    python scripts/json_identity.py record after/       # on the new one
    python scripts/json_identity.py compare before/ after/

``record`` runs every built-in reference (chain, logits, loop, each tree algorithm) through the CLI at
the given budget and seed and writes one JSON per reference; ``compare`` (of two such directories, or two run JSON
files) drops what differs from run to run by nature (durations, timings, start times, versions, the platform) and prints
every other difference, exiting 1 if there is one.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from specverify.report import reproducible

#: (file stem, CLI subcommand, spec) of every built-in reference.
REFERENCES = (
    ("reference", "check", "specverify.samplers:reference"),
    ("logits_reference", "check", "specverify.samplers:logits_reference"),
    ("loop_reference", "loop", "specverify.samplers:loop_reference"),
    ("engine_reference", "engine", "specverify.samplers:engine_reference"),
    ("tree_specinfer", "check", "specverify.samplers:tree_specinfer"),
    ("tree_without_replacement", "check", "specverify.samplers:tree_without_replacement"),
    ("tree_target_only", "check", "specverify.samplers:tree_target_only"),
    ("block_verification", "check", "specverify.samplers:block_verification"),
)


def record(directory: Path, budget: str, seed: int, only: list[str]) -> int:
    directory.mkdir(parents=True, exist_ok=True)
    status = 0
    for stem, command, spec in REFERENCES:
        if only and stem not in only:
            continue
        path = directory / f"{stem}.json"
        argv = [sys.executable, "-m", "specverify", command, spec, "--budget", budget, "--seed", str(seed)]
        argv += ["--json", str(path), "-q"] + (
            ["--no-progress"] if command == "check" else []
        )  # the loop shows no progress
        done = subprocess.run(argv, check=False)
        print(f"{stem}: exit {done.returncode}", flush=True)
        if done.returncode == 2 or not path.exists():
            status = 1
    return status


def differences(a: Any, b: Any, where: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        found = []
        for key in sorted(set(a) | set(b), key=str):
            if key not in a or key not in b:
                found.append(f"{where}.{key}: only in {'after' if key not in a else 'before'}")
            else:
                found += differences(a[key], b[key], f"{where}.{key}")
        return found
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} items before, {len(b)} after"]
        return [line for i, (x, y) in enumerate(zip(a, b)) for line in differences(x, y, f"{where}[{i}]")]
    return [] if a == b else [f"{where}: {a!r} before, {b!r} after"]


def compare(before: Path, after: Path) -> int:
    """Every difference between two records (directories of run JSON) or two run JSON files."""
    if before.is_file() != after.is_file():
        raise SystemExit(f"compare two directories or two files, not {before} and {after}")
    pairs = (
        [(before, after)] if before.is_file() else [(path, after / path.name) for path in sorted(before.glob("*.json"))]
    )
    if not pairs:
        raise SystemExit(f"{before} holds no run JSON: nothing to compare")
    total = 0
    for path, other in pairs:
        if not other.exists():
            print(f"{path.name}: missing after")
            total += 1
            continue
        found = differences(reproducible(json.loads(path.read_text())), reproducible(json.loads(other.read_text())))
        total += len(found)
        print(f"{path.name}: {'identical' if not found else f'{len(found)} differences'}")
        for line in found[:20]:
            print(f"  {line}")
    print(f"{total} differences")
    return 1 if total else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="run every reference and write its JSON into DIR")
    rec.add_argument("directory", type=Path)
    rec.add_argument("--budget", default="quick")
    rec.add_argument("--seed", type=int, default=0)
    rec.add_argument("--only", action="append", default=[], help="a reference's stem (repeatable)")
    cmp_ = sub.add_parser("compare", help="print every difference between two records but timings")
    cmp_.add_argument("before", type=Path)
    cmp_.add_argument("after", type=Path)
    args = parser.parse_args(argv)
    if args.command == "record":
        return record(args.directory, args.budget, args.seed, args.only)
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
