"""The ``specverify`` command.

Exit status of ``specverify check``: 0 lossless (conformant, or lossless but suboptimal), 1 not
lossless (lossy or contract broken, a crash or a hang of the sampler included), 2 the harness could
not run (bad spec, import or factory failure, absent device, unwritable output), 3 the budget could
not decide, 130 interrupted (the JSON and HTML of what finished are kept).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ._budgets import BUDGETS
from ._vocabulary import Status, Verdict, lossless

if TYPE_CHECKING:
    from ._result import CheckResult

__all__ = ["main"]

_EPILOG = """\
exit status of 'check':
  0  lossless: conformant, or lossless but suboptimal
  1  not lossless: lossy, or the sampler contract is broken (a crash, exit or hang of the sampler included)
  2  the harness could not run (bad spec, import or factory failure, absent device, unwritable output)
  3  inconclusive: the budget could not decide
  130 interrupted (Ctrl-C); the JSON and HTML of what finished are written; a second Ctrl-C exits at once

examples:
  specverify check specverify.samplers:reference --json out.json
  specverify check mypkg.kernels:sampler --budget thorough --report reports/mine.html
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="specverify",
        description="Prove or refute that a speculative-decoding sampler preserves the target model's distribution exactly.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    check = commands.add_parser(
        "check",
        help="put a sampler through the conformance battery",
        description=(
            "Run every check family (contract, support, exact, fit, efficiency, robustness, shapes) on the sampler named "
            "by SPEC and print the verdict; a tree sampler (contract = 'tree', docs/trees.md) gets the trees family instead, "
            "run in this process. Statistical checks share one family-wise false-positive budget and "
            "each states the smallest deviation (total variation) it detects with probability 0.99."
        ),
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_run_options(
        check,
        what="sampler",
        spec_help="the sampler as 'package.module:attribute' (a sampler or a zero-argument factory)",
        only_example="'fit.*', 'fit.conditional[*]'",
        timeout_help="seconds one sampler call may take before it is a hang (default: the first calls get 120 s, "
        "later ones a limit scaled to the sampler's measured speed; 5 s plus that once a call has hung)",
        in_process_help="call the sampler in the harness's own process and thread, for debugging with pdb: "
        "a crash then ends the harness and no call is timed (default: a supervised process of its own)",
    )
    check.add_argument("--device", help="device for a sampler that declares none (default cpu)")
    check.add_argument("--no-progress", action="store_true", help="no progress bar")
    check.add_argument("-q", "--quiet", action="store_true", help="print only the verdict line")

    loop = commands.add_parser(
        "loop",
        help="put a whole speculative generation loop through the loop family",
        description=(
            "Run the loop family (output, determinism, per-request seeds, warped laws of short generations by "
            "sampling parameters, pair laws over a long horizon) on the generation loop named by SPEC, declared "
            "with @specverify.loop (docs/loops.md), and print the verdict. The loop runs in a supervised process of "
            "its own: a crash, exit or hang of the loop fails the check it happened in and the run goes on."
        ),
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_run_options(
        loop,
        what="loop",
        spec_help="the loop as 'package.module:attribute' (a loop or a zero-argument factory)",
        only_example="'loop.law[*]', 'loop.law[top-k]'",
        timeout_help="seconds the loop may go without calling a model (or returning) before it is a hang (default 120)",
        in_process_help="run the loop in the harness's own process, for debugging with pdb: a crash then ends the harness "
        "(default: a supervised process of its own)",
    )
    loop.add_argument("-q", "--quiet", action="store_true", help="print only the verdict line")

    report = commands.add_parser(
        "report",
        help="one HTML page comparing several runs (sampler by check family)",
        description="Render each run's JSON as its own HTML page and an index comparing them, sampler by check family.",
    )
    report.add_argument("inputs", nargs="+", metavar="RUN.json", help="JSON results written by 'specverify check --json'")
    report.add_argument("-o", "--output", required=True, metavar="PATH", help="the index page to write (e.g. reports/index.html)")

    zoo = commands.add_parser(
        "zoo",
        help="run the known-bug zoo through the battery and print the kill matrix",
        description=(
            "Run every zoo member (known bugs, correct-but-different, suboptimal and lossy-by-design samplers) "
            "through the battery, print which family caught each and at what cost, count false alarms, and write "
            "the matrix to reports/kill-matrix/kill-matrix-BUDGET.md and .json, after every run (marked partial until "
            "the last one ends). Exits 1 on a false alarm, or on a bug missed at a budget it is declared catchable at; "
            "130 on Ctrl-C, with the partial matrix of the runs that finished."
        ),
    )
    zoo.add_argument("--budget", choices=list(BUDGETS), default="standard")
    zoo.add_argument("--seeds", type=int, default=1, help="run seeds per member (false alarms are counted over all)")
    zoo.add_argument("--members", action="append", metavar="PATTERN", help="glob on member names (repeatable)")
    zoo.add_argument("--jobs", type=int, default=1, help="processes to run members in parallel")
    zoo.add_argument("--output", default="reports/kill-matrix", metavar="DIR", help="where to write the matrix (default reports/kill-matrix/)")
    zoo.add_argument("--timeout", type=float, default=60.0, help="seconds a sampler call may take before it is a hang (default 60)")
    zoo.add_argument(
        "--loops",
        action="store_true",
        help="add the generation-loop members (named loop:NAME, e.g. --members 'loop:*') through the loop family, in a 'loop' column",
    )

    commands.add_parser(
        "adapters",
        help="list the built-in adapters and whether each can run here",
        description="List the built-in adapters for third-party samplers, their specs, and whether each can run on this machine.",
    )
    return parser


def _add_run_options(
    parser: argparse.ArgumentParser, *, what: str, spec_help: str, only_example: str, timeout_help: str, in_process_help: str
) -> None:
    """The options 'check' and 'loop' share: what to run, its budget and seed, where to write, how to isolate."""
    parser.add_argument("spec", metavar="SPEC", help=spec_help)
    parser.add_argument("--json", metavar="PATH", help="write the result as JSON, updated after every check")
    parser.add_argument("--report", metavar="PATH", help="write a self-contained HTML report")
    parser.add_argument("--seed", type=int, default=0, help="run seed; every random draw derives from it (default 0)")
    parser.add_argument(
        "--budget",
        choices=list(BUDGETS),
        default="standard",
        help="how small a deviation to detect: "
        + ", ".join(f"{name} TV {budget.tv:g}" for name, budget in BUDGETS.items())
        + " (default standard)",
    )
    parser.add_argument("--alpha", type=float, help="family-wise false-positive probability of the run (default 1e-4)")
    parser.add_argument(
        "--only",
        action="append",
        metavar="PATTERN",
        help=f"run only checks whose id or family matches (repeatable; globs, with [ ] literal: {only_example}); "
        f"a subset can fail a {what} but not pass it",
    )
    parser.add_argument("--timeout", type=float, metavar="SECONDS", help=timeout_help)
    parser.add_argument("--in-process", action="store_true", help=in_process_help)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    if args.command == "check":
        return _check(args)
    if args.command == "loop":
        return _loop(args)
    if args.command == "report":
        from .report import build_index

        return build_index(args.inputs, args.output)
    if args.command == "zoo":
        return _zoo(args)
    if args.command == "adapters":
        from .adapters import print_adapters

        return print_adapters()
    parser.error(f"unknown command {args.command!r}")
    return 2


def _check(args: argparse.Namespace) -> int:
    from rich.console import Console

    from ._calling import check_device
    from ._contract import SamplerSpecError

    err = Console(stderr=True, soft_wrap=True)
    out = Console(soft_wrap=True)

    def fail(message: str) -> int:
        err.print(f"specverify: error: {message}", markup=False, highlight=False)
        return 2

    # As `python -m` and pytest do: a spec names modules relative to where the command runs.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    if ":" not in args.spec or not all(args.spec.partition(":")[::2]):
        return fail(
            f"sampler spec {args.spec!r} is not of the form 'package.module:attribute' (for example specverify.samplers:reference)"
        )
    problem = _validate(args)
    if problem:
        return fail(problem)
    try:
        check_device(args.device)
    except SamplerSpecError as exc:
        return fail(str(exc))
    if not args.in_process:
        from ._worker import prestart

        prestart(args.device)  # the sampler's process imports torch while the harness imports the battery
    from .checks._plan import check_selection

    problem = check_selection(args.only)
    if problem:
        return fail(problem)

    from ._progress import ProgressDisplay

    display = ProgressDisplay(enabled=not args.no_progress and not args.quiet and err.is_terminal, console=err)
    printer = None if args.quiet else _result_printer(out)

    return _interruptible(lambda exit_now: _run(args, display, printer, err, out, exit_now))


def _interruptible(body: Callable[[Callable[..., None]], int]) -> int:
    """Run ``body(exit_now)`` with Ctrl-C raising ``KeyboardInterrupt`` once; a second press ends
    the harness at once (``body`` installs ``exit_now`` while it writes what finished)."""
    import signal
    import threading

    def exit_now(signum: int, frame: object) -> None:
        os._exit(130)

    def interrupt(signum: int, frame: object) -> None:
        signal.signal(signal.SIGINT, exit_now)  # a second Ctrl-C ends the harness at once
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        return body(exit_now)
    previous = signal.signal(signal.SIGINT, interrupt)
    try:
        return body(exit_now)
    finally:
        signal.signal(signal.SIGINT, previous)


def _interrupted(exc: KeyboardInterrupt, args: argparse.Namespace, err: Any, exit_now: Callable[..., None]) -> int:
    """Ctrl-C: write the report of what finished (the JSON is already written), say where it is; 130."""
    import signal

    from ._runner import Interrupted

    signal.signal(signal.SIGINT, exit_now)
    result = exc.result if isinstance(exc, Interrupted) else None
    if result is not None and args.report:
        _write_report(result, args.report, err)
    kept = [f"{what} {path}" for path, what in ((args.json, "JSON"), (args.report, "report")) if path and result is not None]
    err.print("specverify: interrupted; " + (f"what finished is in {', '.join(kept)}" if kept else "no --json or --report given"))
    return 130


def _run(args: argparse.Namespace, display: Any, printer: Any, err: Any, out: Any, exit_now: Any) -> int:
    """Run the check and write what it found, whatever happens (the sampler's death, Ctrl-C)."""
    from ._contract import SamplerSpecError
    from ._runner import check, load_failure

    def fail(message: str) -> int:
        err.print(f"specverify: error: {message}", markup=False, highlight=False)
        return 2

    def on_result(result: CheckResult) -> None:
        display.finished(result)
        if printer:
            printer(result)

    try:
        with display:
            result = check(
                args.spec,
                budget=args.budget,
                seed=args.seed,
                alpha=args.alpha,
                device=args.device,
                select=args.only,
                spec=args.spec,
                json_path=args.json,
                on_result=on_result,
                progress=display.advance,
                isolation="in-process" if args.in_process else "process",
                timeout=args.timeout,
                on_plan=display.plan,
                on_wait=display.waiting,
            )
    except KeyboardInterrupt as exc:
        return _interrupted(exc, args, err, exit_now)
    except SamplerSpecError as exc:  # the sampler could not be imported or built
        failure = load_failure(args.spec, str(exc), args.budget, args.seed)
        if args.json:
            from ._runner import write_json

            write_json(failure, args.json)
        if args.report:
            _write_report(failure, args.report, err)
        return fail(str(exc))
    if args.report and not _write_report(result, args.report, err):
        _print_verdict(out, result, args)
        return 2
    _print_verdict(out, result, args)
    return result.exit_code


def _validate(args: argparse.Namespace) -> str | None:
    """What makes the options unusable, found before anything runs (or ``None``)."""
    import tempfile
    from pathlib import Path

    if args.alpha is not None and not 0 < args.alpha < 1:
        return "--alpha must lie in (0, 1)"
    if args.timeout is not None and not args.timeout > 0:
        return "--timeout must be a positive number of seconds"
    for flag, path in (("--json", args.json), ("--report", args.report)):
        if not path:
            continue
        target = Path(path)
        if target.is_dir():
            return f"{flag} {path} is a directory; give a file path"
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=target.parent, prefix=f".{target.name}.", suffix=".probe"):
                pass
        except OSError as exc:
            return f"{flag} {path} cannot be written: {exc.strerror or exc}"
    if args.json and args.report and Path(args.json).resolve() == Path(args.report).resolve():
        return "--json and --report name the same file"
    return None


