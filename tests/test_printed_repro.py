"""The repro the terminal prints under a failing line is the JSON's ``evidence.repro``, whole: pasted
into a fresh file and run with python, it exits 1 the same way; and the failure's message names the
case the repro poses."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from specverify._cli import main

ROOT = Path(__file__).resolve().parents[1]

# member, the one check that fails it (quick budget), what its repro's run says on stderr
FAILING = [
    ("replacement_from_target", "exact.conditional[all-drafts]", "exact.conditional[all-drafts] fails"),
    ("nan_residual", "robustness.edge[sub-ulp]", "SamplerFault"),
    ("int32_outputs", "contract.output", "SamplerFault"),
]


def _printed_repros(out: str) -> dict[str, str]:
    """The repros between the printed markers, by check id, as a user would copy them."""
    found = re.findall(r"^# --- repro of (\S+) ---\n(.*?)^# --- end of the repro of \1 ---$", out, re.M | re.S)
    return {check: body for check, body in found}


def _run_check(member: str, check: str, tmp_path: Path, capsys) -> tuple[int, str, dict]:
    report = tmp_path / "out.json"
    argv = ["check", f"specverify.zoo:{member}", "--budget", "quick", "--only", check, "--no-progress"]
    code = main([*argv, "--in-process", "--json", str(report)])
    return code, capsys.readouterr().out, json.loads(report.read_text())


def _run_as_pasted(code: str, folder: Path) -> subprocess.CompletedProcess[str]:
    folder.mkdir()
    script = folder / "repro.py"
    script.write_text(code)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, str(script)], cwd=folder, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize(("member", "check", "says"), FAILING, ids=[m for m, _, _ in FAILING])
def test_the_printed_repro_is_the_jsons_and_runs_as_pasted(member, check, says, tmp_path, capsys):
    code, out, data = _run_check(member, check, tmp_path, capsys)
    assert code == 1, out
    (result,) = [c for c in data["checks"] if c["id"] == check]
    assert result["status"] == "fail", result["message"]
    printed = _printed_repros(out)
    assert set(printed) == {check}, out
    assert printed[check].strip() == result["evidence"]["repro"].strip()  # the terminal's is the JSON's, whole
    assert printed[check].startswith("import torch\nimport specverify\n")
    done = _run_as_pasted(printed[check], tmp_path / "pasted")
    assert done.returncode == 1, done.stdout + done.stderr[-2000:]
    assert says in done.stderr, done.stderr[-2000:]


def test_the_message_names_the_case_the_repro_poses(tmp_path, capsys):
    """A sampler that draws the replacement from p: the message's drafts and count are the repro's."""
    check = "exact.conditional[all-drafts]"
    code, out, data = _run_check("replacement_from_target", check, tmp_path, capsys)
    (result,) = [c for c in data["checks"] if c["id"] == check]
    where = re.search(
        r"V=(\d+) drafts \[([\d, ]+)\], outcome \(accepted (\d+), token (\d+)\): observed (\d+)", result["message"]
    )
    assert code == 1 and where, result["message"]
    vocab, drafts, accepted, token, observed = where.groups()
    repro = result["evidence"]["repro"]
    assert f"draft_tokens = torch.tensor([{drafts}], dtype=torch.int64)" in repro
    assert result["evidence"]["minimal_example"]["draft_tokens"] == [int(d) for d in drafts.split(", ")]
    done = _run_as_pasted(repro, tmp_path / "pasted")
    cell = int(accepted) * int(vocab) + int(token)
    assert done.returncode == 1 and f"0, {cell}: {observed} vs 0.0" in done.stdout, done.stdout + done.stderr[-2000:]


def test_a_repro_too_long_to_read_is_shown_abridged_and_says_where_it_is_whole():
    from specverify._cli.output import REPRO_CHARS, repro_lines

    long = (
        "import torch\nimport specverify\n\nsampler = 1\nx = "
        + "1" * REPRO_CHARS
        + "\nresult = specverify.replay.call_sampler(x)\n"
    )
    lines = repro_lines("contract.output", long)
    assert "abridged" in lines[0][1] and "evidence.repro" in lines[0][1]
    assert all(indent >= 0 for indent, _ in lines)  # nothing printed flush left as if it ran
    assert any("call_sampler(" in line for _, line in lines)
