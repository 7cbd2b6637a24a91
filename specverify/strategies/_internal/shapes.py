"""Production shapes and float edges: structured step inputs where kernels break.

A *structured* case puts its decisive mass on a few *active* tokens placed across tiles and index
boundaries (ids around 1,024, 4,096, 8,192, 32,768, 65,536, 131,072 and the last ids of the
vocabulary) and spreads a diffuse tail of controlled mass over every other token.  Its law is
tested on the active tokens plus a few *lumped* tail cells (one per id range between boundaries),
so the sample size a test needs does not grow with the vocabulary, while a kernel that loses a
tile, wraps an index or mis-sizes a per-position array still moves mass between cells.

Inputs are built from constants and a handful of scatters, never from dense random tensors: the
harness's cost is one write of each input.

*Edge* cases (:func:`edge_case`) are float edges as law tests: a rejection whose residual vanishes
in float (sub-ulp tails, exact zeros next to sub-ulp mass), one-ulp and near-equal laws, bf16 and
fp16 rounding.  Their exact law follows the harness's convention for a residual of float-noise
mass (the token is drawn from the target row; see ``docs/statistics.md``).
"""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import strategies as st

from ..._laws.cases import StepCase

__all__ = [
    "BOUNDARIES",
    "COMMON_VOCABS",
    "EDGE_LAW_KINDS",
    "SMALL_RESIDUAL",
    "boundary_ids",
    "cell_map",
    "edge_case",
    "large_vocab_cases",
    "structured_case",
]

#: Tile and index boundaries kernels are written around (a power of two, or a narrow type's range).
BOUNDARIES = (1_024, 4_096, 8_192, 32_768, 65_536, 131_072)
#: Vocabulary sizes of models in use (Llama 2, Llama 3, Qwen 2, Gemma) and the largest tested.
COMMON_VOCABS = (32_000, 128_256, 151_936, 256_000, 262_144)
#: The float-edge kinds tested as laws.
EDGE_LAW_KINDS = (
    "sub-ulp-residual",
    "zeros-next-to-sub-ulp",
    "small-residual",
    "one-ulp",
    "near-equal",
    "bfloat16",
    "float16",
)
#: Residual mass of the ``small-residual`` case: above the float-noise level of its row
#: (V * float64 eps, 2.3e-13 at V = 1,025), below the 1e-12 some fallbacks use.
SMALL_RESIDUAL = 5e-13


def boundary_ids(vocab: int) -> list[int]:
    """Ids on both sides of every boundary inside the vocabulary, and its last two ids."""
    ids = {i for b in BOUNDARIES for i in (b - 1, b, b + 1) if i < vocab - 2}
    ids |= {max(0, vocab - 2), vocab - 1}
    return sorted(ids)


def _tail_edges(vocab: int) -> list[int]:
    return [0, *[b for b in BOUNDARIES if b < vocab], vocab]


def cell_map(active: torch.Tensor, vocab: int) -> tuple[torch.Tensor, list[str]]:
    """``([V] cell of each token, labels)``: each active token its own cell, the rest lumped by range.

    Tail cells are the id ranges between consecutive boundaries (``[0, 1024)``, ``[1024, 4096)``,
    ...), each without its active tokens; empty ranges get no cell.
    """
    active = torch.unique(active.to(torch.int64))
    edges = _tail_edges(vocab)
    ranges = torch.bucketize(torch.arange(vocab), torch.tensor(edges[1:-1]), right=True)
    is_active = torch.zeros(vocab, dtype=torch.bool)
    is_active[active] = True
    present = sorted(set(ranges[~is_active].tolist()))
    cells = torch.empty(vocab, dtype=torch.int64)
    cells[active] = torch.arange(active.numel())
    renumber = torch.full((len(edges) - 1,), -1, dtype=torch.int64)
    renumber[torch.tensor(present, dtype=torch.int64)] = active.numel() + torch.arange(len(present))
    cells[~is_active] = renumber[ranges[~is_active]]
    labels = [f"token {int(t)}" for t in active] + [f"tail [{edges[r]:,}, {edges[r + 1]:,})" for r in present]
    return cells, labels


