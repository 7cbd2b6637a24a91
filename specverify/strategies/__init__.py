"""Hypothesis strategies for speculative-sampling inputs.

Use them in your own tests::

    from hypothesis import given, settings
    from specverify import strategies as sv

    @settings(settings.get_profile("specverify-ci"))
    @given(sv.step_cases(max_vocab=6, kind="near-equal"))
    def test_my_sampler_is_valid(case):
        ...

* vectors: :func:`probability_vectors` (and :func:`probability_rows` for a matrix) of every
  :data:`VECTOR_KINDS`, rounded to any of :data:`PRECISIONS` without renormalising;
* one position: :func:`target_draft_pairs` of every :data:`PAIR_KINDS` relation;
* one step: :func:`step_cases` and :func:`step_batches` (kinds :data:`STEP_KINDS`, ``"mixed"``);
* a model: :func:`model_cases` and :func:`model_batches` (kinds :data:`MODEL_KINDS`, ``"mixed"``);
* per-row sampling parameters: :func:`sampling_params` (edges :data:`PARAM_EDGES`: temperatures
  near 0 and large, ``top_k`` 1 and >= V, tiny ``top_p``, ``min_p`` near 1), and
  :func:`logits_cases`, tie-free logits with such parameters, for logits-level samplers, and
  :func:`separating_logits_cases`, logits and parameters where two engines' warps differ
  (:data:`SEPARATING_KINDS`: ties at the k-th logit, mass at the top-p boundary, ...);
* production shapes and float edges: :func:`large_vocab_cases` (and :func:`structured_case`, one
  case with mass on tokens across :data:`BOUNDARIES` and diffuse tails), :func:`edge_case` (kinds
  :data:`EDGE_LAW_KINDS`).

Everything shrinks toward a small vocabulary, few drafts and simple numbers.  No strategy draws a
sampler's random seed: seeds are derived from the example (see ``specverify._seeds``).  Importing
this module registers the settings profiles ``specverify-dev``, ``specverify-ci`` and
``specverify-thorough`` (see :data:`PROFILES`).
"""

from ._internal.cases import EDGE_KINDS, MIXABLE_STEP_KINDS, MIXED, STEP_KINDS, step_batches, step_cases
from ._internal.models import MAX_CHAIN_ORDER, MIXABLE_MODEL_KINDS, MODEL_KINDS, model_batches, model_cases
from ._internal.pairs import NEAR_EQUAL_KINDS, PAIR_KINDS, target_draft_pairs
from ._internal.params import PARAM_EDGES, logits_cases, sampling_params
from ._internal.profiles import PROFILES, register_profiles
from ._internal.separating import SEPARATING_KINDS, separating_logits_cases
from ._internal.shapes import BOUNDARIES, COMMON_VOCABS, EDGE_LAW_KINDS, edge_case, large_vocab_cases, structured_case
from ._internal.vectors import (
    LOW_PRECISIONS,
    PRECISIONS,
    VECTOR_KINDS,
    probability_rows,
    probability_vectors,
    round_to,
    vocab_sizes,
)

register_profiles()

__all__ = [
    "BOUNDARIES",
    "COMMON_VOCABS",
    "EDGE_KINDS",
    "EDGE_LAW_KINDS",
    "LOW_PRECISIONS",
    "MAX_CHAIN_ORDER",
    "MIXABLE_MODEL_KINDS",
    "MIXABLE_STEP_KINDS",
    "MIXED",
    "MODEL_KINDS",
    "NEAR_EQUAL_KINDS",
    "PAIR_KINDS",
    "PARAM_EDGES",
    "PRECISIONS",
    "PROFILES",
    "SEPARATING_KINDS",
    "STEP_KINDS",
    "VECTOR_KINDS",
    "edge_case",
    "large_vocab_cases",
    "logits_cases",
    "model_batches",
    "model_cases",
    "probability_rows",
    "probability_vectors",
    "register_profiles",
    "round_to",
    "sampling_params",
    "separating_logits_cases",
    "step_batches",
    "step_cases",
    "structured_case",
    "target_draft_pairs",
    "vocab_sizes",
]
