"""Trees to a verdict: how many trees each ``trees`` check draws per budget, and the time of a quick
run through an unbatched tree sampler that sleeps a fixed time a tree.

    python benchmarks/bench_trees.py counts [--budgets quick standard thorough] [--out benchmarks/results]
    python benchmarks/bench_trees.py time [--before REF] [--ms 1] [--budget quick] [--out benchmarks/results]

``counts`` gives each check's trees on the tree reference (SpecInfer), a passing sampler: the exact
checks are run (their trees depend on the search), each statistical check is asked for the rows it
plans (the rows a passing sampler is given; a failing one is stopped earlier by the sequential
test) without drawing them, so the thorough budget is counted in seconds (``--measured`` runs every
budget for real instead, and checks that the two agree).

``time`` runs ``specverify check bench_trees:slow_reference --budget quick`` as a subprocess (the
sampler in its supervised worker, as a user's would run), on this tree and on ``--before`` (a git
ref, exported with ``git archive`` to a temporary directory) in the same run, alternating, and
reports wall and CPU seconds (the subprocess and its children) and the load average.
``slow_reference`` declares ``batched=False`` (one tree a call) and sleeps ``SPECVERIFY_BENCH_TREE_MS``
(default 1) milliseconds a tree before calling the reference on it.
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
from typing import Any

import torch

import specverify
from specverify.samplers import TREE_REFERENCES, tree_reference

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


class SlowReference:
    """The tree reference one tree a call, each call sleeping first: a real Python verifier's cost."""

    contract = "tree"
    algorithm = "specinfer"
    name = "slow_reference"
    capabilities = specverify.Capabilities(dtypes=(torch.float64,), batched=False)

    def __call__(self, tree: Any, generator: torch.Generator | None = None) -> Any:
        time.sleep(float(os.environ.get("SPECVERIFY_BENCH_TREE_MS", "1")) / 1000.0)
        return tree_reference(tree, generator)


slow_reference = SlowReference()


# --- counts ----------------------------------------------------------------------------------


class _Planned(Exception):
    def __init__(self, rows: int) -> None:
        self.rows = rows


#: How a result tallied on another's trees is counted (it draws none of its own).
SHARED = -1


def planned_counts(budget_name: str, seed: int = 0, sampler: Any = tree_reference) -> dict[str, int]:
    """Trees per result id: the exact checks run, the statistical ones' planned rows (not drawn);
    :data:`SHARED` for a result tallied on another's trees."""
    from specverify._budgets import get_budget
    from specverify._run._driver import load_sut
    from specverify._run._execute import run_check
    from specverify._run._plan import plan, result_ids
    from specverify.checks import _tree_target, _trees
    from specverify.checks._base import Context

    budget = get_budget(budget_name)
    sut = load_sut(sampler, isolation="in-process")
    counts: dict[str, int] = {}

    def planning(ctx: Any, tree_for: Any, rows: int, *args: Any, **kwargs: Any) -> Any:
        raise _Planned(rows)

    for planned in plan(sut, budget):
        ids = result_ids(planned.check)
        if planned.skip_reason is not None:
            continue
        if not planned.check.statistical:
            for result in run_check(planned, sut, budget, seed):
                counts[result.id] = result.samples or 0
            continue
        ctx = Context(sut=sut, budget=budget, seed=seed, alpha=planned.alpha)
        saved = (_trees.tally, _tree_target.tally)
        _trees.tally = _tree_target.tally = planning
        try:
            outcome = planned.check.run(ctx)
            results = outcome if isinstance(outcome, list) else [outcome]
            assert all(r.status == "skip" for r in results), results  # above shape_max_vocab: nothing drawn
        except _Planned as done:
            counts.update({i: SHARED for i in ids})
            counts[ids[0]] = done.rows  # one draw: the first result's (others are tallied on it)
        finally:
            _trees.tally, _tree_target.tally = saved
    return counts


