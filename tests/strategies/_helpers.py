"""What every generated probability must satisfy, and the settings these tests run under."""

from __future__ import annotations

import torch
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from specverify import strategies as sv

#: The package's reproducible profile: derandomised, no database, no deadline.
CI = settings.get_profile("specverify-ci")


def ci(max_examples: int) -> settings:
    """The CI profile with fewer examples (several tests share this suite's CI time)."""
    return settings(CI, max_examples=max_examples)


def examples(strategy: st.SearchStrategy, count: int) -> list:
    """The first ``count`` examples the CI profile generates (no shrinking): the same on every run."""
    seen: list = []

    @settings(ci(count), phases=[Phase.generate])
    @given(strategy)
    def collect(example):
        seen.append(example)

    collect()
    return seen


def sum_tolerance(precision: str, vocab: int) -> float:
    """How far from 1 a vector rounded entry by entry to ``precision`` may sum.

    Each entry moves by at most half an ulp: ``eps / 2`` relative for normal numbers, half the
    subnormal spacing (absolute) below them; plus float64 rounding of the normalisation.
    """
    info = torch.finfo(getattr(torch, precision))
    return info.eps / 2 + vocab * info.tiny * info.eps / 2 + vocab * 2.0**-52


def assert_probability_rows(rows: torch.Tensor, precision: str) -> None:
    """Every row a probability vector exactly representable in ``precision``, summing to 1 within it."""
    assert rows.dtype == torch.float64
    assert torch.isfinite(rows).all()
    assert (rows >= 0).all()
    assert (rows > 0).any(dim=-1).all(), "a row with no positive entry"
    assert torch.equal(sv.round_to(rows, precision), rows), f"not exactly representable in {precision}"
    error = (rows.sum(dim=-1) - 1).abs().max().item()
    assert error <= sum_tolerance(precision, rows.shape[-1]), f"sum off by {error} in {precision}"


def support(vector: torch.Tensor) -> set[int]:
    return set(vector.nonzero().flatten().tolist())
