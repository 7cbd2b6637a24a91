"""A subject that cannot be called as its kind's contract says is a usage error, told once in one line
with the contract's signature before any check (the CLI exits 2); a subject that fails in its own
code on the tiny first call is a finding of the battery, never refused."""

from __future__ import annotations

import json
import textwrap

import pytest
import torch

import specverify
from specverify._calling.first_call import first_call
from specverify._calling.sut import SamplerUnderTest
from specverify._cli import main
from specverify._kinds import kind_named
from specverify.samplers import loop_reference
from specverify.zoo import TREE_MEMBERS, ZOO


def _two_arguments(target_probs, draft_probs):
    return target_probs


def _returns_none(target_probs, draft_probs, draft_tokens, generator):
    return None


@specverify.sampler(inputs="logits", params=("temperature",))
def _logits_without_params(target_logits, draft_probs, draft_tokens, generator):
    raise AssertionError("never reached: the call itself fails")


@specverify.tree_sampler(algorithm="target-only")
def _tree_of_one_argument(tree):
    raise AssertionError("never reached: the call itself fails")


@specverify.loop(parameters=loop_reference.parameters)
def _loop_of_three_arguments(target, draft, prompt):
    raise AssertionError("never reached: the call itself fails")


@pytest.mark.parametrize(
    ("subject", "kind", "says"),
    [
        (_two_arguments, "chain", "takes 2 positional arguments but 4 were given"),
        (_returns_none, "chain", "returned a NoneType, expected a (tokens, num_accepted) pair"),
        (_logits_without_params, "logits", "takes 4 positional arguments but 5 were given"),
        (_tree_of_one_argument, "tree", "takes 1 positional argument but 2 were given"),
        (_loop_of_three_arguments, "loop", "takes 3 positional arguments but 6 were given"),
    ],
    ids=["chain-arguments", "chain-return", "logits", "tree", "loop"],
)
def test_a_subject_that_cannot_be_called_as_declared_is_refused_before_any_check(subject, kind, says):
    seen = []
    run = specverify.check_loop if kind == "loop" else specverify.check
    with pytest.raises(specverify.SamplerSpecError) as refused:
        run(subject, budget="quick", isolation="in-process", on_result=seen.append)
    message = str(refused.value)
    assert seen == [] and "\n" not in message
    assert says in message and kind_named(kind).signature in message, message


def test_a_type_error_in_the_samplers_own_code_is_a_finding_not_a_usage_error():
    def raises_inside(target_probs, draft_probs, draft_tokens, generator):
        return torch.cat(target_probs)  # a TypeError from its own code: the call itself fitted

    result = specverify.check(raises_inside, budget="quick", select=["contract.output"], isolation="in-process")
    (output,) = result.checks
    assert output.status == "fail" and "TypeError" in (output.message or "")


def test_wrong_shapes_and_dtypes_stay_findings():
    """int32 outputs, and one row for a batch (a one-row function undeclared): the battery's to say."""
    first_call(SamplerUnderTest(ZOO["int32-outputs"], isolation="in-process"))
    first_call(SamplerUnderTest(ZOO["one-row-per-call"], isolation="in-process"))


@pytest.mark.parametrize("member", sorted(ZOO) + sorted(TREE_MEMBERS))
def test_no_zoo_member_is_refused(member):
    subject = SamplerUnderTest({**ZOO, **TREE_MEMBERS}[member], isolation="in-process", timeout=30)
    first_call(subject)  # each is a known bug the battery must find: none is a usage error (raises nothing)


def test_the_cli_exits_2_with_one_line_and_runs_no_check(tmp_path, monkeypatch, capsys):
    (tmp_path / "two_args.py").write_text(
        textwrap.dedent(
            """
            def sampler(target_probs, draft_probs):
                return target_probs
            """
        )
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    report = tmp_path / "out.json"
    code = main(["check", "two_args:sampler", "--budget", "quick", "--no-progress", "--json", str(report)])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    (line,) = captured.err.strip().splitlines()
    assert line.startswith("specverify: error: two_args:sampler cannot be called as a chain sampler")
    assert "takes 2 positional arguments but 4 were given" in line and kind_named("chain").signature in line
    data = json.loads(report.read_text())
    assert data["verdict"] == "error" and [c["id"] for c in data["checks"]] == ["harness.load"]


def test_a_wrong_signature_is_told_before_the_battery_is_imported(tmp_path):
    """Without --json or --report the CLI loads and calls the sampler before it imports the battery
    (specverify._cli.early): exit 2, one line, and no check, scipy or Hypothesis module loaded."""
    import subprocess
    import sys

    (tmp_path / "two_args.py").write_text("def sampler(target_probs, draft_probs):\n    return target_probs\n")
    script = textwrap.dedent(
        """
        import sys
        from specverify._cli import main
        code = main(["check", "two_args:sampler", "--budget", "quick", "--no-progress"])
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("scipy", "hypothesis") or m == "specverify.checks")
        print(code, heavy)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.stdout.strip() == "2 []", done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("specverify: error: two_args:sampler cannot be called as a chain sampler")
    assert kind_named("chain").signature in line
