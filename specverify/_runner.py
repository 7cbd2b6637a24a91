"""Put a sampler through the battery: loading it, progress, Ctrl-C, incremental JSON.

:func:`check` is the face of :class:`specverify._run.Run` that the CLI and ``specverify.check``
use; the pytest plugin and the loop runner drive the same Run (its plan, its record, its verdict),
so a check's share of the false-positive budget does not depend on which face, or which xdist
worker, runs it.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ._budgets import Budget, get_budget
from ._calling import SamplerUnderTest, importable_source
from ._result import CheckResult, RunResult
from ._run import Run, base_info, run_check, run_info
from .checks._plan import PlannedCheck

# run_check and run_info live with the Run (specverify._run); kept here, where callers found them
__all__ = ["Interrupted", "Run", "check", "load_failure", "load_sut", "run_check", "run_info", "write_json"]


def load_sut(sampler: Any, **options: Any) -> SamplerUnderTest:
    """The sampler, loaded once and called safely (``options``: :class:`SamplerUnderTest`'s), its
    kind (chain, logits, tree) detected as it loads."""
    return SamplerUnderTest(sampler, **options)


def load_failure(spec: str, message: str, budget: str | Budget = "standard", seed: int = 0) -> RunResult:
    """The result of a run whose sampler could not be imported or built: verdict ``error``."""
    budget = get_budget(budget) if isinstance(budget, str) else budget
    failure = CheckResult(id="harness.load", family="harness", status="error", message=f"the sampler could not be loaded: {message}")
    return RunResult(run=base_info({"name": spec, "capabilities": None}, budget, seed, spec), checks=[failure], finished=False)


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`check`: the sampler's process is ended; ``result`` holds what finished."""

    def __init__(self, result: RunResult) -> None:
        super().__init__()
        self.result = result


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
) -> RunResult:
    """Put a sampler through the battery and return the :class:`~specverify.RunResult`.

    A tree sampler (``specverify._tree``) is put through its kind's battery, the ``trees`` family
    (``specverify.checks._trees``).

    Args:
        sampler: the sampler (see :class:`~specverify.Sampler`), or its ``"module:attribute"`` spec.
        budget: ``"quick"``, ``"standard"``, ``"thorough"`` or a :class:`~specverify.Budget`.
        seed: the run seed; every random draw derives from it.
        alpha: family-wise false-positive probability (default: the budget's, 1e-4).
        device: where to run a sampler that declares none.
        select: glob patterns of check ids or family names to run (default: all).
        spec: the sampler's spec, used in repro snippets (and to load a callable by name).
        json_path: written after every check, so a crash or Ctrl-C keeps what finished.
        on_result: called with each result as it finishes.
        progress: called with ``(check, rows)`` as the sampler is run.
        isolation: ``"process"``: the sampler runs in a supervised process of its own, so a crash,
            a hang or an exit is a finding and not the end of the run; ``"in-process"``: in this
            thread (for pdb; no crash or hang protection); ``"auto"`` (default): a process when the
            sampler is a spec or a callable importable by name, else in-process with its calls in a
            helper thread under the time limit (a hung call is abandoned, not killed), with the
            reason in ``run["isolation"]``.
        timeout: seconds one call may take (default: derived from the budget's ``timeout`` and the
            sampler's measured speed).
        on_plan: called with the planned checks before the first runs.
        on_wait: called with ``(seconds, limit)`` while a call is slow (isolated runs only).

    Raises:
        SamplerSpecError: the sampler could not be imported or built, or the device is absent.
        UsageError: ``select`` matches no check of the sampler's battery.
        Interrupted: Ctrl-C; the JSON holds what finished and the sampler's process is ended.
    """
    budget = get_budget(budget) if isinstance(budget, str) else budget
    if alpha is not None:
        budget = budget.with_(alpha=alpha)
    mode, reason = isolation, None
    if isolation == "auto":
        source = importable_source(sampler, spec)
        mode, reason = ("process", None) if isinstance(source, tuple) else ("in-process", source)
    elif isolation == "in-process":
        reason = "asked for (isolation='in-process', the CLI's --in-process)"
    if isinstance(sampler, str) and spec is None:
        spec = sampler
    start = time.perf_counter()
    sut = load_sut(sampler, device=device, timeout=timeout, first_timeout=budget.timeout, isolation=mode, spec=spec, timed=isolation == "auto")
    run: Run | None = None
    interrupted = False
    try:
        sut.on_wait = on_wait
        run = Run(sut, budget, seed, select=select, spec=spec, isolation_reason=reason, since=start)
        if on_plan:
            on_plan(run.planned)
        for item in run.planned:
            advance = _progress_of(item, progress)
            for check_result in run.execute(item, advance=advance):
                if on_result:
                    on_result(check_result)
            if json_path is not None:
                write_json(run.result(), json_path)
    except KeyboardInterrupt:
        sut.kill()
        if run is None:
            raise
        run.interrupted = interrupted = True
    finally:
        result = run.result() if run is not None else None
        sut.close()
        if json_path is not None and result is not None:
            write_json(result, json_path)
    assert result is not None  # a run that could not be planned raised above
    if interrupted:
        raise Interrupted(result)
    return result


def _progress_of(item: PlannedCheck, progress: Callable[[PlannedCheck, int], None] | None) -> Callable[[int], None]:
    """The check's progress callback, given a number of sampler rows."""
    if progress is None:
        return lambda rows: None
    return lambda rows: progress(item, rows)
