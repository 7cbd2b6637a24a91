"""A planted sampler bug shrinks to the smallest model: two tokens, one draft, simple numbers.

The bug: after a rejection, resample from the target ``p`` instead of the residual
``max(p - q, 0)``.  Its output law is computed exactly, so the search is deterministic.
"""

from __future__ import annotations

import torch
from hypothesis import find

from specverify import strategies as sv
from specverify.replay import ModelCase, StepCase

from ._helpers import ci


def _normalise(rows: torch.Tensor) -> torch.Tensor:
    return rows / rows.sum(dim=-1, keepdim=True)


def resample_from_target_law(case: StepCase) -> torch.Tensor:
    """``[K+1, V]`` exact law of (accepted drafts, token) of the planted buggy sampler."""
    p, q = _normalise(case.target_probs), _normalise(case.draft_probs)
    rows = torch.arange(case.k)
    accept = (p[rows, case.draft_tokens] / q[rows, case.draft_tokens]).clamp(max=1.0)
    reach = torch.cat([torch.ones(1, dtype=torch.float64), accept.cumprod(0)])
    stop = reach * torch.cat([1 - accept, torch.ones(1, dtype=torch.float64)])
    return stop[:, None] * p


def step_bug_shows(batch: list[StepCase]) -> bool:
    return any(float((resample_from_target_law(c) - c.law()).abs().max()) > 1e-9 for c in batch)


def first_token_bug_shows(case: ModelCase) -> bool:
    """The buggy first token's law, ``min(p, q) + (1 - sum min(p, q)) p``, is not ``p``."""
    root = torch.zeros((1, 0), dtype=torch.int64)
    p, q = _normalise(case.model.target(root)[0]), _normalise(case.model.draft(root)[0])
    overlap = torch.minimum(p, q)
    return float((overlap + (1 - overlap.sum()) * p - p).abs().max()) > 1e-9


def test_the_planted_bug_is_real():
    # the exact law of the reference algorithm differs from the buggy one on this plain case
    case = StepCase(
        torch.tensor([[0.5, 0.5], [0.5, 0.5]], dtype=torch.float64),
        torch.tensor([[0.75, 0.25]], dtype=torch.float64),
        torch.tensor([0]),
    )
    assert step_bug_shows([case])
    assert not step_bug_shows([StepCase(case.target_probs, case.target_probs[:1], case.draft_tokens)])


def test_a_failing_step_batch_shrinks_to_one_case_of_two_tokens_and_one_draft():
    batch = find(
        sv.step_batches(max_vocab=8, max_k=4, max_cases=4, kind=sv.MIXED),
        lambda b: step_bug_shows(b) and b[0].vocab_size >= 2,
        settings=ci(100),
    )
    assert len(batch) == 1
    assert batch[0].shape_key == (1, 2)
    assert batch[0].precision == "float64"


def test_a_failing_model_shrinks_to_two_tokens_and_one_draft():
    case = find(
        sv.model_cases(max_vocab=6, max_k=4, kind=sv.MIXED, max_cells=4096), first_token_bug_shows, settings=ci(100)
    )
    assert (case.vocab_size, case.k) == (2, 1)
    assert case.precision == "float64"
    # simple numbers: every probability a ratio of small integers (a byte's weight or less)
    for table in (*case.model.target_tables, *case.model.draft_tables):
        for row in table:
            smallest = row[row > 0].min()
            assert ((row / smallest) <= 257).all()


def test_a_failing_model_batch_shrinks_to_one_small_model():
    batch = find(
        sv.model_batches(max_vocab=6, max_k=4, max_models=4, kind=sv.MIXED),
        lambda b: any(first_token_bug_shows(c) for c in b),
        settings=ci(100),
    )
    assert len(batch) == 1 and (batch[0].vocab_size, batch[0].k) == (2, 1)


def test_the_ci_profile_generates_the_same_cases_every_run():
    from ._helpers import examples

    first = [c.fingerprint() for c in examples(sv.model_cases(kind=sv.MIXED), 20)]
    again = [c.fingerprint() for c in examples(sv.model_cases(kind=sv.MIXED), 20)]
    assert first == again and len(set(first)) > 10
