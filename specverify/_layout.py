"""The step layout: what the harness needs to know of one input shape of a verification step.

A layout is one object per input shape.  It says how a sampler of that shape is posed as the call
the harness makes, how an output is audited (the :class:`~specverify._contract.Violation` objects it
shows), how an audited output is coded as an outcome index for the tallies, and which exact law
those outcomes have given the inputs.  Calling, auditing and tallying are written against the
layout, so a new input shape adds a layout instead of a fork of each of them:

* :class:`ChainLayout`: the chain contract (:mod:`specverify._contract`): probabilities in,
  ``(tokens, num_accepted)`` out, the canonical law :func:`~specverify._exact.step_law`;
* :class:`LogitsLayout`: the same chain, with each case posed to a logits-level sampler as logits
  and per-row sampling parameters whose warp is the case's law (:mod:`specverify._logits_layout`);
* :class:`TreeLayout`: a tree of candidates per row (:mod:`specverify._tree`), ``(path, token)``
  out, the law of the declared tree algorithm; its chain form runs a tree sampler on path trees.

:func:`layout_of` chooses a sampler's layout from what it declares.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar, Generic, NamedTuple, TypeVar

import torch

from ._contract import Violation, audit_output, capabilities_of, malformed, resolve_sampler
from ._exact import sequence_index, step_law
from ._logits_layout import PosedSampler
from ._tree import TreeBatch, as_chain_sampler, audit_tree_output, last_nodes
from ._tree_draw import emitted_sequences
from ._tree_exact import tree_law

__all__ = ["ChainLayout", "LogitsLayout", "StepInputs", "StepLayout", "TreeLayout", "layout_of", "load_sampler"]

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
    :class:`~specverify._tree.TreeBatch`); an output is the pair the sampler returns.
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
        :func:`~specverify._exact.sequence_index` (so emitted laws of every layout compare)."""

    @abc.abstractmethod
    def law(self, inputs: Inputs) -> torch.Tensor:
        """``[B, ...]`` float64: the exact law of each row's outcome given its inputs."""


@dataclasses.dataclass(frozen=True)
class ChainLayout(StepLayout[StepInputs]):
    """Probabilities in, ``(tokens [B, K+1], num_accepted [B])`` out (``specverify._contract``).

    An outcome is ``(j, t)``: ``j`` drafts accepted, then token ``t``, coded ``j * V + t``; its law
    is the canonical algorithm's, :func:`~specverify._exact.step_law` ``[B, K+1, V]``.
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
class LogitsLayout(ChainLayout):
    """The chain posed to a logits-level sampler: each row as logits and values of the sampling
    ``parameters`` named, whose warp is the row's law (:func:`specverify._logits_layout.pose`).

    Outputs, outcomes and laws are the chain's: the law to preserve is the case's, whatever the
    posing, so a sampler that mishandles a warp emits outcomes the chain's law forbids or weighs
    otherwise.
    """

    name: ClassVar[str] = "logits"
    parameters: tuple[str, ...] = ("temperature",)

    def __post_init__(self) -> None:
        object.__setattr__(self, "parameters", tuple(self.parameters))  # any sequence of names

    def posed(self, sampler: Callable[..., Any]) -> Callable[..., Any]:
        return sampler if isinstance(sampler, PosedSampler) else PosedSampler(sampler, self.parameters)


@dataclasses.dataclass(frozen=True)
class TreeLayout(StepLayout[TreeBatch]):
    """A tree of candidates per row in, ``(path [B, D+1], token [B])`` out (``specverify._tree``).

    An outcome is ``(n, t)``: the path ends at node ``n``, then token ``t``, coded ``n * V + t``;
    its law is the declared ``algorithm``'s, :func:`~specverify._tree_exact.tree_law` ``[B, N, V]``
    (a sampler declaring none has no exact law given its candidates).
    """

    name: ClassVar[str] = "tree"
    algorithm: str | None = None

    def posed(self, sampler: Callable[..., Any]) -> Callable[..., Any]:
        return sampler

    def as_chain(self, sampler: Callable[..., Any]) -> Callable[..., Output]:
        return as_chain_sampler(sampler)

    def audit(self, inputs: TreeBatch, output: Any, *, first_only: bool = False) -> list[Violation]:
        return audit_tree_output(inputs, output, first_only=first_only)

    def outcome(self, inputs: TreeBatch, output: Output) -> torch.Tensor:
        path, token = output
        return last_nodes(path) * inputs.vocab + token

    def sequence(self, inputs: TreeBatch, output: Output) -> torch.Tensor:
        path, token = output
        emitted = emitted_sequences(inputs, path, token)
        return sequence_index(emitted, (path >= 0).sum(dim=1) - 1, inputs.vocab)

    def law(self, inputs: TreeBatch) -> torch.Tensor:
        if self.algorithm is None:
            raise ValueError("the tree sampler declares no algorithm: no exact law given its candidates")
        return tree_law(inputs, self.algorithm)


def layout_of(sampler: Any) -> StepLayout[Any]:
    """The layout of a sampler, or of a sampler under test, from what it declares: ``contract =
    "tree"`` the tree layout (with its ``algorithm``), ``capabilities.inputs == "logits"`` the logits
    layout (with its ``capabilities.params``), anything else the chain."""
    if getattr(sampler, "contract", None) == "tree":
        return TreeLayout(getattr(sampler, "algorithm", None))
    capabilities = capabilities_of(sampler)
    if capabilities.inputs == "logits":
        return LogitsLayout(capabilities.params)
    return ChainLayout()


def load_sampler(spec: str) -> Callable[..., Any]:
    """Resolve ``"package.module:attribute"`` to a sampler (:func:`specverify._contract.resolve_sampler`),
    posed as the harness calls it (:meth:`StepLayout.posed`: a logits sampler on probabilities).

    Raises:
        SamplerSpecError: the spec cannot be imported, built or read as a sampler.
    """
    sampler = resolve_sampler(spec)
    return layout_of(sampler).posed(sampler)
