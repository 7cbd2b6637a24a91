"""Put a subject through its battery: loading it, progress, Ctrl-C, incremental JSON.

:func:`check` is the one driver of :class:`specverify._run.Run` for every kind of subject (a chain,
logits or tree sampler, and a generation loop: :func:`check_loop` is ``check(..., kind="loop")``);
the CLI's ``check`` and ``loop`` and ``specverify.check`` use it, and the pytest plugin drives the
same Run (its plan, its record, its verdict), so a check's share of the false-positive budget does
not depend on which face, or which xdist worker, runs it.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from .._budgets import Budget, get_budget, resolve_budget
from .._calling.first_call import first_call
from .._calling.pool import Pool
from .._calling.sut import SamplerUnderTest
from .._kinds import kind_named, kind_of
from .._record.info import SamplerInfo
from .._record.result import CheckResult, RunResult
from ..errors import Interrupted, NotStarted, UsageError
from . import PlannedCheck, Run, base_info, battery_of, no_match, run_check, run_info, selected
from ._cost import RunCost, rehearsed_cost
from ._placement import Placement, open_pool

# run_check and run_info live with the Run (specverify._run); kept here, where callers found them
__all__ = [
    "Run",
    "check",
    "check_engine",
    "check_loop",
    "load_failure",
    "load_sut",
    "run_check",
    "run_info",
    "write_json",
]


def load_sut(sampler: Any, **options: Any) -> SamplerUnderTest:
    """The sampler, loaded once and called safely (``options``: :class:`SamplerUnderTest`'s), its
    kind (chain, logits, tree) detected as it loads."""
    return SamplerUnderTest(sampler, **options)


def load_failure(spec: str, message: str, budget: str | Budget = "standard", seed: int = 0) -> RunResult:
    """The result of a run whose sampler could not be imported or built: verdict ``error``."""
    budget = get_budget(budget) if isinstance(budget, str) else budget
    failure = CheckResult(
        id="harness.load", family="harness", status="error", message=f"the sampler could not be loaded: {message}"
    )
    return RunResult(run=base_info(SamplerInfo(name=spec), budget, seed, spec), checks=[failure], finished=False)


def write_json(result: RunResult, path: str | os.PathLike[str]) -> None:
    """Write atomically: a crash mid-write never leaves a truncated file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(result.to_json(), handle, indent=2)
        os.chmod(tmp, 0o644)  # mkstemp makes it private; a result is for reading
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)  # never a stray temp file beside the target
        raise


