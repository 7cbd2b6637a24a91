"""Step cases and model cases, ordinary and on the edges real engines fall off."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from ..._cases import ModelCase, StepCase
from ..._models import ChainModel, TableModel
from .vectors import probability_vectors, round_to

__all__ = ["EDGE_KINDS", "model_cases", "step_batches", "step_cases"]

#: Named edge-case families of step cases.
EDGE_KINDS = ("near-equal", "zero-residual", "low-precision", "disjoint", "zeros", "one-hot")


@st.composite
def _pair(draw, vocab: int, kind: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(target, draft) probability rows for one position."""
    if kind == "random":
        return draw(probability_vectors(vocab)), draw(probability_vectors(vocab))
    if kind == "near-equal":
        p = draw(probability_vectors(vocab, "smooth"))
        how = draw(st.sampled_from(["equal", "ulp", "1e-6"]))
        if how == "equal":
            return p, p.clone()
        if how == "ulp":
            return p, torch.nextafter(p, torch.ones_like(p))
        noise = torch.tensor(draw(st.lists(st.sampled_from([-1.0, 0.0, 1.0]), min_size=vocab, max_size=vocab)), dtype=torch.float64)
        return p, (p + 1e-6 * noise * p).clamp_min(0)
    if kind == "zero-residual":
        # draft = target scaled up: after normalisation they are equal; a sampler that does not
        # normalise rejects and finds a residual of mass exactly 0.
        p = draw(probability_vectors(vocab, "smooth"))
        return p, p * draw(st.sampled_from([1.001, 1.01, 1.0 + 2.0**-8]))
    if kind == "low-precision":
        precision = draw(st.sampled_from(["bfloat16", "float16", "float32"]))
        return (
            round_to(draw(probability_vectors(vocab, "smooth")), precision),
            round_to(draw(probability_vectors(vocab, "smooth")), precision),
        )
    if kind == "disjoint":
        split = draw(st.integers(1, vocab - 1))
        p = torch.zeros(vocab, dtype=torch.float64)
        q = torch.zeros(vocab, dtype=torch.float64)
        p[:split] = draw(probability_vectors(split, "smooth")) if split > 1 else 1.0
        q[split:] = draw(probability_vectors(vocab - split, "smooth")) if vocab - split > 1 else 1.0
        if draw(st.booleans()):
            p, q = p.flip(0), q.flip(0)
        return p, q
    if kind == "zeros":
        return draw(probability_vectors(vocab, "sparse")), draw(probability_vectors(vocab, "sparse"))
    if kind == "one-hot":
        return draw(probability_vectors(vocab, "one-hot")), draw(probability_vectors(vocab))
    raise ValueError(f"unknown case kind {kind!r}")


@st.composite
def step_cases(draw, *, vocab_size: int | None = None, k: int | None = None, max_vocab: int = 8, max_k: int = 4, kind: str = "random") -> StepCase:
    """Fixed inputs of one verification step; drafts lie in the draft's support."""
    vocab = vocab_size or draw(st.integers(2, max_vocab))
    k = k if k is not None else draw(st.integers(1, max_k))
    targets, drafts, tokens = [], [], []
    for position in range(k + 1):
        p, q = draw(_pair(vocab, kind))
        targets.append(p)
        if position < k:
            drafts.append(q)
            support = q.nonzero().flatten().tolist()
            tokens.append(draw(st.sampled_from(support)))
    precision = "bfloat16" if kind == "low-precision" else "float64"
    return StepCase(
        torch.stack(targets),
        torch.stack(drafts) if drafts else torch.zeros((0, vocab), dtype=torch.float64),
        torch.tensor(tokens, dtype=torch.int64),
        label=kind,
        precision=precision,
    )


@st.composite
def step_batches(draw, *, max_vocab: int = 8, max_k: int = 4, max_cases: int = 4, kind: str = "random") -> list[StepCase]:
    """Several step cases of one shape, to be interleaved in one heterogeneous batch."""
    vocab = draw(st.integers(2, max_vocab))
    k = draw(st.integers(1, max_k))
    return draw(st.lists(step_cases(vocab_size=vocab, k=k, kind=kind), min_size=1, max_size=max_cases))


@st.composite
def model_cases(draw, *, max_vocab: int = 5, max_k: int = 3, kind: str = "random", max_cells: int = 1024) -> ModelCase:
    """A target/draft model whose laws depend on the prefix, and ``K``."""
    vocab = draw(st.integers(2, max_vocab))
    k = draw(st.integers(1, max_k))
    while k > 1 and vocab ** (k + 1) > max_cells:
        k -= 1
    if kind == "chain":
        order = draw(st.integers(1, 2))
        rows = vocab**order
        target = torch.stack([draw(probability_vectors(vocab)) for _ in range(rows)])
        draft = torch.stack([draw(probability_vectors(vocab)) for _ in range(rows)])
        context = tuple(draw(st.lists(st.integers(0, vocab - 1), min_size=order, max_size=order)))
        return ModelCase(ChainModel(target, draft, context), k, label=kind)
    pairs_kind = "random" if kind == "random" else kind
    target_tables, draft_tables = [], []
    for depth in range(k + 1):
        rows = [draw(_pair(vocab, pairs_kind)) for _ in range(vocab**depth)]
        target_tables.append(torch.stack([p for p, _ in rows]))
        if depth < k:
            draft_tables.append(torch.stack([q for _, q in rows]))
    precision = "bfloat16" if kind == "low-precision" else "float64"
    return ModelCase(TableModel(tuple(target_tables), tuple(draft_tables)), k, label=kind, precision=precision)
