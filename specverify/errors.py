"""Every exception specverify raises, in one module.

The tree::

    Exception
    ├── SpecverifyError            specverify could not do what it was asked; the message says what to fix
    │   ├── UsageError             a name or selection that matches nothing (a budget, --only); also a ValueError
    │   ├── SamplerSpecError       a sampler or loop spec could not be loaded, built or posed (CLI: exit 2)
    │   ├── AdapterUnavailable     an adapter cannot run here (library or device absent); also a RuntimeError
    │   ├── RunFileError           a run JSON that cannot be read or is not a run result
    │   └── NotStarted             the run stopped before its first check (--plan, or an estimate over --max-time)
    ├── SamplerFault               evidence: the sampler (or loop) under test raised, hung, died or broke its contract
    └── CheckFailed                evidence: a check of the pytest battery did not pass (a test failure)
    KeyboardInterrupt
    └── Interrupted                Ctrl-C during check() or check_loop(); ``result`` holds what finished

Why two kinds.  An *error* says that specverify could not do its job (a spec that names no sampler,
a selection that matches no check, an unreadable run file, an adapter whose library is absent): it
is never a statement about the sampler, and ``except specverify.SpecverifyError`` catches them all.
What a sampler did wrong is *evidence*, not an error: :class:`SamplerFault` stops one check and
becomes that check's failing result, so it never leaves :func:`specverify.check`; it is raised to
the user only by the replay helpers (:func:`specverify.replay.call_sampler`), which audit each
output as a check does.  It deliberately does not derive from the root: an ``except
SpecverifyError`` around a run must never swallow a finding about the sampler.  Likewise the
pytest plugin's :class:`CheckFailed` is a test failure.  :class:`Interrupted` is control flow: it
is a ``KeyboardInterrupt``, so code that lets Ctrl-C through keeps doing so.

The worker's own messages about the sampler's process (``WorkerRaised``, ``WorkerDied``,
``WorkerHung``, ``WorkerLoadError`` in the private worker) never leave the package: the caller
turns each into a :class:`SamplerFault` or a :class:`SamplerSpecError`.

This module imports nothing heavy (no torch), so catching these costs no import.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._record.evidence import Evidence
    from ._record.result import CheckResult, RunResult

__all__ = [
    "AdapterUnavailable",
    "CheckFailed",
    "Interrupted",
    "NotStarted",
    "RunFileError",
    "SamplerFault",
    "SamplerSpecError",
    "SpecverifyError",
    "UsageError",
]


@dataclasses.dataclass(frozen=True)
class Violation:
    """One broken rule of a sampler's contract, with the first row that shows it: what a
    :class:`SamplerFault` carries."""

    # shape-dtype, device, num-accepted-range, token-range, padding, accepted-drafts, zero-target, raised, hang,
    # crashed, ...
    rule: str
    message: str
    finding: str = "contract"  # or "support"
    row: int | None = None


class SpecverifyError(Exception):
    """Something specverify was asked to do could not be done; the message says what to fix."""


class UsageError(SpecverifyError, ValueError):
    """A name or selection that matches nothing (a budget, a set of checks).

    Also a :class:`ValueError`, which is what such a mistake raised before the root existed.
    """


class SamplerSpecError(SpecverifyError):
    """A sampler spec (``module:attribute``) could not be turned into a sampler.

    The message is one line that says what to fix; the CLI prints it and exits with status 2.
    """


class AdapterUnavailable(SpecverifyError, RuntimeError):
    """An adapter cannot run here; the message is one line that says why and what would fix it.

    Adapter factories raise it, so ``specverify check`` exits with status 2 and prints the reason
    and tests skip with it.
    """


class RunFileError(SpecverifyError):
    """A run JSON that cannot be read or is not a run result; the message is one line."""


class NotStarted(SpecverifyError):
    """The run stopped before its first check, as asked: ``--plan`` (print the cost, run nothing), or
    a cost estimated over ``--max-time``.  ``cost`` is the plan's cost (a ``RunCost``: samples per
    check and the estimated seconds) that decided it."""

    def __init__(self, cost: Any) -> None:
        super().__init__("the run was not started")
        self.cost = cost


class SamplerFault(Exception):
    """The sampler or loop under test raised, hung, died, or returned something its contract forbids.

    ``violation`` is the broken rule (:class:`Violation`: ``rule`` such as
    ``"token-range"``, ``"raised"``, ``"hang"``, ``"crashed"``, and the message); ``details`` holds
    what a user needs to debug it (the sampler's traceback, its last output), attached to the
    failing result's evidence.  One class for chain, tree and loop samplers alike.
    """

    def __init__(self, violation: Violation, details: Evidence | None = None) -> None:
        super().__init__(violation.message)
        self.violation = violation
        self.details: Evidence = details or {}

    def __reduce__(self) -> tuple[Any, ...]:  # it travels back from a worker on another machine (Ray)
        return (type(self), (self.violation, self.details))


class CheckFailed(Exception):
    """A check of the pytest battery did not pass; carries its results for the failure report."""

    def __init__(self, results: list[CheckResult]) -> None:
        super().__init__("; ".join(f"{r.id}: {r.status}" for r in results))
        self.results = results


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`specverify.check`: the sampler's process is ended; ``result`` holds what finished."""

    def __init__(self, result: RunResult) -> None:
        super().__init__()
        self.result = result
