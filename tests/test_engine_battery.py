"""The engine family on engines whose fate is known: the reference engine passes, each zoo engine is
caught by the checks it declares, and whatever an engine does (raise, exit, return garbage) is a
finding of the check it happened in, with the run's JSON written."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

import specverify
from specverify import Verdict
from specverify._record.evidence import unknown_keys
from specverify.checks._engine import position_tables, throughput_line
from specverify.samplers import EngineReference
from specverify.zoo import ENGINE_MEMBERS

QUICK = "quick"


def test_the_reference_engine_passes_the_exact_checks_and_a_law() -> None:
    result = specverify.check_engine(
        specverify.samplers.engine_reference,
        budget=QUICK,
        isolation="in-process",
        select=["engine.output", "engine.determinism", "engine.greedy", "engine.law[top-k]"],
    )
    assert {c.id: c.status for c in result.checks} == dict.fromkeys(
        ["engine.output", "engine.determinism", "engine.greedy", "engine.law[top-k]"], "pass"
    )
    (law,) = [c for c in result.checks if c.id == "engine.law[top-k]"]
    assert law.min_detectable_tv is not None and law.min_detectable_tv <= 2 * specverify.BUDGETS[QUICK].tv
    assert law.samples is not None and law.p_value is not None and law.alpha is not None
    assert result.run["contract"] == "engine" and result.run["vocab_size"] == 5
    assert all(unknown_keys(c.to_json()["evidence"]) == [] for c in result.checks)  # the evidence is in the schema
    # each check timed its calls in each mode; the run's speed in words sums them
    made = law.evidence["throughput"]
    assert set(made) == {"on", "off"} and made["on"]["tokens"] == made["off"]["tokens"] > 0
    assert made["on"]["per_second"] == pytest.approx(made["on"]["tokens"] / made["on"]["seconds"], rel=1e-2)
    line = throughput_line(result.checks)
    assert line is not None and line.startswith("throughput: speculation on ")
    total = sum(made["tokens"] for c in result.checks for made in c.evidence["throughput"].values())
    assert f"over {total:,} tokens" in line


@pytest.mark.parametrize("name", [n for n, m in ENGINE_MEMBERS.items() if m.caught_by])
def test_each_zoo_engine_is_caught_by_the_checks_it_declares(name: str) -> None:
    member = ENGINE_MEMBERS[name]
    result = specverify.check_engine(member.engine, budget=QUICK, isolation="in-process", select=list(member.caught_by))
    failed = {c.id for c in result.checks if c.status == "fail"}
    assert failed == set(member.caught_by) and result.verdict == member.verdict


def test_the_law_check_names_where_the_modes_differ() -> None:
    member = ENGINE_MEMBERS["engine-min-tokens-bonus-only"]
    result = specverify.check_engine(
        member.engine, budget=QUICK, isolation="in-process", select=["engine.law[min-tokens]"]
    )
    (law,) = result.checks
    assert law.finding == "loss" and law.p_value is not None and law.p_value <= law.alpha
    gap = law.evidence["largest_gap"]
    assert gap["token"] == 5 and gap["on"] > 0.2 and gap["off"] == 0.0  # an end (token V) before the minimum
    assert "an end at rate" in law.message
    assert unknown_keys(law.to_json()["evidence"]) == []


class _Broken(EngineReference):
    """Speculation on breaks as ``how`` says; off it is the reference engine."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.how = how

    def __call__(self, prompts, num_tokens, params, seed, speculative):  # noqa: ANN001, ANN204
        if not speculative:
            return super().__call__(prompts, num_tokens, params, seed, speculative)
        if self.how == "raise":
            raise RuntimeError("the draft model's KV cache is full")
        if self.how == "exit":
            os._exit(3)
        if self.how == "wide":
            return torch.zeros(prompts.shape[0], num_tokens + 1, dtype=torch.int64)
        return torch.full((prompts.shape[0], num_tokens), self.vocab_size, dtype=torch.int64)  # an id out of range


BROKEN = {how: _Broken(how) for how in ("raise", "exit", "wide", "out-of-range")}


@pytest.mark.parametrize(
    ("how", "said"),
    [
        ("raise", "the engine raised RuntimeError: the draft model's KV cache is full"),
        ("wide", "expected int64 (64, 6) (speculation on)"),
        ("out-of-range", "holds 5, outside [0, 5) (speculation on)"),
    ],
)
def test_an_engine_that_breaks_is_a_finding(how: str, said: str) -> None:
    result = specverify.check_engine(BROKEN[how], budget=QUICK, isolation="in-process", select=["engine.greedy"])
    (greedy,) = result.checks
    assert greedy.status == "fail" and greedy.finding == "contract" and said in greedy.message
    assert result.verdict == Verdict.NON_CONFORMANT


