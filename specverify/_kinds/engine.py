"""The engine kind: a whole inference engine's ``generate()``, speculation on against itself with it off.

An engine is the system under test end to end, KV cache, position ids, scheduler, seeds and stop
handling included (docs/engines.md)::

    tokens = engine(prompts, num_tokens, params, seed, speculative)   # [B, num_tokens] int64

``prompts [B, P] int64`` are token ids; ``params`` the rows' :class:`~specverify._warps.rules.SamplingParams`
(only those the engine declares); ``seed`` seeds the engine's own randomness (the same seed gives the
same output); ``speculative`` turns speculation on or off.  A row that a stop token ends early is
``-1`` after it.  Declared by ``contract = "engine"`` (:func:`engine`) with the ``parameters`` it
honours and its ``vocab_size``.  The one oracle with no convention at all is the engine with
speculation off: its layout audits and codes generations but has no exact law, and the ``engine``
battery (:mod:`specverify.checks._engine`) compares the two modes' laws with two-sample tests.  This
module is the whole kind: its declaration, its layout, how a call travels to the engine's process
(:meth:`EngineKind.request`) and how it is served there (:meth:`EngineKind.serve`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import torch

from .._contract import Violation
from .._history.posing import posed_params
from .._layout import Output, StepLayout
from .._record.info import Isolation, RunInfo
from .._warps.rules import PARAMETERS, SamplingParams
from ..errors import SamplerFault, SamplerSpecError
from ._base import CalledAsItself

__all__ = ["EngineInputs", "EngineKind", "EngineLayout", "engine"]

#: Rows one call of an engine that declares no ``max_batch`` is given.
DEFAULT_MAX_BATCH = 256
#: Most generations of the plan's timing call, in each mode (an engine's ``max_batch`` if fewer):
#: enough that a call's fixed cost is spread as the checks' own calls spread it.
TIMING_ROWS = 1024


def engine(
    fn: Any = None,
    *,
    vocab_size: int,
    name: str | None = None,
    parameters: tuple[str, ...] = ("temperature",),
    max_batch: int = DEFAULT_MAX_BATCH,
) -> Any:
    """Declare a callable an engine (see the module docstring), in one line.

    ``vocab_size`` is its vocabulary's size (its generations are judged over it); ``parameters``
    names the sampling parameters it honours (the harness gives it only those); ``max_batch`` the
    most prompts one call is given.
    """
    unknown = set(parameters) - set(PARAMETERS)
    if unknown:
        raise ValueError(f"unknown sampling parameters {sorted(unknown)}; known: {PARAMETERS}")

    def declare(f: Any) -> Any:
        f.contract, f.parameters, f.vocab_size, f.max_batch = "engine", tuple(parameters), vocab_size, max_batch
        if name is not None:
            f.name = name
        return f

    return declare(fn) if fn is not None else declare


class EngineInputs(NamedTuple):
    """What one call is given: the prompts ``[B, P]``, the tokens to generate, the rows' sampling
    parameters, and the vocabulary's size (how its outputs are audited and coded)."""

    prompts: torch.Tensor
    num_tokens: int
    params: SamplingParams
    vocab_size: int


@dataclasses.dataclass(frozen=True)
class EngineLayout(StepLayout[EngineInputs]):
    """Prompts in, ``tokens [B, num_tokens]`` out (``-1`` after a row's end); an outcome is a row's
    whole generation, coded in base ``V + 1`` (an end as ``V``, first token most significant).
    No exact law: the engine's own law with speculation off is the oracle."""

    name: ClassVar[str] = "engine"

    def posed(self, sampler: Callable[..., Any]) -> Callable[..., Any]:
        return sampler

    def as_chain(self, sampler: Callable[..., Any]) -> Callable[..., Output]:
        raise TypeError("an engine has no chain form: it is called on prompts, not on step inputs")

    def audit(self, inputs: EngineInputs, output: Any, *, first_only: bool = False) -> list[Violation]:
        """Its type, shape and dtype; ids outside ``[0, V)``; a token after ``-1`` (a row stays ended)."""
        rows, num_tokens, vocab = inputs.prompts.shape[0], inputs.num_tokens, inputs.vocab_size
        if not isinstance(output, torch.Tensor):
            return [Violation("output", f"the engine returned a {type(output).__name__}, not a tensor of token ids")]
        if tuple(output.shape) != (rows, num_tokens) or output.dtype != torch.int64:
            message = f"the engine returned {output.dtype} {tuple(output.shape)}, expected int64 {(rows, num_tokens)}"
            return [Violation("output", message)]
        found = []
        bad = (output < -1) | (output >= vocab)
        if bool(bad.any()):
            row, column = (int(i) for i in bad.nonzero()[0])
            message = f"row {row} position {column} holds {int(output[row, column])}, outside [0, {vocab})"
            found.append(Violation("output", message, row=row))
        resumed = (output == -1).cummax(dim=1).values & (output != -1)
        if bool(resumed.any()):
            row, column = (int(i) for i in resumed.nonzero()[0])
            message = f"row {row} holds token {int(output[row, column])} at position {column}, after it ended (-1)"
            found.append(Violation("output", message, row=row))
        return found[:1] if first_only else found

    def outcome(self, inputs: EngineInputs, output: Any) -> torch.Tensor:
        base, length = inputs.vocab_size + 1, inputs.num_tokens
        coded = torch.where(output < 0, inputs.vocab_size, output)
        return (coded * torch.tensor([base ** (length - 1 - i) for i in range(length)])).sum(-1)

    def sequence(self, inputs: EngineInputs, output: Any) -> torch.Tensor:
        return self.outcome(inputs, output)

    def law(self, inputs: EngineInputs) -> torch.Tensor:
        raise TypeError("an engine's law is not known: it is compared with the engine's own law with speculation off")


