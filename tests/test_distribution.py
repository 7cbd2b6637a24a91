"""The distribution is ``speculative-verify``: ``specverify`` on the package index is another project, so no
install hint the package prints or the docs show may name it (a user who follows it installs that project)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import specverify

ROOT = Path(__file__).resolve().parents[1]
DISTRIBUTION = "speculative-verify"
# Everything a user reads an install line from: the code's messages and help, the README, the docs, the examples.
SOURCES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))] + [
    path for folder in ("specverify", "examples") for path in sorted((ROOT / folder).rglob("*.py"))
]
# `pip install NAME`, `pip install 'NAME[extra]'`, `pip install "NAME"`: the first requirement it names.
_INSTALL = re.compile(r"pip install\s+(?:-\w+\s+)*['\"]?([A-Za-z0-9_.\-]+)(\[[^\]]*\])?")


def _project() -> dict:
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11's tomllib")
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _hints() -> list[tuple[str, str, str]]:
    found = []
    for path in SOURCES:
        for match in _INSTALL.finditer(path.read_text()):
            found.append((str(path.relative_to(ROOT)), match.group(1), match.group(2) or ""))
    return found


def test_the_project_is_distributed_as_speculative_verify():
    project = _project()
    assert project["name"] == DISTRIBUTION
    assert project["scripts"] == {"specverify": "specverify._cli:main"}  # the command keeps the import's name


def test_no_install_hint_names_the_other_projects_distribution():
    hints = _hints()
    assert len(hints) >= 10  # the pattern finds the hints (a broken pattern would pass vacuously)
    wrong = [f"{path}: pip install {name}{extras}" for path, name, extras in hints if name.lower() == "specverify"]
    assert wrong == []
    for path in SOURCES:
        text = path.read_text()
        assert "pip install specverify" not in text and "pip install 'specverify[" not in text, path


def test_every_hint_for_an_extra_of_ours_names_the_distribution():
    extras = set(_project()["optional-dependencies"])
    ours = [(path, name, extra) for path, name, extra in _hints() if extra and extra.strip("[]") in extras]
    assert {extra for _, _, extra in ours} >= {"[ray]", "[transformers]"}
    assert all(name in (DISTRIBUTION, ".") for _, name, _ in ours), ours  # the index's name or a checkout


def test_the_messages_the_code_prints_name_the_distribution(monkeypatch, capsys):
    import importlib.util
    import sys

    from specverify._calling import ray_pool
    from specverify._cli import main

    monkeypatch.setenv("COLUMNS", "1000")  # one line an option: argparse would wrap at the name's hyphen
    with pytest.raises(SystemExit):
        main(["check", "--help"])
    assert "pip install 'speculative-verify[ray]'" in " ".join(capsys.readouterr().out.split())

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real_find_spec(name, *a)
    )
    with pytest.raises(specverify.UsageError, match=re.escape("pip install 'speculative-verify[ray]'")):
        ray_pool.ray_usable(None)

    monkeypatch.setitem(sys.modules, "transformers", None)
    monkeypatch.setitem(sys.modules, "transformers.generation.utils", None)
    with pytest.raises(specverify.SamplerSpecError, match=re.escape("pip install 'speculative-verify[transformers]'")):
        specverify.load_sampler("specverify.adapters.transformers:sampler")
