"""The chain kind: probabilities in, ``(tokens, num_accepted)`` out (:mod:`specverify._contract`).

Its layout is the contract's own; its exact law the canonical algorithm's
(:func:`~specverify._laws.exact.step_law`); it is put through the chain battery, one call of a step a
message to its worker.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar

import torch

from .._contract import Violation, audit_output, malformed
from .._laws.exact import sequence_index, step_law
from .._layout import Output, StepInputs, StepLayout
from ._base import Kind

__all__ = ["ChainKind", "ChainLayout"]


@dataclasses.dataclass(frozen=True)
class ChainLayout(StepLayout[StepInputs]):
    """Probabilities in, ``(tokens [B, K+1], num_accepted [B])`` out (``specverify._contract``).

    An outcome is ``(j, t)``: ``j`` drafts accepted, then token ``t``, coded ``j * V + t``; its law
    is the canonical algorithm's, :func:`~specverify._laws.exact.step_law` ``[B, K+1, V]``.
    """

    name: ClassVar[str] = "chain"

    def posed(self, sampler: Callable[..., Any]) -> Callable[..., Any]:
        return sampler

    def as_chain(self, sampler: Callable[..., Any]) -> Callable[..., Output]:
        return self.posed(sampler)

    def structure(self, inputs: StepInputs, output: Any, *, device: torch.device | None = None) -> list[Violation]:
        """The audit's first rules alone: a pair of int64 tensors of the inputs' shapes, on ``device``
        where given (each call of a batch passes them before the calls' outputs are joined)."""
        batch, k = inputs.draft_tokens.shape
        return malformed(output, batch, k, device=device)

    def audit(self, inputs: StepInputs, output: Any, *, first_only: bool = False) -> list[Violation]:
        return audit_output(output, inputs.target_probs, inputs.draft_tokens, first_only=first_only)

    def outcome(self, inputs: StepInputs, output: Output) -> torch.Tensor:
        tokens, num_accepted = output
        last = tokens.gather(1, num_accepted.unsqueeze(-1)).squeeze(-1)
        return num_accepted * inputs.target_probs.shape[-1] + last

    def sequence(self, inputs: StepInputs, output: Output) -> torch.Tensor:
        tokens, num_accepted = output
        return sequence_index(tokens, num_accepted, inputs.target_probs.shape[-1])

    def law(self, inputs: StepInputs) -> torch.Tensor:
        return step_law(inputs.target_probs, inputs.draft_probs, inputs.draft_tokens)


@dataclasses.dataclass(frozen=True)
class ChainKind(Kind):
    """A sampler of the chain contract, given probabilities (the default kind)."""

    name: ClassVar[str] = "chain"
    battery: ClassVar[str] = "chain"
    #: A step's call, one message to the worker (:mod:`specverify._worker.wire` takes it from here).
    verb: ClassVar[str] = "step"
    rehearsed: ClassVar[bool] = True
    calibrated: ClassVar[bool] = True

    @classmethod
    def of(cls, sampler: Any) -> ChainKind:
        return cls()

    @property
    def layout(self) -> ChainLayout:
        return ChainLayout()
