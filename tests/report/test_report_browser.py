"""The report in a real browser: headless Chromium loads it cleanly and shows the verdict.

Chromium is driven over the DevTools protocol on a pipe (see ``_chromium``), so the test hears every
console message, exception, CSP violation and network request.  Where Chromium is not installed the
tests skip with the reason, unless ``SPECVERIFY_REQUIRE_BROWSER=1`` (set it in CI) makes that a
failure.  ``SPECVERIFY_SCREENSHOTS=DIR`` keeps screenshots of the pages for a person to look at.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from specverify import RunResult
from specverify._record.reach import claims, span_text
from specverify.report import build_index, write_report
from specverify.report._format import detects
from specverify.report._view import run_view

from ._chromium import Chromium, find_chromium
from ._runs import HOSTILE_SHOWN

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Chromium]:
    executable = find_chromium()
    if executable is None:
        reason = "Chromium is not installed (Debian: apt-get install -y chromium); CI installs it"
        if os.environ.get("SPECVERIFY_REQUIRE_BROWSER") == "1":
            pytest.fail(reason + ", but SPECVERIFY_REQUIRE_BROWSER=1")
        pytest.skip(reason)
    with Chromium(executable) as chromium:
        yield chromium


def _screenshot(browser: Chromium, tmp_path: Path, name: str) -> Path:
    folder = Path(os.environ.get("SPECVERIFY_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    browser.screenshot(path)
    assert path.stat().st_size > 10_000  # a rendered page, not a blank one
    return path


def test_a_failing_report_loads_cleanly_and_leads_with_the_failure(
    browser: Chromium, lossy_run: RunResult, tmp_path: Path
) -> None:
    page = tmp_path / "lossy.html"
    write_report(lossy_run, page)
    load = browser.load(page)
    assert load.problems == []
    assert load.requests == [page.resolve().as_uri()], "nothing fetched but the page itself"
    assert browser.evaluate("document.querySelector('h1.verdict').innerText") == "lossy"
    # Above the fold: what failed, on which case, and the way to the repro.
    headline = browser.evaluate(
        "(() => { const r = document.querySelector('.headline').getBoundingClientRect(); return [r.top, r.bottom]; })()"
    )
    assert 0 <= headline[0] and headline[1] <= 900
    text = browser.evaluate("document.querySelector('.headline').innerText")
    first = browser.evaluate("document.querySelector('section.card code').innerText")
    assert first in text and "Smallest failing case" in text and "How to reproduce it" in text
    assert browser.evaluate("document.querySelectorAll('section.card svg').length") >= 1
    _screenshot(browser, tmp_path, "failing-report")
    # The copy button works without an error (clipboard, or the selection fallback) and says so.
    browser.evaluate("document.querySelector('button[data-copy]').click()")
    assert browser.settle().problems == []
    assert browser.evaluate("document.querySelector('button[data-copy]').innerText") in (
        "Copied",
        "Selected: press Ctrl+C",
    )


def test_dark_mode_follows_the_reader(browser: Chromium, lossy_run: RunResult, tmp_path: Path) -> None:
    page = tmp_path / "lossy.html"
    write_report(lossy_run, page)
    colours = {}
    for dark in (False, True):
        assert browser.load(page, dark=dark).problems == []
        colours[dark] = browser.evaluate(
            "[getComputedStyle(document.documentElement).backgroundColor, getComputedStyle(document.body).color,"
            " getComputedStyle(document.querySelector('figure svg')).color]"
        )
    assert colours[False][0] == "rgb(255, 255, 255)" and colours[True][0] == "rgb(13, 17, 23)"
    for background, text, plot in colours.values():
        assert plot == text != background  # plot ink is the page's text colour
    _screenshot(browser, tmp_path, "failing-report-dark")


def test_a_hostile_sampler_cannot_run_code(browser: Chromium, hostile: RunResult, tmp_path: Path) -> None:
    page = tmp_path / "hostile.html"
    write_report(hostile, page)
    load = browser.load(page)
    assert load.dialogs == [] and load.problems == []
    assert load.requests == [page.resolve().as_uri()]
    assert browser.evaluate("typeof window.__pwned") == "undefined"
    assert browser.evaluate("document.querySelectorAll('script').length") == 1
    assert browser.evaluate("document.querySelector('.banner .sampler').textContent") == HOSTILE_SHOWN
    # Long unbroken text wraps: the page never scrolls sideways.
    assert browser.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")


def test_the_index_loads_cleanly_and_its_links_resolve(
    browser: Chromium, lossy_run, support_run, tmp_path: Path
) -> None:
    inputs = []
    for name, run in (("a", lossy_run), ("b", support_run)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(run.to_json()), encoding="utf-8")
        inputs.append(str(path))
    index = tmp_path / "site" / "index.html"
    assert build_index(inputs, str(index)) == 0
    load = browser.load(index)
    assert load.problems == [] and load.requests == [index.resolve().as_uri()]
    links = browser.evaluate("[...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href'))")
    targets = {link.split("#")[0] for link in links if not link.startswith("#")}
    assert targets == {"replacement-from-target.html", "abs-residual.html"}
    assert all((index.parent / target).exists() for target in targets)
    verdicts = browser.evaluate("[...document.querySelectorAll('td .badge')].map(b => b.innerText.toLowerCase())")
    assert verdicts == ["lossy", "non-conformant"]
    _screenshot(browser, tmp_path, "index")


def test_a_float_edge_finding_shows_both_sizes_and_is_not_a_failure(
    browser: Chromium, float_edge_run: RunResult, tmp_path: Path
) -> None:
    edge = next(c for c in float_edge_run.checks if c.status == "float-edge")
    page = tmp_path / "float-edge.html"
    write_report(float_edge_run, page)
    load = browser.load(page)
    assert load.problems == []
    assert browser.evaluate("document.querySelector('#failures')") is None  # nothing failed
    section = browser.evaluate("document.querySelector('#float-edges').innerText")
    assert section == "Float-edge findings"
    table = browser.evaluate("document.querySelector('table.grid.sizes tbody tr').innerText")
    shown = run_view(float_edge_run.to_json(), plots=False).float_edges[0]
    assert shown.event is not None
    assert (
        edge.id in table
        and shown.event["tv_given"] in table
        and shown.event["bound"] in table
        and shown.event["probability"] in table
    )
    card = browser.evaluate(f"document.getElementById({json.dumps(_anchor(edge.id))}).innerText")
    assert (
        "TV given the event" in card
        and "bound on the emitted law's TV" in card
        and "float-edge finding that decides no verdict" in card
    )
    assert "float-edge" in browser.evaluate("document.querySelector('.legend').innerText")
    assert "2e-20" in browser.evaluate("document.querySelector('.legend-note').innerText")
    _screenshot(browser, tmp_path, "float-edge-report")


def _anchor(check_id: str) -> str:
    from specverify.report._format import anchor

    return anchor(check_id)


#: Where the committed screenshots of a conformant and a lossy report live (docs/report.md shows them).
SCREENSHOTS = Path(__file__).resolve().parents[2] / "reports" / "screenshots"

_SKIP_CELLS = """[...document.querySelectorAll('#matrix ~ .scroll td.cell.status-skip')].map(td => {
  const s = getComputedStyle(td), mark = td.querySelector('.mark');
  return {text: td.innerText, image: s.backgroundImage, colour: getComputedStyle(mark).color, \
italic: getComputedStyle(td.querySelector('a')).fontStyle};
})"""


def _skips_are_drawn_as_skips(browser: Chromium, run: RunResult) -> None:
    """Every case where only skips happened is a hatched grey cell marked ⊘, never the failure's
    red; the family totals count passes among the checks that ran and decide, skips (and
    float-edge findings) apart."""
    skipped = {(c.case or "(any case)", c.family) for c in run.checks if c.status == "skip"}
    ran = {(c.case or "(any case)", c.family) for c in run.checks if c.status != "skip"}
    assert skipped, "the run holds a skip to draw"
    cells = browser.evaluate(_SKIP_CELLS)
    assert len(cells) == len(skipped - ran)
    fail_red = browser.evaluate("getComputedStyle(document.documentElement).getPropertyValue('--fail').trim()")
    for cell in cells:
        assert (
            cell["text"].startswith("⊘") and "repeating-linear-gradient" in cell["image"] and cell["italic"] == "italic"
        )
        assert cell["colour"] == "rgb(89, 99, 110)" and fail_red == "#cf222e"  # the skip grey, not the failure red
    footer = browser.evaluate("[...document.querySelectorAll('table.matrix tfoot td')].map(td => td.innerText)")
    families = browser.evaluate(
        "[...document.querySelectorAll('table.matrix thead th')].slice(1).map(th => th.innerText)"
    )
    for family, text in zip(families, footer):
        members = [c for c in run.checks if c.family == family]
        decided = [c for c in members if c.status not in ("skip", "float-edge")]
        apart = [
            f"{mark}\u202f{n}"
            for status, mark in (("float-edge", "≈"), ("skip", "⊘"))
            if (n := sum(c.status == status for c in members))
        ]
        parts = ([f"{sum(c.status == 'pass' for c in decided)}/{len(decided)}"] if decided else []) + (
            [" ".join(apart)] if apart else []
        )
        assert text.strip() == "\n".join(parts), (family, text)


def _shot(browser: Chromium, name: str, tmp_path: Path) -> None:
    """The whole page, into reports/screenshots/ when SPECVERIFY_SCREENSHOTS names it (the
    committed ones are made so), else into the test's folder."""
    folder = Path(os.environ.get("SPECVERIFY_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    browser.screenshot(path, full_page=True)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 20_000


def test_a_conformant_report_states_each_reach_class_and_draws_a_skip_as_a_skip(
    browser: Chromium, reference_run: RunResult, tmp_path: Path
) -> None:
    whole = RunResult(
        run={**reference_run.run, "select": None, "left_out": []}, checks=reference_run.checks
    )  # as a whole run reports them
    assert whole.verdict == "conformant"
    page = tmp_path / "conformant.html"
    write_report(whole, page)
    load = browser.load(page)
    assert load.problems == [] and load.requests == [page.resolve().as_uri()]
    assert browser.evaluate("document.querySelector('h1.verdict').innerText") == "conformant"
    classes = claims(whole.checks)
    assert len(classes) >= 2
    shown = browser.evaluate(
        "[...document.querySelectorAll('.banner .guarantee .reach-classes li')].map(li => li.innerText)"
    )
    assert shown == [f"{detects(tv)} on {span_text(reach)}" for tv, reach in classes if reach is not None]
    assert "every statistical check detects" in browser.evaluate(
        "document.querySelector('.banner .guarantee').innerText"
    )
    _skips_are_drawn_as_skips(browser, whole)
    _shot(browser, "conformant-report", tmp_path)


def test_a_lossy_report_draws_a_skip_as_a_skip_beside_its_failures(
    browser: Chromium, lossy_run: RunResult, tmp_path: Path
) -> None:
    page = tmp_path / "lossy.html"
    write_report(lossy_run, page)
    assert browser.load(page).problems == []
    assert browser.evaluate("document.querySelector('h1.verdict').innerText") == "lossy"
    failing = browser.evaluate(
        "[...document.querySelectorAll('table.matrix td.cell.status-fail')].map(td => "
        "getComputedStyle(td).backgroundColor)"
    )
    assert failing and set(failing) == {"rgb(255, 235, 233)"}  # the failure's red: what a skip must not look like
    # beside the failures, what the checks that passed rule out, by reach class
    classes = claims(lossy_run.checks)
    assert classes
    shown = browser.evaluate(
        "[...document.querySelectorAll('.banner .guarantee .reach-classes li')].map(li => li.innerText)"
    )
    assert shown == [f"{detects(tv)} on {span_text(reach)}" for tv, reach in classes if reach is not None]
    assert "the statistical checks that passed detect" in browser.evaluate(
        "document.querySelector('.banner .guarantee').innerText"
    )
    _skips_are_drawn_as_skips(browser, lossy_run)
    _shot(browser, "lossy-report", tmp_path)


_TREE_TABLES = """[...document.querySelectorAll('.tree-rows table.tree-node')].map(t => {
  const r = t.getBoundingClientRect(), s = getComputedStyle(t);
  return {text: t.innerText, shown: t.offsetParent !== null && r.width > 0 && r.height > 0 && \
s.visibility === 'visible' && s.display !== 'none'};
})"""


def test_a_failing_tree_case_shows_the_probabilities_on_its_path(browser: Chromium, tmp_path: Path) -> None:
    """Beside the failing tree: each path node's target row p and draft row q, the smallest
    |p - q| and the mechanism in words, all visible in the rendered page (the evidence's numbers)."""
    import specverify
    from specverify.report._format import number
    from specverify.zoo import TREE_MEMBERS

    result = specverify.check(
        TREE_MEMBERS["tree-coin-zero-accepts-zero-mass"], budget="quick", seed=0, select=["trees.support*"]
    )
    (failure,) = result.checks
    case = failure.evidence["tree_case"]
    assert failure.status == "fail" and case["rows"] and case["mechanism"]
    page = tmp_path / "tree.html"
    write_report(result, page)
    load = browser.load(page)
    assert load.problems == [] and load.requests == [page.resolve().as_uri()]
    tables = browser.evaluate(_TREE_TABLES)
    assert len(tables) == len(case["rows"]) and all(t["shown"] for t in tables)
    for table, row in zip(tables, case["rows"]):  # V = 5 here: every entry of both rows is shown
        assert f"node {row['node']}" in table["text"]
        cells = table["text"].split()
        assert all(number(p) in cells for p in row["target"]) and all(number(q) in cells for q in row["draft"])
    section = browser.evaluate("document.querySelector('.tree-rows').innerText")
    assert case["mechanism"] in section and number(case["smallest_difference"]) in section
    assert browser.evaluate("document.querySelector('.tree-rows').getBoundingClientRect().height") > 50
    folder = Path(os.environ.get("SPECVERIFY_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    browser.screenshot(folder / "tree-failing-case.png", element=f"#{_anchor(failure.id)}")
    assert (folder / "tree-failing-case.png").stat().st_size > 10_000
