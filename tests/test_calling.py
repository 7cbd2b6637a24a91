"""Every sampler call is audited: each broken rule, a hang and an exception become a SamplerFault."""

from __future__ import annotations

import threading

import pytest
import torch

import specverify
from specverify._calling.sut import SamplerUnderTest
from specverify._contract import audit_output
from specverify.errors import SamplerFault


def inputs(batch=4, k=2, vocab=3):
    g = torch.Generator().manual_seed(0)
    target = torch.rand(batch, k + 1, vocab, generator=g, dtype=torch.float64) + 0.1
    draft = torch.rand(batch, k, vocab, generator=g, dtype=torch.float64) + 0.1
    drafts = torch.randint(0, vocab, (batch, k), generator=g)
    return target, draft, drafts


def good(batch=4, k=2):
    tokens = torch.full((batch, k + 1), -1, dtype=torch.int64)
    tokens[:, 0] = 1
    return tokens, torch.zeros(batch, dtype=torch.int64)


def test_reference_output_is_clean():
    target, draft, drafts = inputs()
    assert audit_output(specverify.reference(target, draft, drafts, torch.Generator()), target, drafts) == []


@pytest.mark.parametrize(
    ("mutate", "rule"),
    [
        (lambda t, n: ("not a pair",), "shape-dtype"),
        (lambda t, n: (t[:, :2], n), "shape-dtype"),
        (lambda t, n: (t.to(torch.int32), n), "shape-dtype"),
        (lambda t, n: (t.float(), n), "shape-dtype"),
        (lambda t, n: (t, n + 5), "num-accepted-range"),
        (lambda t, n: (t.index_fill(1, torch.tensor([0]), 7), n), "token-range"),
        (lambda t, n: (t.index_fill(1, torch.tensor([2]), 0), n), "padding"),
    ],
)
def test_each_rule(mutate, rule):
    target, draft, drafts = inputs()
    tokens, n = good()
    violations = audit_output(mutate(tokens, n), target, drafts)
    assert violations and violations[0].rule == rule
    assert violations[0].message


def test_accepted_tokens_must_be_the_drafts():
    target, draft, drafts = inputs()
    tokens = torch.stack([drafts[:, 0], (drafts[:, 1] + 1) % 3, torch.zeros_like(drafts[:, 0])], dim=1)
    violations = audit_output((tokens, torch.full((4,), 2)), target, drafts)
    assert violations[0].rule == "accepted-drafts"


def test_zero_target_token_is_a_support_violation():
    target, draft, drafts = inputs()
    target[:, 0, 1] = 0.0
    tokens, n = good()
    violations = audit_output((tokens, n), target, drafts)
    assert violations[0].rule == "zero-target" and violations[0].finding == "support"


def test_raise_and_in_place_write_become_faults():
    target, draft, drafts = inputs()

    def raises(*args):
        raise KeyError("bad vocab\nmore")

    def writes(t, d, y, g):
        t.zero_()
        return specverify.reference(t + 1, d, y, g)

    for fn, rule, text in ((raises, "raised", "KeyError"), (writes, "inputs-unmodified", "target_probs")):
        with pytest.raises(SamplerFault) as info:
            SamplerUnderTest(fn).step(target, draft, drafts, generator=torch.Generator())
        assert info.value.violation.rule == rule
        assert text in str(info.value)
    with pytest.raises(SamplerFault) as info:
        SamplerUnderTest(raises).step(target, draft, drafts, generator=torch.Generator())
    assert "bad vocab" in info.value.details["traceback"]


def test_in_process_a_hung_call_is_abandoned_and_the_next_call_gets_a_fresh_thread():
    target, draft, drafts = inputs(batch=3)
    calls = []

    @specverify.sampler(batched=False)
    def first_call_hangs(t, d, y, g):
        calls.append(1)
        if len(calls) == 1:
            threading.Event().wait(2)
        return specverify.reference(t, d, y, g)

    sut = SamplerUnderTest(first_call_hangs, timeout=0.2)
    with pytest.raises(SamplerFault, match="did not return within 0.2 s"):
        sut.step(target, draft, drafts, generator=torch.Generator())
    tokens, _ = sut.step(target, draft, drafts, generator=torch.Generator())
    assert tokens.shape == (3, 3)
    threading.Event().wait(2.5)
    assert len(calls) == 4  # the abandoned thread made no call after its hung one


def test_an_isolated_sampler_draws_what_it_draws_in_process():
    target, draft, drafts = inputs(batch=64)
    isolated = SamplerUnderTest("specverify.samplers:reference", isolation="process")
    here = SamplerUnderTest(specverify.reference)
    g1, g2 = isolated.generator(3), here.generator(3)
    for _ in range(2):  # the generator's state comes back from the worker: the second call continues it
        a, b = isolated.step(target, draft, drafts, generator=g1), here.step(target, draft, drafts, generator=g2)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert torch.equal(g1.get_state(), g2.get_state())
    isolated.close()


