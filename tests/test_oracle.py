"""The oracle (specverify._laws.oracle) against exact rational enumeration.

The oracle is what every sampler is judged by, so it is judged by something that shares no code with
it: cells of the uniforms' cube and the residual law computed in :class:`fractions.Fraction` here and
by :func:`specverify._laws.exact.step_law_scalar`.  Rows are small-integer weights, so every float the
oracle sees is exact and every comparison below is exact too.
"""

from __future__ import annotations

import ast
import pathlib
import random
from fractions import Fraction

import pytest
import torch

import specverify
from specverify._laws.exact import step_law_scalar
from specverify._laws.oracle import canonical_emit, inverse_cdf, normalise, residual_distribution


def weights(rng: random.Random, vocab: int) -> list[int]:
    row = [rng.choice([0, 0, 1, 2, 3, 5, 8]) for _ in range(vocab)]
    if not any(row):
        row[rng.randrange(vocab)] = 1
    return row


def exact(row: list[int]) -> list[Fraction]:
    return [Fraction(w, sum(row)) for w in row]


def as_tensor(rows: list[list[int]]) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float64)


def test_normalise_is_the_correctly_rounded_rational_law():
    rng = random.Random(0)
    for _ in range(200):
        row = weights(rng, rng.randint(2, 7))
        # integer weights and their sum are exact floats, so one division rounds once: bit for bit
        assert normalise(as_tensor([row]))[0].tolist() == [float(x) for x in exact(row)]
    half = normalise(torch.tensor([[1.0, 3.0]], dtype=torch.float16))
    assert half.dtype == torch.float64 and half.tolist() == [[0.25, 0.75]]


def test_residual_has_the_rational_support_and_falls_back_to_p_exactly_when_p_equals_q():
    rng = random.Random(1)
    fallbacks = 0
    for trial in range(300):
        vocab = rng.randint(2, 6)
        p_row = weights(rng, vocab)
        q_row = list(p_row) if trial % 5 == 0 else weights(rng, vocab)
        p, q = exact(p_row), exact(q_row)
        want = [max(a - b, Fraction(0)) for a, b in zip(p, q)]
        got = residual_distribution(normalise(as_tensor([p_row])), normalise(as_tensor([q_row])))[0]
        if sum(want) == 0:
            fallbacks += 1
            want = p
        assert [x > 0 for x in got.tolist()] == [x > 0 for x in want]
        assert got.tolist() == pytest.approx([float(x) for x in want], abs=1e-15)
    assert fallbacks >= 60


def test_inverse_cdf_picks_the_token_of_each_rational_cell_and_never_a_zero_mass_token():
    rng = random.Random(2)
    for _ in range(100):
        row = weights(rng, rng.randint(2, 7))
        law = exact(row)
        dist = as_tensor([row])
        cdf = Fraction(0)
        for token, mass in enumerate(law):
            if mass:
                midpoint = float(cdf + mass / 2)
                assert int(inverse_cdf(dist, torch.tensor([midpoint], dtype=torch.float64))) == token
            cdf += mass
        edges = torch.tensor(
            [
                0.0,
                float(torch.nextafter(torch.tensor(1.0, dtype=torch.float64), torch.tensor(0.0, dtype=torch.float64))),
            ],
            dtype=torch.float64,
        )
        picked = inverse_cdf(dist.expand(2, -1), edges)
        support = [t for t, w in enumerate(row) if w]
        assert picked.tolist() == [support[0], support[-1]]


def rational_step(rng: random.Random):
    vocab, k = rng.randint(2, 5), rng.randint(1, 4)
    p = [weights(rng, vocab) for _ in range(k + 1)]
    q = [weights(rng, vocab) for _ in range(k)]
    if rng.random() < 0.3:
        q[0] = list(p[0])  # p = q at the first position: the residual's fallback
    y = [rng.choice([t for t in range(vocab) if q[i][t]]) for i in range(k)]
    return p, q, y


def test_canonical_emit_gives_each_rational_cell_its_outcome_and_the_cells_the_exact_law():
    """One uniform point inside every cell of the exact partition of [0, 1)^(K+1).

    The cells are built here in rationals: accept ``i`` on ``[0, a_i)`` with ``a_i = min(1, p/q)``,
    reject on ``[a_i, 1)``, then the emitted token's cell of the residual's (or the bonus's) CDF.  The
    oracle must map the cell's midpoint to the cell's outcome, and the cells' volumes must be
    ``step_law_scalar``'s law, exactly.
    """
    rng = random.Random(3)
    cells = 0
    for _ in range(200):
        p_rows, q_rows, y = rational_step(rng)
        k = len(y)
        p, q = [exact(r) for r in p_rows], [exact(r) for r in q_rows]
        accept = [min(Fraction(1), p[i][y[i]] / q[i][y[i]]) for i in range(k)]
        law = step_law_scalar([[Fraction(w) for w in r] for r in p_rows], [[Fraction(w) for w in r] for r in q_rows], y)
        points, outcomes, volumes = [], [], []
        for j in range(k + 1):
            if j < k and accept[j] == 1:
                continue  # rejection at j has no volume
            residual = [max(a - b, Fraction(0)) for a, b in zip(p[j], q[j])] if j < k else list(p[j])
            residual = [r / sum(residual) for r in residual]
            head = [accept[i] / 2 for i in range(j)] + ([(accept[j] + 1) / 2] if j < k else [])
            tail = [Fraction(1, 2)] * (k - len(head))  # positions after the rejection: any value
            volume = Fraction(1)
            for i in range(j):
                volume *= accept[i]
            if j < k:
                volume *= 1 - accept[j]
            if volume == 0:
                continue  # a draft of target probability 0 earlier: never reached
            cdf = Fraction(0)
            for token, mass in enumerate(residual):
                if mass:
                    points.append([float(u) for u in head + tail] + [float(cdf + mass / 2)])
                    outcomes.append((j, token))
                    volumes.append(volume * mass)
                cdf += mass
        assert sum(volumes) == 1
        for (j, token), volume in zip(outcomes, volumes):
            assert law[j][token] == volume
        assert sum(sum(row) for row in law) == 1
        batch = len(points)
        tokens, num_accepted = canonical_emit(
            as_tensor(p_rows).expand(batch, -1, -1),
            as_tensor(q_rows).expand(batch, -1, -1),
            torch.tensor(y).expand(batch, -1),
            torch.tensor(points, dtype=torch.float64),
        )
        got = [(int(n), int(t[n])) for t, n in zip(tokens, num_accepted)]
        assert got == outcomes
        for t, n in zip(tokens.tolist(), num_accepted.tolist()):
            assert t[:n] == y[:n] and all(x == -1 for x in t[n + 1 :])
        cells += batch
    assert cells > 500


def test_the_reference_sampler_is_the_oracle():
    g = torch.Generator().manual_seed(5)
    p = torch.rand(16, 4, 5, generator=g, dtype=torch.float64)
    q = torch.rand(16, 3, 5, generator=g, dtype=torch.float64)
    y = torch.randint(0, 5, (16, 3), generator=g)
    u = torch.rand(16, 4, generator=g, dtype=torch.float64)
    got, want = specverify.reference(p, q, y, None, uniforms=u), canonical_emit(p, q, y, u)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def test_the_oracle_depends_on_nothing_in_specverify():
    source = pathlib.Path(specverify.__file__).parent.joinpath("_laws", "oracle.py").read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0, "the oracle imports from specverify"
            imported.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
    assert imported <= {"__future__", "torch"}