def test_an_engine_that_exits_in_its_process_is_a_finding_and_the_json_is_written(tmp_path) -> None:  # noqa: ANN001
    path = tmp_path / "engine.json"
    result = specverify.check_engine(
        f"{__name__}:BROKEN_EXIT", budget=QUICK, isolation="process", select=["engine.greedy"], json_path=path
    )
    (greedy,) = result.checks
    assert greedy.status == "fail" and "the engine's process died" in greedy.message
    written = json.loads(path.read_text())
    # the first call before the battery died too (a finding of the check that repeats it, not a usage error)
    assert written["verdict"] == "non-conformant" and written["run"]["isolation"]["crashes"] == 2


BROKEN_EXIT = BROKEN["exit"]


def test_the_plan_counts_each_engine_check_by_its_own_rule_and_times_the_engine(capsys) -> None:  # noqa: ANN001
    from specverify._cli import main

    assert main(["engine", "specverify.samplers:engine_reference", "--plan", "--budget", QUICK, "--in-process"]) == 0
    out = capsys.readouterr().out
    assert "(as each check's own sample-size rule gives them)" in out
    assert "timed: one call of 1024 generations in each mode" in out and "estimated time: about" in out
    sampled = next(line for line in out.splitlines() if line.startswith("engine.law[sampled]"))
    rows = int(sampled.split()[2].replace(",", ""))
    assert 2 * 30_000 < rows < 2 * 60_000  # two modes, sized for TV 0.05 at power 0.99 over three looks


class _Plain(EngineReference):
    parameters = ()  # declares no sampling parameter: output, determinism and the sampled law run


PLAIN = _Plain()


def test_a_conformant_engine_run_from_the_command_line_exits_0_and_writes_its_report(tmp_path, capsys) -> None:  # noqa: ANN001
    from specverify._cli import main

    json_path, html = tmp_path / "e.json", tmp_path / "e.html"
    argv = ["engine", f"{__name__}:PLAIN", "--budget", QUICK, "--in-process", "--json", str(json_path)]
    assert main([*argv, "--report", str(html)]) == 0
    out = capsys.readouterr().out
    assert "conformant" in out and "engine.law[sampled]" in out
    assert json.loads(json_path.read_text())["verdict"] == "conformant" and html.stat().st_size > 0


def test_the_reports_rerun_command_of_an_engine_run_is_specverify_engine() -> None:
    from specverify.report._rerun import rerun

    result = specverify.check_engine(PLAIN, budget=QUICK, isolation="in-process", select=["engine.output"])
    command = rerun({**result.run.to_json(), "spec": "mine:generate"})
    assert command is not None and command.startswith("specverify engine mine:generate --budget quick")


@pytest.mark.parametrize("vocab", [5, 40_000])
def test_position_tables_count_each_token_given_its_prefix_as_a_sort_of_rows_would(vocab: int) -> None:
    # integer keys where a prefix fits 62 bits (vocab 5), rows sorted as rows past it (vocab 40,000 at t >= 5)
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 3, (400, 6)), rng.integers(0, 3, (300, 6))
    a[rng.random(400) < 0.2, 3:] = -1  # ended generations
    for t, (count_a, count_b) in enumerate(position_tables(a, b, vocab)):
        coded_a, coded_b = np.where(a < 0, vocab, a), np.where(b < 0, vocab, b)
        running_a, running_b = (coded_a[:, :t] < vocab).all(1), (coded_b[:, :t] < vocab).all(1)
        rows = np.unique(np.concatenate([coded_a[running_a, :t], coded_b[running_b, :t]]), axis=0)
        assert count_a.shape == count_b.shape == (len(rows), vocab + 1)
        for i, prefix in enumerate(rows):
            here_a = coded_a[running_a][(coded_a[running_a, :t] == prefix).all(1), t]
            here_b = coded_b[running_b][(coded_b[running_b, :t] == prefix).all(1), t]
            assert (count_a[i] == np.bincount(here_a, minlength=vocab + 1)).all()
            assert (count_b[i] == np.bincount(here_b, minlength=vocab + 1)).all()


def test_a_law_check_spread_over_two_workers_makes_the_same_generations_and_verdict() -> None:
    # each call is seeded by its first row, whichever worker makes it: the counts and p-value do not depend on N
    from engine_samplers import CALLS  # tests/, as the workers import it by spec

    CALLS.unlink(missing_ok=True)
    select, results, callers = ["engine.law[min-tokens]", "engine.law[stop]"], [], []
    for n in (1, 2):
        before = len(CALLS.read_text().split()) if CALLS.exists() else 0
        result = specverify.check_engine("engine_samplers:small_calls", budget=QUICK, select=select, workers=n)
        results.append([(c.id, c.status, c.p_value, c.samples) for c in result.checks])
        callers.append(set(CALLS.read_text().split()[before:]))
        assert result.verdict == "lossy"
    assert results[0] == results[1]
    assert [len(pids) for pids in callers] == [1, 2]  # two workers' processes made the second run's calls
