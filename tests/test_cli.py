"""The command line: exit statuses, one-line errors, JSON written as it goes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

import specverify
from specverify._cli import main


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "specverify", *args], capture_output=True, text=True, timeout=600)


def test_help_explains_itself():
    out = run_cli("--help")
    assert out.returncode == 0
    for word in ("check", "report", "adapters", "exit status"):
        assert word in out.stdout
    check_help = run_cli("check", "--help").stdout
    for word in ("--json", "--report", "--seed", "--budget", "quick", "standard", "thorough", "TV"):
        assert word in check_help


def test_version_and_every_subcommand_names_its_own_exit_status(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out.strip() == f"specverify {specverify.__version__}"
    for command in ("check", "loop", "report", "zoo", "adapters"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = capsys.readouterr().out
        assert f"exit status of '{command}':" in text, command
        others = {"check", "loop", "report", "zoo", "adapters"} - {command}
        assert not any(f"exit status of '{o}'" in text for o in others), command
        assert f"specverify {command} " in text or command == "adapters", command  # its own examples
        description = text.split("\n\n")[1]
        assert max(len(line) for line in description.splitlines()) <= 88, command
    with pytest.raises(SystemExit):
        main(["zoo", "--help"])
    zoo_help = " ".join(capsys.readouterr().out.split())
    assert "--budget {quick,standard,thorough} the budget every member runs at" in zoo_help


def test_a_failing_line_shows_the_case_and_the_repro(tmp_path, capsys):
    code = main(
        [
            "check",
            "specverify.zoo:nan_residual",
            "--budget",
            "quick",
            "--only",
            "robustness.edge[sub-ulp]",
            "--no-progress",
        ]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert "smallest case: step case 'sub-ulp'" in out and "target_probs p0: [" in out
    assert (
        "repro (paste it into a file and run it with python: it exits 1 the same way" in out
        and "# --- repro of robustness.edge[sub-ulp] ---\nimport torch\nimport specverify\n" in out
        and "specverify.replay.step_law_test(sampler, cases" in out
    )
    assert "TV>=" not in out and "TV >= 0 " not in out


def test_conformant_sampler_exits_0_with_json(tmp_path):
    out = tmp_path / "out.json"
    code = main(["check", "specverify.samplers:reference", "--budget", "quick", "--json", str(out), "--no-progress"])
    data = json.loads(out.read_text())
    assert code == 0
    assert data["verdict"] == "conformant"
    assert data["schema_version"] == 1
    assert {"seed", "budget", "family_wise_alpha", "device", "versions", "sampler"} <= set(data["run"])
    for check in data["checks"]:
        assert {"id", "family", "status", "p_value", "samples", "min_detectable_tv", "message"} <= set(check)


def test_a_subset_can_fail_a_sampler_but_not_pass_it(tmp_path):
    out = tmp_path / "out.json"
    code = main(
        [
            "check",
            "specverify.samplers:reference",
            "--budget",
            "quick",
            "--only",
            "contract",
            "--json",
            str(out),
            "--no-progress",
        ]
    )
    data = json.loads(out.read_text())
    assert code == 3 and data["verdict"] == "inconclusive"
    assert all(c["status"] == "pass" for c in data["checks"])


def test_replacement_from_target_exits_1(tmp_path):
    out = tmp_path / "out.json"
    code = main(
        [
            "check",
            "specverify.zoo:replacement_from_target",
            "--budget",
            "quick",
            "--only",
            "fit.conditional[random]",
            "--json",
            str(out),
            "--no-progress",
        ]
    )
    data = json.loads(out.read_text())
    assert code == 1
    assert data["verdict"] == "lossy"
    failed = [c for c in data["checks"] if c["status"] == "fail"]
    assert failed and failed[0]["evidence"]["repro"].startswith("import torch")


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("no_such_module_abc:sampler", "no module named 'no_such_module_abc'"),
        ("specverify:not_there", "has no attribute 'not_there'"),
        ("nonsense", "not of the form"),
    ],
)
def test_bad_spec_exits_2_with_one_line(spec, fragment):
    out = run_cli("check", spec)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0]


@pytest.mark.parametrize("command", ["check", "loop"])
def test_a_module_that_is_nowhere_is_told_before_torch_loads_with_where_it_was_looked_for(command, tmp_path):
    probe = (
        "import sys\n"
        "from specverify._cli import main\n"
        f"code = main([{command!r}, 'no_such_module_abc:sampler'])\n"
        "assert 'torch' not in sys.modules, 'torch was imported to say a module is missing'\n"
        "sys.exit(code)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert "no module named 'no_such_module_abc' (searched sys.path: " in line
    assert f"{tmp_path} (the current directory)" in line


def test_interrupt_keeps_json_written_so_far(tmp_path):
    calls = {"n": 0}

    def interrupts(t, d, y, g):
        calls["n"] += 1
        if calls["n"] == 12:  # inside contract.call-independence, after four exact checks
            os.kill(os.getpid(), signal.SIGINT)
            import time

            time.sleep(5)
        return specverify.reference(t, d, y, g)

    out = tmp_path / "partial.json"
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's own Ctrl-C, whatever ran before here
    try:
        with pytest.raises(KeyboardInterrupt):
            specverify.check(interrupts, budget="quick", select=["contract"], json_path=out)
    finally:
        signal.signal(signal.SIGINT, previous)
    data = json.loads(out.read_text())
    assert data["finished"] is False
    assert data["verdict"] == "inconclusive"
    assert [c["id"] for c in data["checks"]] == [
        "contract.output",
        "contract.determinism",
        "contract.seed-sensitivity",
        "contract.one-hot",
    ]


def _ctrl_c_as_in_a_terminal() -> None:
    """In the child, Ctrl-C as a terminal's command gets it: handled by default and not blocked.
    A test worker's own disposition is inherited otherwise (a library run earlier in the same
    worker, Ray's core among them, may leave SIGINT ignored or blocked), and a process that starts
    with SIGINT ignored or blocked rightly never sees it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def test_ctrl_c_on_the_zoo_exits_130_and_keeps_the_partial_matrix(tmp_path):
    """The terminal's Ctrl-C reaches the zoo and its member processes (one process group): nothing
    more starts, the runs under way are not waited for, and the matrix of the runs that finished is
    on disk, marked partial."""
    command = [
        sys.executable,
        "-m",
        "specverify",
        "zoo",
        "--budget",
        "quick",
        "--loops",
        "--members",
        "loop:*",
        "--jobs",
        "2",
        "--output",
        str(tmp_path),
    ]
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=_ctrl_c_as_in_a_terminal,
    )
    try:
        first = proc.stdout.readline()  # the first run has finished (and the matrix so far is written)
        assert first.startswith("meets"), first + proc.communicate()[1]
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert "interrupted" in out
    markdown = (tmp_path / "kill-matrix-quick.md").read_text()
    data = json.loads((tmp_path / "kill-matrix-quick.json").read_text())
    from specverify.zoo._loops import LOOP_MEMBERS

    planned = len(LOOP_MEMBERS)
    assert data["partial"] is True and data["planned"] == planned and 1 <= len(data["rows"]) < planned
    assert f"Partial: {len(data['rows'])} of {planned} runs finished (interrupted)" in markdown


