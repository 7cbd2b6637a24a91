"""A table model's drafts drawn whole (``specverify.checks._tally._StepTable``): the joint draft
law, never a sequence of draft mass 0, whatever the rows' normalisation."""

from __future__ import annotations

import numpy as np
import torch

from specverify._exact import all_sequences
from specverify._models import ChainModel, draw_drafts, step_inputs
from specverify.checks._tally import _step_table
from specverify.stats import gof_test


def _model() -> ChainModel:
    gen = torch.Generator().manual_seed(11)
    target = torch.softmax(torch.randn(3, 3, generator=gen, dtype=torch.float64), -1)
    draft = torch.rand(3, 3, generator=gen, dtype=torch.float64) * 4  # rows not normalised
    draft[1, 2] = 0.0  # after token 1, token 2 is never drafted
    return ChainModel(target, draft, (0,))


def test_the_table_gives_the_inputs_step_inputs_would_and_draws_the_joint_draft_law():
    model, k = _model(), 3
    table = _step_table(model, k, 3)
    assert table is not None
    sequences = all_sequences(3, k)
    target, draft = step_inputs(model, sequences)
    assert torch.equal(table.target, target) and torch.equal(table.draft, draft)
    law = np.ones(len(sequences))
    for i in range(k):  # the joint law, position by position, each row normalised
        rows = draft[torch.arange(len(sequences)), i]
        law *= (rows.gather(-1, sequences[:, i : i + 1]).squeeze(-1) / rows.sum(-1)).numpy()
    code = table.draw(400_000, torch.Generator().manual_seed(3))
    counts = np.bincount(code.numpy(), minlength=len(sequences))
    assert counts[law == 0].sum() == 0 and (law == 0).any()
    assert gof_test(counts, law, alpha=1e-6, random_state=0).pvalue > 1e-6  # a fixed seed: no flake
    sequential = draw_drafts(model, 400_000, k, torch.Generator().manual_seed(4))
    code_seq = (sequential * torch.tensor([9, 3, 1])).sum(-1)
    assert gof_test(np.bincount(code_seq.numpy(), minlength=27), law, alpha=1e-6, random_state=0).pvalue > 1e-6


def test_a_uniform_rounding_to_the_total_takes_the_last_sequence_of_positive_mass(monkeypatch):
    model = _model()
    model.draft_table[2, 2] = 0.0  # the last sequence, (2, 2), has draft mass 0
    table = _step_table(model, 2, 3)
    assert table is not None
    monkeypatch.setattr(torch, "rand", lambda rows, **_: torch.ones(rows, dtype=torch.float64))  # u * total == total
    assert table.draw(5, torch.Generator()).tolist() == [7] * 5  # (2, 1), the last of positive mass