def measured_counts(budget_name: str, seed: int = 0, sampler: Any = tree_reference) -> dict[str, int]:
    """Trees per result id, drawn: the whole battery on the sampler, in this process."""
    result = specverify.check(sampler, budget=budget_name, seed=seed, isolation="in-process")
    return {
        c.id: SHARED if c.evidence.get("tallied_with") else c.samples or 0 for c in result.checks if c.status != "skip"
    }


def counts_main(args: argparse.Namespace) -> None:
    table: dict[str, dict[str, int]] = {}
    sampler = TREE_REFERENCES[args.sampler]
    for name in args.budgets:
        start = time.perf_counter()
        table[name] = planned_counts(name, sampler=sampler)
        if args.measured:
            drawn = measured_counts(name, sampler=sampler)
            assert drawn == table[name], {
                k: (drawn.get(k), table[name].get(k))
                for k in set(drawn) | set(table[name])
                if drawn.get(k) != table[name].get(k)
            }
        print(f"{name}: {_total(table[name]):,} trees ({time.perf_counter() - start:.1f} s to count)")
    ids = list(dict.fromkeys(i for b in sorted(args.budgets, key=lambda b: -len(table[b])) for i in table[b]))
    lines = ["| check | " + " | ".join(args.budgets) + " |", "|---|" + "---|" * len(args.budgets)]
    for i in ids:
        lines.append(f"| `{i}` | " + " | ".join(_cell(table[b].get(i)) for b in args.budgets) + " |")
    totals = {b: _total(table[b]) for b in args.budgets}
    lines.append("| **total** | " + " | ".join(f"**{totals[b]:,}**" for b in args.budgets) + " |")
    for ms in (1, 10):
        lines.append(
            f"| time at {ms} ms a tree | " + " | ".join(_duration(totals[b] * ms / 1000) for b in args.budgets) + " |"
        )
    print("\n".join(lines))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"trees-counts-{args.sampler}"
    (out / f"{stem}.json").write_text(
        json.dumps(
            {
                "machine": platform.platform(),
                "sampler": args.sampler,
                "shared": SHARED,
                "counts": table,
                "totals": totals,
            },
            indent=1,
        )
        + "\n"
    )
    command = "python benchmarks/bench_trees.py counts " + " ".join(sys.argv[2:])
    (out / f"{stem}.md").write_text(
        f"# Trees per check and budget ({args.sampler} reference, seed 0)\n\n`{command}`\n\n"
        "A passing sampler's trees (a failing one's law checks stop earlier); \"shared\": tallied on the "
        "trees of the result above it; "
        '"skip": not run (the check skips, saying why: above the budget\'s shape_max_vocab, or not for this '
        "algorithm).\n\n" + "\n".join(lines) + "\n"
    )


def _total(counts: dict[str, int]) -> int:
    return sum(n for n in counts.values() if n > 0)


def _cell(n: int | None) -> str:
    return "skip" if n is None else "shared" if n == SHARED else f"{n:,}"


def _duration(seconds: float) -> str:
    return (
        f"{seconds:.0f} s"
        if seconds < 120
        else f"{seconds / 60:.1f} min"
        if seconds < 7200
        else f"{seconds / 3600:.1f} h"
    )


# --- time ------------------------------------------------------------------------------------


def _export(ref: str, into: Path) -> Path:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def _commit(ref: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", ref], check=True, capture_output=True, text=True
    ).stdout.strip()


