"""Rendering a report from a run's JSON imports neither torch nor Hypothesis (nor the checks).

Each test runs in a fresh interpreter, so what the test process already imported cannot hide an
import.
"""

from __future__ import annotations

import json
import subprocess
import sys

from ._runs import hostile_run

HEAVY = ("torch", "hypothesis", "specverify.checks", "specverify._run._driver")


def imported_after(code: str) -> list[str]:
    probe = f"{code}\nimport sys\nprint(__import__('json').dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_write_report_from_json_imports_no_torch_and_no_hypothesis(tmp_path):
    run = tmp_path / "run.json"
    run.write_text(json.dumps(hostile_run().to_json()))
    page = tmp_path / "page.html"
    code = f"import json, specverify.report as r\nr.write_report(json.load(open({str(run)!r})), {str(page)!r})\n"
    assert imported_after(code) == []
    assert "<html" in page.read_text()


def test_the_report_command_imports_no_torch_and_no_hypothesis(tmp_path):
    run = tmp_path / "run.json"
    run.write_text(json.dumps(hostile_run().to_json()))
    index = tmp_path / "index.html"
    code = (
        "from specverify._cli import main\n"
        f"status = main(['report', {str(run)!r}, '-o', {str(index)!r}])\n"
        "assert status in (0, None), status\n"
    )
    assert imported_after(code) == []
    assert index.is_file()
