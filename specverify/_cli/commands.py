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

from .._record.vocabulary import Verdict
from .._threads import use_default_threads
from .output import print_verdict, result_printer
from .parser import parser as _parser

if TYPE_CHECKING:
    from .._record.result import CheckResult

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    if args.command == "check":
        return _check(args)
    if args.command in ("loop", "engine"):
        return _loop(args)
    if args.command == "report":
        from ..report import build_index

        return build_index(args.inputs, args.output)
    if args.command == "zoo":
        return _zoo(args)
    if args.command == "adapters":
        from ..adapters import print_adapters

        return print_adapters()
    parser.error(f"unknown command {args.command!r}")
    return 2


def _check(args: argparse.Namespace) -> int:
    from rich.console import Console

    err = Console(stderr=True, soft_wrap=True)
    out = Console(soft_wrap=True)

    def fail(message: str) -> int:
        err.print(f"specverify: error: {message}", markup=False, highlight=False)
        return 2

    # As `python -m` and pytest do: a spec names modules relative to where the command runs.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    use_default_threads()  # one thread each for the harness and the sampler's process, unless OMP_NUM_THREADS is set
    if ":" not in args.spec or not all(args.spec.partition(":")[::2]):
        return fail(
            f"sampler spec {args.spec!r} is not of the form 'package.module:attribute' (for example "
            "specverify.samplers:reference)"
        )
    problem = _nowhere(args) or _validate(args)
    if problem:
        return fail(problem)
    from .early import early_subject, start_early

    start_early(args)  # the sampler's process imports torch while this one does
    from .._calling.sut import check_device
    from ..errors import SamplerSpecError

    try:
        check_device(args.device)
    except SamplerSpecError as exc:
        return fail(str(exc))
    try:
        subject = early_subject(args)  # loaded and called once before the battery's imports
    except SamplerSpecError as exc:
        if not (args.json or args.report):
            return fail(str(exc))
        subject = exc  # the run writes the failure's JSON and report, then says it
    except KeyboardInterrupt:
        err.print("specverify: interrupted; no check had started")
        return 130
    if subject is None and not args.in_process:
        from .._worker import prestart

        prestart(args.device)  # the sampler's process imports torch while the harness imports the battery
    from .._run import check_selection

    problem = check_selection(args.only)
    if problem:
        if subject is not None and not isinstance(subject, BaseException):
            subject.close()  # loaded early; nothing ran: its process is kept, idle, as the driver keeps it
        return fail(problem)

    from .._budgets import resolve_budget
    from .progress import ProgressDisplay

    budget = resolve_budget(args.budget, tv=args.tv, alpha=args.alpha, power=args.power)  # checked by _validate
    display = ProgressDisplay(
        enabled=not args.no_progress and not args.quiet and err.is_terminal, console=err, budget=budget
    )
    printer = None if args.quiet else result_printer(out)

    return _interruptible(lambda exit_now: _run(args, display, printer, err, out, exit_now, subject))


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

    from ..errors import Interrupted

    signal.signal(signal.SIGINT, exit_now)
    result = exc.result if isinstance(exc, Interrupted) else None
    if result is not None and args.report:
        _write_report(result, args.report, err)
    kept = [
        f"{what} {path}" for path, what in ((args.json, "JSON"), (args.report, "report")) if path and result is not None
    ]
    err.print(
        "specverify: interrupted; "
        + (f"what finished is in {', '.join(kept)}" if kept else "no --json or --report given")
    )
    return 130


def _run(
    args: argparse.Namespace, display: Any, printer: Any, err: Any, out: Any, exit_now: Any, subject: Any = None
) -> int:
    """Run the check and write what it found, whatever happens (the sampler's death, Ctrl-C); ``subject``:
    the sampler loaded already (:mod:`specverify._cli.early`), or why it could not be."""
    from .._run._driver import check, load_failure
    from ..errors import NotStarted, SamplerSpecError, UsageError

    def fail(message: str) -> int:
        err.print(f"specverify: error: {message}", markup=False, highlight=False)
        return 2

    def on_result(result: CheckResult) -> None:
        display.finished(result)
        if printer:
            printer(result)

    try:
        if isinstance(subject, BaseException):
            raise subject
        with display:
            result = check(
                args.spec if subject is None else subject,
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
                tv=args.tv,
                on_cost=_cost_gate(args, out, display),
                workers=args.workers,
                devices=_devices(args),
                executor=args.executor,
                address=args.address,
                power=args.power,
            )
    except KeyboardInterrupt as exc:
        return _interrupted(exc, args, err, exit_now)
    except NotStarted as exc:
        return _not_started(exc, args, err)
    except (
        UsageError
    ) as exc:  # workers that cannot be had (a sampler that cannot run isolated, Ray unreachable): nothing ran
        return fail(str(exc))
    except SamplerSpecError as exc:  # the sampler could not be imported or built
        from .._budgets import resolve_budget

        failure = load_failure(
            args.spec, str(exc), resolve_budget(args.budget, tv=args.tv, alpha=args.alpha, power=args.power), args.seed
        )
        if args.json:
            from .._run._driver import write_json

            write_json(failure, args.json)
        if args.report:
            _write_report(failure, args.report, err)
        return fail(str(exc))
    if args.report and not _write_report(result, args.report, err):
        print_verdict(out, result, args)
        return 2
    print_verdict(out, result, args)
    return result.exit_code


