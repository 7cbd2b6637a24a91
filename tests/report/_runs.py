"""Runs for the report to render: real ones from the battery, and a hostile synthetic one.

Real runs come from :mod:`_broken_samplers` with only a few fast checks selected.  The synthetic
run is built from ``CheckResult`` objects so that every status, every evidence field and every
place a sampler's text can reach holds something a page must not execute.
"""

from __future__ import annotations

import glob

import specverify
from specverify import CheckResult, RunResult

__all__ = ["HOSTILE", "HOSTILE_SHOWN", "hostile_run", "real_run"]

#: Text that would run code, break out of an element or a comment, or fetch something, if not escaped.
HOSTILE = (
    "<script>window.__pwned = 1; alert(1)</script>"
    '<img src=x onerror="window.__pwned = 2">'
    "</code></pre></svg></style></textarea>--><!--"
    '<a href="javascript:window.__pwned = 3">x</a>'
    "{{ 7*7 }} $x$ & &amp; \u202e reversed?"
)
#: HOSTILE as a page shows it: the right-to-left override as its code point, not obeyed.
HOSTILE_SHOWN = HOSTILE.replace("\u202e", "<U+202E>")


def only(*ids: str) -> list[str]:
    """Select exactly these check ids (their brackets are not glob classes)."""
    return [glob.escape(i) for i in ids]


def real_run(sampler, spec: str, ids: list[str]) -> RunResult:
    return specverify.check(sampler, budget="quick", seed=0, select=only(*ids), spec=spec)


def hostile_run() -> RunResult:
    """Every status, every kind of evidence, and hostile text wherever a sampler's text can go."""
    tv = {"estimate": 0.2, "low": 0.1, "high": 0.3, "confidence": 0.99, "plug_in": 0.21}
    case = {
        "kind": "step", "label": HOSTILE, "precision": "float64", "K": 1, "V": 3,
        "target_probs": [[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]], "draft_probs": [[0.0, 1.0, 0.0]], "draft_tokens": [1],
        HOSTILE: HOSTILE,
    }  # fmt: skip
    checks = [
        CheckResult(
            id="fit.conditional[random]", family="fit", case="random", status="fail", finding="loss",
            p_value=1e-12, alpha=1e-5, samples=12345, min_detectable_tv=0.05, message=HOSTILE, duration_s=1.5,
            evidence={
                "minimal_example": {"cases": [case, case]},
                "repro": f"import specverify\nsampler = specverify.load_sampler({HOSTILE!r})\n# {HOSTILE}",
                "observed": [[10, 20, 30, 0], [5, 5, 5, 5]],
                "expected": [[15.0, 15.0, 30.0, 0.0], [5.0, 0.0, 10.0, 5.0]],
                "outcome_labels": [HOSTILE, "a0:t1", "$\\frac{1}{0}$", "a1:t1"],
                "tv": tv, "where": HOSTILE, "positions": [{"position": 1, "pvalue": 0.001}],
                "unconfirmed_alarms": [{"example": case, "confirm_pvalue": 0.2}], HOSTILE: [HOSTILE, {HOSTILE: 1.5}],
            },
        ),
        CheckResult(
            id="exact.uniform-driven[random]", family="exact", case="random", status="fail", finding="non-canonical",
            samples=4, min_detectable_tv=0.0, message="uniforms [0.75, 0.25] give [0, -1]",
            evidence={
                "minimal_example": case,
                "first_mismatch": {"uniforms": [0.75, 0.25], "expected": {"tokens": [1, -1], "num_accepted": 0},
                                   "got": {"tokens": [0, -1], "num_accepted": 0}, "mismatched_volume": 0.25},
                "induced_tv": 0.25,
            },
        ),
        CheckResult(
            id="contract.output", family="contract", status="fail", finding="contract",
            message=f"raised: the sampler raised RuntimeError: {HOSTILE}",
            evidence={"violation": HOSTILE, "shape": {"B": 4, "K": 2, "V": 5}},
        ),
        CheckResult(
            id="efficiency.acceptance[random]", family="efficiency", case="random", status="fail", finding="suboptimal",
            p_value=1e-9, alpha=1e-5, samples=5000, message="accepts fewer drafts",
            evidence={"expected_accepted": 0.9, "observed_accepted": 0.7, "ratio": 0.7 / 0.9,
                      "expected_law": [0.5, 0.3, 0.2], "observed_counts": [3000, 1500, 500],
                      "min_detectable_drop": 0.05},
        ),
        CheckResult(
            id="exact.emitted[random]", family="exact", case="random", status="error",
            message=f"the harness failed: ValueError: {HOSTILE}",
            evidence={"traceback": f"Traceback (most recent call last):\n  ValueError: {HOSTILE}"},
        ),
        CheckResult(
            id="fit.step[chain]", family="fit", case="chain", status="inconclusive", p_value="nan",
            min_detectable_tv=0.4, samples=10, message=f"could only detect TV >= 0.4; {HOSTILE}",
            evidence={"tv": {"estimate": "nan"}, "observed": "inf", "expected": [1, [2]]},
        ),
        CheckResult(
            id="robustness.large-vocab", family="robustness", case="large-vocab", status="skip", message=HOSTILE
        ),
        CheckResult(
            id="contract.determinism", family="contract", status="pass", samples=512, message=HOSTILE,
            evidence={HOSTILE: HOSTILE, "nested": {"a": [1.0, "inf", None, True]}},
        ),
        CheckResult(
            id="efficiency.acceptance[seed-chain]", family="efficiency", case="seed-chain", status="pass", p_value=0.5,
            alpha=1e-5, samples=6000, message="3.5 accepted drafts per call",
            evidence={"expected_accepted": 3.51, "observed_accepted": 3.5, "ratio": 0.997, "min_detectable_drop": 0.1},
        ),
    ]  # fmt: skip
    run = {
        "sampler": {"name": HOSTILE, "capabilities": {"device": HOSTILE, "dtypes": [HOSTILE]}, HOSTILE: HOSTILE},
        "spec": f"evil.module:{HOSTILE}",
        "seed": 0,
        "budget": {"name": "quick", "alpha": 1e-4, HOSTILE: HOSTILE},
        "family_wise_alpha": 1e-4,
        "power": 0.99,
        "tv": 0.05,
        "device": HOSTILE,
        "dtype": "float64",
        "platform": HOSTILE,
        "versions": {"torch": HOSTILE, HOSTILE: "1"},
        "started": HOSTILE,
        "select": [HOSTILE],
        "left_out": [HOSTILE],  # as a run records it when it starts
        HOSTILE: HOSTILE,
    }
    return RunResult(run=run, checks=checks, finished=False)
