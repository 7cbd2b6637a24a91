"""A logits sampler's failure shows the law it had to preserve beside the raw target's law, and
the token it emitted: the warp it skipped is visible at a glance."""

from __future__ import annotations

import torch

from specverify import check
from specverify._kinds.logits_posing import EVIDENCE_MAX_VOCAB, warps_evidence
from specverify.report import write_report


def test_a_skipped_cut_shows_the_emitted_token_forbidden_by_the_warp_and_allowed_by_the_raw_target(tmp_path):
    result = check(
        "specverify.zoo:logits_target_top_k_skipped",
        budget="quick",
        select=["support.zero-target[zeros]"],
        isolation="in-process",
    )
    [failure] = result.checks
    warps = failure.evidence["warps"]
    token, position = warps["emitted"]["token"], warps["emitted"]["position"]
    assert warps["warped"][position][token] == 0 < warps["unwarped"][position][token]
    assert warps["params"]["top_k"] > 0  # the row's cut the sampler skipped
    page = tmp_path / "run.html"
    write_report(result, page)
    html = page.read_text()
    assert (
        "Warped and unwarped laws" in html
        and "law to preserve (warped target)" in html
        and "raw target (unwarped)" in html
    )


def test_no_warps_for_cases_too_large_to_spell_out_or_not_a_step():
    big = {"target_probs": torch.full((2, EVIDENCE_MAX_VOCAB + 1), 1.0 / (EVIDENCE_MAX_VOCAB + 1)).tolist()}
    assert warps_evidence(big, ("temperature",)) is None
    assert warps_evidence({"kind": "model"}, ("temperature",)) is None
    small = warps_evidence({"target_probs": [[0.25, 0.75, 0.0]]}, ("temperature", "top_k"), row=1)
    assert small["params"]["top_k"] == 2 and small["warped"] == [[0.25, 0.75, 0.0]] and small["emitted"] is None
