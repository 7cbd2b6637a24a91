"""Which counts a plot shows, and the SVG it becomes."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest

from specverify.report._plots import MAX_BARS, comparison, comparison_svg


def test_one_dimensional_counts_drop_outcomes_neither_expected_nor_observed() -> None:
    data = comparison({"observed": [5, 0, 7, 0], "expected": [6.0, 0.0, 5.0, 1.0]})
    assert data.labels == ["0", "2", "3"]
    assert data.observed.tolist() == [5, 7, 0] and data.expected.tolist() == [6, 5, 1]
    assert data.note == "1 outcomes neither expected nor observed are left out."


def test_rows_of_cases_are_labelled_by_case_and_outcome() -> None:
    evidence = {
        "observed": [[1, 2], [3, 4]],
        "expected": [[1.5, 1.5], [3.5, 3.5]],
        "outcome_labels": ["a0:t0", "a0:t1"],
    }
    data = comparison(evidence)
    assert data.labels == ["0·a0:t0", "0·a0:t1", "1·a0:t0", "1·a0:t1"]
    assert data.note is None and "case" in data.axis_label


def test_acceptance_law_is_scaled_to_the_observed_calls() -> None:
    data = comparison({"observed_counts": [30, 50, 20], "expected_law": [0.25, 0.5, 0.25]})
    assert data.expected.tolist() == [25.0, 50.0, 25.0]
    assert data.labels == ["0", "1", "2"] and data.axis_label == "accepted drafts per call"


@pytest.mark.parametrize(
    "evidence",
    [
        {},
        {"observed": [1, 2]},
        {"observed": [1, 2], "expected": [1, 2, 3]},
        {"observed": [[1, 2], [3]], "expected": [[1, 2], [3]]},
        {"observed": [1, "nan"], "expected": [1, 2]},
        {"observed": [1, 2], "expected": ["inf", 2]},
        {"observed": "many", "expected": "few"},
        {"observed": [0, 0], "expected": [0, 0]},
        {"observed": [[[1]]], "expected": [[[1]]]},
        {"observed_counts": [1, 2], "expected_law": [1.0]},
    ],
)
def test_anything_else_is_not_plotted(evidence: dict) -> None:
    assert comparison(evidence) is None


def test_many_outcomes_are_cut_to_the_most_deviant_in_their_order() -> None:
    expected = np.full(200, 50.0)
    observed = expected.copy()
    deviant = [3, 77, 150]
    observed[deviant] = [90, 10, 80]
    observed[100:120] += 3  # small deviations fill the rest
    data = comparison({"observed": observed.tolist(), "expected": expected.tolist()})
    assert len(data.labels) == MAX_BARS
    assert {"3", "77", "150"} <= set(data.labels)
    assert [int(x) for x in data.labels] == sorted(int(x) for x in data.labels)
    assert data.note == f"The {MAX_BARS} most deviant of 200 outcomes that were expected or observed."


def test_long_labels_are_shortened() -> None:
    data = comparison({"observed": [1, 2], "expected": [2, 1], "outcome_labels": ["x" * 500, "y"]})
    assert max(len(label) for label in data.labels) <= 20


def test_the_svg_is_one_scalable_element_with_ids_of_its_own() -> None:
    data = comparison({"observed": [10, 0, 3], "expected": [8.0, 2.0, 0.0]})
    out = comparison_svg(data, "plot-a", label="counts")
    root = ET.fromstring(out)
    assert root.tag == "{http://www.w3.org/2000/svg}svg" and root.get("viewBox") and root.get("height") is None
    ids = [e.get("id") for e in root.iter() if e.get("id")]
    assert ids and all(i.startswith("plot-a-") for i in ids)
    assert "currentColor" in out
    assert "#ef4444" in out  # an observed count where the law allows none is drawn in red
    assert out == comparison_svg(data, "plot-a", label="counts")  # deterministic
