"""What a run's page shows: verdict, failures first with their smallest case and repro, evidence."""

from __future__ import annotations

import html
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specverify import CheckResult, RunResult
from specverify._record.reach import claims, span_text
from specverify._record.result import FINDINGS
from specverify.report import render_report
from specverify.report._example import shape_summary
from specverify.report._format import detects

from ._audit import audit
from ._runs import HOSTILE, HOSTILE_SHOWN


def _cards(page: str) -> list[str]:
    """The ids of the check cards, in page order."""
    return [
        html.unescape(m)
        for m in re.findall(
            r'<section class="card status-\w+" id="[^"]+">\s*<h3>.*?<code>(.*?)</code>', page, re.DOTALL
        )
    ]


def _pre(page: str, element_id: str) -> str:
    match = re.search(rf'<pre id="{re.escape(element_id)}"><code>(.*?)</code></pre>', page, re.DOTALL)
    assert match, f"no <pre id={element_id}>"
    return html.unescape(match.group(1))


def test_a_subset_page_says_why_it_is_inconclusive(reference_run: RunResult) -> None:
    page = render_report(reference_run)
    assert reference_run.verdict == "inconclusive"  # a subset can fail a sampler, never pass it
    assert '<h1 class="verdict" data-verdict="inconclusive">inconclusive</h1>' in page
    text = " ".join(audit(page).text)
    assert "a subset can fail a sampler, not pass it" in text and "contract.determinism" in text
    assert "false alarm in this run" not in text  # no guarantee for what was not a pass


def test_reference_page_states_the_verdict_and_the_guarantee(reference_run: RunResult) -> None:
    # the same checks as a whole run reports them (the rendering of a conformant page)
    reference_run = RunResult(run={**reference_run.run, "select": None, "left_out": []}, checks=reference_run.checks)
    page = render_report(reference_run)
    assert reference_run.verdict == "conformant"
    assert '<h1 class="verdict" data-verdict="conformant">conformant</h1>' in page
    text = " ".join(audit(page).text)
    # the banner states the guarantee of each reach class, as the CLI does, not only the weakest
    classes = claims(reference_run.checks)
    assert len(classes) >= 2, classes
    assert "With probability ≥ 0.99, every statistical check detects" in text
    for tv, reach in classes:
        assert reach is not None
        assert f"{detects(tv)} on {span_text(reach)}" in audit(page).text
    assert "false alarm in this run is ≤ 0.0001" in text
    assert 'id="failures"' not in page
    cells: dict[tuple, list[str]] = {}
    for check in reference_run.checks:  # every check is listed; every matrix cell links to one of its checks
        assert check.id in audit(page).text
        cells.setdefault((check.case, check.family), []).append(check.id)
    for ids in cells.values():
        assert any(f'href="#{_anchor(i)}"' in page for i in ids)


def test_failing_page_leads_with_the_most_decisive_smallest_failure(lossy_run: RunResult) -> None:
    page = render_report(lossy_run)
    failing = [c for c in lossy_run.checks if c.status == "fail"]
    assert lossy_run.verdict == "lossy" and len(failing) >= 3
    cards = _cards(page)
    assert sorted(cards) == sorted(c.id for c in failing)
    assert page.index('id="failures"') < page.index('id="matrix"') < page.index('id="passed"')

    first = next(c for c in failing if c.id == cards[0])
    decisive = min(FINDINGS.index(c.finding) for c in failing)
    assert FINDINGS.index(first.finding) == decisive
    peers = [c for c in failing if FINDINGS.index(c.finding) == decisive and "minimal_example" in c.evidence]
    assert "minimal_example" in first.evidence, "a failure with a smallest case comes before one without"
    assert _size(first) == min(_size(c) for c in peers)
    summary = shape_summary(first.evidence["minimal_example"])

    headline = re.search(r'<div class="headline">(.*?)</div>\s*</div>', page, re.DOTALL).group(1)
    words = _text(headline)
    assert first.id in words and first.message in words and summary in words
    assert f'href="#{_anchor(first.id)}-repro"' in headline
    # What a reader copies is exactly the repro snippet the check recorded.
    assert _pre(page, f"{_anchor(first.id)}-repro-text") == first.evidence["repro"]


def test_each_failure_with_counts_gets_an_observed_versus_expected_plot(lossy_run: RunResult) -> None:
    page = render_report(lossy_run)
    for check in lossy_run.checks:
        if check.status != "fail":
            continue
        card = _card(page, check.id)
        has_counts = "observed" in check.evidence or "observed_counts" in check.evidence
        assert ("<svg" in card) == has_counts, check.id
        if "first_mismatch" in check.evidence:
            assert "First mismatch on injected uniforms" in card
            assert str(check.evidence["first_mismatch"]["uniforms"][0]) in _text(card)


def test_support_failure_shows_the_rule_the_case_and_the_drafted_tokens(support_run: RunResult) -> None:
    (check,) = support_run.checks
    assert support_run.verdict == "non-conformant" and check.finding == "support"
    page = render_report(support_run)
    card = _card(page, check.id)
    words = _text(card)
    assert "emitted a token of target probability 0" in words
    assert f"rule broken {check.evidence['violation']}" in words
    (case,) = check.evidence["minimal_example"]["cases"]
    assert shape_summary(case) in words
    assert card.count('class="drafted"') == 2 * case["K"]  # each drafted token, in p and in q