def structured_case(
    vocab: int,
    k: int,
    seed: int,
    *,
    actives: int = 4,
    tail_mass: tuple[float, float] = (0.3, 0.1),
    accept_until: int = 0,
    bonus_tail: float | None = None,
    precision: str = "float32",
    label: str = "structured",
) -> StepCase:
    """A step of ``K`` drafts over ``V`` tokens with its mass on boundary tokens and diffuse tails.

    Every position draws ``actives`` ids from :func:`boundary_ids`, the last id always among them
    (position 0 also holds an id >= 32,768 where the vocabulary has one); the draft is the first
    id drawn, never the forced ones, so the last ids carry residual and bonus mass.  Where the
    vocabulary has a boundary id >= 32,768 besides the forced ones, position 0's draft is one of
    them: a kernel that reads a draft's id through a narrow type is given one it cannot hold.  The target's tail holds
    ``tail_mass[0]`` spread evenly over the other tokens, the draft's ``tail_mass[1]``, so a
    rejection emits a tail token with real probability and the tail cells see it.  Draft ``i`` is
    the position's first active token (``bonus_tail``, if given, replaces the tail mass of the
    bonus row ``K``; 0 leaves it exact zeros); for ``i < accept_until`` the draft gives it less mass than
    the target (accepted with probability 1, so later positions are reached often), from there on
    twice the target's (accepted with probability about 1/2, so residuals are drawn from).
    """
    rng = np.random.default_rng(seed)
    pool = np.array(boundary_ids(vocab))
    target = torch.empty((k + 1, vocab), dtype=torch.float64)
    draft = torch.empty((k, vocab), dtype=torch.float64)
    drafts = torch.empty(k, dtype=torch.int64)
    for i in range(k + 1):  # over positions: a few scatters each
        m = min(actives, pool.size)
        # every position holds the last id (not drafted); position 0 also an id >= 32,768
        must = [vocab - 1] + ([int(pool[pool >= 32_768][0])] if i == 0 and (pool >= 32_768).any() else [])
        rest = [x for x in rng.permutation(pool).tolist() if x not in must]
        if i == 0:  # a draft id past the int16 range first, where there is one
            rest.sort(key=lambda x: x < 32_768)  # stable: the permutation's order within each group
        ids = np.array(rest[: max(1, m - len(must))] + must)[:m] if rest else np.array(must[:m])
        m = ids.size
        ids_t = torch.from_numpy(ids.astype(np.int64))
        w_p = rng.uniform(0.5, 1.5, size=m)
        tail = tail_mass[0] if i < k or bonus_tail is None else bonus_tail
        w_p = (1.0 - tail) * w_p / w_p.sum()
        target[i].fill_(tail / (vocab - m))
        target[i, ids_t] = torch.from_numpy(w_p)
        if i == k:
            break
        w_q = rng.uniform(0.2, 1.8, size=m)
        w_q = (1.0 - tail_mass[1]) * w_q / w_q.sum()
        # the draft token under-weighted before accept_until (accepted with probability 1), over-
        # weighted from there on (accepted with probability 1/2, so the residual is drawn from)
        w_q[0] = 0.8 * w_p[0] if i < accept_until else min(2.0 * w_p[0], 0.9 * (1.0 - tail_mass[1]))
        if m > 1:
            w_q[1:] *= (1.0 - tail_mass[1] - w_q[0]) / w_q[1:].sum()
        draft[i].fill_(tail_mass[1] / (vocab - m))
        draft[i, ids_t] = torch.from_numpy(w_q)
        drafts[i] = int(ids[0])
    case = StepCase(target, draft, drafts, label=label, precision=precision)
    return _rounded(case, precision)


def _rounded(case: StepCase, precision: str) -> StepCase:
    if precision == "float64":
        return case
    dtype = getattr(torch, precision)
    return StepCase(
        case.target_probs.to(dtype).to(torch.float64),
        case.draft_probs.to(dtype).to(torch.float64),
        case.draft_tokens,
        label=case.label,
        precision=precision,
    )


def active_tokens(case: StepCase, threshold: float = 1e-3) -> torch.Tensor:
    """Tokens holding at least ``threshold`` of some row's mass, and every draft token."""
    heavy = (case.target_probs >= threshold).any(0) | (case.draft_probs >= threshold).any(0)
    return torch.unique(torch.cat([heavy.nonzero()[:, 0], case.draft_tokens]))


