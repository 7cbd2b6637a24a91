"""Nothing from a sampler can run code or fetch anything in a report.

A sampler's name, its messages, exception text, case labels and repro snippets are data.  Each
test renders them and reads the page back as a browser's parser would: the only script is the
page's own (and the page's policy allows no other), no element carries an event handler, and every
URL points inside the page.
"""

from __future__ import annotations

import base64
import hashlib
import xml.etree.ElementTree as ET
from importlib import resources

import numpy as np

from specverify import RunResult
from specverify.report import render_report
from specverify.report._plots import Comparison, comparison_svg
from specverify.report._svg import INK, inline_svg

from ._audit import Audit, audit
from ._runs import HOSTILE, HOSTILE_SHOWN

_SCRIPT = (resources.files("specverify.report") / "templates" / "report.js").read_text(encoding="utf-8")


def _assert_inert(found: Audit) -> None:
    assert found.scripts == [_SCRIPT], "the page's own script and nothing else"
    assert not found.event_handlers()
    assert not found.unexpected_tags()
    assert all(url.startswith("#") or url == "data:," for url in found.references()), found.references()


def test_hostile_text_everywhere_stays_text(hostile: RunResult) -> None:
    page = render_report(hostile)
    found = audit(page)
    _assert_inert(found)
    # Shown, verbatim, as text: in the banner, the messages, the skip reason, the environment.
    assert found.text.count(HOSTILE_SHOWN) >= 8
    assert "{{ 7*7 }}" in " ".join(found.text)  # data is never a template


def test_bidirectional_controls_are_shown_not_obeyed(hostile: RunResult) -> None:
    """A right-to-left override in a sampler's text would reverse what the page says after it."""
    page = render_report(hostile)
    assert "\u202e" not in page
    assert "&lt;U+202E&gt; reversed?" in page


def test_a_real_sampler_named_script_that_raises_markup_is_escaped(raising_run: RunResult) -> None:
    name = raising_run.run["sampler"]["name"]
    assert name.startswith("<script>")
    page = render_report(raising_run)
    found = audit(page)
    _assert_inert(found)
    assert name in found.text
    messages = [c.message for c in raising_run.checks if c.status == "fail"]
    assert messages and all("<img src=x onerror=alert(1)>" in m for m in messages)
    assert all(m in found.text for m in messages)


def test_the_policy_allows_only_the_page_script_and_forbids_fetching(hostile: RunResult) -> None:
    page = render_report(hostile)
    (policy,) = [
        v for tag, name, v in audit(page).attributes if tag == "meta" and name == "content" and "default-src" in v
    ]
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    digest = base64.b64encode(hashlib.sha256(_SCRIPT.encode()).digest()).decode()
    assert directives["default-src"] == "'none'"
    assert directives["script-src"] == f"'sha256-{digest}'"
    assert directives["img-src"] == "data:"
    assert page.index("Content-Security-Policy") < page.index("<style>") < page.index("<script>")


def test_the_svg_sanitiser_keeps_drawing_and_drops_everything_active() -> None:
    svg = """<?xml version="1.0"?>
    <svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="10pt" height="10pt"
         viewBox="0 0 10 10" onload="alert(1)">
      <script>alert(2)</script>
      <defs><clipPath id="c1"><rect x="0" y="0" width="5" height="5"/></clipPath>
        <style>@import url(http://evil.example/x.css); .a { fill: red }</style></defs>
      <foreignObject><div xmlns="http://www.w3.org/1999/xhtml">x</div></foreignObject>
      <a xlink:href="javascript:alert(3)"><text>link</text></a>
      <g id="unused" clip-path="url(#c1)" style="fill: url(http://evil.example/p)"><path d="M0 0" onclick="x()"/></g>
      <use xlink:href="http://evil.example/sprite.svg#a"/>
      <use xlink:href="#c1"/>
      <text style="fill: #010203">&lt;script&gt;alert(4)&lt;/script&gt;</text>
    </svg>"""
    out = inline_svg(svg, "plot-x", label="a <label>")
    root = ET.fromstring(out)
    tags = {element.tag.rsplit("}", 1)[-1] for element in root.iter()}
    assert tags <= {"svg", "defs", "clipPath", "rect", "style", "g", "path", "use", "text"}
    attributes = [(name, value) for element in root.iter() for name, value in element.attrib.items()]
    assert not [name for name, _ in attributes if name.rsplit("}", 1)[-1].startswith("on")]
    assert [v for n, v in attributes if n.endswith("href")] == ["#plot-x-c1"]
    assert ("clip-path", "url(#plot-x-c1)") in attributes
    assert "evil.example" not in out and "javascript:" not in out and "<script" not in out
    assert "&lt;script&gt;alert(4)&lt;/script&gt;" in out  # text stays text
    assert INK not in out and "currentColor" in out
    assert root.get("aria-label") == "a <label>" and root.get("height") is None


def test_plot_labels_with_markup_are_drawn_as_text() -> None:
    data = Comparison(np.array([3.0, 1.0]), np.array([2.0, 2.0]), [HOSTILE[:20], "$x$"], 2, 2, "outcome")
    out = comparison_svg(data, "plot-h", label=HOSTILE)
    root = ET.fromstring(out)
    texts = ["".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert HOSTILE[:20] in texts and "$x$" in texts  # a dollar sign is not TeX
    found = audit(out)
    assert not found.scripts and not found.event_handlers() and not found.unexpected_tags()