def test_efficiency_is_compared_with_the_exact_optimum(lossy_run: RunResult) -> None:
    page = render_report(lossy_run)
    section = page[page.index('id="efficiency"') : page.index('id="passed"')]
    for check in (c for c in lossy_run.checks if c.family == "efficiency"):
        ev = check.evidence
        assert f"{ev['observed_accepted']:.4g}" in section and f"{ev['expected_accepted']:.4g}" in section
        assert f"{ev['ratio']:.4g}" in section


def test_every_status_has_its_place(hostile: RunResult) -> None:
    page = render_report(hostile)
    for section in ("failures", "errors", "inconclusive", "matrix", "efficiency", "passed", "skipped", "environment"):
        assert f'id="{section}"' in page
    assert "This run did not finish" in page
    assert "were run: the verdict covers those alone" in page
    errors = page[page.index('id="errors"') : page.index('id="inconclusive"')]
    assert "Traceback (most recent call last)" in errors
    skipped = page[page.index('id="skipped"') : page.index('id="environment"')]
    assert HOSTILE_SHOWN in audit(skipped).text  # the reason, as text


def test_environment_lists_versions_and_how_to_repeat_the_run(lossy_run: RunResult) -> None:
    page = render_report(lossy_run)
    run = lossy_run.run
    words = _text(page[page.index('id="environment"') :])
    for name, version in run["versions"].items():
        assert f"{name} {version}" in words
    rerun = _pre(page, "rerun-text")
    assert rerun.startswith(f"specverify check {run['spec']} --budget quick --seed 0")


def test_rendering_is_deterministic(lossy_run: RunResult) -> None:
    assert render_report(lossy_run) == render_report(lossy_run.to_json())


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(["nan", "inf", HOSTILE]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=10,
)
_keys = st.sampled_from(
    ["tv", "where", "minimal_example", "model", "repro", "observed", "expected", "outcome_labels", "observed_counts",
     "expected_law", "ratio", "first_mismatch", "positions", "unconfirmed_alarms", "traceback", "violation", "shape"]
) | st.text(max_size=8)  # fmt: skip


@settings(max_examples=40, derandomize=True, database=None, deadline=None)
@given(
    evidence=st.dictionaries(_keys, _json, max_size=6),
    status=st.sampled_from(["pass", "fail", "error", "inconclusive"]),
)
def test_any_evidence_renders_as_inert_text(evidence: dict, status: str) -> None:
    """Every evidence field is optional and of any shape: the page renders, and nothing in it is active."""
    finding = "non-canonical" if status == "fail" else None  # a failure says what it proves
    check = CheckResult(
        id="fit.conditional[random]", family="fit", case="random", status=status, finding=finding, evidence=evidence
    )
    page = render_report(RunResult(run={"sampler": {"name": "s"}}, checks=[check]), plots=False)
    found = audit(page)
    assert not found.unexpected_tags() and not found.event_handlers() and len(found.scripts) == 1


def _text(fragment: str) -> str:
    """The text a reader sees in a piece of a page, whitespace collapsed."""
    return " ".join(" ".join(audit(fragment).text).split())


def _size(check: CheckResult) -> tuple[int, int]:
    """(K, V) of the largest case in a check's minimal example."""
    example = check.evidence["minimal_example"]
    return max((c["K"], c["V"]) for c in example.get("cases", [example]))


def _anchor(check_id: str) -> str:
    from specverify.report._format import anchor

    return anchor(check_id)


def _card(page: str, check_id: str) -> str:
    start = page.index(f'id="{_anchor(check_id)}"')
    return page[start : page.index("</section>", start)]


@pytest.mark.parametrize("plots", [True, False])
def test_a_run_without_checks_still_renders(plots: bool) -> None:
    page = render_report({"schema_version": 1, "verdict": "inconclusive", "run": {}, "checks": []}, plots=plots)
    assert 'data-verdict="inconclusive"' in page and "unnamed sampler" in page


def test_a_float_edge_finding_is_shown_with_both_sizes_in_its_own_section(float_edge_run: RunResult) -> None:
    assert float_edge_run.verdict == "inconclusive"  # a subset; nothing failed
    edge = next(c for c in float_edge_run.checks if c.status == "float-edge")
    event = edge.evidence["event"]
    assert event["tv_given"] > 0.1 and event["tv_bound"] < 1e-9 and event["log10_tv_bound"] < -15
    assert "the emitted law moves by at most" in (edge.message or "") and "given a draft at position 0" in (
        edge.message or ""
    )
    page = render_report(float_edge_run)
    text = " ".join(audit(page).text)
    assert 'id="float-edges"' in page and 'id="failures"' not in page
    assert (
        "Two sizes of this difference" in text
        and "bound on the emitted law's TV" in text
        and "decides no verdict" in text
    )
    assert "status-float-edge" in page
