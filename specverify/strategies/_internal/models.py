"""Model cases: a target and a draft whose law at each position depends on the prefix.

The harness draws the drafts from the draft model, so the law at position ``i`` depends on the
draft tokens before it.  Two shapes of model:

* a :class:`~specverify.models.TableModel`: an arbitrary pair of laws after every prefix up to depth ``K``
  (every position sees its own prefix), the pair of any :data:`PAIR_KINDS` relation;
* a :class:`~specverify.models.ChainModel`: an order-``m`` Markov chain (``m = 1`` is the seed document's
  experiment; ``m`` up to 3), its context drawn too.

Every table of a model is drawn at once (see :func:`pair_rows`), so a model of hundreds of rows
costs a few Hypothesis draws.
"""

from __future__ import annotations

from hypothesis import strategies as st

from ..._laws.cases import ModelCase
from ..._laws.models import ChainModel, TableModel
from .cases import MIXED, _check_kind, case_precision
from .pairs import PAIR_KINDS, pair_rows
from .vectors import vocab_sizes

__all__ = ["MAX_CHAIN_ORDER", "MIXABLE_MODEL_KINDS", "MODEL_KINDS", "model_batches", "model_cases"]

#: ``chain``: a Markov chain; every pair kind: a table model whose rows are pairs of that kind.
MODEL_KINDS = ("random", "chain", *(kind for kind in PAIR_KINDS if kind != "random"))

#: What ``mixed`` draws from (precision is drawn on its own).
MIXABLE_MODEL_KINDS = tuple(kind for kind in MODEL_KINDS if kind != "low-precision")

#: The highest chain order drawn (the cell budget may lower it).
MAX_CHAIN_ORDER = 3


def _fit_k(vocab: int, k: int, max_cells: int) -> int:
    """The largest ``K' <= k`` (at least 1) whose last target table, ``V**(K'+1)`` cells, fits."""
    while k > 1 and vocab ** (k + 1) > max_cells:
        k -= 1
    return k


def model_cases(
    *,
    max_vocab: int = 5,
    max_k: int = 3,
    kind: str = "random",
    max_cells: int = 1024,
    precision: str | None = None,
    vocab_size: int | None = None,
    k: int | None = None,
    max_order: int = MAX_CHAIN_ORDER,
) -> st.SearchStrategy[ModelCase]:
    """A :class:`~specverify.replay.ModelCase`: a model whose laws depend on the prefix, and ``K``.

    ``kind`` is one of :data:`MODEL_KINDS` or ``"mixed"``.  ``K`` is lowered until the last
    target table, ``V**(K+1)`` cells, fits in ``max_cells`` (a chain's order likewise).
    ``precision`` as for :func:`step_cases`.  Shrinks toward ``V = 2``, ``K = 1``, order 1.
    """
    _check_kind(kind, MODEL_KINDS, precision)
    if max_order < 1:
        raise ValueError(f"max_order must be at least 1, got {max_order}")
    return _model_cases(vocab_size, k, max_vocab, max_k, kind, max_cells, precision, max_order)


@st.composite
def _model_cases(
    draw: st.DrawFn,
    vocab_size: int | None,
    k: int | None,
    max_vocab: int,
    max_k: int,
    kind: str,
    max_cells: int,
    precision: str | None,
    max_order: int,
) -> ModelCase:
    vocab = vocab_size if vocab_size is not None else draw(vocab_sizes(2, max_vocab))
    k = k if k is not None else _fit_k(vocab, draw(st.integers(1, max_k)), max_cells)
    precision = case_precision(draw, kind, precision)
    if kind == MIXED:
        kind = draw(st.sampled_from(MIXABLE_MODEL_KINDS))
    if kind == "chain":
        order = draw(st.integers(1, _fit_k(vocab, max_order, max_cells)))
        target, draft = pair_rows(draw, vocab**order, vocab, "random", precision)
        context = tuple(draw(st.lists(st.integers(0, vocab - 1), min_size=order, max_size=order)))
        return ModelCase(ChainModel(target, draft, context), k, label=kind, precision=precision)
    sizes = [vocab**depth for depth in range(k + 1)]
    target, draft = pair_rows(draw, sum(sizes), vocab, kind, precision)
    target_tables = tuple(target.split(sizes))
    draft_tables = tuple(draft.split(sizes)[:k])
    return ModelCase(TableModel(target_tables, draft_tables), k, label=kind, precision=precision)


def model_batches(
    *,
    max_vocab: int = 5,
    max_k: int = 3,
    max_models: int = 4,
    kind: str = "random",
    max_cells: int = 1024,
    precision: str | None = None,
) -> st.SearchStrategy[list[ModelCase]]:
    """Model cases of one ``(K, V)`` and one precision: a heterogeneous batch, row by row.

    Each row of the batch follows its own model; with ``kind="mixed"`` the models differ in kind
    too (tables of different pair kinds, chains of different orders).  Shrinks toward one model.
    """
    _check_kind(kind, MODEL_KINDS, precision)
    if max_models < 1:
        raise ValueError(f"max_models must be at least 1, got {max_models}")
    return _model_batches(max_vocab, max_k, max_models, kind, max_cells, precision)


@st.composite
def _model_batches(
    draw: st.DrawFn, max_vocab: int, max_k: int, max_models: int, kind: str, max_cells: int, precision: str | None
) -> list[ModelCase]:
    vocab = draw(vocab_sizes(2, max_vocab))
    k = _fit_k(vocab, draw(st.integers(1, max_k)), max_cells)
    precision = case_precision(draw, kind, precision)
    model = _model_cases(vocab, k, max_vocab, max_k, kind, max_cells, precision, MAX_CHAIN_ORDER)
    return draw(st.lists(model, min_size=1, max_size=max_models))