def test_zoo_refuses_members_that_match_nothing(tmp_path, capsys):
    assert main(["zoo", "--members", "no-such-member", "--output", str(tmp_path)]) == 2
    assert "matches no zoo member" in capsys.readouterr().out and not list(tmp_path.iterdir())


def test_zoo_writes_the_kill_matrix_with_the_command_that_made_it(tmp_path, capsys):
    code = main(
        [
            "zoo",
            "--budget",
            "quick",
            "--members",
            "ignores-generator",
            "--members",
            "fixed-seed",
            "--output",
            str(tmp_path),
        ]
    )
    markdown = (tmp_path / "kill-matrix-quick.md").read_text()
    rows = json.loads((tmp_path / "kill-matrix-quick.json").read_text())
    assert code == 0
    assert "specverify zoo --budget quick --seeds 1 --members 'ignores-generator' --members 'fixed-seed'" in markdown
    assert sorted(r["member"] for r in rows) == ["fixed-seed", "ignores-generator"]
    assert all(r["meets"] and r["verdict"] == "non-conformant" and "contract" in r["caught_by"] for r in rows)
    assert "false alarms: 0" in capsys.readouterr().out


def test_a_failing_line_says_what_its_test_detects_in_words_never_tv_at_least_0():
    from specverify._cli.output import detects

    assert detects(0.0137) == " (detects TV >= 0.0137)" and detects(None) == ""
    assert detects(0.0) == " (exact: any deviation)"  # an exact check: no statistics
    assert detects(0.0, 0.0) == " (exact: any outcome of probability 0)"  # a test that flags impossible outcomes
