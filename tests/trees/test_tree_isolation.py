"""A tree sampler runs in the supervised worker, as a chain sampler does: a crash, an exit, an
exception, a hang or a write to its inputs fails the check it happened in, the next check runs in a
fresh worker, JSON and HTML are written, and the numbers are those of the harness's own process.

Events and exit codes only, never durations.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import specverify
from specverify._budgets import get_budget
from specverify._cli import main

CHECKS = ("trees.output[[]shapes]", "trees.support[[]zero-coins]")


def run(spec: str, tmp_path: Path, *extra: str) -> tuple[int, dict, str]:
    out, html = tmp_path / "run.json", tmp_path / "run.html"
    argv = ["check", spec, "--budget", "quick", "--json", str(out), "--report", str(html), "--no-progress", *extra]
    for pattern in CHECKS:
        argv += ["--only", pattern]
    code = main(argv)
    return code, json.loads(out.read_text()), html.read_text()


@pytest.mark.parametrize(
    ("sampler", "violation", "fragment", "restarts"),
    [
        ("segfaults", "crashed", "SIGSEGV", 1),
        ("exits", "crashed", "exited with status 3", 1),
        ("raises", "raised", "IndexError: index 9 is out of bounds", 0),
        ("writes_inputs", "inputs-unmodified", "modified its input target_probs in place", 0),
    ],
)
def test_a_tree_sampler_that_fails_in_its_worker_fails_that_check_and_the_next_one_runs(sampler, violation, fragment, restarts, tmp_path):
    code, data, html = run(f"isolation_trees:{sampler}", tmp_path)
    assert code == 1 and data["verdict"] == "non-conformant" and "<html" in html[:2000].lower()
    by_id = {c["id"]: c for c in data["checks"]}
    fault = by_id["trees.output[shapes]"]
    assert fault["status"] == "fail" and fault["evidence"]["violation"] == violation and fragment in fault["message"]
    assert by_id["trees.support[zero-coins]"]["status"] == "pass"
    isolation = data["run"]["isolation"]
    assert isolation["mode"] == "process" and isolation["reason"] is None
    assert isolation["crashes"] == restarts and isolation["worker_starts"] == 1 + restarts
    if sampler == "segfaults":
        assert "call 1 " in fault["message"] and "about to fault" in fault["evidence"]["sampler_output"]
    if sampler == "raises":
        assert "isolation_trees.py" in fault["evidence"]["traceback"]


def test_a_hung_tree_sampler_is_killed_at_the_limit_and_the_run_goes_on(tmp_path):
    code, data, _ = run("isolation_trees:hangs", tmp_path, "--timeout", "2")
    assert code == 1
    by_id = {c["id"]: c for c in data["checks"]}
    assert by_id["trees.output[shapes]"]["evidence"]["violation"] == "hang" and "within 2 s" in by_id["trees.output[shapes]"]["message"]
    assert by_id["trees.support[zero-coins]"]["status"] == "pass"
    assert data["run"]["isolation"]["hangs"] == 1 and data["run"]["isolation"]["worker_starts"] == 2


def test_in_process_runs_the_tree_sampler_here_and_says_why(tmp_path):
    code, data, _ = run("isolation_trees:raises", tmp_path, "--in-process")
    assert code == 1 and data["run"]["isolation"]["mode"] == "in-process" and "--in-process" in data["run"]["isolation"]["reason"]
    assert data["checks"][0]["evidence"]["violation"] == "raised" and "IndexError" in data["checks"][0]["message"]


def test_the_worker_gives_a_tree_sampler_the_same_numbers_as_this_process():
    budget = get_budget("quick").with_(tv=0.2)
    select = ["trees.conditional[[]star]", "trees.target-law[[]binary]", "trees.acceptance[[]chain]"]
    runs = [specverify.check("specverify.samplers:tree_reference", budget=budget, seed=3, select=select, isolation=mode) for mode in ("process", "in-process")]
    assert [r.run["isolation"]["mode"] for r in runs] == ["process", "in-process"]
    process, here = ([(c.id, c.status, c.p_value, c.samples) for c in r.checks] for r in runs)
    assert process == here and len(process) == 3 and all(p is not None for _, _, p, _ in process)


@pytest.mark.parametrize("isolation", ["process", "in-process"])
def test_a_tree_sampler_is_imported_and_built_once(isolation, capsys):
    from specverify._runner import load_sut
    from specverify._tree_calling import TreeSamplerUnderTest

    sut = load_sut("isolation_trees:counted_factory", isolation=isolation)
    try:
        assert isinstance(sut, TreeSamplerUnderTest) and sut.algorithm == "specinfer"
        said = sut._process.output() if isolation == "process" else capsys.readouterr().out
        assert said.count("building the tree sampler") == 1
    finally:
        sut.close()
