"""Tree inputs from a model: candidates drawn as the algorithms assume, and emitted sequences completed.

The target's own law of what a tree sampler emits is testable only when the harness draws the
candidates itself: SpecInfer is lossless for children drawn i.i.d. from the draft, the
without-replacement verifier for children drawn without replacement (``specverify._trees.exact``).
:func:`draw_tree` makes such inputs from any :class:`~specverify._laws.models.Model` (the laws after each
node's prefix, as an engine's are) for a static tree shape; :func:`completed_sequences` completes
each emitted sequence to ``D + 1`` tokens by the target, whose law is then the target's joint law
of ``D + 1`` tokens (``specverify._laws.exact.target_law``) for a lossless sampler.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .._laws.models import Model, sample_next
from .contract import TreeBatch

__all__ = ["completed_sequences", "draw_tree", "emitted_sequences"]


def draw_tree(
    model: Model, parents: Sequence[int], batch: int, generator: torch.Generator, *, replacement: bool
) -> TreeBatch:
    """``batch`` rows of the static tree ``parents``, candidates drawn from the model's draft.

    Each node's children are drawn from the draft law after the node's prefix, i.i.d.
    (``replacement=True``, SpecInfer) or without replacement in try order (``False``, Sequoia);
    every node's ``target_probs`` and ``draft_probs`` are the model's laws after its prefix.
    """
    parents = list(parents)
    if not parents or parents[0] != -1 or any(not 0 <= p < i for i, p in enumerate(parents) if i):
        raise ValueError("draw_tree: parents must start with the root (-1) and name earlier nodes")
    width = len(parents)
    prefixes: list[torch.Tensor] = [torch.empty((batch, 0), dtype=torch.int64)]
    tokens = torch.zeros((batch, width), dtype=torch.int64)
    target = [model.target(prefixes[0]).to(torch.float64)]
    draft = [model.draft(prefixes[0]).to(torch.float64)]
    taken: dict[int, torch.Tensor] = {}  # per parent: the tokens its earlier children took
    for node in range(1, width):  # nodes in order, all rows at once
        parent = parents[node]
        q = draft[parent]
        if not replacement:
            mask = taken.setdefault(parent, torch.zeros_like(q, dtype=torch.bool))
            q = q.masked_fill(mask, 0.0)
            if not bool((q.sum(dim=-1) > 0).all()):
                raise ValueError(f"draw_tree: node {parent} has more children than its draft law has tokens")
        x = sample_next(q, generator)
        if not replacement:
            taken[parent] = mask.scatter(1, x[:, None], True)
        tokens[:, node] = x
        prefixes.append(torch.cat([prefixes[parent], x[:, None]], dim=1))
        target.append(model.target(prefixes[node]).to(torch.float64))
        draft.append(model.draft(prefixes[node]).to(torch.float64))
    parents_t = torch.tensor(parents, dtype=torch.int64).expand(batch, width).clone()
    return TreeBatch(parents_t, tokens, torch.stack(target, dim=1), torch.stack(draft, dim=1))


def emitted_sequences(tree: TreeBatch, path: torch.Tensor, token: torch.Tensor) -> torch.Tensor:
    """``[B, D+1]``: the accepted candidates' tokens, then the emitted token, then -1."""
    steps = tree.path_tokens(path)
    out = torch.cat([steps, torch.full_like(token[:, None], -1)], dim=1)
    out[torch.arange(tree.batch), (path >= 0).sum(dim=1) - 1] = token
    return out


def completed_sequences(model: Model, sequences: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Each row's emitted sequence (``-1`` padded) completed to full width by the target model."""
    out = sequences.clone()
    for position in range(out.shape[1]):  # over positions, vectorised over rows
        missing = out[:, position] < 0
        if missing.any():
            drawn = sample_next(model.target(out[missing, :position]), generator)
            out[missing, position] = drawn
    return out
