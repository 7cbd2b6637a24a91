"""A failing check's repro, pasted into a fresh interpreter, fails the same way.

Each sampled zoo member is run at the quick budget on the families that catch it; every failing
check must carry a repro (``evidence.repro``), and that snippet, run as a script in a fresh
process from an empty directory, must exit non-zero with the same finding: a statistical repro
exits naming the check and its finding (its test at the level the check held it to, on the same
samples), a fault's repro raises ``specverify.SamplerFault`` with the same message.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import specverify

ROOT = Path(__file__).resolve().parents[1]

# member -> the families that catch it at the quick budget (one per kind of repro)
MEMBERS = {
    "nan_residual": ["robustness.edge*"],  # a fault on a shrunk batch of edge cases
    "reused_uniform": ["exact.*"],  # a non-canonical output for given uniforms
    "half_acceptance": [
        "fit.conditional*",
        "fit.first-token*",
        "fit.step*",
        "fit.position*",
    ],  # the law given the drafts differs
    "lossy_at_four_drafts": ["fit.every-shape*"],  # one shape only: the featured failure of a lossy run
    "declares_unnormalised_but_does_not_renormalise": ["fit.unnormalised*"],
    "int32_outputs": ["contract.output"],  # a contract violation
    "uniform_hardcoded_zero": ["efficiency*"],  # accepts more drafts than the canonical algorithm
    "sample_and_compare": ["efficiency*"],  # lossless, accepts fewer (suboptimal)
}


def _run_repro(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    script = cwd / "repro.py"
    script.write_text(code)
    return subprocess.run([sys.executable, str(script)], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_the_seeds_own_step_fails_sub_ulp_and_its_pasted_repro_fails_the_same_way(tmp_path: Path) -> None:
    spec = "seed_sampler:sampler"  # tests/seed_sampler.py: the seed's speculative_step, one row a call
    result = specverify.check(
        spec, budget="quick", select=["robustness.edge[sub-ulp]"], spec=spec, isolation="in-process"
    )
    (edge,) = result.checks
    assert edge.status == "fail" and edge.evidence.get("repro"), edge.message
    cases = edge.evidence["minimal_example"]["cases"]
    repro = edge.evidence["repro"]
    assert all(
        f"case{i} = specverify.replay.StepCase(" in repro for i in range(len(cases))
    )  # every case of the shrunk batch
    env_root = str(Path(__file__).resolve().parent)
    script = tmp_path / "repro.py"
    script.write_text(repro)
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), env_root]), "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode != 0 and "SamplerFault" in done.stderr, done.stdout + done.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("member", sorted(MEMBERS))
def test_every_failing_repro_fails_the_same_way(member: str, tmp_path: Path) -> None:
    spec = f"specverify.zoo:{member}"
    result = specverify.check(spec, budget="quick", select=MEMBERS[member], spec=spec, isolation="in-process")
    failing = [r for r in result.checks if r.status == "fail"]
    assert failing, f"{member}: nothing failed on {MEMBERS[member]}"
    for check in failing:
        repro = check.evidence.get("repro")
        assert repro, f"{member}: {check.id} failed without a repro"
        done = _run_repro(repro, tmp_path)
        assert done.returncode != 0, f"{member}: the repro of {check.id} passed:\n{repro}\n{done.stdout}"
        fault = re.search(r"SamplerFault: (.*)", done.stderr)
        if check.evidence.get("violation"):
            assert fault, f"{member}: {check.id}'s repro did not raise SamplerFault:\n{done.stderr[-2000:]}"
            assert fault.group(1).strip() in (check.message or ""), (fault.group(1), check.message)
        else:
            assert f"{check.id} fails (finding: {check.finding})" in done.stderr, (
                f"{member}: {check.id}:\n{done.stderr[-2000:]}\n{repro}"
            )
            if (
                "model_law_test(" in repro and "statistic" in check.evidence
            ):  # the same samples, not a fresh draw that fails too
                assert f"statistic {check.evidence['statistic']:.4g}," in done.stdout, (
                    check.id,
                    check.evidence["statistic"],
                    done.stdout[:500],
                )