def _placement_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with --workers, --devices, --executor and --address, if anything."""
    from .._run._placement import Placement
    from ..errors import UsageError

    try:  # the API's checks, whose messages name the flags too
        Placement.of(args.workers, _devices(args), args.executor, args.address)
    except UsageError as exc:
        return str(exc)
    return None


def _placed(args: argparse.Namespace) -> bool:
    """Whether --workers, --devices, --executor or --address asks for anything but the default."""
    return (
        args.workers is not None
        or bool(getattr(args, "devices", None))
        or getattr(args, "executor", "local") != "local"
        or getattr(args, "address", None) is not None
    )


def _devices(args: argparse.Namespace) -> list[str] | None:
    listed = getattr(args, "devices", None)
    return listed.split(",") if listed else None


def _nowhere(args: argparse.Namespace) -> str | None:
    """A spec whose module is nowhere, said at once with where it was looked for (before torch
    loads); where a JSON or report is asked, the full load writes it with the same line."""
    from .._not_found import missing_module

    return None if args.json or getattr(args, "report", None) else missing_module(args.spec)


def _validate(args: argparse.Namespace) -> str | None:
    """What makes the options unusable, found before anything runs (or ``None``)."""
    import tempfile
    from pathlib import Path

    from .._budgets import resolve_budget
    from ..errors import UsageError

    try:  # --tv, --alpha and --power, by the rule the API applies to them
        resolve_budget(args.budget, tv=args.tv, alpha=args.alpha, power=args.power)
    except UsageError as exc:
        return str(exc)
    if args.timeout is not None and not args.timeout > 0:
        return "--timeout must be a positive number of seconds"
    if args.max_time is not None and not args.max_time > 0:
        return "--max-time must be a positive number of seconds"
    problem = _placement_problem(args) if _placed(args) else None  # the defaults need no check (nor its imports)
    if problem is not None:
        return problem
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


def _cost_gate(args: argparse.Namespace, out: Any, display: Any = None) -> Callable[[Any], bool] | None:
    """With ``--plan``: print the plan and its cost, never start; with ``--max-time``: start only
    when the estimate is known and within it (the progress ``display`` then counts the plan's
    rows); else ``None`` (no calibration spent)."""
    if not args.plan and args.max_time is None:
        return None

    def gate(cost: Any) -> bool:
        if display is not None:
            display.expect(cost)
        if args.plan:
            for line in cost.lines():
                out.print(line, markup=False, highlight=False)
            return False
        seconds = cost.estimated_seconds
        return seconds is not None and seconds <= args.max_time

    return gate


def _not_started(exc: Any, args: argparse.Namespace, err: Any) -> int:
    """The run stopped before its first check: 0 after ``--plan``, else 2 (the estimate is over ``--max-time``)."""
    if args.plan:
        return 0
    seconds = exc.cost.estimated_seconds
    if seconds is None:
        message = (
            f"--max-time {args.max_time:g}: this run's time cannot be estimated ({exc.cost.calibration.how}); nothing "
            "run"
        )
    else:
        message = (
            f"--max-time {args.max_time:g}: the plan's estimated time is {seconds:,.0f} s (an estimate; see --plan); "
            "nothing run"
        )
    err.print(f"specverify: error: {message}", markup=False, highlight=False)
    return 2


def _write_report(result, path: str, err) -> bool:
    from ..report import write_report

    try:
        write_report(result, path)
    except OSError as exc:
        err.print(f"specverify: error: cannot write the report: {exc}", markup=False, highlight=False)
        return False
    return True


def _loop(args: argparse.Namespace) -> int:
    """``specverify loop`` and ``specverify engine``: the family of the kind the command names, the
    subject in a supervised process (or, asked, in this one)."""
    from rich.console import Console

    err, out = Console(stderr=True, soft_wrap=True), Console(soft_wrap=True)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    use_default_threads()
    problem = _nowhere(args) or _validate(args)
    if problem is not None:
        err.print(f"specverify: error: {problem}", markup=False, highlight=False)
        return 2
    return _interruptible(lambda exit_now: _run_loop(args, err, out, exit_now))


def _run_loop(args: argparse.Namespace, err: Any, out: Any, exit_now: Callable[..., None]) -> int:
    """Run the loop (or engine) family and write what it found, whatever happens (Ctrl-C included)."""
    from .._run._driver import check
    from ..errors import NotStarted, SamplerSpecError

    try:
        result = check(
            args.spec,
            kind=args.command,
            budget=args.budget,
            seed=args.seed,
            alpha=args.alpha,
            select=args.only,
            isolation="in-process" if args.in_process else "process",
            timeout=args.timeout,
            on_result=None if args.quiet else result_printer(out),
            json_path=args.json,
            spec=args.spec,
            tv=args.tv,
            on_cost=_cost_gate(args, out),
            workers=args.workers,
            executor=args.executor,
            address=args.address,
            power=args.power,
        )
    except KeyboardInterrupt as exc:
        return _interrupted(exc, args, err, exit_now)
    except NotStarted as exc:
        return _not_started(exc, args, err)
    except (SamplerSpecError, ValueError) as exc:  # not loadable, not of the kind, or a selection matching nothing
        err.print(f"specverify: error: {exc}", markup=False, highlight=False)
        return 2
    if args.report and not _write_report(result, args.report, err):
        return 2
    print_verdict(out, result, args)
    if result.verdict == Verdict.CONFORMANT and "reach" in result.run:  # a battery that states its reach itself
        out.print(f"tested on {result.run['reach']}", markup=False, highlight=False)
    return result.exit_code


def _zoo(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    from ..zoo._matrix import in_work_order, kill_matrix, matrix_work, write_matrix

    console = Console(soft_wrap=True)
    if args.tv is not None and not 0 < args.tv < 1:
        console.print(f"[bold red]error[/] --tv must lie in (0, 1), got {args.tv:g}")
        return 2
    label = args.budget if args.tv is None else f"tv-{args.tv:g}"  # the matrix's name: kill-matrix-LABEL.md
    command = (
        f"specverify zoo --budget {args.budget}"
        + (f" --tv {args.tv:g}" if args.tv is not None else "")
        + f" --seeds {args.seeds}"
        + (" --loops" if args.loops else "")
        + "".join(f" --members '{pattern}'" for pattern in args.members or ())
    )
    work = matrix_work(args.members, seeds=args.seeds, loops=args.loops)
    if not work:
        console.print(
            f"[bold red]error[/] --members {' '.join(args.members or [])!r} matches no zoo member (names look like "
            "'reference-sampler', 'tree-*', 'loop:*' with --loops)"
        )
        return 2
    finished: list = []

    def show(row) -> None:
        finished.append(row)  # the matrix so far is on disk after every run: an interrupted one keeps it
        write_matrix(in_work_order(finished, work), label, args.output, command, planned=len(work))
        style = "green" if row.meets else "bold red"
        caught = ", ".join(f"{f}:{n}" for f, n in row.caught_by.items()) or "-"
        console.print(
            f"[{style}]{'meets' if row.meets else 'DIFFERS'}[/] {escape(row.member)} seed {row.seed}: {row.verdict} "
            f"(declared {row.declared} at "
            f"{row.declared_budget}{'; found beyond its declared reach' if row.beyond_reach else ''}); caught by "
            f"{caught}; {row.seconds:.1f} s"
        )

    try:
        rows = kill_matrix(
            args.budget,
            tv=args.tv,
            members=args.members,
            seeds=args.seeds,
            jobs=args.jobs,
            timeout=args.timeout,
            on_row=show,
            loops=args.loops,
        )
    except KeyboardInterrupt:
        markdown, _ = write_matrix(
            in_work_order(finished, work), label, args.output, command, planned=len(work), ended="interrupted"
        )
        console.print(
            f"[bold red]interrupted[/]: {len(finished)} of {len(work)} runs finished; the partial matrix is in "
            f"{markdown}"
        )
        return 130
    markdown, data = write_matrix(rows, label, args.output, command)
    console.print(markdown.read_text().split("\n\n")[-1].strip())
    console.print(f"written: {markdown}, {data}")
    due_missed = [r for r in rows if r.miss and r.due(label)]
    return 1 if any(r.false_alarm for r in rows) or due_missed else 0
