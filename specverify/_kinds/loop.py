"""The loop kind: a whole generation loop, called on models (:mod:`specverify._loop`).

Declared by ``contract = "loop"`` (:func:`specverify.loop`), with the sampling ``parameters`` it
honours.  Its layout audits what a loop generates (int64 tokens of the asked shape, ids in the
vocabulary), codes a row's generation as one index and has the target's warped autoregressive law
(:func:`~specverify._loop.generation_law`); it is put through the ``loop`` family, one generation a
message to its worker, which rebuilds the harness's models there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import torch

from .._contract import Violation
from .._history.generation import stop_padding_violation
from .._history.posing import posed_params
from .._layout import Output, StepLayout
from .._loop import MarkovLM, generation_law
from .._record.info import Isolation, RunInfo
from .._warps.rules import SamplingParams
from .._warps.separating import warp_record
from ._base import CalledAsItself

__all__ = ["LoopInputs", "LoopKind", "LoopLayout"]


class LoopInputs(NamedTuple):
    """What one generation is given: the target model, the prompts ``[B, L]``, the tokens to
    generate and the rows' sampling parameters."""

    target: MarkovLM
    prompt: torch.Tensor
    num_tokens: int
    params: SamplingParams


@dataclasses.dataclass(frozen=True)
class LoopLayout(StepLayout[LoopInputs]):
    """Models in, ``tokens [B, num_tokens]`` out; an outcome is a row's whole generation, coded in
    base ``V`` (first token most significant), whose law is :func:`~specverify._loop.generation_law`."""

    name: ClassVar[str] = "loop"

    def posed(self, sampler: Callable[..., Any]) -> Callable[..., Any]:
        return sampler

    def as_chain(self, sampler: Callable[..., Any]) -> Callable[..., Output]:
        raise TypeError("a generation loop has no chain form: it is called on models, not on step inputs")

    def audit(self, inputs: LoopInputs, output: Any, *, first_only: bool = False) -> list[Violation]:
        rows, num_tokens, vocab = inputs.prompt.shape[0], inputs.num_tokens, inputs.target.vocab_size
        if (
            not isinstance(output, torch.Tensor)
            or tuple(output.shape) != (rows, num_tokens)
            or output.dtype != torch.int64
        ):
            described = (
                f"a tensor of shape {tuple(output.shape)} and dtype {output.dtype}"
                if isinstance(output, torch.Tensor)
                else f"a {type(output).__name__}"
            )
            return [
                Violation(
                    "output", f"the loop returned {described}, expected int64 tokens of shape {(rows, num_tokens)}"
                )
            ]
        stops = inputs.params.stop_tokens
        if stops is not None:  # a row ends at its stop token, -1 after it (specverify._history.generation)
            broken = stop_padding_violation(output, stops)
            if broken is not None:
                return [Violation("output", f"the loop's output breaks the stop-token rule: {broken}")]
        padding = (output == -1) if stops is not None else torch.zeros_like(output, dtype=torch.bool)
        bad = ((output < 0) & ~padding) | (output >= vocab)
        if bool(bad.any()):
            row = int(bad.any(-1).nonzero()[0, 0])
            message = f"the loop's output, row {row}: token id {int(output[row][bad[row]][0])} is outside [0, {vocab})"
            return [Violation("output", message, row=row)]
        return []

    def outcome(self, inputs: LoopInputs, output: Any) -> torch.Tensor:
        vocab, length = inputs.target.vocab_size, inputs.num_tokens
        return (output * torch.tensor([vocab ** (length - 1 - i) for i in range(length)])).sum(-1)

    def sequence(self, inputs: LoopInputs, output: Any) -> torch.Tensor:
        return self.outcome(inputs, output)

    def law(self, inputs: LoopInputs) -> torch.Tensor:
        """``[B, V**num_tokens]``: each row's law, from its prompt and parameters."""
        rows = inputs.prompt.shape[0]
        return torch.stack(
            [
                generation_law(
                    inputs.target, inputs.prompt[r], inputs.num_tokens, inputs.params.select(torch.tensor([r]))
                )
                for r in range(rows)
            ]
        )


