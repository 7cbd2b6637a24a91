"""The trees the ``trees`` family poses: its shapes, the fixed cases with their candidates, the
production-vocabulary trees and the lumped model the target-law checks draw candidates from.

Kept apart from the checks (:mod:`specverify.checks._trees`) so the cases read in one place and a
test (the Triton tree kernel's) can pose the same trees without the battery.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
from typing import Any

import numpy as np
import torch

from .._laws.oracle import normalise
from .._record.evidence import TreeCase
from .._trees.contract import TreeBatch
from .._trees.limits import TreeLimits
from ..errors import SamplerFault
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
    "ROBUSTNESS_KINDS",
    "WEIGHTED_RESIDUAL",
    "WITHOUT_REPLACEMENT",
    "case_fingerprint",
    "case_json",
    "fixed_tree",
    "lumped_model",
    "outside_drafting",
    "posed_parents",
    "production_actives",
    "production_tree",
    "rows_slice",
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
AUDIT_ONLY = {"siblings-64": TreeShape((-1,) + (0,) * 64, 80), "nodes-64": TreeShape((-1,) + (0,) * 36 + (1,) * 28, 48)}
#: The one algorithm defined on chains only.
BLOCK = "block-verification"


# --- fixed cases: trees given with their candidates ------------------------------------------


WITHOUT_REPLACEMENT = "without-replacement"
#: Trees a without-replacement drafter cannot produce (kind -> why): its law checks never pose them;
#: ``trees.robustness[kind]`` does, and judges only the contract there.
ROBUSTNESS_KINDS = {"duplicates": "duplicate siblings", "draft-zero": "a child of draft probability 0"}


def outside_drafting(tree: TreeBatch, algorithm: str | None) -> str | None:
    """Why the drafting ``algorithm`` assumes cannot produce row 0 of ``tree``, or ``None``.

    Without replacement: siblings are distinct, each of positive draft probability at its parent.
    I.i.d. drafting (SpecInfer, target-only) and block verification's chains: every tree, as posed.
    """
    if algorithm != WITHOUT_REPLACEMENT:
        return None
    seen: dict[tuple[int, int], int] = {}
    for node in range(1, int(tree.num_nodes[0])):
        parent, token = int(tree.parents[0, node]), int(tree.tokens[0, node])
        if (parent, token) in seen:
            return f"nodes {seen[parent, token]} and {node} are duplicate siblings (token {token})"
        seen[parent, token] = node
        if tree.draft_probs is not None and float(tree.draft_probs[0, parent, token]) == 0.0:
            return f"node {node} (token {token}) has draft probability 0 at its parent"
    return None


def _distinct_siblings(parents: tuple[int, ...], vocab: int, g: torch.Generator) -> torch.Tensor:
    """Tokens for the nodes of ``parents``: distinct among each node's siblings (as drawn without replacement)."""
    tokens = [-1] * len(parents)
    for parent in sorted(set(parents[1:])):
        children = [c for c, p in enumerate(parents) if p == parent and c]
        for child, token in zip(children, torch.randperm(vocab, generator=g)[: len(children)].tolist()):
            tokens[child] = int(token)
    return torch.tensor([tokens])


def fixed_tree(kind: str, seed: int, algorithm: str | None) -> TreeBatch:
    """One tree of the conditional ``kind`` with its candidates and laws, from a seeded draw.

    For a without-replacement sampler the trees of a law check are ones its drafter can produce
    (distinct siblings, no child of draft probability 0: :func:`outside_drafting`); the
    ``draft-zero`` kind is the ``zeros`` tree with its child of draft probability 0 kept.
    """
    draft_zero = kind == "draft-zero" or (kind == "zeros" and algorithm != WITHOUT_REPLACEMENT)
    kind = "zeros" if kind == "draft-zero" else kind
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
        if (
            algorithm == WITHOUT_REPLACEMENT
            and kind != "duplicates"
            and max(shape.parents.count(p) for p in set(shape.parents[1:])) <= v
        ):
            tokens = _distinct_siblings(shape.parents, v, g)
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
        if draft_zero:
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


def posed_parents(kind: str, algorithm: str | None) -> tuple[int, ...]:
    """The parents of the tree :func:`fixed_tree` poses for ``kind`` (a chain of as many nodes for
    block verification), so a check knows its shape before it draws the tree."""
    kind = "zeros" if kind == "draft-zero" else kind
    shape = TREE_SHAPES[CONDITIONAL_KINDS[kind]] if kind in CONDITIONAL_KINDS else AUDIT_ONLY[kind]
    if algorithm == BLOCK or kind in ("chain", "weighted-residual"):
        return tuple(range(-1, shape.nodes - 1))
    return shape.parents


# --- production vocabularies: a few active tokens and a lumped tail --------------------------


