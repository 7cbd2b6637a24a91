"""scripts/false_alarms.py: a campaign of many runs that an interruption does not lose."""

from __future__ import annotations

import json
import subprocess

import pytest


@pytest.fixture()
def script(load_by_path):
    return load_by_path("scripts/false_alarms.py")


def test_runs_recorded_by_an_earlier_campaign_are_reused_and_written(script, tmp_path, monkeypatch):
    runs, out = tmp_path / "runs", tmp_path / "out"
    runs.mkdir()
    for seed in range(2):
        row = {
            "seed": seed,
            "commit": "abc1234",
            "verdict": "conformant",
            "exit_code": 0,
            "seconds": 1.0,
            "checks": 3,
            "passed": 3,
            "failed": [],
            "smallest_p": 0.5,
            "stderr": "",
        }
        (runs / f"{script.slug('pkg.mod:sampler')}-quick-{seed}.run.json").write_text(json.dumps(row))
    real = subprocess.run

    def no_command(command, *args, **kwargs):
        if "specverify" in command:
            raise AssertionError(f"a recorded run was run again: {command}")
        return real(command, *args, **kwargs)  # git, for the commit

    monkeypatch.setattr(script.subprocess, "run", no_command)
    assert (
        script.main(["pkg.mod:sampler", "--budget", "quick", "--seeds", "2", "--runs", str(runs), "--output", str(out)])
        == 0
    )
    table = (out / f"{script.slug('pkg.mod:sampler')}-quick.md").read_text()
    assert "2 of 2 runs conformant" in table and "| 1 | conformant | 0 | 3 of 3 | 0.5 | 1.0 | abc1234 |" in table
    assert (
        "under way" not in table.lower()
        and json.loads((out / f"{script.slug('pkg.mod:sampler')}-quick.json").read_text())["complete"] is True
    )


def test_an_interrupted_campaign_leaves_its_table_as_its_runs_stood_titled_under_way(script, tmp_path, monkeypatch):
    out = tmp_path / "out"
    real = subprocess.run
    name = f"{script.slug('pkg.mod:sampler')}-quick"

    def fake_cli(command, *args, **kwargs):
        if "specverify" not in command:
            return real(command, *args, **kwargs)  # git, for the commit
        seed = int(command[command.index("--seed") + 1])
        if seed == 2:  # the third run is interrupted: the table stands as the first two left it
            raise KeyboardInterrupt
        with open(command[command.index("--json") + 1], "w") as f:
            json.dump({"verdict": "conformant", "checks": [{"id": "fit.x", "status": "pass", "p_value": 0.3}]}, f)
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(script.subprocess, "run", fake_cli)
    assert (
        script.main(["pkg.mod:sampler", "--budget", "quick", "--seeds", "3", "--jobs", "1", "--output", str(out)])
        == 130
    )
    final = (out / f"{name}.md").read_text()
    assert (
        "over 2 of 3 run seeds (under way)" in final
        and "1 of 3 seeds not yet run" in final
        and "| 1 | conformant |" in final
    )
    record = json.loads((out / f"{name}.json").read_text())
    assert record["complete"] is False and record["seeds"] == 3 and [r["seed"] for r in record["runs"]] == [0, 1]


def test_a_false_alarm_is_listed_and_the_exit_status_says_so(script, tmp_path):
    runs, out = tmp_path / "runs", tmp_path / "out"
    runs.mkdir()
    row = {
        "seed": 0,
        "commit": "abc1234",
        "verdict": "non-conformant",
        "exit_code": 1,
        "seconds": 1.0,
        "checks": 3,
        "passed": 2,
        "failed": ["fit.conditional[random]: p = 1e-9"],
        "smallest_p": 1e-9,
        "stderr": "",
    }
    (runs / f"{script.slug('pkg.mod:sampler')}-quick-0.run.json").write_text(json.dumps(row))
    assert (
        script.main(["pkg.mod:sampler", "--budget", "quick", "--seeds", "1", "--runs", str(runs), "--output", str(out)])
        == 1
    )
    assert "false alarms: 1 in 1 runs" in (out / f"{script.slug('pkg.mod:sampler')}-quick.md").read_text()