def _write_report(result, path: str, err) -> bool:
    from .report import write_report

    try:
        write_report(result, path)
    except OSError as exc:
        err.print(f"specverify: error: cannot write the report: {exc}", markup=False, highlight=False)
        return False
    return True


def _loop(args: argparse.Namespace) -> int:
    """``specverify loop``: the loop family, the loop in a supervised process (or, asked, in this one)."""
    from rich.console import Console

    err, out = Console(stderr=True, soft_wrap=True), Console(soft_wrap=True)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    problem = _validate(args)
    if problem is not None:
        err.print(f"specverify: error: {problem}", markup=False, highlight=False)
        return 2
    return _interruptible(lambda exit_now: _run_loop(args, err, out, exit_now))


def _run_loop(args: argparse.Namespace, err: Any, out: Any, exit_now: Callable[..., None]) -> int:
    """Run the loop family and write what it found, whatever happens (Ctrl-C included)."""
    from ._contract import SamplerSpecError
    from .checks._loop import check_loop

    try:
        result = check_loop(
            args.spec, budget=args.budget, seed=args.seed, alpha=args.alpha, select=args.only,
            isolation="in-process" if args.in_process else "process", timeout=args.timeout,
            on_result=None if args.quiet else _result_printer(out), json_path=args.json, spec=args.spec,
        )
    except KeyboardInterrupt as exc:
        return _interrupted(exc, args, err, exit_now)
    except (SamplerSpecError, ValueError) as exc:  # not loadable, not a loop, or a selection that matches nothing
        err.print(f"specverify: error: {exc}", markup=False, highlight=False)
        return 2
    if args.report and not _write_report(result, args.report, err):
        return 2
    _print_verdict(out, result, args)
    if result.verdict == Verdict.CONFORMANT:
        out.print(f"tested on {result.run['reach']}", markup=False, highlight=False)
    return result.exit_code