def test_an_in_place_write_in_the_worker_shows_in_the_audit():
    target, draft, drafts = inputs()
    sut = SamplerUnderTest("isolation_samplers:writes_draft", isolation="process")
    with pytest.raises(SamplerFault, match="draft_probs"):
        sut.step(target, draft, drafts, generator=torch.Generator())
    sut.close()


def test_batches_are_split_and_rows_reported_globally():
    target, draft, drafts = inputs(batch=10)
    seen = []

    @specverify.sampler(max_batch=4)
    def small(t, d, y, g):
        seen.append(y.shape[0])
        tokens, n = specverify.reference(t, d, y, g)
        if len(seen) == 3:
            tokens[0, 0] = 99
        return tokens, n

    with pytest.raises(SamplerFault) as info:
        SamplerUnderTest(small).step(target, draft, drafts, generator=torch.Generator())
    assert seen == [4, 4, 2]
    assert info.value.violation.row == 8


def test_odd_max_batch_keeps_row_pairs_in_one_call():
    target, draft, drafts = inputs(batch=10)
    seen = []

    @specverify.sampler(max_batch=5)
    def odd(t, d, y, g):
        seen.append(y.shape[0])
        return specverify.reference(t, d, y, g)

    SamplerUnderTest(odd).step(target, draft, drafts, generator=torch.Generator())
    assert seen == [4, 4, 2]


@pytest.mark.parametrize("isolation", ["in-process", "process"])
def test_a_write_in_a_later_call_on_the_same_inputs_is_seen_and_the_next_call_gets_them_pristine(isolation):
    target, draft, drafts = inputs(batch=8)
    sut = SamplerUnderTest("isolation_samplers:writes_target_on_call_2", isolation=isolation)
    reference = SamplerUnderTest(specverify.reference)
    sut.step(target, draft, drafts, generator=sut.generator(0))
    with pytest.raises(SamplerFault, match="modified its input target_probs"):
        sut.step(target, draft, drafts, generator=sut.generator(0))
    after = sut.step(
        target, draft, drafts, generator=sut.generator(5)
    )  # what it is given is the harness's tensor again
    expected = reference.step(target, draft, drafts, generator=reference.generator(5))
    assert torch.equal(after[0], expected[0]) and torch.equal(after[1], expected[1])
    sut.close()


def test_inputs_passed_again_are_laid_out_once_and_a_change_by_the_harness_is_sent():
    target, draft, drafts = inputs(batch=8)
    sut = SamplerUnderTest("specverify.samplers:reference", isolation="process")
    process = sut._process
    sut.step(target, draft, drafts, generator=sut.generator(0))
    written = process._generation
    sut.step(target, draft, drafts, generator=sut.generator(0))
    assert process._generation == written  # nothing copied again
    target[:, :, :] = target.flip(-1)  # the harness changes its tensor in place: it is sent again
    here = SamplerUnderTest(specverify.reference)
    got = sut.step(target, draft, drafts, generator=sut.generator(1))
    want = here.step(target, draft, drafts, generator=here.generator(1))
    assert process._generation == written + 1
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    sut.close()


def test_without_the_page_watch_the_parent_compares_and_sees_the_write():
    from specverify._worker import SamplerProcess

    target, draft, drafts = inputs(batch=4)
    process = SamplerProcess(("spec", "isolation_samplers:writes_draft"), None, page_watch=False)
    assert process.start()["page_watch"] is False
    _, _, _, changed = process.call(
        [target, draft, drafts, None], dtype=torch.float64, per_row=False, generator=torch.Generator(), limit=60.0
    )
    assert changed == [1]
    process.kill()


def test_nan_in_an_input_is_not_a_write():
    from specverify._worker import unchanged

    a = torch.tensor([0.5, float("nan"), 0.5])
    assert unchanged(a.clone(), a)
    assert not unchanged(torch.tensor([0.5, float("nan"), 0.25]), a)


