"""The tree kind: a tree of candidates per row in, ``(path, token)`` out (:mod:`specverify._trees.contract`).

Declared by ``contract = "tree"`` (:func:`specverify._calling.tree.tree_sampler`), with the
``algorithm`` whose law it must have given its candidates (:func:`~specverify._trees.exact.tree_law`;
none declared: judged on the target's law alone).  It is put through the ``trees`` family, a call
of a step on a tree batch one message to its worker.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar

import torch

from .._contract import Violation
from .._laws.exact import sequence_index
from .._layout import Output, StepLayout
from .._record.info import RunInfo
from .._trees.contract import TreeBatch, as_chain_sampler, audit_tree_output, last_nodes
from .._trees.draw import emitted_sequences
from .._trees.exact import tree_law
from ._base import Kind

__all__ = ["TreeKind", "TreeLayout"]


@dataclasses.dataclass(frozen=True)
class TreeLayout(StepLayout[TreeBatch]):
    """A tree of candidates per row in, ``(path [B, D+1], token [B])`` out (``specverify._trees.contract``).

    An outcome is ``(n, t)``: the path ends at node ``n``, then token ``t``, coded ``n * V + t``;
    its law is the declared ``algorithm``'s, :func:`~specverify._trees.exact.tree_law` ``[B, N, V]``
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


@dataclasses.dataclass(frozen=True)
class TreeKind(Kind):
    """A tree sampler implementing ``algorithm`` (``None``: an unlisted verifier)."""

    name: ClassVar[str] = "tree"
    #: The value of a sampler's ``contract`` attribute that declares this kind.
    declared: ClassVar[str] = "tree"
    signature: ClassVar[str] = "tree_sampler(tree, generator) -> (path, token)"
    contract_doc: ClassVar[str] = "docs/trees.md"
    called_as: ClassVar[str] = "a tree sampler"
    battery: ClassVar[str] = "trees"
    #: A step on a tree batch, one message to the worker.
    verb: ClassVar[str] = "tree-step"
    contract: ClassVar[str | None] = "tree"
    algorithm: str | None = None

    @classmethod
    def of(cls, sampler: Any) -> TreeKind:
        return cls(getattr(sampler, "algorithm", None))

    @property
    def layout(self) -> TreeLayout:
        return TreeLayout(self.algorithm)

    def call_once(self, subject: Any, target: Any, draft: Any, drafts: Any) -> None:
        """A tree sampler's call: the tiny step as a chain-shaped tree."""
        subject.step(TreeBatch.from_chain(target, draft, drafts), generator=subject.generator(0))

    def refuses(self, capabilities: Any) -> str | None:
        return None  # its tree limits are its own

    def describe(self, record: RunInfo, subject: Any) -> None:
        super().describe(record, subject)
        record.sampler.algorithm = self.algorithm
