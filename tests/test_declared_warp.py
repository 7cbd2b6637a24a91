"""A declared warp is the oracle: its laws judge the sampler; a bad declaration is the user's or the
sampler's fault, each said in one line; an undeclared sampler warping as another engine is told which."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings

import specverify
from specverify import check_loop
from specverify._kinds.logits_posing import pose
from specverify._record.result import judge
from specverify._warps.declared import declared_warp, resolve_warp
from specverify._warps.posing import pose_for
from specverify._warps.presets import PRESETS
from specverify.samplers._loop_reference import LoopReference
from specverify.strategies import step_cases

LAWS = ["loop.output", "loop.law[top-p]", "loop.law[separating]"]


def test_undeclared_is_transformers_and_says_so():
    oracle = declared_warp(object())
    assert oracle.preset == "transformers" and not oracle.declared
    assert "no warp declared" in oracle.statement
    assert resolve_warp("vllm").describe() == {"name": "vllm", "declared": True, "preset": "vllm"}


@pytest.mark.parametrize("declare", [specverify.loop, specverify.sampler])
def test_an_unknown_preset_is_one_line_naming_the_known_ones(declare):
    with pytest.raises(
        ValueError, match=r"^unknown warp preset 'hf'; known presets: 'transformers', 'vllm', 'sglang', 'llama.cpp'$"
    ):
        declare(warp="hf")


def test_an_unknown_preset_as_an_attribute_exits_2_at_load(tmp_path):
    (tmp_path / "badwarp.py").write_text(
        textwrap.dedent("""
        from specverify.samplers._loop_reference import LoopReference
        loop = LoopReference()
        loop.warp = "tgi"
    """)
    )
    done = subprocess.run(
        [sys.executable, "-m", "specverify", "loop", "badwarp:loop", "--budget", "quick"],
        check=False,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{Path(specverify.__file__).parents[1]}"},
    )
    assert done.returncode == 2, done.stdout + done.stderr
    [line] = [line for line in done.stderr.splitlines() if line.strip()]
    assert "unknown warp preset 'tgi'" in line


@pytest.mark.parametrize("name", [n for n in PRESETS if n != "transformers"])
def test_each_preset_declared_passes_and_undeclared_is_inconclusive_naming_it(name):
    declared = check_loop(LoopReference(warp=name), budget="quick", select=LAWS, isolation="in-process")
    assert all(c.status == "pass" for c in declared.checks), [(c.id, c.message) for c in declared.checks]
    undeclared = LoopReference(warp=name)
    undeclared.warp = None  # warps as `name` does, declares nothing
    result = check_loop(undeclared, budget="quick", select=LAWS, isolation="in-process")
    assert {c.status for c in result.checks} <= {"pass", "inconclusive"} and "inconclusive" in {
        c.status for c in result.checks
    }
    explained = {c.evidence.get("explained_by") for c in result.checks if c.status == "inconclusive"}
    assert explained == {name}
    assert (
        judge(result.checks).reason
        == f"judged by transformers' warp, but the output fits the {name} preset's: declare warp={name!r}"
    )


def test_a_loop_declaring_one_preset_and_warping_by_another_is_lossy():
    loop = LoopReference(warp="transformers")
    loop.warp = "llama.cpp"  # declares llama.cpp, warps as transformers
    result = check_loop(
        loop, budget="quick", select=["loop.law[top-p]", "loop.law[separating]"], isolation="in-process"
    )
    assert [c.status for c in result.checks] == ["fail", "fail"] and result.verdict == "lossy"
    assert all("explained_by" not in c.evidence for c in result.checks)  # a declared warp is never explained away


def _raising(logits, params):
    raise RuntimeError("no such table")


def _not_a_law(logits, params):
    return torch.full_like(logits, 0.5, dtype=torch.float64)


@pytest.mark.parametrize(
    "warp, message",
    [(_raising, "raised RuntimeError: no such table"), (_not_a_law, "returned a row that is not probabilities")],
)
def test_a_declared_callable_that_fails_is_the_samplers_fault_and_the_run_goes_on(warp, message):
    loop = LoopReference()
    loop.warp = warp  # the loop itself warps well; its declared warp is broken
    result = check_loop(loop, budget="quick", select=["loop.output", "loop.law[plain]"], isolation="in-process")
    assert [c.status for c in result.checks] == ["fail", "fail"] and result.verdict == "non-conformant"
    assert all(message in c.message and c.message.startswith("the declared warp ") for c in result.checks)


def _llama(logits, params):
    return PRESETS["llama.cpp"](logits, params)


def test_a_declared_callable_is_the_oracle():
    result = check_loop(LoopReference(warp=_llama), budget="quick", select=LAWS, isolation="in-process")
    assert all(c.status == "pass" for c in result.checks), [(c.id, c.message) for c in result.checks]
    assert result.run["warp"]["preset"] is None and result.run["warp"]["declared"]
    assert {d["preset"]: d["case"] for d in result.run["warp"]["differences"]}["llama.cpp"] is None


@pytest.mark.parametrize("name", [*PRESETS, None])
@settings(max_examples=25, deadline=None)
@given(case=step_cases(max_vocab=8, max_k=2, kind="mixed"))
def test_every_case_is_posed_so_the_declared_warp_gives_its_law(name, case):
    target = case.target_probs.unsqueeze(0).expand(4, -1, -1).to(torch.float64)  # rows 0-3: each temperature, each cut
    oracle = resolve_warp(name)
    logits, params = pose_for(target, ("temperature", "top_k", "top_p", "min_p"), oracle, pose)
    law = target / target.sum(-1, keepdim=True)
    for by in [oracle] if name is not None else PRESETS.values():  # undeclared: every preset's law is the case's
        torch.testing.assert_close(by(logits, params), law, rtol=0, atol=1e-9)


@pytest.mark.parametrize("name", ["vllm", "llama.cpp", None])
@settings(max_examples=10, deadline=None)
@given(case=step_cases(max_vocab=8, max_k=2, kind="mixed"))
def test_a_batch_of_repeated_cases_is_posed_once_per_case_and_phase_as_row_by_row(name, case):
    from specverify._kinds.logits_posing import PERIOD

    other = torch.softmax(torch.linspace(-1.0, 1.0, case.target_probs.shape[-1], dtype=torch.float64), -1)
    cases = torch.stack([case.target_probs.to(torch.float64), other.expand_as(case.target_probs)])
    target = cases[torch.arange(100) % 7 % 2]  # two cases, 100 rows, every phase of each
    oracle, names = resolve_warp(name), ("temperature", "top_k", "top_p", "min_p")
    whole_logits, whole = pose_for(target, names, oracle, pose)
    once_logits, once = pose_for(target, names, oracle, pose, period=PERIOD)
    assert torch.equal(whole_logits, once_logits)
    assert all(torch.equal(getattr(whole, n), getattr(once, n)) for n in whole.given)
    assert whole.given == once.given


def test_a_fault_in_a_batch_of_repeated_cases_names_the_batchs_own_row():
    from specverify._kinds.logits_posing import PERIOD

    def untempered(logits, params):  # ignores the temperature: no posing gives a row at T != 1 its law
        return torch.softmax(logits.to(torch.float64), -1)

    uniform = torch.full((2, 3), 1 / 3, dtype=torch.float64)  # any temperature leaves it alone
    skewed = torch.softmax(torch.tensor([[1.0, 0.0, -1.0], [0.5, 0.2, 0.1]], dtype=torch.float64), -1)
    target = torch.cat([uniform.expand(31, -1, -1), skewed.expand(40, -1, -1)])  # row 31 at T = 1 fits
    with pytest.raises(specverify.errors.SamplerFault, match="does not give row 32 its law"):
        pose_for(target, ("temperature",), resolve_warp(untempered), pose, period=PERIOD)


def test_a_logits_sampler_is_posed_by_its_declared_warp():
    from specverify import check
    from specverify.samplers._logits_reference import LogitsReferenceSampler

    honest = check(
        LogitsReferenceSampler(warp="llama.cpp"),
        budget="quick",
        select=["support.zero-target[zeros]"],
        isolation="in-process",
    )
    assert [c.status for c in honest.checks] == ["pass"], [c.message for c in honest.checks]
    lying = LogitsReferenceSampler(warp="transformers")
    lying.warp = "llama.cpp"  # declares llama.cpp, cuts before the temperature as transformers does
    caught = check(lying, budget="quick", select=["support.zero-target[zeros]"], isolation="in-process")
    assert [c.status for c in caught.checks] == ["fail"] and caught.verdict == "non-conformant"
    undeclared = LogitsReferenceSampler(warp="llama.cpp")
    undeclared.warp = None  # cuts before the temperature as llama.cpp does, declares nothing: never a fault
    result = check(undeclared, budget="quick", select=["support.zero-target[zeros]"], isolation="in-process")
    assert [c.status for c in result.checks] == ["pass"], [c.message for c in result.checks]


def test_a_sampler_declaring_a_preset_is_posed_by_it_in_its_own_worker():
    from specverify import check

    result = check(
        "specverify.samplers._logits_reference:logits_reference_llama_cpp",
        budget="quick",
        select=["support.zero-target[zeros]"],
    )
    assert result.run["isolation"]["mode"] == "process" and [c.status for c in result.checks] == ["pass"], [
        c.message for c in result.checks
    ]
    warp = result.run["warp"]
    assert {k: warp[k] for k in ("name", "declared", "preset")} == {
        "name": "llama.cpp",
        "declared": True,
        "preset": "llama.cpp",
    }  # it travelled from the worker
    assert [d["preset"] for d in warp["differences"]] == [
        "transformers",
        "vllm",
        "sglang",
    ]  # informative, as a loop run records it