def _zoo(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    from .zoo._matrix import in_work_order, kill_matrix, matrix_work, write_matrix

    console = Console(soft_wrap=True)
    command = f"specverify zoo --budget {args.budget} --seeds {args.seeds}" + (" --loops" if args.loops else "") + "".join(
        f" --members '{pattern}'" for pattern in args.members or ()
    )
    work = matrix_work(args.members, seeds=args.seeds, loops=args.loops)
    if not work:
        console.print(f"[bold red]error[/] --members {' '.join(args.members or [])!r} matches no zoo member (names look like 'reference-sampler', 'tree-*', 'loop:*' with --loops)")
        return 2
    finished: list = []

    def show(row) -> None:
        finished.append(row)  # the matrix so far is on disk after every run: an interrupted one keeps it
        write_matrix(in_work_order(finished, work), args.budget, args.output, command, planned=len(work))
        style = "green" if row.meets else "bold red"
        caught = ", ".join(f"{f}:{n}" for f, n in row.caught_by.items()) or "-"
        console.print(
            f"[{style}]{'meets' if row.meets else 'DIFFERS'}[/] {escape(row.member)} seed {row.seed}: "
            f"{row.verdict} (declared {row.declared} at {row.declared_budget}); caught by {caught}; {row.seconds:.1f} s"
        )

    try:
        rows = kill_matrix(args.budget, members=args.members, seeds=args.seeds, jobs=args.jobs, timeout=args.timeout, on_row=show, loops=args.loops)
    except KeyboardInterrupt:
        markdown, _ = write_matrix(in_work_order(finished, work), args.budget, args.output, command, planned=len(work), ended="interrupted")
        console.print(f"[bold red]interrupted[/]: {len(finished)} of {len(work)} runs finished; the partial matrix is in {markdown}")
        return 130
    markdown, data = write_matrix(rows, args.budget, args.output, command)
    console.print(markdown.read_text().split("\n\n")[-1].strip())
    console.print(f"written: {markdown}, {data}")
    due_missed = [r for r in rows if r.miss and r.due(args.budget)]
    return 1 if any(r.false_alarm for r in rows) or due_missed else 0


_STATUS_STYLE = {s.value: s.style for s in Status}
_VERDICT_STYLE = {v.value: v.style for v in Verdict}


def _result_printer(console: Any) -> Callable[[CheckResult], None]:
    from rich.markup import escape

    def show(result: CheckResult) -> None:
        style = _STATUS_STYLE[result.status]
        tv = f" TV>={result.min_detectable_tv:.3g}" if result.min_detectable_tv is not None else ""
        console.print(f"[{style}]{result.status:>12}[/] {escape(result.id)}{tv}  [dim]{escape(result.message or '')}[/]")
        if result.status in ("fail", "error"):
            for label, text in (("traceback", result.evidence.get("traceback")), ("sampler output", result.evidence.get("sampler_output"))):
                lines = str(text or "").strip().splitlines()[-4:]
                if lines:
                    console.print(f"{'':>12}   [dim]{label} (last lines; all in the JSON):[/]")
                    for line in lines:
                        console.print(f"{'':>12}     [dim]{escape(line[:200])}[/]")

    return show


def _print_verdict(console, result, args) -> None:
    from rich.markup import escape

    from ._reach import guarantee

    summary = ", ".join(f"{n} {s}" for s, n in result.to_json()["summary"].items() if n)
    verdict = result.verdict
    line = f"[{_VERDICT_STYLE[verdict]}]{verdict}[/]  {escape(result.run['sampler']['name'])}  ({summary})"
    console.print(line)
    for check in result.checks:  # on their own lines: real differences that decide nothing
        if check.status == "float-edge" and "event" in check.evidence:
            from .checks._event import sizes_text

            console.print(f"[{_STATUS_STYLE['float-edge']}]float-edge[/] {escape(check.id)}: {escape(sizes_text(check.evidence['event']))}")
    promise = guarantee(result.checks, power=result.run["power"], alpha=result.run["family_wise_alpha"])
    if promise is not None and lossless(verdict):
        console.print(escape(promise))
    for path, what in ((args.json, "JSON"), (args.report, "report")):
        if path:
            console.print(f"{what}: {escape(str(path))}")