def test_the_harness_computes_on_one_thread_while_the_samplers_process_has_its_threads(monkeypatch):
    """libgomp's idle threads spin-wait: while a sampler's process is in use the harness keeps one
    thread, the sampler's process gets the harness's count (the user chose it: OMP_NUM_THREADS is
    set), and the harness gets it back after."""
    from specverify._worker import supervision

    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    monkeypatch.setattr(
        supervision, "_HARNESS_THREADS", supervision.HarnessThreads()
    )  # no process an earlier test holds
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        sut = SamplerUnderTest("isolation_samplers:tells_its_threads", isolation="process")
        assert torch.get_num_threads() == 1
        with pytest.raises(SamplerFault, match="threads=2"):
            sut.step(
                torch.full((1, 2, 2), 0.5, dtype=torch.float64),
                torch.full((1, 1, 2), 0.5, dtype=torch.float64),
                torch.zeros((1, 1), dtype=torch.int64),
            )
        sut.close()
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_without_omp_num_threads_the_samplers_process_computes_on_one_thread(monkeypatch):
    """Unless the user sets OMP_NUM_THREADS, the sampler's process gets one thread (specverify._threads)."""
    from specverify import _threads
    from specverify._worker import supervision

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert _threads.sampler_env() == {"OMP_NUM_THREADS": "1"} and _threads.sampler_threads(8) == 1
    monkeypatch.setattr(supervision, "_HARNESS_THREADS", supervision.HarnessThreads())
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        sut = SamplerUnderTest("isolation_samplers:tells_its_threads", isolation="process")
        with pytest.raises(SamplerFault, match="threads=1"):
            sut.step(
                torch.full((1, 2, 2), 0.5, dtype=torch.float64),
                torch.full((1, 1, 2), 0.5, dtype=torch.float64),
                torch.zeros((1, 1), dtype=torch.int64),
            )
        sut.close()
    finally:
        torch.set_num_threads(before)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert _threads.sampler_env() == {} and _threads.sampler_threads(8) == 8  # the user's choice is kept


def _batches(count, batch=16):
    return [inputs(batch=batch, k=2, vocab=3) for _ in range(count)]


@pytest.mark.parametrize("spec", ["specverify.samplers:reference", "isolation_samplers:six_rows_a_call"])
def test_steps_give_what_step_gives_with_the_next_call_sent_before_an_output_is_handed_back(spec):
    batches = [(t, d, y) for t, d, y in _batches(4)]
    isolated = SamplerUnderTest(spec, isolation="process")
    here = SamplerUnderTest(spec)
    g1, g2 = isolated.generator(5), here.generator(5)
    in_flight = []
    for index, (a, batch) in enumerate(zip(isolated.steps(batches, generator=g1), batches)):
        in_flight.append(isolated._process.in_flight)
        b = here.step(*batch, generator=g2)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]), index
    assert (
        in_flight[:3] == [1, 1, 1] and in_flight[3] == 0
    )  # a call was running while each output but the last was handled
    assert torch.equal(g1.get_state(), g2.get_state())
    assert isolated.calls == here.calls == (4 if spec.endswith("reference") else 12)
    isolated.close()


def test_leaving_steps_early_drops_the_call_in_flight_and_the_generator_continues_from_the_last_output():
    batches = _batches(3)
    isolated = SamplerUnderTest("specverify.samplers:reference", isolation="process")
    here = SamplerUnderTest(specverify.reference)
    g1, g2 = isolated.generator(7), here.generator(7)
    for _ in isolated.steps(batches, generator=g1):
        break
    here.step(*batches[0], generator=g2)
    assert isolated._process.in_flight == 0
    a, b = (
        isolated.step(*batches[2], generator=g1),
        here.step(*batches[2], generator=g2),
    )  # as if the dropped call never ran
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    isolated.close()


def test_a_fault_in_a_call_with_another_behind_it_is_that_calls_and_the_next_step_is_clean():
    batches = _batches(3)
    sut = SamplerUnderTest("isolation_samplers:raises_on_call_2", isolation="process")
    seen = []
    with pytest.raises(SamplerFault, match="second call's tile overflowed"):
        for output in sut.steps(batches, generator=torch.Generator()):
            seen.append(output)
    assert len(seen) == 1 and sut._process.in_flight == 0  # the third call, sent behind the second, was dropped
    tokens, _ = sut.step(*batches[0], generator=torch.Generator())
    assert tokens.shape == (16, 3)
    sut.close()


def test_a_crash_in_a_call_with_another_behind_it_names_that_call_and_a_fresh_process_takes_the_next():
    batches = _batches(4)
    sut = SamplerUnderTest("isolation_samplers:exits_on_call_3", isolation="process")
    with pytest.raises(SamplerFault, match=r"died in call 3 \(a batch of 16 rows"):
        for _ in sut.steps(batches, generator=torch.Generator()):
            pass
    tokens, _ = sut.step(*batches[0], generator=torch.Generator())
    assert tokens.shape == (16, 3) and sut.worker_starts == 2
    sut.close()


def test_ctrl_c_with_a_call_in_flight_waits_for_no_call_and_ends_the_process():
    sut = SamplerUnderTest("isolation_samplers:hangs", isolation="process", timeout=600.0)
    drained = []
    sut._process.drain = lambda limit: drained.append(limit)  # waiting on the hung call would take its 600 s

    def batches():
        yield inputs(batch=4)
        raise KeyboardInterrupt  # the terminal's Ctrl-C while the first call runs

    with pytest.raises(KeyboardInterrupt):
        for _ in sut.steps(batches(), generator=torch.Generator()):
            pass
    assert not sut._process.alive() and sut._process.in_flight == 0 and drained == []
    sut.close()
