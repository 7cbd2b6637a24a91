"""The README is a landing page that runs as written: its set-up command, its example sampler (and
the hint its undeclared twin gets), its size, and the docs site's copy of it."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

import specverify

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
SETUP = (
    "python3 -m venv .venv && . .venv/bin/activate && pip install torch==2.13.0 && pip install -e '.[dev]' && "
    "specverify check specverify.samplers:reference --json out.json --report out.html"
)


def test_the_readme_is_a_landing_page():
    assert len(README.encode()) < 10_000
    assert SETUP in README.splitlines()  # the first set-up command: set-up plus the main job, one line
    assert "python -m pytest -n 2" in README and "pip install .\n" in README
    for page in re.findall(r"\]\(docs/([^)#]+)", README):
        assert (ROOT / "docs" / page).is_file(), page


def test_the_docs_index_is_the_readme_with_site_links():
    index = (ROOT / "docs" / "index.md").read_text()
    assert index.replace("](", "](docs/").count("](docs/") >= README.count("](docs/")
    assert README.split("## Documentation")[0].replace("](docs/", "](") == index.split("## Documentation")[0]


def _example(monkeypatch, source: str) -> types.ModuleType:
    module = types.ModuleType("mine")
    exec(compile(source, "README.md[mine.py]", "exec"), module.__dict__)  # noqa: S102 (our own README)
    monkeypatch.setitem(sys.modules, "mine", module)
    return module


@pytest.fixture
def example_source() -> str:
    found = re.search(r"```python\n(# mine\.py\n.*?)```", README, flags=re.DOTALL)
    assert found, "the README's example sampler (# mine.py)"
    return found.group(1)


def test_the_readmes_one_row_sampler_passes_the_contract_as_declared(monkeypatch, example_source):
    mine = _example(monkeypatch, example_source)
    assert mine.sampler.capabilities.batched is False
    result = specverify.check(
        mine.sampler, budget="quick", select=["contract.output", "contract.one-hot", "support"], isolation="in-process"
    )
    assert result.checks and all(c.status == "pass" for c in result.checks), [
        (c.id, c.status, c.message) for c in result.checks
    ]


def test_undeclared_it_fails_with_the_hint_the_readme_quotes(monkeypatch, example_source):
    mine = _example(monkeypatch, example_source.replace(", batched=False)", ")"))
    result = specverify.check(mine.sampler, budget="quick", select=["contract.output"], isolation="in-process")
    (output,) = result.checks
    assert output.status == "fail" and "declare batched=False" in (output.message or "")
    quoted = re.search(r'"(tokens has shape \(1, 3\), expected \(\d+, 3\))', README.replace("\n", " "))
    assert quoted and "tokens has shape (1, " in (output.message or "")
