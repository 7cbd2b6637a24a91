"""What differs from one kind of sampler to the next, in one protocol (:class:`Kind`)."""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar

from .._contract import Capabilities, name_of
from .._layout import StepLayout
from .._record.evidence import Warps
from .._record.info import Isolation, RunInfo, SamplerInfo
from .._warps.declared import warp_reference

__all__ = ["CalledAsItself", "Kind"]


class Kind(abc.ABC):
    """One kind of sampler (chain, logits, tree, loop, engine): everything the harness does differently for it.

    A kind is decided once, when the sampler is given to the harness (:func:`specverify._kinds.kind_of`
    from what the sampler declares, or :func:`specverify._kinds.kind_as_given` where a command names
    the kind); the run, calling and worker layers then ask it, never the declarations, and never
    which kind it is:

    * :attr:`layout`: how a case is posed to the sampler, how an output is audited and coded as an
      outcome, and which exact law the outcomes have (:class:`~specverify._layout.StepLayout`);
    * :attr:`battery`: the name of the battery it is put through (``specverify.checks.BATTERIES``);
    * :attr:`verb`: the worker verb its calls travel with (:mod:`specverify._worker.wire` takes
      its verbs from here); :attr:`units_in_worker`: whether an experiment's units may run in the
      sampler's process;
    * :meth:`describe`: what a run's record says of the subject (``run``);
    * :attr:`rehearsed`, :attr:`calibrated`: how a plan's cost is estimated;
    * :attr:`call_timeout`, :attr:`kept_after_failure`, :attr:`strict_warp`: how its calls are
      limited, whether its idle worker is kept after a failed run, how its warp is read;
    * :meth:`declares`, :meth:`of`: how it is read from a sampler's declarations.

    Kinds are frozen values: two kinds are equal when they declare the same; they travel from the
    sampler's process to the harness pickled.
    """

    name: ClassVar[str]
    battery: ClassVar[str]
    verb: ClassVar[str]
    contract: ClassVar[str | None] = None
    #: Whether an experiment's unit may run in the sampler's own process (its counts travel back):
    #: a kind whose worker beats at other calls than its sampler's (a loop's, at model calls) may not.
    units_in_worker: ClassVar[bool] = True
    #: Whether its calls are steps on inputs staged in the worker's arena (chain, logits, tree), or
    #: the subject called as itself, with what :meth:`request` sends and :meth:`serve` rebuilds
    #: (a loop, an engine: :mod:`specverify._calling.direct`).
    steps: ClassVar[bool] = True
    #: What the subject is called in a fault's message ("the loop raised ...").
    noun: ClassVar[str] = "sampler"
    #: Whether a plan's cost is rehearsed on stand-ins (else counted at the cap).
    rehearsed: ClassVar[bool] = False
    #: Whether a few calls of the chain's calibration shape time the sampler.
    calibrated: ClassVar[bool] = False
    #: Seconds a call may go without a heartbeat when none is given (``None``: from the sampler's speed).
    call_timeout: ClassVar[float | None] = None
    #: Whether the sampler's idle worker is kept for the next run after a run that failed to start
    #: or raised (a worker of a kind whose calls may be mid-way then is ended instead).
    kept_after_failure: ClassVar[bool] = True
    #: Whether a warp the sampler declares must be known by name in its process (a loop's oracle).
    strict_warp: ClassVar[bool] = False
    #: What a selection that matches none of the battery's checks is told (``{patterns}`` filled in).
    no_match: ClassVar[str] = (
        "no check matches {patterns}; ids look like 'contract.output' or 'fit.conditional[random]'"
    )
    #: Why a sampler loaded by name for this kind is refused when it declares another.
    undeclared: ClassVar[str] = "{spec!r} is not of the {name} kind"
    #: The contract's signature and where it is documented, as a usage error names them (the fix).
    signature: ClassVar[str] = "sampler(target_probs, draft_probs, draft_tokens, generator) -> (tokens, num_accepted)"
    contract_doc: ClassVar[str] = "docs/sampler.md"
    #: What a subject of this kind is called, in a usage error ("cannot be called as ...").
    called_as: ClassVar[str] = "a chain sampler"

    #: The value of a subject's ``contract`` attribute that declares this kind (``None``: none does).
    declared: ClassVar[str | None] = None

    @classmethod
    def declares(cls, sampler: Any) -> bool:
        """Whether ``sampler`` declares this kind: its ``contract`` is :attr:`declared` (the chain kind,
        the default, declares none and is declared by anything)."""
        return cls.declared is None or getattr(sampler, "contract", None) == cls.declared

    @classmethod
    @abc.abstractmethod
    def of(cls, sampler: Any) -> Kind:
        """This kind, with what ``sampler`` declares of it (its parameters, its algorithm)."""

    @property
    @abc.abstractmethod
    def layout(self) -> StepLayout[Any]:
        """How a case is posed, an output audited and coded, and the outcomes' exact law."""

    def call_once(self, subject: Any, target: Any, draft: Any, drafts: Any) -> None:
        """Call ``subject`` (a sampler under test of this kind) once on a tiny step (``target [1, K+1, V]``,
        ``draft [1, K, V]``, ``drafts [1, K]``), as :func:`specverify._calling.first_call.first_call` does before
        the battery: a step kind's call of those three tensors."""
        subject.step(target, draft, drafts, generator=subject.generator(0))

    def request(self, *args: Any) -> dict[str, Any]:
        """What one call of a subject called as itself (:attr:`steps` false) sends to its process:
        its arguments as they travel (a step kind's calls travel through the arena instead)."""
        raise TypeError(f"a sampler of the {self.name} kind makes steps: it is not called as itself")

    def serve(self, sampler: Any, request: dict[str, Any], beat: Callable[[], None]) -> Any:
        """In the subject's process: call ``sampler`` on what :meth:`request` sent, ``beat`` at each
        call it makes (how the harness tells a slow call from a hung one); its output, as it is."""
        raise TypeError(f"a sampler of the {self.name} kind makes steps: it is not called as itself")

    def seconds_per_row(self, subject: Any) -> tuple[float | None, str] | None:
        """A kind that times its own subject for the plan: seconds a row and how they were measured
        (``None``: the plan times it as a chain sampler, where :attr:`calibrated`)."""
        return None

    def posed(self, sampler: Callable[..., Any]) -> Callable[..., Any]:
        """The sampler as the harness calls it (already posed: itself)."""
        return self.layout.posed(sampler)

    def name_of(self, sampler: Callable[..., Any]) -> str:
        """The name a sampler loaded in this process is shown by (:func:`specverify._contract.name_of`)."""
        return name_of(sampler)

    def warp_of(self, sampler: Any) -> Any:
        """The warp a sampler declares, by reference, as its process reports it (:func:`warp_reference`)."""
        return warp_reference(sampler, strict=self.strict_warp)

    def refuses(self, capabilities: Capabilities) -> str | None:
        """Why a sampler of this kind cannot declare ``capabilities`` (``None``: it may): the tree
        limits are a tree sampler's alone."""
        if capabilities.tree_limits:
            return (
                "declares max_children, max_depth, max_nodes or reserved_tokens, capabilities of a tree sampler, "
                f"but is of the {self.name} kind (a tree sampler declares contract='tree': @specverify.tree_sampler)"
            )
        return None

    def sampler_info(self, subject: Any) -> SamplerInfo:
        """What ``run["sampler"]`` says of the subject: its name and capabilities."""
        return SamplerInfo(name=subject.name, capabilities=subject.capabilities.to_json())

    def describe(self, record: RunInfo, subject: Any) -> None:
        """Fill in what a run's record says of the subject beyond the sampler: where it runs, on
        what, its contract (the step kinds': its device, dtype and isolation)."""
        record.device, record.dtype = str(subject.device), str(subject.dtype).removeprefix("torch.")
        record.isolation = Isolation(
            mode=subject.isolation, reason=None, timeout=subject.timeout, first_timeout=subject.limit.first
        )
        record.contract = self.contract

    def tally(self, record: RunInfo, subject: Any, count: dict[str, float]) -> None:
        """What a run's record says the subject was put through, from its counters summed over the
        run's workers (a step kind's: its calls, rows, seconds, crashes, hangs and worker starts)."""
        isolation = record.isolation if record.isolation is not None else Isolation()
        isolation.crashes, isolation.hangs, isolation.worker_starts = (
            int(count["crashes"]),
            int(count["hangs"]),
            int(count["worker_starts"]),
        )
        record.isolation = isolation
        record.sampler_calls, record.sampler_rows, record.sampler_seconds = (
            int(count["calls"]),
            int(count["rows"]),
            round(count["seconds"], 3),
        )

    def runs(self, battery: str) -> bool:
        """Whether a check of ``battery`` is one this kind is put through (a check run on another
        kind's subject declines, saying why)."""
        return battery == self.battery

    @property
    def seeds(self) -> bool:
        """Whether the sampler takes per-request seeds (the ``seeds`` family runs on it)."""
        return False

    def warps(self, example: Any, row: int | None, message: str, warp: Any = None) -> Warps | None:
        """The failing case as the sampler saw it, where it was posed otherwise than as given
        (a logits sampler's warps, posed by its declared ``warp``); ``None`` for a kind given its
        cases as they are."""
        return None


@dataclasses.dataclass(frozen=True)
class CalledAsItself(Kind):
    """A kind whose subject is called as itself (a loop, an engine): declared by the sampling
    ``parameters`` it honours, named by its own ``name``, its calls whole generations whose worker may
    be mid-call when a run fails (never kept) and beats at the subject's own pace (no units there)."""

    steps: ClassVar[bool] = False
    units_in_worker: ClassVar[bool] = False
    kept_after_failure: ClassVar[bool] = False
    parameters: tuple[str, ...] = ("temperature",)

    def __post_init__(self) -> None:
        object.__setattr__(self, "parameters", tuple(self.parameters))

    def name_of(self, sampler: Callable[..., Any]) -> str:
        """Shown by its ``name``, else its qualified name alone."""
        named: Any = getattr(sampler, "name", None) or getattr(sampler, "__qualname__", type(sampler).__qualname__)
        return named

    def sampler_info(self, subject: Any) -> SamplerInfo:
        """Its name and the parameters it declares."""
        return SamplerInfo(name=subject.name, parameters=list(self.parameters))
