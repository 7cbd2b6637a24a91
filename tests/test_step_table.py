"""A table model's drafts drawn whole (``specverify.checks._step_table``): the joint draft law by
an alias table, never a sequence of draft mass 0, whatever the rows' normalisation; emitted counts
completed by the target's law."""

from __future__ import annotations

import numpy as np
import torch

from specverify._laws.exact import all_sequences
from specverify._laws.models import ChainModel, draw_drafts, step_inputs
from specverify.checks._step_table import _alias_table, step_table
from specverify.stats import gof_test


def _model() -> ChainModel:
    gen = torch.Generator().manual_seed(11)
    target = torch.softmax(torch.randn(3, 3, generator=gen, dtype=torch.float64), -1)
    draft = torch.rand(3, 3, generator=gen, dtype=torch.float64) * 4  # rows not normalised
    draft[1, 2] = 0.0  # after token 1, token 2 is never drafted
    return ChainModel(target, draft, (0,))


def test_the_table_gives_the_inputs_step_inputs_would_and_draws_the_joint_draft_law():
    model, k = _model(), 3
    table = step_table(model, k)
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


def test_no_uniform_draws_a_sequence_of_draft_mass_0(monkeypatch):
    model = _model()
    model.draft_table[2, 2] = 0.0  # the last sequence, (2, 2), has draft mass 0 too
    table = step_table(model, 2)
    assert table is not None
    never = {5, 8}  # (1, 2) and (2, 2): token 2 is never drafted after 1 or 2
    grid = torch.cat(
        [torch.linspace(0, 1, 100_001, dtype=torch.float64)[:-1], torch.tensor([1 - 2**-53], dtype=torch.float64)]
    )
    monkeypatch.setattr(torch, "rand", lambda rows, **_: grid[:rows])
    drawn = set(table.draw(grid.shape[0], torch.Generator()).tolist())
    assert drawn.isdisjoint(never) and drawn == set(range(9)) - never


def test_an_alias_table_gives_each_column_its_mass_exactly():
    mass = np.random.default_rng(2).random(1000) ** 4  # a long tail of small masses
    accept, alias = _alias_table(mass)
    law = accept.copy()
    np.add.at(law, alias, 1.0 - accept)  # what each column gives away goes to its alias
    assert np.allclose(law / len(mass), mass / mass.sum(), rtol=1e-12, atol=0)
    assert ((accept >= 0) & (accept <= 1)).all()


def test_emitted_counts_are_completed_by_the_targets_law_and_never_lose_a_row():
    model, k = _model(), 2
    table = step_table(model, k)
    assert table is not None
    # emitted counts of every length: 1..K+1 tokens, sequence_index order (offsets 0, 3, 12, 39)
    emitted = np.random.default_rng(5).integers(0, 40_000, size=39)
    completed = table.complete(emitted, np.random.default_rng(6))
    assert completed.shape == (27,) and completed.sum() == emitted.sum()
    full = all_sequences(3, k + 1)
    # the expected completion of each emitted sequence, from the target's own rows (step_inputs' rows)
    expected = np.zeros(27)
    target = step_inputs(model, full[:, :k])[0].double()
    for code, sequence in enumerate(full.tolist()):
        for length in range(1, k + 2):
            offset = [0, 3, 12][length - 1]
            prefix = int(np.ravel_multi_index(sequence[:length], (3,) * length))
            mass = 1.0
            for i in range(length, k + 1):
                row = target[code, i]
                mass *= float(row[sequence[i]] / row.sum())
            expected[code] += emitted[offset + prefix] * mass
    # the completed full-length sequences are the emitted ones exactly, untouched by the draw
    assert all(completed[c] >= emitted[12 + c] for c in range(27))
    assert (
        gof_test(completed, expected / expected.sum(), alpha=1e-6, random_state=0).pvalue > 1e-6
    )  # a fixed seed: no flake
    assert np.abs(completed - expected).max() < 6 * np.sqrt(expected.max())
