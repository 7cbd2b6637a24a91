"""Hypothesis strategies for speculative-sampling inputs.

Use them in your own tests::

    from hypothesis import given
    from specverify import strategies as sv

    @given(sv.step_cases(max_vocab=6, kind="near-equal"))
    def test_my_sampler_is_valid(case):
        ...

Everything shrinks toward a small vocabulary, few drafts and simple numbers.  No strategy draws a
sampler's random seed: seeds are derived from the example (see ``specverify._seeds``).
"""

from ._internal.cases import EDGE_KINDS, model_cases, step_batches, step_cases
from ._internal.vectors import VECTOR_KINDS, probability_vectors, round_to

__all__ = [
    "EDGE_KINDS",
    "VECTOR_KINDS",
    "model_cases",
    "probability_vectors",
    "round_to",
    "step_batches",
    "step_cases",
]
