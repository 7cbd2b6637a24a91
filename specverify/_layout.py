"""The step layout: what the harness needs to know of one input shape of a verification step.

A layout is one object per input shape, held by its kind (:mod:`specverify._kinds`).  It says how a sampler of that
shape is posed as the call the harness makes, how an output is audited (the :class:`~specverify._contract.Violation`
objects it shows), how an audited output is coded as an outcome index for the tallies, and which exact law
those outcomes have given the inputs.  Calling, auditing and tallying are written against the
layout, so a new input shape adds a layout instead of a fork of each of them:

* :class:`~specverify._kinds.chain.ChainLayout`: the chain contract (:mod:`specverify._contract`):
  probabilities in, ``(tokens, num_accepted)`` out, the canonical law :func:`~specverify._laws.exact.step_law`;
* :class:`~specverify._kinds.logits.LogitsLayout`: the same chain, with each case posed to a
  logits-level sampler as logits and per-row sampling parameters whose warp is the case's law
  (:mod:`specverify._kinds.logits_posing`);
* :class:`~specverify._kinds.tree.TreeLayout`: a tree of candidates per row (:mod:`specverify._trees.contract`),
  ``(path, token)`` out, the law of the declared tree algorithm; its chain form runs a tree sampler
  on path trees;
* :class:`~specverify._kinds.loop.LoopLayout`: a generation loop's output, its sequences and their
  law (:func:`~specverify._loop.generation_law`).

:func:`specverify._kinds.kind_of` detects a sampler's kind, and so its layout, from what it declares.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any, ClassVar, Generic, NamedTuple, TypeVar

import torch

from ._contract import Violation

__all__ = ["Output", "StepInputs", "StepLayout"]

Inputs = TypeVar("Inputs")
Output = tuple[torch.Tensor, torch.Tensor]


class StepInputs(NamedTuple):
    """One batch of the chain contract's inputs (``specverify._contract``)."""

    target_probs: torch.Tensor  # [B, K+1, V]
    draft_probs: torch.Tensor  # [B, K, V]
    draft_tokens: torch.Tensor  # [B, K]

    def rows(self, rows: slice) -> StepInputs:
        return StepInputs(self.target_probs[rows], self.draft_probs[rows], self.draft_tokens[rows])


class StepLayout(abc.ABC, Generic[Inputs]):
    """One input shape: its call, its audit, its outcome coding and its exact law.

    ``Inputs`` is what the harness gives a sampler of this shape (:class:`StepInputs`, a
    :class:`~specverify._trees.contract.TreeBatch`); an output is the pair the sampler returns.
    """

    name: ClassVar[str]

    @abc.abstractmethod
    def posed(self, sampler: Callable[..., Any]) -> Callable[..., Any]:
        """The sampler as the harness calls it on this layout's inputs (already posed: itself)."""

    @abc.abstractmethod
    def as_chain(self, sampler: Callable[..., Any]) -> Callable[..., Output]:
        """The sampler as a call on the chain contract's inputs, so the chain battery runs it."""

    @abc.abstractmethod
    def audit(self, inputs: Inputs, output: Any, *, first_only: bool = False) -> list[Violation]:
        """Every rule of the contract ``output`` breaks on ``inputs`` (exact; no statistics), each
        with the first row that shows it; ``first_only``: the first rule broken alone."""

    @abc.abstractmethod
    def outcome(self, inputs: Inputs, output: Output) -> torch.Tensor:
        """``[B]`` int64: each row's outcome, its index in the row of :meth:`law` flattened."""

    @abc.abstractmethod
    def sequence(self, inputs: Inputs, output: Output) -> torch.Tensor:
        """``[B]`` int64: each row's emitted tokens as one index, in the order of
        :func:`~specverify._laws.exact.sequence_index` (so emitted laws of every layout compare)."""

    @abc.abstractmethod
    def law(self, inputs: Inputs) -> torch.Tensor:
        """``[B, ...]`` float64: the exact law of each row's outcome given its inputs."""
