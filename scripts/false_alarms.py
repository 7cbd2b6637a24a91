"""A correct sampler over many run seeds: how often does the harness cry wolf on it?

    python scripts/false_alarms.py specverify.samplers:logits_reference --budget standard --seeds 20 --jobs 2
    python scripts/false_alarms.py --loop specverify.samplers:loop_reference --seeds 20
    python scripts/false_alarms.py specverify.samplers:tree_specinfer specverify.samplers:block_verification
    python scripts/false_alarms.py --loop --undeclared vllm --budget quick \
        specverify.samplers._loop_reference:loop_reference_vllm_undeclared
    python scripts/false_alarms.py specverify.samplers:reference --tv 0.001 --workers 2 --jobs 1

Each (sampler, seed) is one fresh ``specverify check`` (or ``specverify loop`` with ``--loop``) command,
seeds 0 to N-1, so a run is exactly what a user gets from the CLI: its own supervised sampler
process, its own JSON. Every run's family-wise false-positive probability is at most its alpha
(1e-4 by default), so N runs of a correct sampler should all be ``conformant``; any other verdict is
a false alarm (or a harness error) and is listed with the checks that failed.  With
``--undeclared PRESET`` the samplers warp as that engine and declare nothing: judged by
transformers' law, ``inconclusive`` naming PRESET to declare is their expected verdict too.  With
``--tv EPS`` each run asks for a budget sized for EPS instead of a preset (``--budget`` is then
its base, as on the CLI), and ``--workers N`` gives each run N sampler processes. Writes
``OUTPUT/<sampler>-<budget>.md`` (``<sampler>-tvEPS.md`` with ``--tv``) and ``.json`` per sampler, rewritten as each run
lands (titled "under way" until all its seeds are in), and exits 1 if any run was not conformant. With ``--runs DIR``
each run's JSON and record are kept there and a run already recorded is not run again: an interrupted campaign (Ctrl-C
exits 130, its tables written as its runs stood) goes on where it stopped.
Run with ``OMP_NUM_THREADS=1`` on a small machine (the runs then do not fight over cores: README,
"Benchmarks").
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from specverify.report._format import slug


def _commit() -> str:
    """The commit of the specverify the runs import (the table says which code ran), or ``?``."""
    import specverify

    where = Path(specverify.__file__).parent
    done = subprocess.run(["git", "-C", str(where), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
    ).stdout.strip()
    return (done.stdout.strip() + ("+changes" if dirty else "")) if done.returncode == 0 else "?"


def _setting(budget: str, tv: float | None) -> tuple[str, list[str]]:
    """A campaign's budget as a name (in file names and tables) and as the CLI's options."""
    if tv is None:
        return budget, ["--budget", budget]
    return f"tv{tv:g}", ["--tv", f"{tv:g}"] + (["--budget", budget] if budget != "standard" else [])


def _run(
    spec: str, seed: int, budget: str, loop: bool, scratch: Path, commit: str, options: list[str] | None = None
) -> dict[str, Any]:
    """One fresh CLI run of ``spec`` at ``seed``; ``budget`` names the setting, ``options`` are its
    CLI options (default ``--budget BUDGET``)."""
    path = scratch / f"{slug(spec)}-{budget}-{seed}.json"
    record = path.with_suffix(".run.json")
    if record.exists():  # recorded by an earlier, interrupted campaign
        return json.loads(record.read_text())
    given = ["--budget", budget] if options is None else options
    command = [
        sys.executable,
        "-m",
        "specverify",
        "loop" if loop else "check",
        spec,
        *given,
        "--seed",
        str(seed),
        "--json",
        str(path),
        "-q",
    ]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env={"OMP_NUM_THREADS": "1", **os.environ})
    seconds = time.perf_counter() - started
    result = json.loads(path.read_text()) if path.exists() else {}
    checks = result.get("checks", [])
    row = {
        "seed": seed,
        "commit": commit,
        "verdict": result.get("verdict", "no JSON"),
        "reason": result.get("verdict_reason", ""),
        "exit_code": done.returncode,
        "seconds": round(seconds, 1),
        "checks": len(checks),
        "passed": sum(c.get("status") == "pass" for c in checks),
        "failed": [f"{c['id']}: {c.get('message', '')}"[:300] for c in checks if c.get("status") in ("fail", "error")],
        "smallest_p": min((c["p_value"] for c in checks if isinstance(c.get("p_value"), (int, float))), default=None),
        "stderr": done.stderr[-600:] if done.returncode not in (0, 3) else "",
    }
    if done.returncode != 130:  # an interrupted run is run again next time
        record.write_text(json.dumps(row))
    return row


def explains(row: dict[str, Any], preset: str | None) -> bool:
    """Whether a run of a correct sampler is no false alarm: ``conformant``, or, for a sampler that
    warps as engine ``preset`` and declares nothing (``--undeclared PRESET``), ``inconclusive``
    naming that preset to declare (the loop's law fits its convention, not transformers')."""
    if row["verdict"] == "conformant":
        return True
    return (
        preset is not None and row["verdict"] == "inconclusive" and f"declare warp={preset!r}" in row.get("reason", "")
    )


def _table(
    spec: str,
    budget: str,
    loop: bool,
    runs: list[dict[str, Any]],
    command: str,
    preset: str | None = None,
    planned: int | None = None,
) -> str:
    """The campaign's table; while fewer runs than the ``planned`` seeds are in, it says so in its
    title and its last line (a campaign under way is never read as a finished one)."""
    good = sum(explains(r, preset) for r in runs)
    under_way = planned is not None and len(runs) < planned
    lines = [
        f"# `{spec}` over "
        f"{f'{len(runs)} of {planned} run seeds (under way)' if under_way else f'{len(runs)} run seeds'}, budget "
        f"`{budget}`",
        "",
        f"Generated by `{command}`: one `specverify {'loop' if loop else 'check'}` command per seed.",
        "",
        "| seed | verdict | exit code | checks passed | smallest p-value | seconds | code | failing checks (or why) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        p = "" if r["smallest_p"] is None else f"{r['smallest_p']:.3g}"
        lines.append(
            f"| {r['seed']} | {r['verdict']} | {r['exit_code']} | {r['passed']} of {r['checks']} | {p} | "
            f"{r['seconds']} | {r.get('commit', '?')} | "
            f"{'; '.join(r['failed']) or (r.get('reason', '') if r['verdict'] != 'conformant' else '')} |"
        )
    conformant = sum(r["verdict"] == "conformant" for r in runs)
    if preset is None:
        lines += ["", f"{good} of {len(runs)} runs conformant; false alarms: {len(runs) - good} in {len(runs)} runs."]
    else:
        lines += [
            "",
            f"Undeclared, warping as {preset}: {conformant} of {len(runs)} runs conformant, {good - conformant} "
            f"inconclusive naming warp={preset!r} to declare (not false alarms); false alarms (lossy, non-conformant, "
            f"or any other verdict): {len(runs) - good} in {len(runs)} runs.",
        ]
    if under_way:
        lines += [
            "",
            f"Under way: {planned - len(runs)} of {planned} seeds not yet run; this table is rewritten as each run "
            "lands.",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "specs", nargs="+", metavar="SPEC", help="correct samplers (or loops, with --loop) as 'module:attribute'"
    )
    parser.add_argument("--budget", default="standard", choices=("quick", "standard", "thorough"))
    parser.add_argument("--seeds", type=int, default=20, help="run seeds 0 to N-1 (default 20)")
    parser.add_argument("--jobs", type=int, default=2, help="runs at once (default 2)")
    parser.add_argument("--loop", action="store_true", help="the specs are generation loops: run `specverify loop`")
    parser.add_argument("--output", type=Path, default=Path("reports/false-alarms"))
    parser.add_argument(
        "--undeclared",
        metavar="PRESET",
        default=None,
        help="the specs warp as engine PRESET and declare nothing: 'inconclusive' naming PRESET to declare is no false "
        "alarm",
    )
    parser.add_argument(
        "--runs", type=Path, default=None, help="keep each run's JSON here, and reuse the runs recorded here (resume)"
    )
    parser.add_argument(
        "--tv",
        type=float,
        metavar="EPS",
        default=None,
        help="each run at a budget sized for TV EPS (the CLI's --tv; --budget its base)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        metavar="N",
        default=None,
        help="sampler processes each run spreads its work over (the CLI's --workers)",
    )
    args = parser.parse_args(argv)
    if args.tv is not None and not 0 < args.tv < 1:
        parser.error(f"--tv must lie in (0, 1), not {args.tv:g}")
    if args.workers is not None and args.workers < 1:
        parser.error(f"--workers must be at least 1, not {args.workers}")
    setting, options = _setting(args.budget, args.tv)
    options += [] if args.workers is None else ["--workers", str(args.workers)]
    args.output.mkdir(parents=True, exist_ok=True)
    command = "python scripts/false_alarms.py " + " ".join(sys.argv[1:] if argv is None else argv)
    work = [(spec, seed) for spec in args.specs for seed in range(args.seeds)]
    runs: dict[str, list[dict[str, Any]]] = {spec: [] for spec in args.specs}
    bad = 0
    commit = _commit()

    def write(spec: str) -> None:
        """The sampler's table and JSON as its runs stand (rewritten as each lands); counted once all are in."""
        nonlocal bad
        rows = sorted(runs[spec], key=lambda r: r["seed"])
        name, complete = f"{slug(spec)}-{setting}", len(rows) == args.seeds
        record = {
            "spec": spec,
            "budget": setting,
            "command": command,
            "undeclared": args.undeclared,
            "seeds": args.seeds,
            "complete": complete,
            "runs": rows,
        }
        (args.output / f"{name}.json").write_text(json.dumps(record, indent=1))
        (args.output / f"{name}.md").write_text(
            _table(spec, setting, args.loop, rows, command, args.undeclared, planned=args.seeds)
        )
        if not complete:
            return
        good = sum(explains(r, args.undeclared) for r in rows)
        bad += len(rows) - good
        print(
            f"{spec}: {good} of {len(rows)} "
            f"{'conformant' if args.undeclared is None else 'conformant or inconclusive naming ' + args.undeclared} -> "
            f"{args.output / name}.md",
            flush=True,
        )

    with contextlib.ExitStack() as stack:
        scratch = args.runs or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="specverify-false-alarms-")))
        scratch.mkdir(parents=True, exist_ok=True)
        pool = concurrent.futures.ThreadPoolExecutor(args.jobs)
        futures = {
            pool.submit(_run, spec, seed, setting, args.loop, scratch, commit, options): spec for spec, seed in work
        }
        try:
            for future in concurrent.futures.as_completed(futures):
                spec, run = futures[future], future.result()
                runs[spec].append(run)
                print(
                    f"{spec} seed {run['seed']}: {run['verdict']} (exit {run['exit_code']}) in {run['seconds']} s",
                    flush=True,
                )
                write(spec)
        except KeyboardInterrupt:  # the runs under way had the terminal's SIGINT too; start no more
            pool.shutdown(wait=True, cancel_futures=True)
            left = [spec for spec in args.specs if len(runs[spec]) < args.seeds]
            print(
                f"interrupted: {sum(map(len, runs.values()))} of {len(work)} runs finished; under way in their tables: "
                f"{', '.join(left)}"
                + (f" (their finished runs are kept in {scratch}: run the same command to go on)" if args.runs else ""),
                flush=True,
            )
            return 130
        pool.shutdown()
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
