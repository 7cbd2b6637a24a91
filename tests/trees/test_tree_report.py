"""A failing tree case is drawn in the report: nodes, tokens, the accepted path, where the law breaks."""

from __future__ import annotations

import specverify
from specverify._record.evidence import unknown_keys
from specverify.report._tree_svg import tree_case_svg
from specverify.report._view import run_view
from specverify.zoo import TREE_MEMBERS


def test_a_failing_tree_case_is_drawn_with_its_path_and_the_node_the_target_forbids() -> None:
    result = specverify.check(
        TREE_MEMBERS["tree-coin-zero-accepts-zero-mass"], budget="quick", seed=0, select=["trees.support*"]
    )
    (failure,) = result.checks
    case = failure.evidence["tree_case"]
    assert unknown_keys(failure.to_json()["evidence"]) == []  # the fault's details and the tree case are in the schema
    assert case["path"][0] == 0 and case["breaks_at"] in case["path"]  # the accepted zero-mass node is on the path
    view = run_view(result.to_json())
    (card,) = view.failures
    assert card.tree is not None and "<svg" in card.tree
    assert card.tree.count("<circle") == len(case["parents"])
    assert card.tree.count('stroke-width="3.5"') == len([n for n in case["path"] if n > 0])  # the path's edges, thick
    assert card.tree.count('stroke="#c0392b"') == 1  # one node ringed: where the law breaks


def test_tree_drawing_rings_the_node_farthest_from_the_exact_law_and_refuses_a_non_tree() -> None:
    case = {
        "parents": [-1, 0, 0, 1],
        "tokens": [-1, 5, 6, 7],
        "ends_observed": [10, 10, 80, 0],
        "ends_expected": [10.0, 10.0, 50.0, 30.0],
    }
    svg = tree_case_svg(case, "t", label="case")
    assert svg is not None and svg.count("<circle") == 4 and "expected 30.0" in svg
    assert svg.count('stroke-width="3.5"') == 2  # root -> 1 -> 3: the path to the worst node (3)
    assert tree_case_svg({"parents": [-1, 2, 0], "tokens": [-1, 1, 2]}, "t", label="x") is None