def _row(seed, verdict, reason=""):
    return {
        "seed": seed,
        "commit": "abc1234",
        "verdict": verdict,
        "reason": reason,
        "exit_code": {"conformant": 0, "inconclusive": 3}.get(verdict, 1),
        "seconds": 1.0,
        "checks": 3,
        "passed": 3,
        "failed": [],
        "smallest_p": 0.5,
        "stderr": "",
    }


def test_undeclared_an_inconclusive_naming_its_preset_is_no_false_alarm_and_another_is(script, tmp_path):
    runs, out = tmp_path / "runs", tmp_path / "out"
    runs.mkdir()
    named = "judged by transformers' warp, but the output fits the vllm preset's: declare warp='vllm'"
    rows = [
        _row(0, "conformant"),
        _row(1, "inconclusive", named),
        _row(2, "inconclusive", named.replace("vllm", "sglang")),
        _row(3, "lossy"),
    ]
    for row in rows:
        (runs / f"{script.slug('pkg.mod:loop')}-quick-{row['seed']}.run.json").write_text(json.dumps(row))
    assert [script.explains(r, "vllm") for r in rows] == [True, True, False, False]
    assert [script.explains(r, None) for r in rows] == [True, False, False, False]  # declared: only conformant
    assert (
        script.main(
            [
                "--loop",
                "--undeclared",
                "vllm",
                "pkg.mod:loop",
                "--budget",
                "quick",
                "--seeds",
                "4",
                "--runs",
                str(runs),
                "--output",
                str(out),
            ]
        )
        == 1
    )
    table = (out / f"{script.slug('pkg.mod:loop')}-quick.md").read_text()
    assert "1 of 4 runs conformant, 1 inconclusive naming warp='vllm' to declare (not false alarms)" in table
    assert "false alarms (lossy, non-conformant, or any other verdict): 2 in 4 runs" in table
    assert json.loads((out / f"{script.slug('pkg.mod:loop')}-quick.json").read_text())["undeclared"] == "vllm"


def test_a_tv_campaign_asks_each_run_for_the_tv_and_its_workers_and_names_its_table_by_it(
    script, tmp_path, monkeypatch
):
    out, commands = tmp_path / "out", []
    real = subprocess.run

    def fake_cli(command, *args, **kwargs):
        if "specverify" not in command:
            return real(command, *args, **kwargs)  # git, for the commit
        commands.append(command)
        path = command[command.index("--json") + 1]
        with open(path, "w") as f:
            json.dump({"verdict": "conformant", "checks": [{"id": "fit.x", "status": "pass", "p_value": 0.3}]}, f)
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(script.subprocess, "run", fake_cli)
    assert (
        script.main(
            ["pkg.mod:sampler", "--tv", "0.001", "--workers", "2", "--seeds", "2", "--jobs", "1", "--output", str(out)]
        )
        == 0
    )
    assert len(commands) == 2 and all(
        c[c.index("--tv") + 1] == "0.001" and c[c.index("--workers") + 1] == "2" for c in commands
    )
    assert all("--budget" not in c for c in commands)  # the default base: --tv alone, as a user types it
    table = (out / f"{script.slug('pkg.mod:sampler')}-tv0.001.md").read_text()
    assert "budget `tv0.001`" in table and "2 of 2 runs conformant" in table


@pytest.mark.parametrize("flags", [["--tv", "1.5"], ["--tv", "0"], ["--workers", "0"]])
def test_a_bad_tv_or_worker_count_is_a_usage_error(script, flags, capsys):
    with pytest.raises(SystemExit) as exit_:
        script.main(["pkg.mod:sampler", *flags])
    assert exit_.value.code == 2 and flags[0] in capsys.readouterr().err
