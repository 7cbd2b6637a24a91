"""The trees the ``trees`` family poses: its shapes, the fixed cases with their candidates, the
production-vocabulary trees and the lumped model the target-law checks draw candidates from.

Kept apart from the checks (:mod:`specverify.checks._trees`) so the cases read in one place and a
test (the Triton tree kernel's) can pose the same trees without the battery.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import torch

from .._oracle import normalise
from .._trees.contract import TreeBatch
from ._fixtures import random_laws

__all__ = [
    "AUDIT_ONLY",
    "BLOCK",
    "CONDITIONAL_KINDS",
    "LumpedModel",
    "PRODUCTION_PARENTS",
    "PRODUCTION_VOCABS",
    "TREE_SHAPES",
    "TreeShape",
    "WEIGHTED_RESIDUAL",
    "fixed_tree",
    "lumped_model",
    "production_actives",
    "production_tree",
]


@dataclasses.dataclass(frozen=True)
class TreeShape:
    """A static tree shape at a vocabulary; ``large``: sized by the budget's shape volume."""

    parents: tuple[int, ...]
    vocab: int
    large: bool = False

    @property
    def nodes(self) -> int:
        return len(self.parents)

    @property
    def depth(self) -> int:
        depth = [0]
        for parent in self.parents[1:]:
            depth.append(depth[parent] + 1)
        return max(depth)


#: The family's shapes.  ``duplicates`` and ``zeros`` cases reuse the star's and the binary tree's
#: shapes, so the target-law checks cover every shape the conditional checks use (specverify.judge).
TREE_SHAPES = {
    "chain": TreeShape((-1, 0, 1, 2), 4),
    "star": TreeShape((-1, 0, 0, 0, 0), 6),
    "binary": TreeShape((-1, 0, 0, 1, 1, 2, 2), 4),
    "wide": TreeShape((-1,) + (0,) * 36, 40, large=True),  # past the 32-sibling boundary
}
#: Kinds of the conditional law and the shape each uses.
CONDITIONAL_KINDS = {
    "chain": "chain", "star": "star", "binary": "binary", "wide": "wide", "duplicates": "star", "zeros": "binary",
    "weighted-residual": "chain",
}  # fmt: skip
#: A chain where block verification's weight w_1 = 1/2 shapes its residual: norm([w p - q]_+) and
#: the token-wise norm([p - q]_+) differ by TV 0.29 given tau = 1, reached with probability 1/3.
WEIGHTED_RESIDUAL = {
    "tokens": [-1, 0, 3, 1],
    "target": [[0.2, 0.4, 0.2, 0.2], [0.5, 0.5, 0.0, 0.0], [0.25] * 4, [0.25] * 4],
    "draft": [[0.4, 0.2, 0.2, 0.2], [0.3, 0.0, 0.0, 0.7], [0.25] * 4, [0.0] * 4],
}
#: Production vocabularies of the target-law check (a root with two children, one grandchild).
PRODUCTION_VOCABS = (32_000, 151_936, 262_144)
PRODUCTION_PARENTS = (-1, 0, 0, 1)
#: The shapes only the exact audit uses: 64 siblings, and 64 candidates on two levels.
AUDIT_ONLY = {
    "siblings-64": TreeShape((-1,) + (0,) * 64, 80),
    "nodes-64": TreeShape((-1,) + (0,) * 36 + (1,) * 28, 48),
}
#: The one algorithm defined on chains only.
BLOCK = "block-verification"


# --- fixed cases: trees given with their candidates ------------------------------------------


def fixed_tree(kind: str, seed: int, algorithm: str | None) -> TreeBatch:
    """One tree of the conditional ``kind`` with its candidates and laws, from a seeded draw."""
    shape = TREE_SHAPES[CONDITIONAL_KINDS[kind]] if kind in CONDITIONAL_KINDS else AUDIT_ONLY[kind]
    g = torch.Generator().manual_seed(seed)
    n, v = shape.nodes, shape.vocab
    parents = torch.tensor(shape.parents, dtype=torch.int64)[None]
    # dense laws, but sparse at the leaves of wide trees (so the cells stay few)
    target = random_laws(g, (1, n, v), zeros=0.9 if shape.large or n > 40 else 0.0)
    draft = random_laws(g, (1, n, v))
    if n - 1 <= v:
        tokens = torch.cat([torch.tensor([-1]), torch.randperm(v, generator=g)[: n - 1]])[None]
    else:
        tokens = torch.cat([torch.tensor([-1]), torch.randint(v, (n - 1,), generator=g)])[None]
    if kind in ("wide", "siblings-64", "nodes-64"):
        # most of the root's mass on the siblings past rank 32, so the verifier gets there
        late = tokens[0, 33 : 33 + 32]
        target[0, 0] = 0.1 / v
        target[0, 0, late] += 0.9 / late.numel()
        draft[0, 0] = target[0, 0].flip(0) * 0.5 + 0.5 / v
    if kind == "duplicates":  # the star's children: a, a, b, a
        a, b = (int(x) for x in torch.randperm(v, generator=g)[:2])
        tokens = torch.tensor([[-1, a, a, b, a]])
        target[0, 0, a] += 0.5
    if kind == "zeros":  # children of target probability 0, one of draft probability 0
        for child in (1, 5):
            target[0, shape.parents[child], tokens[0, child]] = 0.0
        draft[0, shape.parents[4], tokens[0, 4]] = 0.0
        target[0] = target[0] + (target[0].sum(-1, keepdim=True) == 0) * 1.0
    if kind == "weighted-residual":
        tokens = torch.tensor([WEIGHTED_RESIDUAL["tokens"]])
        target = torch.tensor([WEIGHTED_RESIDUAL["target"]], dtype=torch.float64)
        draft = torch.tensor([WEIGHTED_RESIDUAL["draft"]], dtype=torch.float64)
        draft[0, -1] = 1.0  # the leaf's draft row is never read
    if algorithm == BLOCK or kind in ("chain", "weighted-residual"):
        parents = torch.arange(-1, n - 1)[None]
    return TreeBatch(parents, tokens, normalise(target), normalise(draft))


