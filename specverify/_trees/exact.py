"""Exact laws of a tree verification step, by enumeration, for the lossless algorithms in use.

The outcome of one step on a tree is ``(n, t)``: the accepted path ends at node ``n`` (a path is
determined by its last node) and token ``t`` is emitted after it.  Given the tree's candidates, each
algorithm's law of ``(n, t)`` is computed two ways, as :mod:`specverify._laws.exact` does for chains:

* :func:`tree_law`: vectorised float64 torch, ``[B, N, V]``, for expected counts;
* :func:`tree_law_scalar`: plain Python over any number type; fed :class:`fractions.Fraction` it
  has no rounding at all, which is how the tests *prove* the algorithms lossless on small models.

The algorithms (``p`` the target law at the node, ``q`` its draft law; children in try order):

* ``specinfer`` (SpecInfer, arXiv 2305.09781): children drawn i.i.d. from ``q``.  ``p_1 = p``;
  child ``x_k`` is accepted with probability ``min(1, p_k(x_k) / q(x_k))``; on rejection
  ``p_{k+1} = norm([p_k - q]_+)``, ``q`` unchanged.
* ``without-replacement`` (recursive rejection sampling, Jeon et al. arXiv 2402.14160; Sequoia):
  children drawn without replacement from ``q``.  Accept with ``min(1, p_k(x_k) / q_k(x_k))``; on
  rejection ``p_{k+1} = norm([p_k - q_k]_+)`` and ``q_{k+1} = norm(q_k with x_k removed)``.
* ``target-only`` (EAGLE; SGLang with both thresholds 1): deterministic children, ``g = p``; accept
  ``x_k`` with probability ``g(x_k)``, else ``g(x_k) = 0`` and renormalise.  It is ``specinfer``
  with ``q_k`` the point mass on ``x_k``, which is how it is computed here.
* every algorithm: all children rejected, the token is drawn from the last residual; at a leaf, from
  ``p`` (the bonus).
* ``block-verification`` (Sun et al. arXiv 2403.10444), chains only, ``M_b`` the target and ``M_s``
  the draft: ``w_0 = 1``, ``w_i = min(1, w_{i-1} M_b(X_i) / M_s(X_i))``; ``Z_{i+1} = sum_x
  [w_i M_b(x | X^i) - M_s(x | X^i)]_+``; ``h_i = Z_{i+1} / (Z_{i+1} + 1 - w_i)`` for ``i < K``,
  ``h_K = w_K``; ``tau`` is the largest ``i`` with ``eta_i < h_i`` (0 if none); emit ``X^tau``, then
  a token from ``M_b(. | X^K)`` if ``tau = K``, else from ``norm([w_tau M_b(. | X^tau) - M_s(. | X^tau)]_+)``.

Conventions shared with the reference samplers: a ratio with ``q(x) = 0`` accepts iff ``p(x) > 0``;
a residual of no mass (a rejection that had probability 0, or float noise) is replaced by the law it
was computed from; ``0 / 0`` in ``h_i`` is 0.

The target's own law: with the candidates drawn as each algorithm assumes, the emitted sequence
completed to ``D + 1`` tokens by the target is distributed as ``D + 1`` tokens of the target
(:func:`drawn_emitted_law_scalar`, :func:`completed_law_scalar`); the target-only verifier has that
property for any fixed tree (:func:`fixed_emitted_law_scalar`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction
from typing import Any

import torch

from .._laws.oracle import normalise
from .contract import ALGORITHMS, TreeBatch

__all__ = [
    "accepted_law",
    "block_law",
    "block_law_scalar",
    "block_mean_accepted_scalar",
    "completed_law_scalar",
    "drawn_emitted_law_scalar",
    "drawn_mean_accepted_scalar",
    "expected_accepted",
    "fixed_emitted_law_scalar",
    "mean_accepted_scalar",
    "tree_law",
    "tree_law_scalar",
]

LawFn = Callable[[tuple[int, ...]], Sequence[Any]]
TREE_ALGORITHMS = ALGORITHMS[:3]


def _check_algorithm(algorithm: str, allowed: tuple[str, ...] = ALGORITHMS) -> None:
    if algorithm not in allowed:
        raise ValueError(f"unknown tree algorithm {algorithm!r}; choose one of {', '.join(allowed)}")


# --- vectorised float64 ----------------------------------------------------------------------


def accept_probability(p_x: torch.Tensor, q_x: torch.Tensor) -> torch.Tensor:
    """``min(1, p/q)``, with ``q = 0`` accepting iff ``p > 0``."""
    ratio = (p_x / q_x.clamp_min(torch.finfo(torch.float64).tiny)).clamp(max=1.0)
    return torch.where(q_x > 0, ratio, (p_x > 0).to(torch.float64))


def residual(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """``norm([p - q]_+)`` over the last axis, or ``p`` where that has no mass beyond float noise."""
    r = (p - q).clamp_min(0.0)
    mass = r.sum(dim=-1, keepdim=True)
    keep = mass > p.shape[-1] * torch.finfo(torch.float64).eps
    return torch.where(keep, r / mass.clamp_min(torch.finfo(torch.float64).tiny), p)


def without(q: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``norm(q with token x removed)``; all zeros if nothing is left."""
    q = q.scatter(-1, x.unsqueeze(-1), 0.0)
    mass = q.sum(dim=-1, keepdim=True)
    return torch.where(mass > 0, q / mass.clamp_min(torch.finfo(torch.float64).tiny), 0.0)


