"""Several workers: units seeded from (experiment seed, index), results identical for any worker count.

The pools here hold in-process samplers under test (each calls its sampler in a helper thread of
its own), so the tests need no processes; ``test_cli_json_is_identical_for_any_worker_count``
runs the CLI with isolated workers end to end.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import numpy as np
import pytest
import torch

import specverify
from specverify._budgets import get_budget
from specverify._calling.pool import UNIT_ROWS, LocalPool, SerialPool, UnitDone, unit_seed, unit_spans
from specverify._calling.sut import SamplerUnderTest
from specverify._laws.cases import ModelCase, StepCase
from specverify._laws.models import ChainModel
from specverify.checks import Context
from specverify.checks import _shape_base as shape_base
from specverify.checks._loop_context import LoopContext
from specverify.checks._shape_base import count_lumped, lumped_units, run_together, shape_spans
from specverify.checks._shape_target import tally_completed
from specverify.checks._tally import adjacent_counts, model_tallies, model_tally, step_counts
from specverify.errors import SamplerFault
from specverify.report import reproducible
from specverify.samplers import loop_reference, reference
from specverify.strategies._internal.shapes import active_tokens, cell_map, structured_case

ROWS = 3 * UNIT_ROWS + 1_000  # four units, the last one short


def _sut(sampler=reference) -> SamplerUnderTest:
    return SamplerUnderTest(sampler, isolation="in-process")


def _context(pool, seed: int = 5) -> Context:
    return Context(sut=pool.primary, budget=get_budget("quick"), seed=seed, alpha=0.0, pool=pool)


def _cases() -> list[StepCase]:
    gen = torch.Generator().manual_seed(0)
    cases = []
    for label in ("a", "b"):
        target = torch.softmax(torch.randn(3, 5, generator=gen, dtype=torch.float64), -1)
        draft = torch.softmax(torch.randn(2, 5, generator=gen, dtype=torch.float64), -1)
        cases.append(StepCase(target, draft, torch.tensor([1, 3]), label=label))
    return cases


def _pools(sizes=(1, 2, 3)):
    return {n: SerialPool(_sut()) if n == 1 else LocalPool([_sut() for _ in range(n)]) for n in sizes}


def test_units_keep_the_experiment_seed_for_the_first_and_derive_the_rest():
    assert unit_seed(11, 0) == 11
    assert len({unit_seed(11, i) for i in range(100)}) == 100
    assert unit_spans(2 * UNIT_ROWS + 1) == [
        (0, 0, UNIT_ROWS),
        (1, UNIT_ROWS, 2 * UNIT_ROWS),
        (2, 2 * UNIT_ROWS, 2 * UNIT_ROWS + 1),
    ]
    assert unit_spans(0) == []


def test_step_counts_are_identical_for_any_worker_count_and_every_worker_works():
    counts = {}
    for n, pool in _pools().items():
        counts[n] = step_counts(_context(pool), _cases(), ROWS // 2, seed=9)
        members = getattr(pool, "members", [pool.primary])
        assert all(member.rows > 0 for member in members), f"a worker of {n} ran no unit"
        assert sum(member.rows for member in members) == ROWS
        pool.close()
    assert counts[1].sum() == ROWS
    assert np.array_equal(counts[1], counts[2]) and np.array_equal(counts[1], counts[3])


def test_a_different_seed_gives_different_counts():
    """The identity is not vacuous: the counts depend on the seed (and so on each unit's)."""
    pool = SerialPool(_sut())
    first, second = (step_counts(_context(pool), _cases(), ROWS // 2, seed=s) for s in (9, 10))
    assert not np.array_equal(first, second)


def test_a_sequential_stop_sees_the_units_in_order_whatever_the_worker_count():
    """Stopping after the second unit gives the first two units' counts, for 1 or 3 workers
    (a unit that landed early on another worker is dropped, never counted)."""
    results = {}
    for n, pool in _pools((1, 3)).items():
        seen = []

        def stop(counts, seen=seen):
            seen.append(int(counts.sum()))
            return len(seen) == 2

        results[n] = step_counts(_context(pool), _cases(), ROWS // 2, seed=9, stop=stop)
        assert seen == [UNIT_ROWS, 2 * UNIT_ROWS]
        pool.close()
    assert np.array_equal(results[1], results[3])


def test_model_tallies_are_identical_for_any_worker_count():
    gen = torch.Generator().manual_seed(2)
    tables = [torch.softmax(torch.randn(4, 4, generator=gen, dtype=torch.float64), -1) for _ in range(2)]
    case = ModelCase(ChainModel(tables[0], tables[1], (0,)), k=2)
    tallies = {n: model_tally(_context(pool), case, 2 * UNIT_ROWS + 77, seed=4) for n, pool in _pools((1, 2)).items()}
    for field in ("emitted", "completed", "accepted"):
        assert np.array_equal(getattr(tallies[1], field), getattr(tallies[2], field))
    assert tallies[1].samples == 2 * UNIT_ROWS + 77


def test_loop_generations_are_identical_for_any_worker_count():
    from specverify._loop import MarkovLM
    from specverify._warps.rules import SamplingParams

    gen = torch.Generator().manual_seed(3)
    target, draft = (MarkovLM(torch.randn(4, 4, generator=gen), (0,)) for _ in range(2))
    rows = UNIT_ROWS + 500
    prompt = torch.ones((rows, 1), dtype=torch.int64)
    params = SamplingParams(temperature=torch.full((rows,), 0.9, dtype=torch.float64))
    outs = {}
    for n in (1, 2):
        loop = loop_reference if n == 1 else None
        pool = SerialPool(loop) if n == 1 else LocalPool([loop_reference, loop_reference])
        ctx = LoopContext(loop or loop_reference, tv=0.1, power=0.9, max_samples=rows, seed=0, alpha=0.0, pool=pool)
        outs[n] = ctx.run(target, draft, prompt, 3, params, seed=8)
    assert outs[1].shape == (rows, 3)
    assert torch.equal(outs[1], outs[2])


def test_loop_tallies_are_the_counts_of_the_generations_for_any_worker_count():
    import numpy as np

    from specverify._loop import MarkovLM
    from specverify.checks._loop import LoopTally, _params, loop_parameters

    gen = torch.Generator().manual_seed(5)
    target, draft = (MarkovLM(torch.randn(4, 4, generator=gen), (0,)) for _ in range(2))
    rows, groups = UNIT_ROWS + 501, [{"temperature": 0.7}, {"temperature": 1.3, "top_k": 2}, {}]
    names = loop_parameters(loop_reference)
    counted = {}
    for n in (1, 2):
        pool = SerialPool(loop_reference) if n == 1 else LocalPool([loop_reference, loop_reference])
        ctx = LoopContext(loop_reference, tv=0.1, power=0.9, max_samples=rows, seed=0, alpha=0.0, pool=pool)
        sequences = ctx.tally(
            target,
            draft,
            torch.ones((1, 1), dtype=torch.int64),
            rows,
            3,
            groups,
            8,
            LoopTally(4, False, np.ones((3, 64)), groups=3),
        )
        pairs = ctx.tally(
            target,
            draft,
            torch.ones((1, 1), dtype=torch.int64),
            rows,
            5,
            groups,
            9,
            LoopTally(4, True, np.ones((4, 16))),
        )
        counted[n] = sequences, pairs
        if n == 1:  # the same units' tokens, counted here
            which = torch.arange(rows) % 3
            out = ctx.run(
                target, draft, torch.ones((rows, 1), dtype=torch.int64), 3, _params(groups, which, names), seed=8
            )
            code = (out * torch.tensor([16, 4, 1])).sum(-1)
            assert np.array_equal(
                sequences, np.stack([np.bincount(code[which == g].numpy(), minlength=64) for g in range(3)])
            )
            out = ctx.run(
                target, draft, torch.ones((rows, 1), dtype=torch.int64), 5, _params(groups, which, names), seed=9
            )
            assert np.array_equal(
                pairs,
                np.stack([np.bincount((out[:, t - 1] * 4 + out[:, t]).numpy(), minlength=16) for t in range(1, 5)]),
            )
    assert sequences.sum() == rows and pairs.sum() == 4 * rows
    assert all(np.array_equal(a, b) for a, b in zip(counted[1], counted[2]))


def test_a_loops_phases_are_one_stream_of_units_each_counted_as_it_would_be_alone():
    from specverify._loop import MarkovLM
    from specverify.checks._loop import LoopTally, _params, loop_parameters

    gen = torch.Generator().manual_seed(6)
    target, draft = (MarkovLM(torch.randn(4, 4, generator=gen), (0,)) for _ in range(2))
    groups, tally = [{"temperature": 0.8}, {}], LoopTally(4, False, np.ones((2, 64)), groups=2)
    phases = [(UNIT_ROWS + 301, 11), (0, 12), (2 * UNIT_ROWS, 13), (77, 14)]  # several units, none, a short one
    prompt = torch.ones((1, 1), dtype=torch.int64)
    names = loop_parameters(loop_reference)
    alone = []  # each phase generated on its own, untallied, and its tokens counted here
    ctx = LoopContext(
        loop_reference, tv=0.1, power=0.9, max_samples=1, seed=0, alpha=0.0, pool=SerialPool(loop_reference)
    )
    for rows, seed in phases:
        if rows == 0:
            alone.append(np.zeros((2, 64), dtype=np.int64))
            continue
        which = torch.arange(rows) % 2
        out = ctx.run(
            target, draft, torch.ones((rows, 1), dtype=torch.int64), 3, _params(groups, which, names), seed=seed
        )
        code = (out * torch.tensor([16, 4, 1])).sum(-1)
        alone.append(np.stack([np.bincount(code[which == g].numpy(), minlength=64) for g in range(2)]))
    for pool in (SerialPool(loop_reference), LocalPool([loop_reference, loop_reference])):
        ctx = LoopContext(loop_reference, tv=0.1, power=0.9, max_samples=1, seed=0, alpha=0.0, pool=pool)
        streamed = list(ctx.tally_phases(target, draft, prompt, phases, 3, groups, tally))
        assert [int(c.sum()) for c in streamed] == [rows for rows, _ in phases]
        assert all(np.array_equal(a, b) for a, b in zip(streamed, alone))


class _Gated:
    """A pool member whose units from 3 on wait, once started, until the map is left."""

    def __init__(self, ran: list[int], started: threading.Semaphore, gate: threading.Event) -> None:
        self.ran, self.started, self.gate = ran, started, gate

    def unit(self, work, unit, there):
        if unit >= 3:
            self.started.release()
            assert self.gate.wait(timeout=60)
        self.ran.append(unit)
        return UnitDone(unit, None, {})

    def close(self) -> None:
        pass


def test_leaving_a_map_early_drops_the_units_not_yet_started(monkeypatch):
    import types

    from specverify._calling import pool as pool_module

    ran, started, gate = [], threading.Semaphore(0), threading.Event()

    class _Left(threading.Event):  # the map's "left" flag: its running units go on once it is set
        def set(self) -> None:
            super().set()
            gate.set()

    monkeypatch.setattr(pool_module, "threading", types.SimpleNamespace(Event=_Left))
    pool = LocalPool([_Gated(ran, started, gate), _Gated(ran, started, gate)])
    landed = pool.map(None, range(100))
    assert [next(landed).result for _ in range(3)] == [
        0,
        1,
        2,
    ]  # units 3-5 in flight: two running, one waiting for a worker
    assert started.acquire(timeout=60) and started.acquire(timeout=60)
    landed.close()
    assert sorted(ran)[:3] == [0, 1, 2] and len(ran) == 5  # the two running finished; the third never started
    monkeypatch.undo()
    assert [d.result for d in pool.map(None, range(3))] == [0, 1, 2]  # the pool goes on as before
    pool.close()


class _FailsOnUnit:
    """A sampler that raises in the unit seeded ``unit_seed(9, 2)``: a fault wherever it runs."""

    def __init__(self) -> None:
        self.bad = unit_seed(9, 2)

    def __call__(self, target_probs, draft_probs, draft_tokens, generator=None):
        if generator is not None and generator.initial_seed() == self.bad:
            raise RuntimeError("boom in unit 2")
        return reference(target_probs, draft_probs, draft_tokens, generator=generator)


@pytest.mark.parametrize("n", [1, 2])
def test_a_fault_in_any_unit_is_the_checks_fault(n):
    sampler = _FailsOnUnit()
    pool = SerialPool(_sut(sampler)) if n == 1 else LocalPool([_sut(sampler) for _ in range(n)])
    with pytest.raises(SamplerFault, match="boom in unit 2"):
        step_counts(_context(pool), _cases(), ROWS // 2, seed=9)
    pool.close()


class _Member:
    """A pool member whose unit 0 waits until unit 2 has started: only a pool that keeps more units
    in flight than it has workers starts unit 2 while unit 0, the oldest, is running."""

    def __init__(self, started: dict[int, threading.Event]) -> None:
        self.started = started

    def unit(self, work, unit, there):
        self.started[unit].set()
        waited = self.started[2].wait(timeout=30) if unit == 0 else True
        return UnitDone((unit, waited), None, {})

    def close(self) -> None:
        pass


def test_a_worker_that_finishes_first_starts_the_next_unit_while_the_oldest_runs_and_results_keep_unit_order():
    started = {i: threading.Event() for i in range(6)}
    pool = LocalPool([_Member(started), _Member(started)])
    done = [d.result for d in pool.map(None, range(6))]
    pool.close()
    assert [unit for unit, _ in done] == list(range(6))  # taken in unit order, whatever finished first
    assert done[0][1], "unit 2 did not start while unit 0 ran: the free worker waited for the oldest unit"


def _cli(*extra: str, tmp_path, name: str) -> dict:
    path = tmp_path / f"{name}.json"
    command = [
        sys.executable,
        "-m",
        "specverify",
        "check",
        "specverify.samplers:reference",
        "--budget",
        "quick",
        "--seed",
        "4",
        "--only",
        "fit.conditional[[]zero-residual[]]",
        "--only",
        "fit.step*",
        "--json",
        str(path),
        "-q",
        "--no-progress",
        *extra,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 3 and done.stdout.startswith("inconclusive"), (
        done.stdout + done.stderr
    )  # a subset passes nothing
    result = json.loads(path.read_text())
    assert all(c["status"] == "pass" for c in result["checks"])
    return result


def test_cli_json_is_identical_for_any_worker_count(tmp_path):
    one, two = _cli(tmp_path=tmp_path, name="one"), _cli("--workers", "2", tmp_path=tmp_path, name="two")
    assert two["run"]["workers"] == {"count": 2, "executor": "local", "devices": None, "address": None}
    assert two["run"]["isolation"]["worker_starts"] == 2
    assert max(c["samples"] or 0 for c in one["checks"]) > UNIT_ROWS  # units were spread, not one call
    assert reproducible(one) == reproducible(two)


#: Bad worker options a check and a loop refuse alike (a check also takes --device and --devices).
BAD_WORKER_OPTIONS = [
    (["--workers", "0"], "workers (--workers) must be a whole number of at least 1"),
    (["--address", "127.0.0.1:1"], "--executor ray"),
    (["--workers", "2", "--in-process"], "need a sampler that runs isolated"),
]


@pytest.mark.parametrize(
    ("options", "message"),
    [*BAD_WORKER_OPTIONS, (["--devices", "cuda:7"], "cuda:7"), (["--device", "cuda:7"], "cuda:7")],
)
def test_bad_worker_options_are_one_line_and_exit_2(options, message, tmp_path, capsys):
    _refused(["check", "specverify.samplers:reference", "--no-progress", *options], message, tmp_path, capsys)


@pytest.mark.parametrize(("options", "message"), BAD_WORKER_OPTIONS)
def test_a_loops_bad_worker_options_are_one_line_and_exit_2(options, message, tmp_path, capsys):
    _refused(["loop", "specverify.samplers:loop_reference", *options], message, tmp_path, capsys)


def _refused(command: list[str], message: str, tmp_path, capsys) -> None:
    from specverify._cli import main

    path = tmp_path / "out.json"
    code = main([*command, "--budget", "quick", "--json", str(path)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not path.exists()  # nothing ran


def test_the_api_refuses_bad_worker_options():
    with pytest.raises(specverify.errors.UsageError, match="at least 1"):
        specverify.check(reference, workers=0)
    with pytest.raises(specverify.errors.UsageError, match="executor"):
        specverify.check(reference, executor="threads")


def test_experiments_in_one_stream_tally_what_each_tallies_alone_for_any_worker_count():
    gen = torch.Generator().manual_seed(6)
    cases = []
    for vocab, k in ((3, 1), (4, 2), (2, 3)):
        tables = [torch.softmax(torch.randn(vocab, vocab, generator=gen, dtype=torch.float64), -1) for _ in range(2)]
        cases.append(ModelCase(ChainModel(tables[0], tables[1], (0,)), k=k))
    # one and two units each, and a short one: a worker ends one experiment while the other starts the next
    experiments = [(cases[0], UNIT_ROWS + 5, 11), (cases[1], 300, 12), (cases[2], 2 * UNIT_ROWS, 13)]
    alone = [model_tally(_context(SerialPool(_sut())), *experiment) for experiment in experiments]
    for n, pool in _pools((1, 2)).items():
        ctx = _context(pool)
        rows = []
        ctx.advance = rows.append
        together = model_tallies(ctx, experiments)
        assert sum(rows) == sum(samples for _, samples, _ in experiments), n
        for mine, theirs in zip(together, alone):
            for field in ("emitted", "completed", "accepted"):
                assert np.array_equal(getattr(mine, field), getattr(theirs, field)), (n, field)
        pool.close()


# --- units run and tallied in isolated workers' processes (LocalPool of processes) ----------------


def test_one_isolated_worker_streams_units_and_tallies_what_each_unit_tallies_alone():
    gen = torch.Generator().manual_seed(3)
    tables = [torch.softmax(torch.randn(3, 3, generator=gen, dtype=torch.float64), -1) for _ in range(2)]
    case = ModelCase(ChainModel(tables[0], tables[1], (0,)), k=2)
    isolated = SamplerUnderTest("specverify.samplers:reference", isolation="process")
    try:  # one stream of calls: a unit's first call goes out while the last unit's is in flight, with its own generator
        streamed = model_tally(_context(SerialPool(isolated)), case, 2 * UNIT_ROWS + 77, seed=4)
        assert isolated.calls > 3
        counted = step_counts(_context(SerialPool(isolated)), _cases(), ROWS // 2, seed=9)
        adjacent = adjacent_counts(_context(SerialPool(isolated)), _cases()[0], ROWS // 2, seed=9)
    finally:
        isolated.close()
    alone = LocalPool([_sut(), _sut()])  # each unit on its own
    tally = model_tally(_context(alone), case, 2 * UNIT_ROWS + 77, seed=4)
    for field in ("emitted", "completed", "accepted"):
        assert np.array_equal(getattr(streamed, field), getattr(tally, field))
    assert np.array_equal(counted, step_counts(_context(alone), _cases(), ROWS // 2, seed=9))
    assert np.array_equal(adjacent, adjacent_counts(_context(alone), _cases()[0], ROWS // 2, seed=9))


def _isolated_pool(spec: str, n: int = 2, timeout: float | None = None) -> LocalPool:
    return LocalPool([SamplerUnderTest(spec, isolation="process", timeout=timeout) for _ in range(n)])


def test_isolated_workers_tally_in_their_processes_and_agree_with_one_in_process():
    pool = _isolated_pool("specverify.samplers:reference")
    try:
        there = step_counts(_context(pool), _cases(), ROWS // 2, seed=9)
        assert all(m.rows > 0 and m.calls > 0 for m in pool.members)  # the worker's counters came back with its units
        ctx = _context(pool)
        step_counts(ctx, _cases(), ROWS // 2, seed=9)
        assert sum(r.rows for r in ctx.reached) == ROWS  # and what each unit gave the sampler
    finally:
        pool.close()
    here = step_counts(_context(SerialPool(_sut())), _cases(), ROWS // 2, seed=9)
    assert np.array_equal(there, here)


@pytest.mark.parametrize(
    ("spec", "timeout", "rule", "words"),
    [
        ("isolation_samplers:raises", None, "raised", "IndexError: index 7 is out of bounds"),
        (
            "isolation_samplers:segfaults",
            None,
            "crashed",
            "process died",
        ),  # no short limit: a core dump may take seconds
        ("isolation_samplers:hangs", 2.0, "hang", "did not return within 2 s"),
    ],
)
def test_a_fault_inside_a_workers_unit_is_the_samplers_fault(spec, timeout, rule, words):
    pool = _isolated_pool(spec, timeout=timeout)
    try:
        with pytest.raises(SamplerFault) as caught:
            step_counts(_context(pool), _cases(), ROWS // 2, seed=9)
        assert caught.value.violation.rule == rule and words in caught.value.violation.message
        assert pool.primary.last_fault is not None  # the run reads the details from its own worker
    finally:
        pool.kill()


# --- the shapes family's experiments: cut into units by shape, run together -----------------------


def _shape_experiments(ctx, rows=3_000):
    """Two production-like shapes' lumped experiments, each of several units."""
    experiments = []
    for vocab, k in ((4097, 3), (1025, 2)):
        case = structured_case(vocab, k, 7)
        cells, labels = cell_map(active_tokens(case), vocab)
        experiments.append(
            lumped_units(ctx, case, cells, len(labels), rows, seed=vocab, per_call=100, harness=vocab + 1)
        )
    return experiments


@pytest.mark.parametrize("work", [count_lumped, tally_completed])
def test_shape_experiments_are_identical_for_any_worker_count(work, monkeypatch):
    monkeypatch.setattr(shape_base, "UNIT_ELEMENTS", 2**20)  # a few hundred rows a unit: several each
    ran = {}
    for n, pool in _pools((1, 2)).items():
        ctx = _context(pool)
        experiments = _shape_experiments(ctx)
        assert all(len(units) > 2 for units in experiments) and {u.rows for u in experiments[0][:-1]} == {
            experiments[0][0].rows
        }
        ran[n] = run_together(ctx, work, experiments, ["a", "b"])
        assert all(m.rows > 0 for m in getattr(pool, "members", [pool.primary])), f"a worker of {n} ran no unit"
        assert [r.reach.rows for r in ran[n]] == [3_000, 3_000]  # what each experiment gave the sampler
        pool.close()
    for one, two in zip(ran[1], ran[2]):
        for a, b in zip(*(x.result if isinstance(x.result, tuple) else (x.result,) for x in (one, two))):
            assert a.sum() > 0 and np.array_equal(a, b)


def test_shape_units_depend_on_the_shape_alone():
    """A unit's rows: whole calls, at most UNIT_ROWS rows and about UNIT_ELEMENTS elements."""
    assert shape_spans(100, 10, 2**30) == [(i, 10 * i, 10 * i + 10) for i in range(10)]  # at least one call a unit
    assert shape_spans(10**6, 512, 10)[0] == (0, 0, UNIT_ROWS - UNIT_ROWS % 512)
    spans = shape_spans(5_000, 7, shape_base.UNIT_ELEMENTS // 700)
    assert spans[0][2] == 700 and spans[-1][2] == 5_000


def test_a_fault_in_one_shape_ends_that_shape_alone_unless_asked_to_stop():
    class FailsOnFirstShape:
        def __call__(self, target_probs, draft_probs, draft_tokens, generator=None):
            if target_probs.shape[-1] == 4097:
                raise RuntimeError("boom at V=4097")
            return reference(target_probs, draft_probs, draft_tokens, generator=generator)

    pool = SerialPool(_sut(FailsOnFirstShape()))
    ctx = _context(pool)
    first, second = run_together(ctx, count_lumped, _shape_experiments(ctx), ["a", "b"])
    assert first.fault is not None and "boom at V=4097" in first.fault.violation.message and first.result is None
    assert second.fault is None and second.result.sum() == 3_000
    first, second = run_together(ctx, count_lumped, _shape_experiments(ctx), ["a", "b"], stop_at_fault=True)
    assert first.fault is not None and second.not_run is first.fault and second.result is None


def test_a_plan_for_several_workers_times_units_where_they_run_in_the_samplers_process():
    """One worker tallies units here while its process runs the calls (the two overlap); several
    tally them in their own processes, so the plan times them there (it ran 0.5x fast for two)."""
    from specverify._run._rehearsal import _unit_example

    calls = []

    class Isolated:
        def unit(self, work, unit, *, there):
            calls.append(("in the sampler's process", unit, there))

    def work(sut, unit):
        calls.append(("here", unit))

    run = _unit_example(work, "unit", lambda unit, rows: (unit, rows))
    assert run(Isolated(), 3, True) == 3 and calls == [("in the sampler's process", ("unit", 3), True)]
    calls.clear()
    assert run(Isolated(), 4) == 4 and calls == [("here", ("unit", 4))]