def _free(ids: list[int], vocab: int, limits: TreeLimits | None) -> list[int]:
    """``ids`` with each reserved one moved to the nearest id neither reserved nor already taken."""
    if limits is None or not limits.reserved:
        return ids
    out: list[int] = []
    for token in ids:
        out.append(limits.free_near(token, vocab, out))
    return out


def production_actives(vocab: int, limits: TreeLimits | None = None) -> torch.Tensor:
    """The conditional case's active tokens: past the first 1,024-token tile, the middle, the last id
    (each moved to the nearest free id where the sampler reserves it: candidates are never reserved)."""
    return torch.tensor(
        sorted(set(_free(sorted({1024 % vocab, vocab // 2, vocab - 1}), vocab, limits))), dtype=torch.int64
    )


def production_tree(vocab: int, seed: int, limits: TreeLimits | None = None) -> TreeBatch:
    """A root with two children and a grandchild, the candidates the active tokens, every law 90%
    on the active tokens (random) and 10% spread over all ``V`` (so the tail is one cell per node)."""
    g = torch.Generator().manual_seed(seed)
    actives = production_actives(vocab, limits)
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
    #: token ids the draft gives no mass (the sampler reserves them: never a candidate)
    reserved: tuple[int, ...] = ()

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
        row = (
            self.classes(prefix[:, -1]) if prefix.shape[1] else torch.full((prefix.shape[0],), a + 1, dtype=torch.int64)
        )
        mass = table[row]  # [B, A+1]
        out = (mass[:, a:] / (self.vocab - a)).expand(-1, self.vocab).clone()
        out[:, self.actives] = mass[:, :a]
        return out

    def target(self, prefix: torch.Tensor) -> torch.Tensor:
        return self._law(self.target_classes, prefix)

    def draft(self, prefix: torch.Tensor) -> torch.Tensor:
        law = self._law(self.draft_classes, prefix)
        return TreeLimits(reserved=self.reserved).drafts_without_reserved(law)

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


def lumped_model(vocab: int, seed: int, limits: TreeLimits | None = None) -> LumpedModel:
    """Active tokens past the first 1,024-token tile and at the last index, and a diffuse tail
    (the draft's tail without the ids the sampler reserves, and no active token reserved)."""
    g = torch.Generator().manual_seed(seed)
    actives = torch.tensor(sorted(_free(sorted({1024 % vocab, vocab - 1}), vocab, limits)), dtype=torch.int64)
    a = actives.numel()

    def table() -> torch.Tensor:
        law = random_laws(g, (a + 2, a + 1))
        return 0.8 * law + 0.2 * torch.eye(a + 1, dtype=torch.float64)[torch.arange(a + 2) % (a + 1)]

    return LumpedModel(vocab, actives, table(), table(), () if limits is None else limits.reserved)


# --- a failing case, for the report --------------------------------------------------------


def rows_slice(tree: TreeBatch, row: int) -> TreeBatch:
    """Row ``row`` of a batch, as a batch of one."""
    draft = None if tree.draft_probs is None else tree.draft_probs[row : row + 1]
    return TreeBatch(tree.parents[row : row + 1], tree.tokens[row : row + 1], tree.target_probs[row : row + 1], draft)


def case_json(
    tree: TreeBatch,
    *,
    counts: np.ndarray | None = None,
    expected: np.ndarray | None = None,
    fault: SamplerFault | None = None,
    columns: int | None = None,
) -> TreeCase:
    """One tree for the report's drawing (``specverify.report._tree_svg``): nodes, tokens, the
    failing output's path and token, how often paths ended at each node against the exact law, and
    (V <= :data:`ROWS_MAX_VOCAB`) the target and draft rows at the nodes involved with the smallest
    difference between them."""
    real = int(tree.num_nodes[0])
    out: TreeCase = {
        "parents": tree.parents[0, :real].tolist(),
        "tokens": tree.tokens[0, :real].tolist(),
        "vocab": tree.vocab,
    }
    details = (fault.details or {}) if fault is not None else {}
    if "failing_path" in details:
        out["path"], out["token"] = details["failing_path"], details["failing_token"]
        out["breaks_at"] = _breaks_at(tree, out["path"], out["token"])
    if counts is not None and expected is not None:
        observed = counts.reshape(tree.width, columns or tree.vocab)[:real].sum(axis=1)
        wanted = expected.reshape(tree.width, columns or tree.vocab)[:real].sum(axis=1)
        out["ends_observed"] = observed.tolist()
        out["ends_expected"] = wanted.tolist()
    nodes, why = _nodes_involved(tree, out, real)
    if nodes and tree.vocab <= ROWS_MAX_VOCAB:  # what decides the case: the laws at the nodes involved
        draft = tree.draft_probs
        out["rows"] = [
            {
                "node": n,
                "target": tree.target_probs[0, n].tolist(),
                "draft": None if draft is None else draft[0, n].tolist(),
            }
            for n in nodes
        ]
        out["rows_of"] = why
        out["smallest_difference"] = (
            None if draft is None else _smallest_difference(tree.target_probs[0, nodes], draft[0, nodes])
        )
    mechanism = _mechanism(tree, out, real, fault)
    if mechanism:
        out["mechanism"] = mechanism
    return out


def _mechanism(tree: TreeBatch, case: TreeCase, real: int, fault: SamplerFault | None) -> str | None:
    """How the case fails, in words: which step of the walk (an accepted child, the residual after
    a node's children are rejected, the bonus after a leaf) produced what the law forbids."""
    parents = tree.parents[0, :real].tolist()
    leaf = lambda n: n not in parents[1:]  # noqa: E731
    if "path" in case:
        path = [n for n in case["path"] if 0 <= n < real]
        token, at = case.get("token", -1), case.get("breaks_at")
        last = path[-1] if path else 0
        after = (
            f"the bonus after a leaf (node {last}), drawn from the target there"
            if leaf(last)
            else f"the residual after node {last}'s children were rejected"
        )
        if at is not None and at > 0 and float(tree.target_probs[0, parents[at], tree.tokens[0, at]]) == 0.0:
            return (
                f"an accepted child: node {at} (token {int(tree.tokens[0, at])}) was accepted although its target "
                f"probability at node {parents[at]} is 0"
            )
        if at is not None:
            return f"the token after the path: {token} was emitted as {after}, where its target probability is 0"
        if fault is not None:
            return (
                f"{fault.violation.rule}: the output after path {path} (ending at "
                f"{'a leaf' if leaf(last) else 'an inner node'}, node {last}) breaks the contract"
            )
    if "ends_observed" in case and "ends_expected" in case:
        gaps = np.abs(np.asarray(case["ends_observed"], dtype=float) - np.asarray(case["ends_expected"], dtype=float))
        node = int(gaps.argmax())
        how = (
            f"a leaf: its token accepted, then the bonus drawn from the target at node {node}"
            if leaf(node)
            else f"{'the root' if node == 0 else 'an inner node'}: every child of node {node} rejected, then the "
            "residual drawn there"
        )
        return (
            f"paths ending at node {node}, {how}: {case['ends_observed'][node]} observed against "
            f"{case['ends_expected'][node]:.1f} expected"
        )
    return None


#: The largest vocabulary whose target and draft rows a failing tree case carries.
ROWS_MAX_VOCAB = 64


def _nodes_involved(tree: TreeBatch, case: TreeCase, real: int) -> tuple[list[int], str]:
    """The nodes whose laws decide a case, root first, and which they are in words: a fault's
    failing path, else the path to the node where paths ended farthest from the exact law."""
    if "path" in case:
        return [n for n in case["path"] if 0 <= n < real], "the nodes on the failing output's path"
    if "ends_observed" in case and "ends_expected" in case:
        gaps = np.abs(np.asarray(case["ends_observed"], dtype=float) - np.asarray(case["ends_expected"], dtype=float))
        node = int(gaps.argmax())
        farthest = node
        nodes = [node]
        while node > 0:
            node = int(tree.parents[0, node])
            nodes.append(node)
        return nodes[::-1], f"the nodes on the path to node {farthest}, where paths ended farthest from the exact law"
    return [], ""


def _smallest_difference(target: torch.Tensor, draft: torch.Tensor) -> float | None:
    """The smallest nonzero |target - draft| over the rows' tokens: two laws this close make a
    verdict turn on rounding (a ratio of 1 - 1e-8 is a coin's, not a law's, decision)."""
    gaps = (target - draft).abs()
    gaps = gaps[gaps > 0]
    return float(gaps.min()) if gaps.numel() else None


def _breaks_at(tree: TreeBatch, path: list[int], token: int) -> int | None:
    """The first node of a failing output's path the target forbids (an accepted token of target
    probability 0 at its parent), or the last node if what it emits there is forbidden."""
    steps = [n for n in path if 0 <= n < tree.width]
    for parent, node in zip(steps, steps[1:]):
        if float(tree.target_probs[0, parent, tree.tokens[0, node]]) == 0.0:
            return node
    if steps and 0 <= token < tree.vocab and float(tree.target_probs[0, steps[-1], token]) == 0.0:
        return steps[-1]
    return None


def case_fingerprint(case: Any) -> str:
    """A generated tree's identity: its bytes (equal trees are screened once)."""
    tree = case.tree
    digest = hashlib.sha256()
    for tensor in (tree.parents, tree.tokens, tree.target_probs, tree.draft_probs):
        if tensor is not None:
            digest.update(tensor.contiguous().flatten().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()[:24]
