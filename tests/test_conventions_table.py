"""docs/conventions.md is generated from the presets: the checked-in page is the script's output."""

from __future__ import annotations

import pytest

from specverify._warps.presets import PRESETS


@pytest.fixture()
def script(load_by_path):
    return load_by_path("scripts/conventions_table.py")


def test_the_checked_in_table_is_the_scripts_output(script):
    assert script.PAGE.read_text() == script.render(), (
        "docs/conventions.md is stale: run python scripts/conventions_table.py"
    )
    assert script.main(["--check"]) == 0


def test_the_table_names_every_preset_and_every_pair(script):
    page = script.render()
    assert all(f"`{name}`" in page for name in PRESETS)
    assert page.count(" / ") >= len(PRESETS) * (len(PRESETS) - 1) // 2
    largest = page.splitlines()[-1]
    assert "**0.000**" not in largest  # every pair of presets is told apart by some case


def test_a_stale_page_fails_the_check(script, tmp_path, monkeypatch):
    stale = tmp_path / "conventions.md"
    stale.write_text("# by hand\n")
    monkeypatch.setattr(script, "PAGE", stale)
    assert script.main(["--check"]) == 1