@dataclasses.dataclass(frozen=True)
class EngineKind(CalledAsItself):
    """An engine honouring the sampling ``parameters`` it declares, over ``vocab_size`` tokens."""

    name: ClassVar[str] = "engine"
    #: The value of an engine's ``contract`` attribute that declares this kind.
    declared: ClassVar[str] = "engine"
    signature: ClassVar[str] = "engine(prompts, num_tokens, params, seed, speculative) -> tokens [B, num_tokens]"
    contract_doc: ClassVar[str] = "docs/engines.md"
    called_as: ClassVar[str] = "an engine"
    battery: ClassVar[str] = "engine"
    #: One call of the engine's generate, one message to its worker.
    verb: ClassVar[str] = "engine"
    contract: ClassVar[str | None] = "engine"
    noun: ClassVar[str] = "engine"
    call_timeout: ClassVar[float | None] = 600.0  # one batch of generations, beating once
    no_match: ClassVar[str] = "no engine check matches {patterns}; ids look like 'engine.law[top-k]'"
    undeclared: ClassVar[str] = "{spec!r} is not an engine: declare it with @specverify.engine (docs/engines.md)"
    vocab_size: int = 0
    max_batch: int = DEFAULT_MAX_BATCH

    @classmethod
    def of(cls, sampler: Any) -> EngineKind:
        """The engine's declared ``parameters``, ``vocab_size`` and ``max_batch``.

        Raises:
            SamplerSpecError: it declares no vocabulary size, or parameters the harness does not know.
        """
        vocab = getattr(sampler, "vocab_size", None)
        if not isinstance(vocab, int) or vocab < 2:
            raise SamplerSpecError(
                f"{sampler!r} declares no vocab_size (an int >= 2): declare it with @specverify.engine(vocab_size=...) "
                "(docs/engines.md)"
            )
        parameters = tuple(getattr(sampler, "parameters", ("temperature",)))
        unknown = set(parameters) - set(PARAMETERS)
        if unknown:
            raise SamplerSpecError(f"{sampler!r} declares unknown sampling parameters {sorted(unknown)}")
        return cls(parameters, vocab, int(getattr(sampler, "max_batch", DEFAULT_MAX_BATCH)))

    @property
    def layout(self) -> EngineLayout:
        return EngineLayout()

    def request(self, *args: Any) -> dict[str, Any]:
        prompts, num_tokens, params, seed, speculative = args
        return {
            "prompts": prompts,
            "num_tokens": num_tokens,
            "params": params,
            "seed": seed,
            "speculative": speculative,
        }

    def serve(self, sampler: Any, request: dict[str, Any], beat: Callable[[], None]) -> Any:
        """One call of the engine, beating once (its limit is a whole batch's time)."""
        beat()
        return sampler(**request)

    def call_once(self, subject: Any, target: Any, draft: Any, drafts: Any) -> None:
        """An engine's call: one prompt of two tokens, two tokens generated, speculation on, its
        declared parameters all off; an output not of the contract's type is a usage error."""
        prompts = torch.zeros(1, 2, dtype=torch.int64)
        params = posed_params([{}], torch.zeros(1, dtype=torch.int64), self.parameters)
        output = subject(prompts, 2, params, 0, True)
        wrong = self.layout.audit(EngineInputs(prompts, 2, params, self.vocab_size), output, first_only=True)
        if wrong and not isinstance(output, torch.Tensor):
            raise SamplerFault(wrong[0])

    def seconds_per_row(self, subject: Any) -> tuple[float | None, str]:
        """One call of up to :data:`TIMING_ROWS` generations of six tokens in each mode (an engine's
        ``max_batch`` if fewer), timed: the plan's seconds a generation (either mode's, on average)."""
        rows = min(TIMING_ROWS, self.max_batch)
        prompts = torch.zeros(rows, 4, dtype=torch.int64)
        params = posed_params([{}], torch.zeros(rows, dtype=torch.int64), self.parameters)
        try:
            started = time.perf_counter()
            for speculative in (True, False):
                subject(prompts, 6, params, 0, speculative)
        except Exception as exc:  # noqa: BLE001 - an engine that fails the timing call: no estimate, never a guess
            return None, f"not calibrated: the timing call failed ({type(exc).__name__}: {exc})"
        seconds = (time.perf_counter() - started) / (2 * rows)  # the rows it ran, not the most it may
        return seconds, f"timed: one call of {rows} generations in each mode, {1e3 * seconds:.3g} ms a generation"

    def warp_of(self, sampler: Any) -> Any:
        """An engine declares no warp: its own law with speculation off is its oracle."""
        return None

    def describe(self, record: RunInfo, subject: Any) -> None:
        """Its contract, its vocabulary and its isolation as its calls record it."""
        record.contract = self.contract
        record.extra["vocab_size"] = self.vocab_size
        record.isolation = Isolation.from_json(subject.info())

    def tally(self, record: RunInfo, subject: Any, count: dict[str, float]) -> None:
        """Its calls (each a batch of generations), their seconds, and its isolation."""
        record.isolation = Isolation.from_json(subject.info())
        record.sampler_calls, record.sampler_seconds = int(count["calls"]), round(count["seconds"], 3)

    @property
    def seeds(self) -> bool:
        return False