def timed_check(tree: Path, budget: str, ms: float, json_path: Path) -> dict[str, Any]:
    """``specverify check bench_trees:slow_reference`` with ``tree``'s specverify: wall and CPU seconds."""
    env = {
        **os.environ,
        "PYTHONPATH": f"{tree}{os.pathsep}{HERE}",
        "SPECVERIFY_BENCH_TREE_MS": str(ms),
        "OMP_NUM_THREADS": "1",
        "OMP_WAIT_POLICY": "PASSIVE",
    }
    command = [
        sys.executable,
        "-m",
        "specverify",
        "check",
        "bench_trees:slow_reference",
        "--budget",
        budget,
        "--seed",
        "0",
        "--json",
        str(json_path),
        "--no-progress",
        "-q",
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=tree)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    data = json.loads(json_path.read_text())
    trees = sum(c.get("samples") or 0 for c in data["checks"] if not (c.get("evidence") or {}).get("tallied_with"))
    return {
        "verdict": data.get("verdict"),
        "exit": done.returncode,
        "wall_s": wall,
        "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "trees": trees,
        "load_before": load,
        "load_after": os.getloadavg(),
    }


def time_main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "before").mkdir()
        before, after = _commit(args.before), _commit("HEAD")  # resolved now: main may move during the runs
        base = _export(before, Path(tmp) / "before")
        runs: list[dict[str, Any]] = []
        for round_ in range(args.repeat):
            for label, tree in (("before", base), ("after", ROOT)):
                record = timed_check(tree, args.budget, args.ms, Path(tmp) / f"{label}-{round_}.json")
                record.update(label=label, round=round_)
                runs.append(record)
                print(
                    f"{label:6} {record['verdict']:12} {record['trees']:>8,} trees  wall {record['wall_s']:7.1f} s  "
                    f"CPU {record['cpu_s']:7.1f} s  load {record['load_before'][0]:.2f} -> "
                    f"{record['load_after'][0]:.2f}",
                    flush=True,
                )
    command = "python benchmarks/bench_trees.py time " + " ".join(sys.argv[2:])
    dirty = (
        " with uncommitted changes"
        if subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--", "specverify"], capture_output=True, text=True
        ).stdout
        else ""
    )
    lines = [
        f"# A {args.budget} run of the tree reference through an unbatched {args.ms:g} ms-a-tree wrapper: before and "
        "after\n",
        f"`{command}` (before: `{args.before}` = {before}, exported with `git archive`; after: this tree, "
        f"{after}{dirty} to specverify/; alternating, the same machine, one after the other)\n",
        f"Machine: {platform.platform()}, {os.cpu_count()} CPUs, shared with other work (load average: 1-minute figure "
        "before and after each run).\n",
        "| run | verdict | trees | wall s | CPU s | load before | load after |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['label']} ({r['round'] + 1}) | {r['verdict']} | {r['trees']:,} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | "
        f"{r['load_before'][0]:.2f} | {r['load_after'][0]:.2f} |"
        for r in runs
    ]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"trees-time-{args.budget}-{args.ms:g}ms"
    (out / f"{stem}.json").write_text(
        json.dumps(
            {"machine": platform.platform(), "before": [args.before, before], "after": after + dirty, "runs": runs},
            indent=1,
        )
        + "\n"
    )
    (out / f"{stem}.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    counts = sub.add_parser("counts", help="trees per check and budget")
    counts.add_argument("--budgets", nargs="*", default=["quick", "standard", "thorough"])
    counts.add_argument("--sampler", default="specinfer", choices=list(TREE_REFERENCES), help="which tree reference")
    counts.add_argument(
        "--measured", action="store_true", help="also run each budget for real and check the counts agree"
    )
    counts.add_argument("--out", default=str(HERE / "results"))
    timing = sub.add_parser("time", help="a quick run through the unbatched slow wrapper, before and after")
    timing.add_argument("--before", default="main", help="git ref of the 'before' run")
    timing.add_argument("--ms", type=float, default=1.0, help="milliseconds the wrapper sleeps a tree")
    timing.add_argument("--budget", default="quick")
    timing.add_argument("--repeat", type=int, default=1, help="before/after pairs, alternating")
    timing.add_argument("--out", default=str(HERE / "results"))
    args = parser.parse_args()
    counts_main(args) if args.command == "counts" else time_main(args)


if __name__ == "__main__":
    main()