@dataclasses.dataclass(frozen=True)
class LoopKind(CalledAsItself):
    """A generation loop honouring the sampling ``parameters`` it declares."""

    name: ClassVar[str] = "loop"
    #: The value of a loop's ``contract`` attribute that declares this kind.
    declared: ClassVar[str] = "loop"
    signature: ClassVar[str] = "loop(target, draft, prompt, num_tokens, params, generator) -> tokens [B, num_tokens]"
    contract_doc: ClassVar[str] = "docs/loops.md"
    called_as: ClassVar[str] = "a generation loop"
    battery: ClassVar[str] = "loop"
    #: One generation, one message to the worker, which rebuilds the harness's models there.
    verb: ClassVar[str] = "generate"
    contract: ClassVar[str | None] = "loop"
    noun: ClassVar[str] = "loop"
    rehearsed: ClassVar[bool] = True
    call_timeout: ClassVar[float | None] = 120.0  # how long it may go without calling a model
    strict_warp: ClassVar[bool] = True
    no_match: ClassVar[str] = "no loop check matches {patterns}; ids look like 'loop.law[top-k]'"
    undeclared: ClassVar[str] = "{spec!r} is not a generation loop: declare it with @specverify.loop (docs/loops.md)"

    @classmethod
    def of(cls, sampler: Any) -> LoopKind:
        """The loop's declared ``parameters`` (a callable given as a loop that declares none: temperature)."""
        return cls(tuple(getattr(sampler, "parameters", ("temperature",))))

    @property
    def layout(self) -> LoopLayout:
        return LoopLayout()

    def call_once(self, subject: Any, target: Any, draft: Any, drafts: Any) -> None:
        """A loop's call: on the tiny step's target as a model, its declared parameters all off."""
        model = MarkovLM(torch.log(target[0]), context=(0,))
        params = posed_params([{}], torch.zeros(1, dtype=torch.int64), self.parameters)
        subject(model, model, drafts, 2, params, torch.Generator().manual_seed(0))

    def request(self, *args: Any) -> dict[str, Any]:
        """A generation's arguments as they travel: the harness's models as descriptions (their
        logits table and context, rebuilt in the worker: never pickled closures), the generator as
        its state."""
        target, draft, prompt, num_tokens, params, generator = args
        return {
            "target": (target.logits, target.context),
            "draft": (draft.logits, draft.context),
            "prompt": prompt,
            "num_tokens": num_tokens,
            "params": params,
            "generator": generator.get_state(),
        }

    def serve(self, sampler: Any, request: dict[str, Any], beat: Callable[[], None]) -> Any:
        """The models rebuilt, each beating at every model call (a loop hangs when it goes its limit
        without calling one), and the loop called on them."""

        def model(description: tuple[Any, ...]) -> MarkovLM:
            logits, context = description
            built = MarkovLM(logits, context=tuple(context))
            object.__setattr__(built, "on_call", beat)
            return built

        generator = torch.Generator()
        generator.set_state(request["generator"])
        return sampler(
            model(request["target"]),
            model(request["draft"]),
            request["prompt"],
            request["num_tokens"],
            request["params"],
            generator,
        )

    def describe(self, record: RunInfo, subject: Any) -> None:
        """Its contract, what its models and generations cover (``record.reach``, its battery's) and
        the warp it is judged by
        (:mod:`specverify._warps.declared`); its isolation as its calls record it."""
        record.contract, record.reach = self.contract, f"{record.reach}; {subject.warp.statement}"
        record.extra["warp"] = warp_record(subject.warp)
        record.isolation = Isolation.from_json(subject.info())

    def tally(self, record: RunInfo, subject: Any, count: dict[str, float]) -> None:
        """A loop's calls are generations, timed whole (:mod:`specverify._calling.direct`): its
        isolation as its calls record it, no call or row counts."""
        record.isolation = Isolation.from_json(subject.info())

    @property
    def seeds(self) -> bool:
        return "seeds" in self.parameters
