"""The sampler loaded and called once before the battery is imported, for ``specverify check``.

A sampler that cannot be called as its contract says is a usage error told in one line (exit 2,
:func:`specverify._calling.first_call.first_call`).  Told after the battery's imports (scipy,
Hypothesis, every check) it took seconds more than the error needs; here the sampler's process
starts and takes its one call while this process has imported torch and the calling layer only.
The subject loaded here is the run's own (:func:`specverify.check` takes it as it is), so its first
call is made once, as before, and a run's calls and results do not change.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["early_subject", "start_early"]


def _early(args: argparse.Namespace) -> bool:
    """Whether the CLI loads the subject itself: one local worker, isolated (not in-process,
    several workers, Ray or given devices: the driver's own order then)."""
    return not (
        args.in_process or args.executor != "local" or getattr(args, "devices", None) or (args.workers or 1) != 1
    )


def start_early(args: argparse.Namespace) -> None:
    """Start the sampler's process before this one imports torch (:mod:`specverify._worker_start`)."""
    if _early(args):
        from .._worker_start import start_early as start

        start()


def early_subject(args: argparse.Namespace) -> Any:
    """The run's subject, loaded in its own process and called once, or ``None`` where the run
    loads it itself (see :func:`_early`).

    Raises:
        SamplerSpecError: the sampler could not be imported or built, or cannot be called as its
            kind's contract says (one line).
    """
    if not _early(args):
        return None
    from .._budgets import resolve_budget
    from .._calling.first_call import first_call
    from .._calling.sut import SamplerUnderTest

    budget = resolve_budget(args.budget, tv=args.tv, alpha=args.alpha, power=args.power)
    subject = SamplerUnderTest(  # as the driver loads it (specverify._run._driver._load)
        args.spec,
        device=args.device,
        timeout=args.timeout,
        first_timeout=budget.timeout,
        isolation="process",
        spec=args.spec,
        timed=False,
    )
    try:
        first_call(subject, args.spec)
    except KeyboardInterrupt:
        subject.kill()
        raise
    except BaseException:
        subject.close() if subject.kind.kept_after_failure else subject.kill()
        raise
    return subject