# --- production vocabularies: a few active tokens and a lumped tail --------------------------


def production_actives(vocab: int) -> torch.Tensor:
    """The conditional case's active tokens: past the first 1,024-token tile, the middle, the last id."""
    return torch.tensor(sorted({1024 % vocab, vocab // 2, vocab - 1}), dtype=torch.int64)


def production_tree(vocab: int, seed: int) -> TreeBatch:
    """A root with two children and a grandchild, the candidates the active tokens, every law 90%
    on the active tokens (random) and 10% spread over all ``V`` (so the tail is one cell per node)."""
    g = torch.Generator().manual_seed(seed)
    actives = production_actives(vocab)
    n = len(PRODUCTION_PARENTS)

    def laws() -> torch.Tensor:
        rows = torch.full((1, n, vocab), 0.1 / vocab, dtype=torch.float64)
        rows[0, :, actives] += 0.9 * random_laws(g, (n, actives.numel()))
        return rows

    tokens = torch.tensor([[-1, int(actives[0]), int(actives[-1]), int(actives[1 % actives.numel()])]])
    return TreeBatch(torch.tensor([PRODUCTION_PARENTS]), tokens, laws(), laws())


# --- a model whose law lives on a few active tokens and a lumped tail ------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class LumpedModel:
    """A first-order model over ``V`` tokens whose law depends on the *class* of the last token:
    one of ``A`` active tokens or the tail (every other token, all alike), or the step's start.

    ``target_classes`` / ``draft_classes`` are ``[A + 2, A + 1]`` (rows: active 0..A-1, tail,
    start; columns: the mass of each active token, then of the whole tail, spread evenly).
    The lumped law of a sequence of classes is then exact and small (:meth:`class_law`).
    """

    vocab: int
    actives: torch.Tensor
    target_classes: torch.Tensor
    draft_classes: torch.Tensor

    @property
    def vocab_size(self) -> int:
        return self.vocab

    @property
    def max_depth(self) -> None:
        return None

    def classes(self, tokens: torch.Tensor) -> torch.Tensor:
        lookup = torch.full((self.vocab,), self.actives.numel(), dtype=torch.int64)
        lookup[self.actives] = torch.arange(self.actives.numel())
        return lookup[tokens.clamp_min(0)]

    def _law(self, table: torch.Tensor, prefix: torch.Tensor) -> torch.Tensor:
        a = self.actives.numel()
        row = self.classes(prefix[:, -1]) if prefix.shape[1] else torch.full((prefix.shape[0],), a + 1, dtype=torch.int64)
        mass = table[row]  # [B, A+1]
        out = (mass[:, a:] / (self.vocab - a)).expand(-1, self.vocab).clone()
        out[:, self.actives] = mass[:, :a]
        return out

    def target(self, prefix: torch.Tensor) -> torch.Tensor:
        return self._law(self.target_classes, prefix)

    def draft(self, prefix: torch.Tensor) -> torch.Tensor:
        return self._law(self.draft_classes, prefix)

    def class_law(self, length: int) -> np.ndarray:
        """``[(A+1)**length]``: the target's law of the classes of ``length`` tokens (base A+1)."""
        a = self.actives.numel()
        law = []
        for classes in itertools.product(range(a + 1), repeat=length):
            mass, previous = 1.0, a + 1
            for c in classes:
                mass *= float(self.target_classes[previous, c])
                previous = c
            law.append(mass)
        return np.array(law)


def lumped_model(vocab: int, seed: int) -> LumpedModel:
    """Active tokens past the first 1,024-token tile and at the last index, and a diffuse tail."""
    g = torch.Generator().manual_seed(seed)
    actives = torch.tensor(sorted({1024 % vocab, vocab - 1}), dtype=torch.int64)
    a = actives.numel()

    def table() -> torch.Tensor:
        law = random_laws(g, (a + 2, a + 1))
        return 0.8 * law + 0.2 * torch.eye(a + 1, dtype=torch.float64)[torch.arange(a + 2) % (a + 1)]

    return LumpedModel(vocab, actives, table(), table())
