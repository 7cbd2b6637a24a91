"""The exact law: proofs of losslessness by enumeration in rational arithmetic.

Each model's tables are small-integer weights, so every probability is a Fraction and the
equalities below are exact: no tolerance, no sampling.
"""

from __future__ import annotations

import random
from fractions import Fraction

import pytest
import torch

from specverify._laws.exact import (
    chain_law_fns,
    emitted_law_scalar,
    model_law_fns,
    sequence_index,
    sequence_of,
    sequence_offsets,
    step_law_scalar,
    stream_law_scalar,
    target_law_scalar,
)
from specverify.laws import completed_law, emitted_law, step_law, target_law
from specverify.models import ChainModel, TableModel


def rational_row(rng: random.Random, vocab: int, zeros: bool) -> list[Fraction]:
    weights = [rng.choice([0, 0, 1, 2, 3, 5, 8]) if zeros else rng.randint(1, 9) for _ in range(vocab)]
    if not any(weights):
        weights[rng.randrange(vocab)] = 1
    return [Fraction(w) for w in weights]  # unnormalised on purpose: laws are row / sum


def rational_model(seed: int):
    rng = random.Random(seed)
    vocab, k = rng.randint(2, 5), rng.randint(1, 4)
    while vocab ** (k + 1) > 3125:
        k -= 1
    zeros = rng.random() < 0.5
    target = {}
    draft = {}

    def table(store, prefix):
        if prefix not in store:
            store[prefix] = rational_row(rng, vocab, zeros)
        return store[prefix]

    return vocab, k, (lambda prefix: table(target, prefix)), (lambda prefix: table(draft, prefix))


MODELS = 200


def test_losslessness_proved_on_200_random_models():
    """Emitted law completed by the target == the target's joint law, exactly, on every model."""
    proved = []
    for seed in range(MODELS):
        vocab, k, target, draft = rational_model(seed)
        emitted = emitted_law_scalar(target, draft, vocab, k)
        full = target_law_scalar(target, vocab, k + 1)
        assert sum(emitted.values()) == 1
        heads: dict[tuple[int, ...], Fraction] = {}
        for sequence, mass in full.items():
            for length in range(1, k + 2):
                heads[sequence[:length]] = heads.get(sequence[:length], 0) + mass
        completed: dict[tuple[int, ...], Fraction] = {}
        for sequence, mass in full.items():
            total = Fraction(0)
            for length in range(1, k + 2):
                prefix = sequence[:length]
                if prefix in emitted and heads[prefix]:
                    total += emitted[prefix] * mass / heads[prefix]
            completed[sequence] = total
        assert completed == full, f"model {seed} (V={vocab}, K={k}) is not lossless"
        # the first emitted token alone follows the first target law
        first = {}
        for sequence, mass in emitted.items():
            first[sequence[0]] = first.get(sequence[0], 0) + mass
        row = target(())
        assert all(first.get(t, 0) == row[t] / sum(row) for t in range(vocab))
        proved.append((vocab, k))
    assert {v for v, _ in proved} == {2, 3, 4, 5}
    assert {k for _, k in proved} == {1, 2, 3, 4}


def test_stream_law_equals_target_stream_law_for_chains():
    """A stream of canonical steps emits exactly the target chain's law, across step boundaries."""
    for seed in range(6):
        rng = random.Random(seed)
        vocab, order = rng.randint(2, 3), rng.randint(1, 2)
        rows = vocab**order
        tt = torch.tensor(
            [[float(rng.randint(0, 4) or 1) for _ in range(vocab)] for _ in range(rows)], dtype=torch.float64
        )
        dt = torch.tensor(
            [[float(rng.randint(0, 4)) + (i == 0) for i in range(vocab)] for _ in range(rows)], dtype=torch.float64
        )
        model = ChainModel(tt, dt, tuple(range(order)))
        target, draft = chain_law_fns(model)
        for k in (1, 2, 3):
            stream = stream_law_scalar(target, draft, vocab, k, length=5)
            assert stream == target_law_scalar(target, vocab, 5)


def test_vectorised_step_law_matches_exact():
    rng = random.Random(7)
    for _ in range(50):
        vocab, k = rng.randint(2, 6), rng.randint(1, 4)
        p = [rational_row(rng, vocab, zeros=True) for _ in range(k + 1)]
        q = [rational_row(rng, vocab, zeros=True) for _ in range(k)]
        y = [rng.choice([t for t in range(vocab) if q[i][t] > 0]) for i in range(k)]
        exact = step_law_scalar(p, q, y)
        fast = step_law(
            torch.tensor([[float(x) for x in r] for r in p])[None],
            torch.tensor([[float(x) for x in r] for r in q])[None],
            torch.tensor([y]),
        )[0]
        assert sum(sum(r) for r in exact) == 1
        assert torch.allclose(
            fast, torch.tensor([[float(x) for x in r] for r in exact], dtype=torch.float64), atol=1e-12
        )


def test_vectorised_model_laws_match_exact():
    generator = torch.Generator().manual_seed(3)
    vocab, k = 3, 2
    targets = tuple(torch.rand(vocab**d, vocab, generator=generator, dtype=torch.float64) for d in range(k + 1))
    drafts = tuple(torch.rand(vocab**d, vocab, generator=generator, dtype=torch.float64) for d in range(k))
    model = TableModel(targets, drafts)
    target, draft = model_law_fns(model)
    exact = emitted_law_scalar(target, draft, vocab, k)
    fast = emitted_law(model, k)
    for sequence, mass in exact.items():
        index = sequence_offsets(vocab, k)[len(sequence) - 1] + sum(
            t * vocab ** (len(sequence) - 1 - i) for i, t in enumerate(sequence)
        )
        assert abs(float(mass) - float(fast[index])) < 1e-12
        assert sequence_of(index, vocab, k) == sequence
    assert torch.allclose(completed_law(model, k), target_law(model, k + 1), atol=1e-14)


def test_sequence_index_round_trip():
    vocab, k = 3, 3
    tokens = torch.tensor([[2, -1, -1, -1], [0, 1, -1, -1], [2, 2, 2, 1]])
    accepted = torch.tensor([0, 1, 3])
    index = sequence_index(tokens, accepted, vocab)
    assert [sequence_of(int(i), vocab, k) for i in index] == [(2,), (0, 1), (2, 2, 2, 1)]


@pytest.mark.parametrize("equal", [True, False])
def test_step_law_handles_p_equal_q_and_zero_rows(equal):
    p = torch.tensor([[[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]]], dtype=torch.float64)
    q = p[:, :1].clone() if equal else torch.tensor([[[0.0, 1.0, 0.0]]], dtype=torch.float64)
    law = step_law(p, q, torch.tensor([[1]]))
    assert torch.isfinite(law).all()
    assert abs(float(law.sum()) - 1.0) < 1e-15
    assert float(law[0, 0, 2]) == 0.0  # never a token of target probability 0
