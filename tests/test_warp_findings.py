"""The convention finding where users read it: the verdict lines and the HTML report say which warp
a run judged against, and, in their own informative section, how each other preset differs from it
(the TV and the first separating case), logits and loop runs alike; it never decides the verdict."""

from __future__ import annotations

import json
import re

from specverify._cli import main
from specverify._kinds import load_sampler
from specverify._warps.declared import resolve_warp
from specverify._warps.findings import warp_finding
from specverify._warps.presets import PRESETS
from specverify._warps.separating import warp_record

LOGITS = "specverify.samplers._logits_reference:logits_reference_vllm"
LOOP_UNDECLARED = "specverify.samplers._loop_reference:loop_reference_llama_cpp_undeclared"
VLLM_VS_TRANSFORMERS = (
    "differs from preset 'transformers' by TV 0.09 on the separating cases, first at min-p before or after top-p"
)


def _text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).replace("&#39;", "'").split())


def test_a_declared_logits_run_says_its_warp_and_how_the_other_presets_differ_apart_from_the_verdict(tmp_path, capsys):
    json_path, page = tmp_path / "run.json", tmp_path / "run.html"
    code = main(
        [
            "check",
            LOGITS,
            "--budget",
            "quick",
            "--only",
            "contract.output",
            "--in-process",
            "--no-progress",
            "-q",
            "--json",
            str(json_path),
            "--report",
            str(page),
        ]
    )
    out = capsys.readouterr().out
    assert code == 3  # a subset: inconclusive, whatever the conventions
    lines = out.splitlines()
    assert lines[lines.index("warp: judged against vllm's warp (declared: vllm)") - 2].startswith("inconclusive")
    assert "convention finding (informative, never the verdict" in out and VLLM_VS_TRANSFORMERS in out
    assert "differs from preset 'sglang' by TV 0.5" in out and "differs from preset 'llama.cpp' by TV 0.5" in out
    record = json.loads(json_path.read_text())["run"]["warp"]
    assert record["declared"] and [d["preset"] for d in record["differences"]] == [
        "transformers",
        "sglang",
        "llama.cpp",
    ]
    assert all(c["status"] == "pass" for c in json.loads(json_path.read_text())["checks"])  # no finding became a check
    html = page.read_text()
    text = _text(html)
    assert "Warp: judged against vllm's warp (declared: vllm)." in text and 'href="#conventions"' in html
    section = text[text.index("Convention findings Informative, never the verdict") :]
    assert section.startswith(
        "Convention findings Informative, never the verdict: the run was judged against vllm's warp (declared: vllm)."
    )
    assert (
        "transformers 0.09 min-p before or after top-p: logits [2.0, 1.0, 0.0, -1.0], top_p=0.9, min_p=0.1" in section
    )
    assert "Failures" not in text[: text.index("Convention findings")].split("Warp:")[1]  # not listed as a failure


def test_an_undeclared_loop_says_it_was_judged_by_transformers_and_names_its_preset(tmp_path, capsys):
    page = tmp_path / "loop.html"
    code = main(["loop", LOOP_UNDECLARED, "--budget", "quick", "-q", "--report", str(page)])
    out = capsys.readouterr().out
    assert code == 3
    assert (
        "why: judged by transformers' warp, but the output fits the llama.cpp preset's: declare warp='llama.cpp'" in out
    )
    assert (
        "warp: judged against transformers' warp (undeclared: declare warp= to be judged by your engine's own)" in out
    )
    assert "differs from preset 'llama.cpp' by TV 0.5" in out and "differs from preset 'vllm' by TV 0.09" in out
    text = _text(page.read_text())
    assert "Warp: judged against transformers' warp (undeclared" in text and "Convention findings" in text
    assert "lossy" not in out and "non-conformant" not in out


def test_the_finding_reads_back_a_record_and_says_which_presets_agree():
    finding = warp_finding(warp_record(resolve_warp(PRESETS["vllm"])))  # a declared callable: vLLM's own function
    assert (
        finding is not None
        and finding.judged.startswith("judged against its own warp ")
        and finding.judged.endswith("(declared)")
    )
    assert [d.preset for d in finding.differing] == ["transformers", "sglang", "llama.cpp"] and finding.same == (
        "vllm",
    )
    assert finding.lines()[-1] == "  the same law as 'vllm' on every separating case"
    assert warp_finding(None) is None and warp_finding({"declared": True}) is None  # a step sampler, a broken record
    faulty = warp_finding(
        {
            "name": "m.f",
            "declared": True,
            "preset": None,
            "differences": None,
            "fault": "the declared warp m.f raised ValueError: no",
        }
    )
    assert (
        faulty is not None
        and faulty.lines()[1]
        == "  the declared warp could not be compared with the presets: the declared warp m.f raised ValueError: no"
    )


def test_every_preset_has_a_reference_sampler_and_loop_importable_by_name_declared_and_not():
    # the false-alarm campaigns name them as specs a worker imports: one per preset, none hand-listed
    for name in PRESETS:
        slug = name.replace(".", "_")
        for module, attribute in [("_logits_reference", "logits_reference"), ("_loop_reference", "loop_reference")]:
            declared = load_sampler(f"specverify.samplers.{module}:{attribute}_{slug}")
            assert getattr(declared.warp, "preset", declared.warp) == name and name in declared.name
            if name != "transformers":  # transformers' undeclared one is the plain reference itself
                undeclared = load_sampler(f"specverify.samplers.{module}:{attribute}_{slug}_undeclared")
                assert not getattr(undeclared.warp, "declared", undeclared.warp) and "undeclared" in undeclared.name