def check(
    sampler: Callable[..., Any] | str,
    *,
    budget: str | Budget = "standard",
    seed: int = 0,
    alpha: float | None = None,
    device: str | None = None,
    select: Iterable[str] | None = None,
    spec: str | None = None,
    json_path: str | os.PathLike[str] | None = None,
    on_result: Callable[[CheckResult], None] | None = None,
    progress: Callable[[PlannedCheck, int], None] | None = None,
    isolation: str = "auto",
    timeout: float | None = None,
    on_plan: Callable[[list[PlannedCheck]], None] | None = None,
    on_wait: Callable[[float, float], None] | None = None,
    kind: str | None = None,
    tv: float | None = None,
    on_cost: Callable[[RunCost], bool] | None = None,
    workers: int | None = None,
    devices: Sequence[str] | None = None,
    executor: str = "local",
    address: str | None = None,
    power: float | None = None,
) -> RunResult:
    """Put a sampler (or a generation loop) through its battery and return the :class:`~specverify.RunResult`.

    A tree sampler (``contract = "tree"``, ``specverify._trees.contract``) is put through the ``trees`` family
    instead (``specverify.checks._trees``); a generation loop (``kind="loop"``, or an object that
    declares ``contract = "loop"``) through the ``loop`` family (``specverify.checks._loop``).

    Args:
        sampler: the sampler (see :class:`~specverify.Sampler`) or loop, or its ``"module:attribute"`` spec.
        budget: ``"quick"``, ``"standard"``, ``"thorough"`` or a :class:`~specverify.Budget`.
        seed: the run seed; every random draw derives from it.
        alpha: family-wise false-positive probability (default: the budget's, 1e-4).
        device: where to run a sampler that declares none (not for loops).
        select: glob patterns of check ids or family names to run (default: all).
        spec: the sampler's spec, used in repro snippets (and to load a callable by name).
        json_path: written after every check, so a crash or Ctrl-C keeps what finished.
        on_result: called with each result as it finishes.
        progress: called with ``(check, 0)`` as each check starts, then ``(check, rows)`` as the sampler is run.
        isolation: ``"process"``: the sampler runs in a supervised process of its own, so a crash,
            a hang or an exit is a finding and not the end of the run; ``"in-process"``: in this
            thread (for pdb; no crash or hang protection); ``"auto"`` (default): a process when the
            sampler is a spec or a callable importable by name, else in-process with its calls in a
            helper thread under the time limit (a hung call is abandoned, not killed), with the
            reason in ``run["isolation"]``.
        timeout: seconds one call may take (default: from the budget's ``timeout`` and the sampler's speed).
        on_plan: called with the planned checks before the first runs.
        on_wait: called with ``(seconds, limit)`` while a call is slow (isolated samplers only).
        kind: the name of the kind the subject is given as (``"loop"`` for a generation loop given
            by its spec; an object says so itself), decided once (:func:`specverify._kinds.kind_as_given`);
            ``None``: what the subject declares.
        tv: a target TV in (0, 1): a custom budget sized for it (:func:`specverify._budgets.budget_for_tv`)
            from the nearest preset (or from ``budget`` when it is not the default); ``None``: the preset.
        on_cost: called with the plan's cost, timed by a short calibration, before the first check;
            ``False`` stops the run before it starts (:class:`~specverify.errors.NotStarted`).
        workers: sampler processes to spread the experiments' units over (default: one a device of
            ``devices``, else 1), each supervised; the counts, p-values and verdict do not depend on it.
        devices: one worker a device (``["cuda:0", "cuda:1"]``), in turn; overrides ``device``.
        executor: ``"local"`` (processes here) or ``"ray"``: Ray actors (``pip install 'speculative-verify[ray]'``)
            on the cluster at ``address``, or on a local one started for the run when it is ``None``.
        address: the Ray cluster's address (``executor="ray"`` only).
        power: the probability each statistical check detects the budget's TV with (default 0.99).

    Raises:
        SamplerSpecError: the sampler could not be imported or built, the device is absent, or it
            cannot be called as its kind's contract says (:func:`specverify._calling.first_call.first_call`).
        UsageError: ``select`` matches no check of the subject's battery (for a loop, before it
            loads); ``workers`` below 1, several workers of a sampler that cannot run isolated, an
            unknown ``executor`` or a Ray cluster that cannot be reached.
        Interrupted: Ctrl-C; the JSON holds what finished and the sampler's process is ended.
    """
    budget = resolve_budget(budget, tv=tv, alpha=alpha, power=power)
    if isinstance(sampler, str) and spec is None:
        spec = sampler
    placement = Placement.of(workers, devices, executor, address, device)  # bad options fail before anything loads
    run = _start(
        sampler, kind, budget, seed, select, spec, placement, isolation=isolation, timeout=timeout, on_wait=on_wait
    )
    if on_cost is not None:
        _gate(run, on_cost)
    return _drive(run, json_path=json_path, on_result=on_result, progress=progress, on_plan=on_plan)


def _start(
    sampler: Any,
    kind: str | None,
    budget: Budget,
    seed: int,
    select: Iterable[str] | None,
    spec: str | None,
    placement: Placement,
    *,
    isolation: str,
    timeout: float | None,
    on_wait: Callable[[float, float], None] | None,
) -> Run:
    """The subject loaded, its workers started and the Run planned on them; on any failure here
    nothing is left running (a sampler's idle process is kept for the next run)."""
    start = time.perf_counter()
    subject, reason = _load(
        sampler, kind, budget, select, device=placement.device(0), isolation=isolation, timeout=timeout, spec=spec
    )
    if on_wait is not None:
        subject.on_wait = on_wait
    pool: Pool | None = None
    try:
        first_call(subject, spec)  # one that cannot be called as declared: told once, before any check
        pool = open_pool(subject, sampler, placement, spec=spec, timeout=timeout, first_timeout=budget.timeout)
        run = Run(subject, budget, seed, select=select, spec=spec, isolation_reason=reason, since=start, pool=pool)
    except KeyboardInterrupt:
        (pool or subject).kill()
        raise
    except BaseException:  # nothing ran (a selection that matches nothing): a sampler's process is kept
        ending = pool if pool is not None else subject
        ending.close() if subject.kind.kept_after_failure else ending.kill()
        raise
    if placement.recorded:
        run.info.extra["workers"] = placement.to_json()
    return run


def _gate(run: Run, on_cost: Callable[[RunCost], bool]) -> None:
    """Time the plan (a short calibration), record it, and stop before the first check where
    ``on_cost`` says so (:class:`NotStarted`); the Run recorded the plan's samples already."""
    cost = rehearsed_cost(run.planned, run.subject, run.budget, run.seed, spec=run.spec, workers=run.pool.size)
    run.info.extra["plan"] = cost.to_json()
    if not on_cost(cost):
        run.pool.close()
        raise NotStarted(cost)


