"""A failing check says where the evidence is: an impossible outcome before a large deviation."""

from __future__ import annotations

import numpy as np

from specverify.checks._tally import largest_deviation


def label(group: int, cell: int) -> str:
    return f"group {group} cell {cell}"


def test_the_largest_standardised_deviation_is_named():
    observed = np.array([[300, 100, 0], [50, 50, 0]])
    expected = np.array([[263.3, 136.7, 0.0], [50.0, 50.0, 0.0]])
    assert (
        largest_deviation(observed, expected, label)
        == "largest deviation at group 0 cell 1: observed 100, expected 136.7"
    )


def test_an_outcome_of_exact_probability_zero_comes_first():
    observed = np.array([[300, 98, 2], [50, 50, 0]])
    expected = np.array([[263.3, 136.7, 0.0], [50.0, 50.0, 0.0]])
    assert (
        largest_deviation(observed, expected, label) == "outcome of exact probability 0 at group 0 cell 2: observed 2"
    )
