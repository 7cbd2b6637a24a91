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
def test_a_tree_sampler_that_fails_in_its_worker_fails_that_check_and_the_next_one_runs(
    sampler, violation, fragment, restarts, tmp_path
):
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
        # call 2: call 1 was the first call, on a tiny case before the battery (specverify._calling.first_call)
        assert "call 2 " in fault["message"] and "about to fault" in fault["evidence"]["sampler_output"]
    if sampler == "raises":
        assert "isolation_trees.py" in fault["evidence"]["traceback"]


def test_a_hung_tree_sampler_is_killed_at_the_limit_and_the_run_goes_on(tmp_path):
    code, data, _ = run("isolation_trees:hangs", tmp_path, "--timeout", "2")
    assert code == 1
    by_id = {c["id"]: c for c in data["checks"]}
    assert (
        by_id["trees.output[shapes]"]["evidence"]["violation"] == "hang"
        and "within 2 s" in by_id["trees.output[shapes]"]["message"]
    )
    assert by_id["trees.support[zero-coins]"]["status"] == "pass"
    assert data["run"]["isolation"]["hangs"] == 1 and data["run"]["isolation"]["worker_starts"] == 2


def test_in_process_runs_the_tree_sampler_here_and_says_why(tmp_path):
    code, data, _ = run("isolation_trees:raises", tmp_path, "--in-process")
    assert (
        code == 1
        and data["run"]["isolation"]["mode"] == "in-process"
        and "--in-process" in data["run"]["isolation"]["reason"]
    )
    assert data["checks"][0]["evidence"]["violation"] == "raised" and "IndexError" in data["checks"][0]["message"]


def test_the_worker_gives_a_tree_sampler_the_same_numbers_as_this_process():
    budget = get_budget("quick").with_(tv=0.2)
    select = ["trees.conditional[[]star]", "trees.target-law[[]binary]", "trees.acceptance[[]chain]"]
    runs = [
        specverify.check("specverify.samplers:tree_reference", budget=budget, seed=3, select=select, isolation=mode)
        for mode in ("process", "in-process")
    ]
    assert [r.run["isolation"]["mode"] for r in runs] == ["process", "in-process"]
    process, here = ([(c.id, c.status, c.p_value, c.samples) for c in r.checks] for r in runs)
    assert (
        process == here and len(process) == 5 and all(p is not None for _, _, p, _ in process)
    )  # each target-law with its acceptance


@pytest.mark.parametrize("isolation", ["process", "in-process"])
def test_a_tree_sampler_is_imported_and_built_once(isolation):
    from specverify._kinds import TreeKind
    from specverify._run._driver import load_sut

    builds = []
    for _ in range(2):  # the second load reuses the first's process (or this one): the count goes on
        sut = load_sut("isolation_trees:counted_factory", isolation=isolation)
        try:
            assert sut.kind == TreeKind("specinfer") and sut.algorithm == "specinfer"
            builds.append(int(sut.name.rsplit("-", 1)[1]))
        finally:
            sut.close()
    assert builds[1] - builds[0] == 1


def _mixed_trees(rows: int, marked_row: int | None = None):
    """Chains of depth 3 and stars of depth 1 in turn (so rows' paths differ in length), V = 5;
    ``marked_row``'s first candidate is token 4 (``one_tree_per_call`` then misbehaves on it)."""
    import torch

    from specverify._trees.contract import TreeBatch

    g = torch.Generator().manual_seed(3)
    parents = torch.tensor([[-1, 0, 1, 2], [-1, 0, 0, 0]]).repeat(rows // 2, 1)
    tokens = torch.tensor([[-1, 1, 2, 3], [-1, 2, 1, 3]]).repeat(rows // 2, 1)
    if marked_row is not None:
        tokens[marked_row, 1] = 4
    target, draft = (torch.rand(rows, 4, 5, generator=g, dtype=torch.float64) + 0.05 for _ in range(2))
    return TreeBatch(parents, tokens, target / target.sum(-1, keepdim=True), draft / draft.sum(-1, keepdim=True))


def test_an_unbatched_tree_sampler_isolated_has_its_rows_called_in_one_round_trip_with_the_same_outputs():
    import torch

    from specverify._run._driver import load_sut

    tree, outputs = _mixed_trees(64), {}
    for isolation in ("in-process", "process"):
        sut = load_sut("isolation_trees:one_tree_per_call", isolation=isolation)
        try:
            before = sut._process.exchanges if isolation == "process" else 0
            outputs[isolation] = sut.step(tree, generator=torch.Generator().manual_seed(7))
            assert sut.calls == 64 and sut.rows == 64
            if isolation == "process":
                assert sut._process.exchanges - before == 1  # one round trip for the 64 calls
        finally:
            sut.close()
    (path, token), (path_iso, token_iso) = outputs["in-process"], outputs["process"]
    assert torch.equal(path, path_iso) and torch.equal(token, token_iso)
    assert path.shape == (64, 4) and (path[1::2, 2:] == -1).all()  # the stars' paths padded beyond their depth, 1


def _faults_of_one_tree_per_call(tree) -> dict:
    """The violation ``one_tree_per_call`` gets on ``tree``, in-process and isolated."""
    import torch

    from specverify._run._driver import load_sut

    faults = {}
    for isolation in ("in-process", "process"):
        sut = load_sut("isolation_trees:one_tree_per_call", isolation=isolation)
        try:
            with pytest.raises(specverify.SamplerFault) as caught:
                sut.step(tree, generator=torch.Generator().manual_seed(7))
            faults[isolation] = caught.value.violation
        finally:
            sut.close()
    return faults


def test_an_unbatched_tree_samplers_malformed_row_is_found_as_if_called_one_round_trip_a_row():
    faults = _faults_of_one_tree_per_call(_mixed_trees(8, marked_row=2))
    assert faults["process"] == faults["in-process"] and faults["process"].rule == "shape-dtype"


def test_an_unbatched_tree_samplers_first_broken_row_is_the_one_a_row_by_row_audit_finds():
    """Row 1 emits a token of target probability 0 and row 4 a broken path: auditing the rows
    together skips the support rule (a path is broken), yet the finding is row 1's, as row by row."""
    from specverify._trees.contract import TreeBatch

    tree = _mixed_trees(8)
    tokens, target = tree.tokens.clone(), tree.target_probs.clone()
    tokens[1, 3], tokens[4, 3] = 0, 4
    target[1, :, 0] = 0.0
    faults = _faults_of_one_tree_per_call(
        TreeBatch(tree.parents, tokens, target / target.sum(-1, keepdim=True), tree.draft_probs)
    )
    assert faults["process"] == faults["in-process"]
    assert faults["process"].rule == "zero-target" and faults["process"].row == 1
