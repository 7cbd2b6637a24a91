"""Screen and confirm (checks/_search.py) with scripted evaluations: no sampler runs.

Cases are integers; an evaluation is a function of the case and the stage, so every assertion is
exact.  The search's own seed derives from the context, so the cases Hypothesis tries are the same
on every run.
"""

from __future__ import annotations

from hypothesis import strategies as st

from specverify._contract import Violation
from specverify.checks._search import Outcome, search_and_confirm
from specverify.errors import SamplerFault
from specverify.stats import confirmation_alpha

from ._fakes import fake_context


def run(evaluate, *, strategy=st.integers(0, 40), statistical=True, examples=30):
    calls: list[tuple[int, str]] = []

    def recorded(case, seed, alpha, stage):
        calls.append((case, stage))
        return evaluate(case, stage)

    found = search_and_confirm(
        fake_context(), "test.search", strategy, recorded, str, examples=examples, statistical=statistical
    )
    return found, calls


def statistical(p: float) -> Outcome:
    return Outcome({"d": p}, 100, {"d": 0.01})


def test_an_exact_mismatch_alarms_and_needs_no_confirmation():
    found, calls = run(lambda case, stage: Outcome({}, 1, {}, mismatch=case >= 7), statistical=False)
    case, outcome = found.confirmed
    assert case == 7  # shrunk to the smallest mismatching case
    assert outcome.mismatch
    assert {stage for _, stage in calls} == {"screen"}


def test_an_exact_check_alarms_on_the_typed_field_only():
    """Evidence is for the report: a ``"mismatch"`` key there raises no alarm (the typed field does)."""
    found, _ = run(lambda case, stage: Outcome({}, 1, {}, evidence={"mismatch": True}), statistical=False)
    assert found.confirmed is None and found.examples > 0


def test_a_fault_alarms_in_exact_and_statistical_searches_alike():
    fault = SamplerFault(Violation("raised", "boom"))
    for exact in (True, False):

        def evaluate(case, stage):
            if case >= 3:
                raise fault
            return Outcome({}, 1, {}) if exact else statistical(0.5)

        found, calls = run(evaluate, statistical=not exact)
        case, outcome = found.confirmed
        assert case == 3 and outcome.fault is fault
        assert "confirm" not in {stage for _, stage in calls}  # a fault is final


def test_a_screen_false_alarm_that_does_not_confirm_is_set_aside():
    found, calls = run(
        lambda case, stage: statistical(0.0 if case == 2 and stage == "screen" else 0.5), strategy=st.integers(0, 3)
    )
    assert found.confirmed is None
    assert [case for case, _ in found.unconfirmed] == [2]
    assert not found.exhausted
    assert calls.count((2, "confirm")) == 1  # confirmed once on fresh samples, then excluded
    # confirmations spend the check's share: a false failure needs a screen alarm and a false confirmation
    assert found.confirm_alpha == confirmation_alpha(1e-4, 30, fake_context().budget.screen_alpha, confirmations=2)


def test_a_real_deviation_confirms():
    found, calls = run(lambda case, stage: statistical(0.0 if case >= 5 else 0.5))
    case, outcome = found.confirmed
    assert case == 5 and outcome.pvalues == {"d": 0.0}
    assert (5, "confirm") in calls
    assert found.unconfirmed == []


def test_alarms_that_never_confirm_exhaust_the_search():
    found, _ = run(lambda case, stage: statistical(0.0 if stage == "screen" and case >= 5 else 0.5))
    assert found.confirmed is None and found.exhausted
    assert len(found.unconfirmed) >= 3  # every round alarmed; each round's alarms were set aside


def test_a_screen_alarm_is_held_to_the_level_shared_by_the_case_decisions():
    level = fake_context().budget.screen_alpha
    both = Outcome({"a": level * 0.75, "b": 0.5}, 1, {})
    assert not both.rejects(level)  # two decisions share the screen's level: level / 2 each
    assert both.rejects(level, each=True)  # a confirmation holds each decision to its own level
    assert Outcome({}, 0, {}, fault=SamplerFault(Violation("raised", "boom"))).rejects(0.0)


def test_a_search_screens_the_same_cases_however_slow_the_machine(monkeypatch):
    """No wall-clock limit: on a clock that runs 1000 s a reading (a slow or busy machine) the
    search shrinks as far and screens the same cases, so the verdict cannot depend on the machine."""
    import time

    def evaluate(case, stage):
        return statistical(0.0 if case >= 17 and stage == "screen" else 0.5)  # alarms, never confirms

    found, calls = run(evaluate)
    clock = iter(range(0, 10**9, 1000))
    monkeypatch.setattr(time, "perf_counter", lambda: float(next(clock)))
    slow, slow_calls = run(evaluate)
    monkeypatch.undo()
    assert found.exhausted and len(found.unconfirmed) >= 3  # three rounds, each shrunk to its smallest alarm
    assert slow_calls == calls and slow.examples == found.examples and slow.unconfirmed == found.unconfirmed


def test_a_failing_search_shrinks_within_its_count_of_screens():
    """Shrinking a real deviation stops after ``examples + 4`` new screens a round (a count, so the
    same case on any machine); the case found still alarms and confirms, and the result says the
    limit cut the shrinking short."""

    def evaluate(case, stage):
        return statistical(0.0 if sum(case) >= 300 else 0.5)

    strategy = st.lists(st.integers(0, 1000), min_size=1, max_size=20)
    found, calls = run(evaluate, strategy=strategy, examples=6)
    case, outcome = found.confirmed
    assert sum(case) >= 300 and outcome.pvalues == {"d": 0.0}
    assert found.shrink_limit == 6 + 4 and found.shrink_screens == found.shrink_limit and found.shrink_cut
    screens = [c for c, stage in calls if stage == "screen"]
    assert len(screens) <= 6 + found.shrink_limit  # the generated cases, then the bounded shrink
    again, again_calls = run(evaluate, strategy=strategy, examples=6)
    assert again_calls == calls and again.confirmed[0] == case
