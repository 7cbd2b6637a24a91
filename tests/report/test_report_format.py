"""How values read, and how a failing case is laid out."""

from __future__ import annotations

import pytest

from specverify.report._example import example, shape_summary, size_key
from specverify.report._format import anchor, compact, count, detects, duration, number, pvalue, slug, timestamp


@pytest.mark.parametrize(
    ("value", "text"),
    [(None, "–"), (True, "yes"), (12345, "12\u202f345"), (0.000123456, "0.000123"), ("nan", "NaN"), ("inf", "∞"),
     ("-inf", "−∞"), ("cpu", "cpu"), (float("inf"), "∞")],
)  # fmt: skip
def test_number(value, text) -> None:
    assert number(value) == text


def test_enough_digits_to_show_a_difference() -> None:
    # a probability one float32 ulp short of 1 is the difference a table exists to show
    assert number(0.99999994) == "0.9999999" and number(1.0) == "1" and number(99.96) == "99.96"
    assert number(1.0000001) != "1" and number(0.5) == "0.5" and number(0.123456) == "0.123"
    assert compact([0.99999994, 1.0, 0.123456789]) == "[0.9999999, 1.0, 0.1235]"
    assert example({**STEP, "target_probs": [[0.99999994, 6e-08, 0.0]] * 3}).tables[0].rows[0][0] == "0.9999999"


def test_what_a_test_detects_is_said_in_words_never_tv_at_least_0() -> None:
    assert detects(0.0137) == "TV ≥ 0.0137"
    assert detects(0.0) == "any deviation (exact)"  # an exact check: no statistics
    assert detects(0.0, 0.0) == "any outcome of probability 0 (exact)"  # a test that flags impossible outcomes
    assert "TV ≥ 0" not in detects(0, 1e-300)


def test_pvalues_counts_and_durations() -> None:
    assert pvalue(0.0) == "< 1e-300" and pvalue(6.9e-261) == "6.9e-261" and pvalue(None) == "–"
    assert count(1e6) == "1\u202f000\u202f000" and count(2.5) == "2.5"
    assert (
        duration(0.04) == "0.0 s" and duration(12.4) == "12 s" and duration(185) == "3 min 5 s" and duration("x") == "–"
    )


def test_timestamps_read_as_dates() -> None:
    assert timestamp("2026-11-30T03:12:36+00:00") == "2026-11-30 03:12 UTC"
    assert timestamp("2026-11-30T03:12:36+02:00") == "2026-11-30 03:12 +0200"
    assert timestamp("<yesterday>") == "<yesterday>"


def test_compact_rounds_and_cuts() -> None:
    assert compact({"a": [0.123456789, 1]}) == '{"a": [0.1235, 1]}'
    assert compact(list(range(1000)), limit=20).endswith("…") and len(compact(list(range(1000)), limit=20)) == 20


def test_slugs_and_anchors_are_safe_names() -> None:
    assert slug("<script>alert(1)</script>") == "script-alert-1-script"
    assert slug("specverify.reference") == "specverify.reference"
    assert slug("../../etc/passwd") == "etc-passwd"
    assert anchor("fit.conditional[low-precision]") == "check-fit-conditional-low-precision"


STEP = {
    "kind": "step", "label": "zeros", "precision": "float64", "K": 2, "V": 3,
    "target_probs": [[0.5, 0.5, 0.0], [0.2, 0.3, 0.5], [1.0, 0.0, 0.0]],
    "draft_probs": [[0.0, 1.0, 0.0], [0.1, 0.1, 0.8]], "draft_tokens": [1, 2],
}  # fmt: skip


def test_a_step_case_is_shown_as_probability_tables_with_the_drafts_marked() -> None:
    shown = example(STEP)
    assert shown.summary == "step case 'zeros': K=2, V=3, float64"
    assert ("draft_tokens", "[1, 2]") in shown.facts and not any(k == "K" for k, _ in shown.facts)
    target, draft = shown.tables
    assert target.row_labels == ["p0", "p1", "p2"] and draft.row_labels == ["q0", "q1"]
    assert target.marked == {(0, 1), (1, 2)} and draft.marked == {(0, 1), (1, 2)}
    assert (0, 2) in target.zero and target.rows[1] == ["0.2", "0.3", "0.5"]


def test_cases_models_and_unknown_values() -> None:
    assert example({"cases": [STEP]}).summary == shape_summary(STEP)  # one case: shown as itself
    two = example({"cases": [STEP, STEP]})
    assert two.summary.startswith("2 cases: ") and len(two.parts) == 2
    model = example({"kind": "model", "K": 1, "V": 2, "target_tables": [[[0.5, 0.5]], [[0.5, 0.5], [1.0, 0.0]]]})
    assert [t.title for t in model.tables] == ["target_tables[0]", "target_tables[1]"]
    odd = example({"weird": [[1, 2], [3]], "huge": [[0.0] * 500] * 2})
    assert [k for k, _ in odd.other] == ["weird", "huge"]
    assert example("just text").summary == "just text"
    assert size_key({"cases": [STEP, {**STEP, "K": 4}]}) == (4, 3) and size_key(None)[0] > 1000
