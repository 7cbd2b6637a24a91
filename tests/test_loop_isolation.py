"""A generation loop runs in a supervised process: a crash, exit, exception or hang of the loop is
a finding of the check it happened in, the run goes on in a fresh worker, JSON and HTML are written.

Events and exit codes only, never durations.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_isolation import interrupt

from specverify._cli import main


def run(spec: str, tmp_path: Path, *extra: str) -> tuple[int, dict, str]:
    out, html = tmp_path / "run.json", tmp_path / "run.html"
    argv = [
        "loop",
        spec,
        "--budget",
        "quick",
        "--only",
        "loop.output",
        "--only",
        "loop.determinism",
        "--json",
        str(out),
        "--report",
        str(html),
        "-q",
        *extra,
    ]
    code = main(argv)
    return code, json.loads(out.read_text()), html.read_text()


@pytest.mark.parametrize(
    ("loop", "violation", "fragment"),
    [
        ("segfaults", "crashed", "SIGSEGV"),
        ("exits", "raised", "sys.exit(3)"),
        ("raises", "raised", "IndexError: index 9 is out of bounds"),
    ],
)
def test_a_loop_that_crashes_fails_its_check_and_the_next_check_runs_in_a_fresh_worker(
    loop, violation, fragment, tmp_path
):
    code, data, html = run(f"isolation_loops:{loop}", tmp_path)
    assert code == 1 and data["verdict"] == "non-conformant"
    by_id = {c["id"]: c for c in data["checks"]}
    fault = by_id["loop.output"]
    assert fault["status"] == "fail" and fault["finding"] == "contract" and fault["evidence"]["violation"] == violation
    assert fragment in fault["message"] and "<html" in html[:2000].lower()
    assert by_id["loop.determinism"]["status"] == "pass"
    isolation = data["run"]["isolation"]
    assert isolation["mode"] == "process" and isolation["crashes"] == (violation == "crashed")
    assert isolation["worker_starts"] == (2 if violation == "crashed" else 1)
    if loop == "segfaults":
        assert "after 1 model calls" in fault["message"] and "about to fault" in fault["evidence"]["sampler_output"]
    if loop == "raises":
        assert "isolation_loops.py" in fault["evidence"]["traceback"]


def test_a_hung_loop_is_killed_at_the_limit_and_the_run_goes_on(tmp_path):
    code, data, _ = run("isolation_loops:hangs", tmp_path, "--timeout", "2")
    assert code == 1
    by_id = {c["id"]: c for c in data["checks"]}
    assert by_id["loop.output"]["evidence"]["violation"] == "hang" and "within 2 s" in by_id["loop.output"]["message"]
    assert by_id["loop.determinism"]["status"] == "pass"
    assert data["run"]["isolation"]["hangs"] == 1 and data["run"]["isolation"]["worker_starts"] == 2


def test_in_process_runs_the_loop_here_and_says_why(tmp_path):
    code, data, _ = run("isolation_loops:raises", tmp_path, "--in-process")
    assert code == 1 and data["run"]["isolation"]["mode"] == "in-process"
    assert "--in-process" in data["run"]["isolation"]["reason"]
    assert "IndexError" in data["checks"][0]["message"] and data["checks"][0]["evidence"]["violation"] == "raised"


def test_a_step_sampler_or_a_missing_loop_is_refused_before_anything_runs(capsys):
    assert main(["loop", "specverify.samplers:reference"]) == 2
    assert "not a generation loop" in capsys.readouterr().err
    assert main(["loop", "isolation_loops:nothing_here"]) == 2
    assert "no attribute" in capsys.readouterr().err


def test_the_worker_gives_the_loop_the_same_numbers_as_this_process():
    from specverify._budgets import get_budget
    from specverify._run._driver import check_loop

    budget = get_budget("quick").with_(tv=0.2)
    runs = [
        check_loop(
            "specverify.samplers:loop_reference",
            budget=budget,
            seed=5,
            select=["loop.law[top-k]", "loop.seeds"],
            isolation=mode,
        )
        for mode in ("process", "in-process")
    ]
    assert [r.run["isolation"]["mode"] for r in runs] == ["process", "in-process"]
    assert [(c.id, c.status, c.p_value, c.samples) for c in runs[0].checks] == [
        (c.id, c.status, c.p_value, c.samples) for c in runs[1].checks
    ]


@pytest.mark.parametrize("presses", [1, 2])
def test_ctrl_c_exits_130_with_json_and_html_and_the_loops_worker_ended(presses, tmp_path):
    _, _, data, _ = interrupt(["loop", "isolation_loops:slow", "--budget", "quick"], tmp_path, presses)
    assert data["finished"] is False and [c["id"] for c in data["checks"]] == ["loop.output"]
    assert data["checks"][0]["status"] == "pass" and data["verdict"] != "conformant"