def _drive(
    run: Run,
    *,
    json_path: str | os.PathLike[str] | None,
    on_result: Callable[[CheckResult], None] | None,
    progress: Callable[[PlannedCheck, int], None] | None,
    on_plan: Callable[[list[PlannedCheck]], None] | None,
) -> RunResult:
    """Run every planned check of ``run`` in plan order, writing the JSON after each; the subject
    and its workers are closed (kept for the next run) after, or killed on Ctrl-C (:class:`Interrupted`)."""
    subject, pool = run.subject, run.pool
    try:
        if on_plan:
            on_plan(run.planned)
        for item in run.planned:
            advance = _progress_of(item, progress)
            advance(0)  # the check starts: a progress bar weighs what is left by the checks not yet begun
            for check_result in run.execute(item, advance=advance):
                if on_result:
                    on_result(check_result)
            if json_path is not None:
                write_json(run.result(), json_path)
    except KeyboardInterrupt:  # Ctrl-C mid-call: the worker is ended, not kept; what finished is kept
        pool.kill()
        run.interrupted = True
    except BaseException:
        if not subject.kind.kept_after_failure:
            pool.kill()  # its worker may be mid-call (a loop's): never kept for the next run
        raise
    finally:
        result = run.result()
        pool.close()
        if json_path is not None:
            write_json(result, json_path)
    if run.interrupted:
        raise Interrupted(result) from None
    return result


def check_loop(
    loop: Callable[..., Any] | str,
    *,
    budget: str | Budget = "standard",
    seed: int = 0,
    alpha: float | None = None,
    select: list[str] | None = None,
    isolation: str = "auto",
    timeout: float | None = None,
    on_result: Callable[[CheckResult], None] | None = None,
    json_path: str | os.PathLike[str] | None = None,
    spec: str | None = None,
    tv: float | None = None,
    on_cost: Callable[[RunCost], bool] | None = None,
    workers: int | None = None,
    executor: str = "local",
    address: str | None = None,
    power: float | None = None,
) -> RunResult:
    """Put a generation loop through the loop family: :func:`check` with ``kind="loop"``.

    ``isolation`` and ``timeout`` are :class:`~specverify._calling.sut.SamplerUnderTest`'s: by
    default a loop importable by name runs in a supervised process of its own, so a crash, exit or
    hang is a finding (``crashed``, ``hang``) of the check it happened in, and the run goes on.

    Raises:
        UsageError: ``select`` matches no check of the loop family (before the loop is loaded).
        SamplerSpecError: the loop cannot be loaded or is not declared a loop.
        Interrupted: Ctrl-C; the loop's process is ended, ``result`` (and the JSON) hold what
            finished, marked unfinished.
    """
    return check(
        loop,
        budget=budget,
        seed=seed,
        alpha=alpha,
        select=select,
        isolation=isolation,
        timeout=timeout,
        on_result=on_result,
        json_path=json_path,
        spec=spec,
        kind="loop",
        tv=tv,
        on_cost=on_cost,
        workers=workers,
        executor=executor,
        address=address,
        power=power,
    )


def check_engine(engine: Callable[..., Any] | str, **options: Any) -> RunResult:
    """Put an engine through the engine family: :func:`check` with ``kind="engine"`` (options as
    :func:`check_loop`'s): its ``generate()`` with speculation on against itself with it off.

    Raises:
        UsageError: ``select`` matches no check of the engine family (before the engine is loaded).
        SamplerSpecError: the engine cannot be loaded or is not declared an engine.
        Interrupted: Ctrl-C; as :func:`check_loop`.
    """
    return check(engine, kind="engine", **options)


def _load(
    sampler: Any,
    kind: str | None,
    budget: Budget,
    select: Iterable[str] | None,
    *,
    device: str | None,
    isolation: str,
    timeout: float | None,
    spec: str | None,
) -> tuple[SamplerUnderTest, str | None]:
    """The subject under test, and why it runs in this process where it does (``None``: it runs
    isolated).  Its kind is decided once: the one ``kind`` names, else what it declares; where that
    is known before it loads (a kind named, or a callable), a selection that matches none of the
    kind's checks fails first: a typo costs no worker."""
    if isinstance(sampler, SamplerUnderTest):  # loaded and called once already (specverify._cli.early)
        return sampler, sampler.reason
    known = kind_named(kind) if kind is not None else None if isinstance(sampler, str) else type(kind_of(sampler))
    if known is not None:
        patterns = list(select or [])
        if not selected(battery_of(known), patterns):
            raise UsageError(no_match(patterns, known))
    sut = load_sut(
        sampler,
        kind=kind,
        device=device,
        timeout=timeout,
        first_timeout=budget.timeout,
        isolation=isolation,
        spec=spec,
        timed=isolation == "auto",
    )
    return sut, sut.reason


def _progress_of(item: PlannedCheck, progress: Callable[[PlannedCheck, int], None] | None) -> Callable[[int], None]:
    """The check's progress callback, given a number of sampler rows."""
    if progress is None:
        return lambda rows: None
    return lambda rows: progress(item, rows)
