"""Calling a sampler under test: its process, placement, batching, time limits and an exact audit
of every output, whatever its kind.

Every call the harness makes of a sampler goes through :class:`SamplerUnderTest`, so whatever check
is running, an output that breaks the contract of the sampler's kind, an exception, a hang or the
death of the sampler's process stops that check with a :class:`SamplerFault` that says exactly what
happened, and the run goes on.  The sampler is loaded once and its kind detected then
(:func:`specverify._kinds.kind_of`, in the sampler's process where it runs isolated); the kind
chooses the calls (:class:`~specverify._calling.chain.ChainCalls` for the chain and logits kinds,
:class:`~specverify._calling.tree.TreeCalls` for the tree kind,
:class:`~specverify._calling.direct.DirectCalls` for a subject called as itself: a generation loop,
an engine), the layout that audits them and the worker verb they travel with.

With ``isolation="process"`` the sampler runs in a supervised process of its own
(:mod:`specverify._worker`); ``isolation="in-process"`` calls it in the caller's process, for
debugging with pdb: nothing then guards the harness against a crash; ``"auto"``: a process where
the sampler can be loaded by name there, else this one, with the reason in :attr:`reason`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .._contract import Capabilities, capabilities_of, resolve_sampler
from .._kinds import Kind, kind_as_given
from .._layout import StepLayout
from .._record.reach import ReachRecorder
from .._warps.declared import DeclaredWarp, declared_warp, from_reference
from .._worker import SamplerProcess
from .._worker.wire import STEP, TREE_STEP
from ..errors import SamplerFault, SamplerSpecError
from .chain import DEFAULT_CHUNK, ChainCalls, _Staging
from .direct import DirectCalls
from .pool import UnitDone, run_unit
from .supervised import CallLimit, CallThread, check_device, importable_source
from .tree import TreeCalls

__all__ = [
    "DEFAULT_CHUNK",
    "CallLimit",
    "SamplerFault",
    "SamplerUnderTest",
    "check_device",
    "host_unit",
    "importable_source",
]


#: Why a sampler asked to run in this process does.
ASKED_IN_PROCESS = "asked for (isolation='in-process', the CLI's --in-process)"


class SamplerUnderTest(ChainCalls, TreeCalls, DirectCalls):
    """A sampler of any kind with its capabilities, called safely.

    Args:
        sampler: the callable under test, or its ``"package.module:attribute"`` spec.
        device: where to put inputs when the sampler does not declare a device.
        timeout: seconds one call may take before it counts as a hang; ``None`` derives the
            limit from the sampler's measured speed (:class:`CallLimit`).
        first_timeout: the limit of a call before the sampler's speed is known.
        isolation: ``"process"`` (the sampler runs in a supervised process of its own; a callable
            must be importable by name, see :func:`importable_source`), ``"in-process"`` or
            ``"auto"`` (a process where it can be loaded by name, else this one).
        spec: the sampler's spec, tried to load a callable by name.
        timed: in-process only: make calls in a helper thread, so a hang is abandoned at its limit
            (``False``: in the caller's thread, untimed, so ``breakpoint()`` works).
        kind: the kind the sampler is given as (a kind's name, as ``specverify loop`` names
            ``"loop"``, or a kind decided already), decided once (:func:`specverify._kinds.kind_as_given`):
            a callable passed in is taken for one, a spec must declare it; ``None``: what the
            sampler declares.  Where the kind has a :attr:`~specverify._kinds.Kind.call_timeout`
            (a loop's: how long it may go without calling a model), it is the default ``timeout``.

    :attr:`kind` is the sampler's :class:`~specverify._kinds.Kind`, :attr:`layout` its layout;
    :meth:`step` runs a batch of a step kind's inputs (the chain's three tensors, or a tree batch),
    and a loop is called as the loop itself.

    Raises:
        SamplerSpecError: the sampler cannot be loaded (import or factory failure, bad device), or
            a spec given as a loop declares none.
    """

    def __init__(
        self,
        sampler: Callable[..., Any] | str,
        *,
        device: str | None = None,
        timeout: float | None = None,
        first_timeout: float = 120.0,
        isolation: str = "in-process",
        spec: str | None = None,
        timed: bool = True,
        kind: str | Kind | None = None,
    ) -> None:
        if isolation not in ("process", "in-process", "auto"):
            raise ValueError(f"isolation must be 'process', 'in-process' or 'auto', not {isolation!r}")
        check_device(device)
        self.reason: str | None = ASKED_IN_PROCESS if isolation == "in-process" else None
        if isolation == "auto":
            source = importable_source(sampler, spec)
            isolation, self.reason = ("process", None) if isinstance(source, tuple) else ("in-process", source)
        self.isolation = isolation
        self.limit = CallLimit(timeout=timeout, first=first_timeout)
        self.calls = self.rows = self.crashes = self.hangs = 0
        self.seconds = 0.0  # the sampler's own time, measured around its calls
        self.last_fault: SamplerFault | None = None
        self.reach = ReachRecorder()  # what the sampler is given, reset by the runner per check
        self._process: SamplerProcess | None = None
        self._thread: CallThread | None = None
        self._staging = _Staging()
        self.timed = timed
        self._warm = False
        self.worker_starts = 0
        self.first_called = False  # specverify._calling.first_call: called once on a tiny case
        by_name = sampler if isinstance(sampler, str) else None  # a spec must declare the kind it is given as
        if isolation == "process":
            self._load_isolated(sampler, spec, device)
            try:
                self.kind = kind_as_given(sampler, kind, declared=self.kind, spec=by_name)
            except SamplerSpecError:
                self.close()
                raise
        else:
            raw = resolve_sampler(sampler) if isinstance(sampler, str) else sampler
            self.kind = kind_as_given(raw, kind, spec=by_name)
            self.sampler: Callable[..., Any] | None = self.kind.posed(raw)
            try:
                self.warp: DeclaredWarp = declared_warp(raw)  # the law it is judged by (specverify._warps.declared)
            except ValueError as exc:  # an unknown preset: the user's mistake, at load
                raise SamplerSpecError(str(exc)) from None
            self.name = self.kind.name_of(self.sampler)
            self.capabilities: Capabilities = capabilities_of(self.sampler)
            self.device = torch.device(self.capabilities.device or device or "cpu")
            check_device(str(self.device))
        if self.kind.call_timeout is not None:  # its own limit, how long it may go without a heartbeat
            self.limit.timeout = self.kind.call_timeout if timeout is None else float(timeout)
        refused = self.kind.refuses(self.capabilities)
        if refused is not None:
            self.close()
            raise SamplerSpecError(f"{self.name} {refused}")
        self.dtype = self.capabilities.dtypes[0]
        self.layout: StepLayout[Any] = self.kind.layout  # how its outputs are audited and coded

    def _load_isolated(self, sampler: Callable[..., Any] | str, spec: str | None, device: str | None) -> None:
        """Load the sampler into a supervised process of its own, which detects its kind there."""
        source = importable_source(sampler, spec)
        if isinstance(source, str):
            raise SamplerSpecError(source)
        self.sampler = None
        self._process = SamplerProcess.acquire(source, device)
        info = self._load()
        self.worker_starts = 1
        self.name = info["name"]
        self.capabilities = info["capabilities"]
        self.device = torch.device(info["device"])
        self.kind: Kind = info["kind"]
        try:
            self.warp = from_reference(info.get("warp"))
        except ValueError as exc:
            self.close()
            raise SamplerSpecError(str(exc)) from None

    def step(self, *inputs: Any, **options: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """Run the sampler over a batch of its kind's inputs, of any size; outputs audited, returned
        on the CPU (:meth:`~ChainCalls.chain_step`, :meth:`~TreeCalls.tree_step`)."""
        calls = _STEPS.get(self.kind.verb)
        if calls is None:
            raise TypeError(f"a sampler of the {self.kind.name} kind makes no steps: it is called as itself")
        return calls(self, *inputs, **options)


def host_unit(worker: Any, work: Callable[[Any, Any], Any], unit: Any) -> UnitDone:
    """Run an experiment's unit in the sampler's own process (the worker's ``unit`` verb names this
    function, :data:`specverify._calling.supervised.UNIT_HOST`): on an in-process sampler under test
    of the sampler ``worker`` loaded, built at its first unit, whose calls beat the worker's counter."""
    if worker.local is None:
        worker.local = SamplerUnderTest(worker.raw, isolation="in-process", timed=False, device=str(worker.device))
        worker.local.sampler = worker.beating(worker.local.sampler)
    return run_unit(worker.local, work, unit)


#: The calls of each worker verb a step kind names (:attr:`specverify._kinds.Kind.verb`).
_STEPS: dict[str, Callable[..., tuple[torch.Tensor, torch.Tensor]]] = {
    STEP: ChainCalls.chain_step,
    TREE_STEP: TreeCalls.tree_step,
}
