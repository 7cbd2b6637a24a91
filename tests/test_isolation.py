"""The sampler runs in a supervised process: whatever it does, the harness survives it and says so.

Each case asserts events and exit codes (never durations): the verdict and exit status the README
promises, the finding and the message naming the exit code or signal, JSON and HTML written.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import specverify
from specverify._calling.sut import CallLimit, SamplerUnderTest
from specverify._cli import main

TESTS = Path(__file__).parent


def run(spec: str, tmp_path: Path, *only: str, extra: tuple[str, ...] = ()) -> tuple[int, dict]:
    out, html = tmp_path / "run.json", tmp_path / "run.html"
    argv = ["check", spec, "--budget", "quick", "--json", str(out), "--report", str(html), "--no-progress", *extra]
    for pattern in only or ("contract.output",):
        argv += ["--only", pattern]
    code = main(argv)
    assert html.exists() and "<html" in html.read_text()[:2000].lower()
    return code, json.loads(out.read_text())


def failing(data: dict) -> list[dict]:
    return [c for c in data["checks"] if c["status"] == "fail"]


@pytest.mark.parametrize(("sampler", "how"), [("aborts", "SIGABRT"), ("segfaults", "SIGSEGV")])
def test_a_sampler_killed_by_a_signal_is_non_conformant(sampler, how, tmp_path):
    code, data = run(f"isolation_samplers:{sampler}", tmp_path)
    assert code == 1 and data["verdict"] == "non-conformant"
    [fault] = failing(data)
    assert fault["finding"] == "contract" and fault["evidence"]["violation"] == "crashed"
    assert how in fault["message"] and "call 1 " in fault["message"]


def test_an_exit_mid_run_fails_the_check_and_a_fresh_worker_runs_the_rest(tmp_path):
    code, data = run("isolation_samplers:exits_on_call_3", tmp_path, "contract.output", "contract.determinism")
    assert code == 1 and data["verdict"] == "non-conformant"
    by_id = {c["id"]: c for c in data["checks"]}
    assert by_id["contract.output"]["status"] == "fail"
    assert (
        "exited with status 0" in by_id["contract.output"]["message"]
        and "call 3 " in by_id["contract.output"]["message"]
    )
    assert by_id["contract.determinism"]["status"] == "pass"
    assert data["run"]["isolation"]["crashes"] == 1 and data["run"]["isolation"]["worker_starts"] == 2


def test_sys_exit_and_an_exception_in_the_sampler_keep_its_traceback(tmp_path):
    code, data = run("isolation_samplers:calls_sys_exit", tmp_path)
    assert code == 1 and "sys.exit(3)" in failing(data)[0]["message"]
    code, data = run("isolation_samplers:raises", tmp_path)
    [fault] = failing(data)
    assert code == 1 and "IndexError" in fault["message"]
    assert (
        "isolation_samplers.py" in fault["evidence"]["traceback"] and "out of bounds" in fault["evidence"]["traceback"]
    )
    assert "out of bounds" in (tmp_path / "run.html").read_text()


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("isolation_samplers:factory_exits", "sys.exit(4)"),
        ("isolation_samplers:factory_raises", "no GPU kernel built"),
        ("isolation_exit_at_import:sampler", "sys.exit(5)"),
    ],
)
def test_an_import_or_factory_failure_is_an_error_with_its_message(spec, fragment, tmp_path, capsys):
    code, data = run(spec, tmp_path)
    assert code == 2 and data["verdict"] == "error"
    assert fragment in data["checks"][0]["message"] and fragment in capsys.readouterr().err


def test_a_hang_is_killed_at_the_limit_and_the_next_check_gets_a_fresh_worker(tmp_path):
    code, data = run(
        "isolation_samplers:hangs", tmp_path, "contract.output", "contract.determinism", extra=("--timeout", "2")
    )
    assert code == 1 and data["verdict"] == "non-conformant"
    assert [c["evidence"]["violation"] for c in failing(data)] == ["hang", "hang"]
    assert "within 2 s" in failing(data)[0]["message"]
    # three hangs and three workers: the first call, on a tiny case before the battery
    # (specverify._calling.first_call), hung too, and was a finding for the checks to report, not a usage error
    assert data["run"]["isolation"]["hangs"] == 3 and data["run"]["isolation"]["worker_starts"] == 3


def test_outputs_on_the_meta_device_are_a_contract_finding(tmp_path):
    code, data = run("isolation_samplers:on_meta", tmp_path)
    [fault] = failing(data)
    assert code == 1 and fault["finding"] == "contract" and fault["evidence"]["violation"] == "device"
    assert "meta" in fault["message"]


def test_a_flood_of_output_is_captured_not_printed(tmp_path, capsys):
    code, data = run("isolation_samplers:floods", tmp_path, "contract.determinism")
    printed = capsys.readouterr()
    assert code == 3 and data["checks"][0]["status"] == "pass"  # a subset: inconclusive, never a pass
    assert "flood flood" not in printed.out + printed.err and len(printed.out) < 5000


def test_a_slow_batched_sampler_gets_the_time_its_size_needs():
    sut = SamplerUnderTest("isolation_samplers:slow_batched", isolation="process", first_timeout=1.0)
    g = torch.Generator().manual_seed(0)

    def batch(rows):
        return (
            torch.full((rows, 2, 512), 1 / 512, dtype=torch.float64),
            torch.full((rows, 1, 512), 1 / 512, dtype=torch.float64),
            torch.zeros(rows, 1, dtype=torch.int64),
        )

    for rows in (2, 2, 64):  # a first call, then the fixed cost and the cost per element are measured
        sut.step(*batch(rows), generator=g)
    tokens, _ = sut.step(*batch(2560), generator=g)  # 2.6 s: over the 1 s first limit
    assert tokens.shape == (2560, 2) and sut.hangs == 0
    sut.close()


def test_the_call_limit_scales_with_speed_and_shortens_after_a_hang():
    limit = CallLimit(timeout=None, first=120.0, short=5.0)
    assert limit(10**6) == 120.0
    limit.observe(10, 0.5, warm=False)  # a first call: it may compile
    limit.observe(10, 0.001, warm=True)  # the fixed cost
    limit.observe(10, 0.5, warm=False)  # a fresh worker's first call: ignored
    limit.observe(1_000, 0.3, warm=True)  # a small call's jitter: not a measure of the cost per element
    limit.observe(100_000, 0.101, warm=True)  # 1e-6 s per element beyond the fixed cost
    assert limit(10**6) == pytest.approx(120.0 + 10 * (0.001 + 1e-6 * 10**6))
    limit.hung = True
    assert limit(1000) == pytest.approx(5.0 + 10 * (0.001 + 1e-6 * 1000))
    assert CallLimit(timeout=3.0, first=120.0)(10**9) == 3.0


@pytest.mark.parametrize(
    ("flag", "value", "fragment"),
    [
        ("--device", "bogus", "not a torch device"),
        ("--report", "/proc/specverify-x.html", "cannot be written"),
        ("--timeout", "0", "--timeout must be"),
    ],
)
def test_unusable_options_fail_before_anything_runs(flag, value, fragment, tmp_path, capsys):
    path = tmp_path / "out.json"
    code = main(["check", "isolation_samplers:hangs", flag, value, "--no-progress", "--json", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and fragment in err and len(err.strip().splitlines()) == 1, err
    assert not path.exists()  # nothing ran


def test_json_naming_a_directory_fails_at_once_and_leaves_nothing(tmp_path, capsys):
    target = tmp_path / "results"
    target.mkdir()
    assert main(["check", "isolation_samplers:hangs", "--json", str(target), "--no-progress"]) == 2
    assert "is a directory" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["results"]


def test_a_closure_runs_in_process_and_the_run_says_why():
    def inline(t, d, y, g):
        return specverify.reference(t, d, y, g)

    result = specverify.check(inline, budget="quick", select=["contract.output"])
    assert result.run["isolation"]["mode"] == "in-process" and "closure" in result.run["isolation"]["reason"]
    assert {"sampler_seconds", "harness_seconds"} <= set(result.run["timing"])


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in state


def interrupt(argv: list[str], tmp_path: Path, presses: int) -> tuple[int, str, dict, int]:
    """Run ``python -m specverify ARGV --json run.json --report run.html``, press Ctrl-C ``presses``
    times once the first check's JSON is written; its exit status, stderr, JSON and worker's pid."""
    out, html, pid_file = tmp_path / "run.json", tmp_path / "run.html", tmp_path / "worker.pid"
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(TESTS.parent), str(TESTS)]), ISOLATION_PID_FILE=str(pid_file)
    )
    command = [sys.executable, "-m", "specverify", *argv, "--json", str(out), "--report", str(html)]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while not out.exists() and proc.poll() is None:  # the first check has finished
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()
        for _ in range(presses):
            proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    if presses == 1:
        assert "<html" in html.read_text()[:2000].lower() and "interrupted" in err
    pid = int(pid_file.read_text())
    for _ in range(200):
        if not _alive(pid):
            break
        time.sleep(0.05)
    assert not _alive(pid)
    return proc.returncode, err, json.loads(out.read_text()), pid


@pytest.mark.parametrize("presses", [1, 2])
def test_ctrl_c_exits_130_with_json_and_html_and_the_worker_ended(presses, tmp_path):
    _, _, data, _ = interrupt(
        ["check", "isolation_samplers:slow", "--budget", "quick", "--only", "contract", "--no-progress"],
        tmp_path,
        presses,
    )
    assert data["finished"] is False and data["checks"]