def edge_case(kind: str, vocab: int, seed: int = 0) -> StepCase:
    """A float edge as a law test (``K = 2``).

    * ``sub-ulp-residual``: one dominant token (the last id), tails of 1e-20 in the target and
      2e-20 in the draft; the first draft is a tail token, rejected half the time, and its
      residual rounds to exactly zero: the token emitted then shows the fallback.  The later rows
      have a law of their own (token 3 holds 0.6 of it; the draft's row 1 the same, so its draft is
      accepted): a fallback that draws from another position's row than the rejection's shows too.
    * ``zeros-next-to-sub-ulp``: the same with exact zeros in the target (token 0 among them) and a
      first draft the target forbids (rejected always), the draft holding 1e-20 there.
    * ``small-residual``: a residual of mass 5e-13 (above the row's float noise, V * eps): the
      first draft holds 5e-13 of the draft row and none of the target's (rejected always), and
      the residual is token 1's 5e-13 of the target.  A fallback with a larger noise threshold
      draws from the target row instead: a law difference on an event of probability 5e-13.
    * ``one-ulp``: the draft one float32 ulp from the target on every token.
    * ``near-equal``: the draft within a relative 1e-6 of the target.
    * ``bfloat16``, ``float16``: smooth laws rounded to the precision (not renormalised; fp16
      flushes the smallest entries to exact zeros).
    """
    rng = np.random.default_rng(seed)
    k = 2
    if kind in ("sub-ulp-residual", "zeros-next-to-sub-ulp"):
        top = vocab - 1
        p = torch.full((k + 1, vocab), 1e-20, dtype=torch.float64)
        q = torch.full((k, vocab), 2e-20, dtype=torch.float64)
        p[:, top], q[:, top] = 1.0, 1.0
        tail = int(rng.integers(1, vocab - 1))
        drafts = torch.tensor([tail, top])
        if kind == "zeros-next-to-sub-ulp":
            zeros = torch.arange(0, vocab - 1, 2)  # token 0 and every even id below the top
            p[:, zeros] = 0.0
            drafts[0] = 0
            # a second live token so that the fallback's law is not a point mass
            p[:, 1], q[:, 1] = 0.25, 0.25
        p[1:, 3], q[1, 3] = 1.5, 1.5  # rows after the rejection's differ from its row
        return StepCase(p, q, drafts, label=kind, precision="float64")
    if kind == "small-residual":
        top = vocab - 1
        p = torch.zeros((k + 1, vocab), dtype=torch.float64)
        q = torch.zeros((k, vocab), dtype=torch.float64)
        tail = int(rng.integers(2, vocab - 1))
        p[:, top], q[:, top] = 1.0, 1.0
        p[0, 1], q[0, tail] = SMALL_RESIDUAL, SMALL_RESIDUAL  # equal row sums: the top tokens agree exactly
        p[1:, 3], q[1, 3] = 1.5, 1.5
        return StepCase(p, q, torch.tensor([tail, top]), label=kind, precision="float64")
    smooth = torch.from_numpy(rng.uniform(1.0, 3.0, size=(k + 1, vocab)))
    p = smooth / smooth.sum(-1, keepdim=True)
    if kind == "one-ulp":
        p32 = p.to(torch.float32)
        up = torch.from_numpy(rng.integers(0, 2, size=(k, vocab)).astype(bool))
        q32 = torch.nextafter(p32[:k], torch.where(up, 1.0, 0.0).to(torch.float32))
        drafts = torch.from_numpy(rng.integers(0, vocab, size=k))
        return StepCase(p32.double(), q32.double(), drafts, label=kind, precision="float32")
    if kind == "near-equal":
        sign = torch.from_numpy(rng.integers(-1, 2, size=(k, vocab)).astype(np.float64))
        q = p[:k] * (1.0 + 4e-7 * sign)
        drafts = torch.from_numpy(rng.integers(0, vocab, size=k))
        return StepCase(p, q / q.sum(-1, keepdim=True), drafts, label=kind, precision="float64")
    if kind in ("bfloat16", "float16"):
        # peaked laws so that fp16 flushes the tail: a few heavy tokens, the rest near 1e-8
        weights = torch.from_numpy(rng.uniform(0.0, 1.0, size=(2 * k + 1, vocab))) ** 8 * 1e-3
        heavy = torch.from_numpy(rng.integers(0, vocab, size=(2 * k + 1, 4)))
        weights.scatter_(1, heavy, torch.from_numpy(rng.uniform(0.5, 1.5, size=(2 * k + 1, 4))))
        laws = weights / weights.sum(-1, keepdim=True)
        p, q = laws[: k + 1], laws[k + 1 :]
        drafts = heavy[k + 1 :, 0]
        dtype = getattr(torch, kind)
        return StepCase(p.to(dtype).double(), q.to(dtype).double(), drafts, label=kind, precision=kind)
    raise ValueError(f"unknown edge kind {kind!r}; choose one of {', '.join(EDGE_LAW_KINDS)}")


def large_vocab_cases(
    vocabs: tuple[int, ...] = COMMON_VOCABS, max_k: int = 16, precision: str = "float32"
) -> st.SearchStrategy[StepCase]:
    """Hypothesis strategy over :func:`structured_case` at the given vocabulary sizes."""
    return st.builds(
        lambda vocab, k, seed, accept_until: structured_case(
            vocab, k, seed, accept_until=accept_until, precision=precision
        ),
        st.sampled_from(vocabs),
        st.integers(1, max_k),
        st.integers(0, 2**32 - 1),
        st.integers(0, max_k),
    )