def drafts_normalised(draft: torch.Tensor) -> torch.Tensor:
    """Each draft row divided by its sum; rows of no mass (leaves) stay zero."""
    draft = draft.to(torch.float64)
    mass = draft.sum(dim=-1, keepdim=True)
    return torch.where(mass > 0, draft / mass.clamp_min(torch.finfo(torch.float64).tiny), 0.0)


def judged_against(algorithm: str, q: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The law a child ``x`` is accepted against: the draft state, or its point mass (target-only)."""
    if algorithm == "target-only":
        return torch.nn.functional.one_hot(x, q.shape[-1]).to(torch.float64)
    return q


def tree_law(tree: TreeBatch, algorithm: str) -> torch.Tensor:
    """``[B, N, V]``: probability that the path ends at node ``n`` and token ``t`` follows it."""
    _check_algorithm(algorithm)
    if algorithm == "block-verification":
        return block_law(tree)
    if algorithm != "target-only" and tree.draft_probs is None:
        raise ValueError(f"algorithm {algorithm!r} needs draft_probs")
    p_state = normalise(tree.target_probs).clone()
    q_state = drafts_normalised(tree.draft_probs) if tree.draft_probs is not None else torch.zeros_like(p_state)
    rejected = torch.ones(tree.batch, tree.width, dtype=torch.float64, device=p_state.device)
    accepted = torch.zeros_like(rejected)  # probability of accepting the node, given its parent is reached
    children = tree.children
    for r in range(children.shape[2]):  # the r-th child of every node at once
        b, n = (children[:, :, r] >= 0).nonzero(as_tuple=True)
        if b.numel() == 0:
            break
        c = children[b, n, r]
        x = tree.tokens[b, c]
        p = p_state[b, n]
        q = judged_against(algorithm, q_state[b, n], x)
        a = accept_probability(p.gather(-1, x[:, None]).squeeze(-1), q.gather(-1, x[:, None]).squeeze(-1))
        accepted[b, c] = rejected[b, n] * a
        rejected[b, n] = rejected[b, n] * (1.0 - a)
        p_state[b, n] = residual(p, q)
        if algorithm == "without-replacement":
            q_state[b, n] = without(q_state[b, n], x)
    reach = torch.zeros_like(accepted)
    reach[:, 0] = 1.0
    for i in range(1, tree.width):  # parents precede children
        parent = tree.parents[:, i].clamp_min(0)
        reach[:, i] = torch.where(tree.real[:, i], reach.gather(1, parent[:, None]).squeeze(1) * accepted[:, i], 0.0)
    return torch.where(tree.real.unsqueeze(-1), (reach * rejected).unsqueeze(-1) * p_state, 0.0)


def block_law(tree: TreeBatch) -> torch.Tensor:
    """``[B, K+1, V]`` on path trees: probability that block verification keeps ``tau`` drafts, then ``t``."""
    if not tree.is_chain or not bool((tree.num_nodes == tree.width).all()):
        raise ValueError("block verification is defined on chains: a batch of full path trees (TreeBatch.from_chain)")
    if tree.draft_probs is None:
        raise ValueError("block verification needs draft_probs")
    k = tree.width - 1
    p = normalise(tree.target_probs)
    q = drafts_normalised(tree.draft_probs)
    h, weight = _block_thresholds(p, q, tree.tokens[:, 1:])
    # P(tau = i) = h_i prod_{j > i} (1 - h_j), with h_0 = 1
    h_full = torch.cat([torch.ones_like(h[:, :1]), h], dim=1)
    later = torch.cat(
        [torch.flip(torch.cumprod(torch.flip(1.0 - h, [1]), dim=1), [1]), torch.ones_like(h[:, :1])], dim=1
    )
    stop = h_full * later
    # the residual at tau < K; at tau = K the "residual" against a zero draft row is p_K itself
    q_pad = torch.cat([q[:, :k], torch.zeros_like(q[:, :1])], dim=1)
    r = (weight.unsqueeze(-1) * p - q_pad).clamp_min(0.0)
    mass = r.sum(dim=-1, keepdim=True)
    dist = torch.where(
        mass > p.shape[-1] * torch.finfo(torch.float64).eps, r / mass.clamp_min(torch.finfo(torch.float64).tiny), p
    )
    return stop.unsqueeze(-1) * dist


def _block_thresholds(p: torch.Tensor, q: torch.Tensor, drafts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``h [B, K]`` (``h_1 .. h_K``) and the weights ``w [B, K+1]`` (``w_0 .. w_K``) of block verification."""
    batch, k = drafts.shape
    weights = [torch.ones(batch, dtype=torch.float64, device=p.device)]
    for i in range(1, k + 1):  # w_i = min(1, w_{i-1} p_{i-1}(X_i) / q_{i-1}(X_i))
        x = drafts[:, i - 1 : i]
        num = weights[-1] * p[:, i - 1].gather(-1, x).squeeze(-1)
        den = q[:, i - 1].gather(-1, x).squeeze(-1)
        weights.append(accept_probability(num, den))
    weight = torch.stack(weights, dim=1)
    z = (weight[:, 1:k, None] * p[:, 1:k] - q[:, 1:k]).clamp_min(0.0).sum(dim=-1)
    denom = z + 1.0 - weight[:, 1:k]
    h_inner = torch.where(denom > 0, z / denom.clamp_min(torch.finfo(torch.float64).tiny), 0.0).clamp(
        0.0, 1.0
    )  # (z + 1) - w rounds
    return torch.cat([h_inner, weight[:, k:]], dim=1), weight


def accepted_law(tree: TreeBatch, law: torch.Tensor) -> torch.Tensor:
    """``[B, D+1]``: the law of the number of accepted nodes after the root (for ``stats.mean_test``)."""
    depth = tree.node_depth.clamp_min(0)
    out = torch.zeros(tree.batch, tree.depth + 1, dtype=torch.float64, device=law.device)
    return out.scatter_add_(1, depth, law.sum(dim=-1))


def expected_accepted(tree: TreeBatch, law: torch.Tensor) -> torch.Tensor:
    """``[B]``: the mean number of accepted nodes after the root under ``law [B, N, V]``."""
    return (law.sum(dim=-1) * tree.node_depth.clamp_min(0)).sum(dim=-1)


# --- scalar, any number type -----------------------------------------------------------------


def _normalised(row: Sequence[Any]) -> list[Any]:
    total = sum(row)
    return [x / total for x in row] if total != 0 else [0 * x for x in row]


def _accept(p_x: Any, q_x: Any) -> Any:
    if q_x == 0:
        return 1 if p_x > 0 else 0
    return min(1, p_x / q_x)


def _residual(p: Sequence[Any], q: Sequence[Any]) -> list[Any]:
    r = [max(a - b, 0) for a, b in zip(p, q)]
    total = sum(r)
    return [x / total for x in r] if total != 0 else list(p)


def tree_law_scalar(
    parents: Sequence[int],
    tokens: Sequence[int],
    target_rows: Sequence[Sequence[Any]],
    draft_rows: Sequence[Sequence[Any]] | None,
    algorithm: str,
) -> dict[tuple[int, int], Any]:
    """One tree's law of ``(n, t)`` in any exact number type (``Fraction`` for proofs).

    ``parents``, ``tokens`` and the rows cover the real nodes only (no padding).
    """
    _check_algorithm(algorithm)
    if algorithm == "block-verification":
        k = len(parents) - 1
        if list(parents) != list(range(-1, k)):
            raise ValueError("block verification is defined on chains")
        assert draft_rows is not None
        return block_law_scalar(target_rows, draft_rows[:k], tokens[1:])
    children: list[list[int]] = [[] for _ in parents]
    for node in range(1, len(parents)):
        children[parents[node]].append(node)
    vocab = len(target_rows[0])
    law: dict[tuple[int, int], Any] = {}

    def visit(node: int, reach: Any) -> None:
        p = _normalised(target_rows[node])
        q = _normalised(draft_rows[node]) if draft_rows is not None and children[node] else None
        for child in children[node]:
            if reach == 0:
                return
            x = tokens[child]
            qk = [int(v == x) for v in range(vocab)] if algorithm == "target-only" else q
            assert qk is not None, f"algorithm {algorithm!r} needs draft rows"
            a = _accept(p[x], qk[x])
            visit(child, reach * a)
            reach = reach * (1 - a)
            p = _residual(p, qk)
            if algorithm == "without-replacement":
                q = _normalised([0 * v if i == x else v for i, v in enumerate(qk)])
        if reach == 0:
            return
        for t, mass in enumerate(p):
            if mass != 0:
                law[(node, t)] = law.get((node, t), 0) + reach * mass

    visit(0, Fraction(1) if isinstance(target_rows[0][0], Fraction) else 1.0)
    return law


def block_law_scalar(
    target_rows: Sequence[Sequence[Any]], draft_rows: Sequence[Sequence[Any]], drafts: Sequence[int]
) -> dict[tuple[int, int], Any]:
    """Block verification's law of ``(tau, t)`` on one chain, in any exact number type."""
    k = len(drafts)
    p = [_normalised(row) for row in target_rows]
    q = [_normalised(row) for row in draft_rows]
    w = [Fraction(1) if isinstance(p[0][0], Fraction) else 1.0]
    for i in range(1, k + 1):
        w.append(_accept(w[-1] * p[i - 1][drafts[i - 1]], q[i - 1][drafts[i - 1]]))
    h: list[Any] = [1]
    for i in range(1, k):
        z = sum(max(w[i] * a - b, 0) for a, b in zip(p[i], q[i]))
        denom = z + 1 - w[i]
        h.append(z / denom if denom != 0 else 0)
    h.append(w[k])
    law: dict[tuple[int, int], Any] = {}
    for tau in range(k + 1):
        stop = h[tau]
        for j in range(tau + 1, k + 1):
            stop = stop * (1 - h[j])
        if stop == 0:
            continue
        r = [max(w[tau] * a - b, 0) for a, b in zip(p[tau], q[tau])] if tau < k else p[k]
        total = sum(r)
        dist = [x / total for x in r] if total != 0 else p[tau]  # no residual mass: p, as the float law
        for t, mass in enumerate(dist):
            if mass != 0:
                law[(tau, t)] = law.get((tau, t), 0) + stop * mass
    return law


def mean_accepted_scalar(law: dict[tuple[int, int], Any], parents: Sequence[int]) -> Any:
    """The mean number of accepted nodes after the root under a scalar law of ``(n, t)``."""
    depth = [0] * len(parents)
    for node in range(1, len(parents)):
        depth[node] = depth[parents[node]] + 1
    return sum(mass * depth[node] for (node, _), mass in law.items())


# --- the target's own law, candidates drawn as each algorithm assumes ------------------------


def _prefixes(parents: Sequence[int], tokens: Sequence[int]) -> list[tuple[int, ...]]:
    """The token sequence from the root (exclusive) to each node (inclusive)."""
    out: list[tuple[int, ...]] = [()]
    for node in range(1, len(parents)):
        out.append(out[parents[node]] + (tokens[node],))
    return out


def fixed_emitted_law_scalar(
    target: LawFn, parents: Sequence[int], tokens: Sequence[int], vocab: int, algorithm: str, draft: LawFn | None = None
) -> dict[tuple[int, ...], Any]:
    """Law of the emitted sequence (accepted tokens, then the last) of one fixed tree.

    ``target(prefix)`` / ``draft(prefix)`` give the next-token laws after a prefix of tokens, so the
    tree's laws are those of a model, as an engine's are.  ``tokens[0]`` is not read.
    """
    prefixes = _prefixes(parents, tokens)
    target_rows = [list(target(prefix)) for prefix in prefixes]
    draft_rows = None if draft is None else [list(draft(prefix)) for prefix in prefixes]
    law: dict[tuple[int, ...], Any] = {}
    for (node, t), mass in tree_law_scalar(parents, tokens, target_rows, draft_rows, algorithm).items():
        key = prefixes[node] + (t,)
        law[key] = law.get(key, 0) + mass
    return law


def _drawn_trees(
    draft: LawFn, parents: Sequence[int], vocab: int, algorithm: str
) -> Iterator[tuple[Any, tuple[int, ...]]]:
    """Every assignment of candidate tokens with its probability, children drawn from the draft
    at their parent: i.i.d. (``specinfer``) or without replacement (``without-replacement``)."""
    _check_algorithm(algorithm, ("specinfer", "without-replacement"))
    for assignment in itertools.product(range(vocab), repeat=len(parents) - 1):
        tokens = (-1, *assignment)
        prefixes = _prefixes(parents, tokens)
        weight: Any = Fraction(1)
        removed: dict[int, list[int]] = {}
        for node in range(1, len(parents)):
            parent = parents[node]
            q = _normalised(list(draft(prefixes[parent])))
            if algorithm == "without-replacement":
                taken = removed.setdefault(parent, [])
                q = _normalised([0 * v if i in taken else v for i, v in enumerate(q)])
                taken.append(tokens[node])
            weight = weight * q[tokens[node]]
            if weight == 0:
                break
        if weight != 0:
            yield weight, tokens


def drawn_emitted_law_scalar(
    target: LawFn, draft: LawFn, parents: Sequence[int], vocab: int, algorithm: str
) -> dict[tuple[int, ...], Any]:
    """Law of the emitted sequence when the harness draws the candidates as ``algorithm`` assumes."""
    law: dict[tuple[int, ...], Any] = {}
    for weight, tokens in _drawn_trees(draft, parents, vocab, algorithm):
        for key, mass in fixed_emitted_law_scalar(target, parents, tokens, vocab, algorithm, draft).items():
            law[key] = law.get(key, 0) + weight * mass
    return law


def drawn_mean_accepted_scalar(target: LawFn, draft: LawFn, parents: Sequence[int], vocab: int, algorithm: str) -> Any:
    """Mean accepted nodes after the root, over candidates drawn as ``algorithm`` assumes."""
    total: Any = 0
    for weight, tokens in _drawn_trees(draft, parents, vocab, algorithm):
        prefixes = _prefixes(parents, tokens)
        law = tree_law_scalar(
            parents, tokens, [list(target(x)) for x in prefixes], [list(draft(x)) for x in prefixes], algorithm
        )
        total = total + weight * mean_accepted_scalar(law, parents)
    return total


def block_emitted_law_scalar(target: LawFn, draft: LawFn, vocab: int, k: int) -> dict[tuple[int, ...], Any]:
    """Law of block verification's emitted sequence, drafts drawn from the draft chain."""
    law: dict[tuple[int, ...], Any] = {}
    for drafts, weight in _drawn_chains(draft, vocab, k):
        p = [list(target(drafts[:i])) for i in range(k + 1)]
        q = [list(draft(drafts[:i])) for i in range(k)]
        for (tau, t), mass in block_law_scalar(p, q, drafts).items():
            key = drafts[:tau] + (t,)
            law[key] = law.get(key, 0) + weight * mass
    return law


def block_mean_accepted_scalar(target: LawFn, draft: LawFn, vocab: int, k: int) -> Any:
    """Block verification's mean accepted drafts, drafts drawn from the draft chain."""
    total: Any = 0
    for drafts, weight in _drawn_chains(draft, vocab, k):
        p = [list(target(drafts[:i])) for i in range(k + 1)]
        q = [list(draft(drafts[:i])) for i in range(k)]
        total = total + weight * sum(mass * tau for (tau, _), mass in block_law_scalar(p, q, drafts).items())
    return total


def _drawn_chains(draft: LawFn, vocab: int, k: int) -> Iterator[tuple[tuple[int, ...], Any]]:
    for drafts in itertools.product(range(vocab), repeat=k):
        weight: Any = Fraction(1)
        for i in range(k):
            weight = weight * _normalised(list(draft(drafts[:i])))[drafts[i]]
        if weight != 0:
            yield drafts, weight


def completed_law_scalar(
    emitted: dict[tuple[int, ...], Any], target: LawFn, vocab: int, length: int
) -> dict[tuple[int, ...], Any]:
    """An emitted law completed to ``length`` tokens by the target; lossless means it equals
    :func:`specverify._laws.exact.target_law_scalar` of that length."""
    law: dict[tuple[int, ...], Any] = {}
    for sequence, mass in emitted.items():
        for tail in itertools.product(range(vocab), repeat=length - len(sequence)):
            full = sequence + tail
            value = mass
            for i in range(len(sequence), length):
                value = value * _normalised(list(target(full[:i])))[full[i]]
            if value != 0:
                law[full] = law.get(full, 0) + value
    return law
