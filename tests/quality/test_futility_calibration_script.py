"""scripts/futility_calibration.py: the calibration table of futility looks is written as documented."""

from __future__ import annotations

import sys


def test_the_calibration_writes_a_row_per_setting_with_its_level_power_and_savings(load_by_path, tmp_path, monkeypatch):
    script = load_by_path("scripts/futility_calibration.py")
    out = tmp_path / "calibration.md"
    monkeypatch.setattr(
        sys, "argv", ["futility_calibration.py", "--runs", "40", "--limit-runs", "50", "--output", str(out)]
    )
    script.main()
    rows = [line for line in out.read_text().splitlines() if line.startswith("| ") and "cells" in line.split("|")[1]]
    assert len(rows) == len(script.SETTINGS)
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert float(cells[5]) < 0.8  # a conforming decision stops early on average
        assert cells[7].startswith("0 of 40") or int(cells[7].split()[0]) <= 1  # level 1e-3 or less
    schedules = [line for line in out.read_text().splitlines() if line.startswith("| 0.")]
    assert len(schedules) == len(script.SCHEDULES)
    assert schedules[0].startswith(
        f"| {', '.join(map(str, script.LOOKS))} | {script.FINAL_SHARE} |"
    )  # the library's first
    for row in schedules:
        costs = [float(c) for c in row.strip("|").split("|")[2:]]
        assert len(costs) == len(script.EXPERIMENTS) + 2 and all(0.3 < c < 1.2 for c in costs)
